"""A run over time (summary.json's ``timeline``): the offered and served rates, the replicas in each state and the
GPUs billed (a fleet run), the waiting queue, TTFT and TPOT quantiles and the SLO attainment of each window's
arrivals; one column of panels sharing the time axis, drawn from the summary alone (so a streamed day draws it)."""
from __future__ import annotations

import numpy as np

from .sheet import Sheet

STATES = ("provisioning", "loading", "warm", "serving", "draining")
STATE_COLOURS = {"provisioning": "#f2c14e", "loading": "#f78154", "warm": "#b56576", "serving": "#4d9078",
                 "draining": "#9aa0a6"}


def column(rows: list[dict], name: str) -> np.ndarray:
    return np.array([np.nan if r.get(name) is None else float(r[name]) for r in rows])


def plot_timeline(timeline: dict, path, title: str | None = None):
    """Draw ``timeline`` (``{"window": s, "rows": [...]}``) into ``path``."""
    rows = timeline["rows"]
    if not rows:
        raise ValueError("the timeline has no windows to draw")
    t = (column(rows, "start") + column(rows, "end")) / 2
    hours = t[-1] > 3 * 3600
    x = t / 3600 if hours else t
    fleet = "replicas_serving" in rows[0]
    panels = 5 if fleet else 4
    sheet = Sheet(panels, 1, panel=(9.0, 2.2), title=title, share="col")
    ax = [row[0] for row in sheet.axes]
    ax[0].plot(x, column(rows, "offered_rate"), color="#1f77b4", linewidth=1.0, label="offered (arrived)")
    if "scheduled_rate" in rows[0]:
        ax[0].plot(x, column(rows, "scheduled_rate"), color="#1f77b4", linestyle="--", linewidth=1.0,
                   label="scheduled")
    ax[0].plot(x, column(rows, "served_rate"), color="#d62728", linewidth=1.0, label="served (finished)")
    ax[0].set_ylabel("requests/s")
    ax[0].set_title("Offered and served rate", fontsize=9)
    k = 1
    if fleet:
        stacks = [column(rows, f"replicas_{s}") for s in STATES]
        ax[1].stackplot(x, *stacks, colors=[STATE_COLOURS[s] for s in STATES], labels=list(STATES), alpha=0.9)
        ax[1].plot(x, column(rows, "billed_gpus"), color="black", linewidth=1.0, label="GPUs billed")
        ax[1].set_ylabel("replicas (mean)")
        ax[1].set_title("Replicas by state", fontsize=9)
        k = 2
    ax[k].plot(x, column(rows, "waiting"), color="#8c564b", linewidth=1.0, label="waiting (mean)")
    ax[k].set_ylabel("requests")
    ax[k].set_title("Waiting queue", fontsize=9)
    last = ax[k + 1]
    for name, style in (("ttft_p50", ":"), ("ttft_p90", "-"), ("tpot_p90", "--")):
        last.plot(x, column(rows, name), color="#2ca02c" if name.startswith("ttft") else "#9467bd",
                  linestyle=style, linewidth=1.0, label=name.replace("_", " ").upper().replace(" P", " p"))
    last.set_yscale("log")
    last.set_ylabel("seconds")
    last.set_title("Latency of each window's arrivals", fontsize=9)
    att = ax[k + 2]
    att.plot(x, column(rows, "slo_attainment"), color="black", linewidth=1.0, label="SLO attainment")
    att.set_ylim(0, 1.05)
    att.set_ylabel("fraction")
    att.set_title("SLO attainment of each window's arrivals", fontsize=9)
    att.set_xlabel("time (h)" if hours else "time (s)")
    sheet.legend()
    return sheet.save(path)
