"""A figure of panels whose size is fixed in inches: the figure grows around them to fit tick labels, titles
and legends (always outside the panels), and never shrinks a panel. Drawn on an Agg canvas: no window, no
pyplot state. Every figure llmsched writes goes through ``Sheet.save`` or ``Sheet.png``; with
LLMSCHED_CHECK_FIGURES=1 (as the tests run) each is checked for readability and an unreadable one is an error."""
from __future__ import annotations

import io
import math
import os
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .readable import problems

DPI = 110
PANEL = (4.2, 2.8)  # inches: a panel's plotting area
GAP = 0.18          # inches between one panel's labels and the next panel's
LEGEND_ROWS = 16    # entries per legend column before a second column starts
CHECK = "LLMSCHED_CHECK_FIGURES"


class Sheet:
    """``rows`` x ``cols`` panels of ``panel`` inches; ``share`` is "" or "col" (a column shares its x axis)."""

    def __init__(self, rows: int, cols: int, panel=PANEL, title: str | None = None, share: str = ""):
        if rows < 1 or cols < 1:
            raise ValueError(f"a sheet needs at least one panel, got {rows} x {cols}")
        self.panel = panel
        self.fig = Figure(figsize=(cols * (panel[0] + 1.2), rows * (panel[1] + 1.0)), dpi=DPI)
        FigureCanvasAgg(self.fig)
        self.title = title
        self.axes = []
        for r in range(rows):
            row = []
            for c in range(cols):
                first = self.axes[0][c] if r and share == "col" else None
                row.append(self.fig.add_axes(self._provisional(r, c), sharex=first))
            self.axes.append(row)
        self.legends: list[tuple[int | None, object]] = []

    def _provisional(self, r, c) -> list[float]:
        """Where a panel sits until ``layout`` places it (figure fractions): a rough spot, but its final size,
        so that its ticks are the ones it will have."""
        w, h = self.fig.get_size_inches()
        x = 1.0 + c * (self.panel[0] + 1.2)
        y = h - (r + 1) * (self.panel[1] + 1.0)
        return [x / w, y / h, self.panel[0] / w, self.panel[1] / h]

    def legend(self, handles=None, labels=None, row: int | None = None, title: str | None = None,
               ncol: int | None = None):
        """A legend beside ``row`` (or beside the whole grid when ``row`` is None), from the handles given or
        from that row's (the grid's) labelled lines."""
        if handles is None:
            handles, labels = self.handles(row)
        if not handles:
            return None
        ncol = ncol or math.ceil(len(handles) / LEGEND_ROWS)
        leg = self.fig.legend(handles, labels, loc="upper left", fontsize=8, title=title, title_fontsize=8,
                              ncol=ncol, frameon=False, handlelength=3.2)
        self.legends.append((row, leg))
        return leg

    def handles(self, row: int | None = None):
        """Labelled artists of a row (or of every panel), one per label, in drawing order."""
        seen = {}
        for r, axes in enumerate(self.axes):
            if row is not None and r != row:
                continue
            for ax in axes:
                for h, label in zip(*ax.get_legend_handles_labels()):
                    seen.setdefault(label, h)
        return list(seen.values()), list(seen)

    def layout(self) -> None:
        """Place panels and legends: measure what sticks out of each panel, then size the figure around them."""
        fig = self.fig
        renderer = fig.canvas.get_renderer()
        rows, cols = len(self.axes), len(self.axes[0])
        ppi = fig.dpi
        out = [[_overhang(ax, renderer, ppi) for ax in row] for row in self.axes]
        left = [max(out[r][c][0] for r in range(rows)) for c in range(cols)]
        right = [max(out[r][c][1] for r in range(rows)) for c in range(cols)]
        top = [max(o[2] for o in out[r]) for r in range(rows)]
        bottom = [max(o[3] for o in out[r]) for r in range(rows)]
        sizes = {id(leg): _size(leg, renderer, ppi) for _, leg in self.legends}
        row_legend = {r: sizes[id(leg)] for r, leg in self.legends if r is not None}
        grid_legend = [sizes[id(leg)] for r, leg in self.legends if r is None]
        heights = [max(top[r] + self.panel[1] + bottom[r], top[r] + row_legend.get(r, (0, 0))[1]) + GAP
                   for r in range(rows)]
        head = 0.45 if self.title else 0.1
        grid_h = head + sum(heights)
        legend_h = sum(h for _, h in grid_legend) + GAP * len(grid_legend)
        xs, x = [], 0.1
        for c in range(cols):
            x += left[c]
            xs.append(x)
            x += self.panel[0] + right[c] + GAP
        legend_x = x
        legend_w = max([w for w, _ in row_legend.values()] + [w for w, _ in grid_legend] + [0])
        width = legend_x + legend_w + (0.1 if legend_w else 0)
        height = max(grid_h, head + top[0] + legend_h) + 0.05
        fig.set_size_inches(width, height)
        ys, y = [], height - head
        for r in range(rows):
            ys.append(y - top[r] - self.panel[1])
            y -= heights[r]
        for r in range(rows):
            for c in range(cols):
                self.axes[r][c].set_position([xs[c] / width, ys[r] / height, self.panel[0] / width,
                                              self.panel[1] / height])
        stack = height - head - top[0]
        for r, leg in self.legends:
            if r is None:
                leg.set_bbox_to_anchor((legend_x / width, stack / height), transform=fig.transFigure)
                stack -= sizes[id(leg)][1] + GAP
            else:
                leg.set_bbox_to_anchor((legend_x / width, (ys[r] + self.panel[1]) / height),
                                       transform=fig.transFigure)
        if self.title:
            fig.suptitle(self.title, y=1 - 0.12 / height, va="top")

    def save(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.layout()
        self.fig.savefig(path, dpi=DPI)
        self.check(path)
        return path

    def png(self) -> bytes:
        """The figure as PNG bytes (for a page that embeds it)."""
        self.layout()
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=DPI)
        self.check(self.title or "an embedded figure")
        return buf.getvalue()

    def check(self, what) -> None:
        if os.environ.get(CHECK, "") not in ("", "0"):
            found = problems(self.fig)
            if found:
                raise RuntimeError(f"{what}: unreadable figure ({CHECK}=1): " + "; ".join(found))


def _overhang(ax, renderer, ppi) -> tuple[float, float, float, float]:
    """Inches that an axes' ticks, labels and title reach beyond its plotting area: left, right, top, bottom."""
    if not ax.get_visible():
        return 0.0, 0.0, 0.0, 0.0
    box = ax.get_window_extent(renderer)
    tight = ax.get_tightbbox(renderer)
    return (max(box.x0 - tight.x0, 0) / ppi, max(tight.x1 - box.x1, 0) / ppi,
            max(tight.y1 - box.y1, 0) / ppi, max(box.y0 - tight.y0, 0) / ppi)


def _size(legend, renderer, ppi) -> tuple[float, float]:
    box = legend.get_window_extent(renderer)
    return box.width / ppi, box.height / ppi
