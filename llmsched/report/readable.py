"""Whether a figure can be read, judged from its matplotlib objects: every panel at least MIN_PANEL_PX, no
legend over any panel, no two series of one panel drawn alike, no panel's labels over another's, nothing cut off
at the figure's edge."""
from __future__ import annotations

from matplotlib.colors import to_hex

MIN_PANEL_PX = (300, 200)  # width, height of a plotting area, at the DPI the figure is written with


def problems(fig) -> list[str]:
    """What makes ``fig`` unreadable, one line each (empty when readable)."""
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.get_visible()]
    tight = [(ax, ax.get_tightbbox(renderer)) for ax in panels]  # the panel with its ticks, labels and title
    found = []
    for ax in panels:
        box = ax.get_window_extent(renderer)
        if box.width < MIN_PANEL_PX[0] or box.height < MIN_PANEL_PX[1]:
            found.append(f"panel {_name(ax)!r} is {box.width:.0f} x {box.height:.0f} px, under "
                         f"{MIN_PANEL_PX[0]} x {MIN_PANEL_PX[1]}")
    legends = list(fig.legends) + [ax.get_legend() for ax in panels if ax.get_legend() is not None]
    for leg in legends:
        lbox = leg.get_window_extent(renderer)
        for ax, box in tight:
            if _overlap(lbox, box):
                found.append(f"a legend ({_legend_name(leg)}) covers panel {_name(ax)!r} or its labels")
    for ax in panels:
        seen, alike = {}, []
        for look, label in _series(ax):
            if look in seen:
                alike.append(f"{label!r} and {seen[look]!r}")
            seen.setdefault(look, label)
        if alike:
            more = f" (and {len(alike) - 3} more pairs)" if len(alike) > 3 else ""
            found.append(f"panel {_name(ax)!r}: {', '.join(alike[:3])}{more} have one colour, line style and marker")
    canvas = fig.bbox
    for thing, box in tight + [(leg, leg.get_window_extent(renderer)) for leg in legends]:
        if box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1:
            what = f"panel {_name(thing)!r}" if thing in panels else f"a legend ({_legend_name(thing)})"
            found.append(f"{what} is cut off at the figure's edge")
    for i, (a, abox) in enumerate(tight):
        for b, bbox in tight[i + 1:]:
            if _overlap(abox, bbox):
                found.append(f"the labels of panels {_name(a)!r} and {_name(b)!r} overlap")
    return found


def _series(ax):
    """(colour, line style, marker) of each labelled line and point set of ``ax``: what tells series apart."""
    for line in ax.get_lines():
        label = line.get_label()
        if not label.startswith("_"):
            marker = line.get_marker()
            yield (to_hex(line.get_color()), str(line.get_linestyle()) if line.get_linestyle() != "None" else "",
                   "" if marker in (None, "None", "", " ") else str(marker)), label
    for coll in ax.collections:
        label = coll.get_label()
        if not label.startswith("_") and len(coll.get_facecolor()):
            paths = coll.get_paths()
            shape = tuple(paths[0].vertices.round(2).ravel()) if paths else ()
            yield (to_hex(coll.get_facecolor()[0]), "points", str(hash(shape))), label


def _overlap(a, b) -> bool:
    """Boxes share area (more than an edge: a pixel's tolerance)."""
    pad = 1.0
    return a.x0 + pad < b.x1 and b.x0 + pad < a.x1 and a.y0 + pad < b.y1 and b.y0 + pad < a.y1


def _name(ax) -> str:
    x, y, w, h = ax.get_position().bounds
    return ax.get_title() or ax.get_ylabel() or f"at x={x:.2f}, y={y:.2f} (figure fractions)"


def _legend_name(leg) -> str:
    texts = [t.get_text() for t in leg.get_texts()]
    return f"{len(texts)} entries: {', '.join(texts[:3])}{', ...' if len(texts) > 3 else ''}"
