"""How a figure of many schedulers is split: past MAX_SERIES_IN_ONE_PANEL series, one row of panels per family
with the baselines in grey in each; and how a series whose data repeats an earlier one's is labelled, since its
line hides the other."""
from __future__ import annotations

import hashlib

import numpy as np

from .sheet import Sheet
from .style import FAMILIES, OTHER, Style

MAX_SERIES_IN_ONE_PANEL = 8


def family_groups(styled: dict[str, Style]) -> list[tuple[str, list[str]]]:
    """The panels of a figure: one of everything when few, else one per family (families in FAMILIES order,
    labels of no family together last)."""
    labels = list(styled)
    if len(labels) <= MAX_SERIES_IN_ONE_PANEL:
        return [("", labels)]
    order = list(FAMILIES) + [OTHER]
    groups = [(f, [label for label in labels if styled[label].family == f]) for f in order]
    return [(f, members) for f, members in groups if members]


def family_order(styled: dict[str, Style]) -> list[str]:
    """Labels with the baselines first, then each paper's family (FAMILIES order), then labels of no family."""
    rank = {f: i for i, f in enumerate(FAMILIES)}
    return sorted(styled, key=lambda label: rank.get(styled[label].family, len(rank)))


def same_as(data: dict[str, list]) -> dict[str, str]:
    """Label -> the first earlier label whose arrays are all identical to its own."""
    first, out = {}, {}
    for label, arrays in data.items():
        h = hashlib.sha1()
        for a in arrays:
            h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
            h.update(b"|")
        key = h.digest()
        if key in first:
            out[label] = first[key]
        first.setdefault(key, label)
    return out


def display(label: str, twins: dict[str, str]) -> str:
    return f"{label} (= {twins[label]})" if label in twins else label


def draw_groups(sheet: Sheet, styled: dict[str, Style], groups, columns: int, draw, twins: dict[str, str]) -> None:
    """Each group's row of ``columns`` panels: ``draw(ax, column, label, line_kwargs, reference)`` for its
    members, and in another family's row for the baselines as grey references; a legend beside each row."""
    baselines = [label for label, s in styled.items() if s.family == "baselines"]
    for r, (family, members) in enumerate(groups):
        refs = [] if not family or family == "baselines" else baselines
        for c in range(columns):
            ax = sheet.axes[r][c]
            for label in members:
                draw(ax, c, label, styled[label].line(label=display(label, twins)), False)
            for label in refs:
                draw(ax, c, label, styled[label].reference(), True)
        sheet.legend(row=r, title=family or None)


def titled(name: str, family: str) -> str:
    lower = name[:1].lower() + name[1:] if name[1:2].islower() else name
    return f"{family}: {lower}" if family else name
