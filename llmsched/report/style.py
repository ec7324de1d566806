"""How a series looks: one colour per scheduler family (the paper a scheduler comes from, or the baselines),
a shade of it, a line style and past four variants a marker per variant, so that any number of schedulers stays
tellable apart; grey for the baselines drawn as references beside another family."""
from __future__ import annotations

from dataclasses import dataclass

FAMILIES = ("baselines", "RAD/SLAI", "InferMax", "FairBatching", "WAIT", "deferred prefill", "goodput",
            "tenant policies")
OTHER = "other"  # a label that names no registered scheduler
FAMILY_COLOURS = {"baselines": "#1f77b4", "RAD/SLAI": "#ff7f0e", "InferMax": "#2ca02c", "FairBatching": "#d62728",
                  "WAIT": "#9467bd", "deferred prefill": "#8c564b", "goodput": "#d4a000", "tenant policies": "#c51b7d"}
FAMILY_SHADES = {"baselines": "Blues", "RAD/SLAI": "Oranges", "InferMax": "Greens", "FairBatching": "Reds",
                 "WAIT": "Purples", "deferred prefill": "copper_r",
                 "goodput": "YlOrBr", "tenant policies": "RdPu"}  # colour maps that run through each hue
OTHER_COLOURS = ("#17becf", "#e377c2", "#bcbd22", "#7f7f7f", "#1f3c88", "#a05d00", "#005f3b", "#8b0046")
REFERENCE_COLOUR = "#9a9a9a"
LINESTYLES = ("solid", "dashed", "dashdot", "dotted")  # named, so a figure's lines say which they have
MARKERS = (None, "o", "s", "^", "D", "v", "x", "P")


@dataclass(frozen=True)
class Style:
    label: str
    family: str
    color: str
    linestyle: object
    marker: str | None
    linewidth: float = 1.5

    def line(self, **extra) -> dict:
        """Keyword arguments for ``Axes.plot``/``step``; markers spaced along the line, not on every point."""
        kw = dict(color=self.color, linestyle=self.linestyle, linewidth=self.linewidth, label=self.label)
        if self.marker:
            kw.update(marker=self.marker, markevery=0.12, markersize=4.5)
        return {**kw, **extra}

    def reference(self, **extra) -> dict:
        """The same line style in thin grey: a baseline drawn for comparison in another family's panel."""
        kw = dict(color=REFERENCE_COLOUR, linestyle=self.linestyle, linewidth=0.9, label=self.label, zorder=1)
        if self.marker:
            kw.update(marker=self.marker, markevery=0.12, markersize=3.5, markerfacecolor="none")
        return {**kw, **extra}


def family_of(label: str) -> str:
    """The registered scheduler's family, or ``other`` for a label that is no scheduler name."""
    from ..schedulers.registry import scheduler_info, scheduler_names
    return scheduler_info(label)["family"] if label in scheduler_names() else OTHER


def styles(labels, families: dict | None = None) -> dict[str, Style]:
    """Each label's style. ``families`` maps a label to its family where the label is not a scheduler name
    (a reproduction's "Sarathi (FCFS)"); labels of no family get a colour each."""
    labels = list(dict.fromkeys(labels))
    fam = {label: (families or {}).get(label) or family_of(label) for label in labels}
    out = {}
    others = [label for label in labels if fam[label] not in FAMILY_COLOURS]
    for i, label in enumerate(others):
        out[label] = Style(label, OTHER, OTHER_COLOURS[i % len(OTHER_COLOURS)],
                           LINESTYLES[i // len(OTHER_COLOURS) % len(LINESTYLES)], None)
    for family in FAMILY_COLOURS:
        members = [label for label in labels if fam[label] == family]
        for i, label in enumerate(members):
            out[label] = Style(label, family, shade(family, i, len(members)),
                               LINESTYLES[i % len(LINESTYLES)], MARKERS[i // len(LINESTYLES) % len(MARKERS)])
    return {label: out[label] for label in labels}


def shade(family: str, i: int, n: int) -> str:
    """The ``i``-th of ``n`` shades of ``family``'s hue, darkest first (one family stays one hue)."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex
    if n < 2:
        return FAMILY_COLOURS[family]
    return to_hex(colormaps[FAMILY_SHADES[family]](0.95 - 0.5 * i / (n - 1)))


def with_points(kw: dict) -> dict:
    """A line through measured points: each point marked (with the style's marker, else a dot)."""
    return {**kw, "marker": kw.get("marker") or ".", "markersize": 6 if kw.get("marker") else 7, "markevery": None}
