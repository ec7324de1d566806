"""Figures of runs and sweeps, drawn with matplotlib's object API on an Agg canvas: never opens a window and
never touches pyplot's global state. Every function writes one PNG and returns its path.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator

from ..request import Status
from .latency_stats import merged_sketch
from .writers import is_time_column

DPI = 130
CDF_POINTS = 2000  # points per CDF line, whatever the number of samples
TIME_BINS = 600  # time bins of the KV-usage plot

METRIC_LABELS = {
    "ttft_p50": "TTFT p50", "ttft_p90": "TTFT p90", "ttft_p99": "TTFT p99", "ttft_mean": "TTFT mean",
    "tbt_p50": "TBT p50", "tbt_p90": "TBT p90", "tbt_p99": "TBT p99", "tbt_mean": "TBT mean", "tbt_max": "TBT max",
    "tpot_p50": "TPOT p50", "tpot_p99": "TPOT p99", "tpot_mean": "TPOT mean",
    "e2e_p50": "E2E p50", "e2e_p99": "E2E p99", "e2e_mean": "E2E mean",
    "throughput_rps": "Throughput (req/s)", "goodput_rps": "Goodput (req/s)",
    "output_tps": "Output throughput (tokens/s)", "input_tps": "Input throughput (tokens/s)",
    "slo_attainment": "SLO attainment (fraction)", "kv_util_mean": "Mean KV utilisation (fraction)",
    "preemptions": "Preemptions",
}
SWEEP_METRICS = ("ttft_p50", "ttft_p99", "tbt_p99", "throughput_rps", "goodput_rps")


def _save(fig: Figure, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return path


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    v = np.sort(values[np.isfinite(values) & (values > 0)])
    if not len(v):
        return v, v
    y = np.arange(1, len(v) + 1) / len(v)
    if len(v) > CDF_POINTS:
        idx = np.unique(np.r_[np.linspace(0, len(v) - 1, CDF_POINTS).astype(np.int64), len(v) - 1])
        v, y = v[idx], y[idx]
    return v, y


def _sketch_cdf(sk) -> tuple[np.ndarray, np.ndarray]:
    if sk is None or not sk.count:
        return np.empty(0), np.empty(0)
    keys = np.array(sorted(sk.counts), dtype=np.float64)
    counts = np.array([sk.counts[int(k)] for k in keys], dtype=np.float64)
    x = np.minimum(2 * sk.gamma ** keys / (sk.gamma + 1), sk.max)
    y = (sk.zeros + np.cumsum(counts)) / sk.count
    return x, y


def _latency_cdf(result, metric: str) -> tuple[np.ndarray, np.ndarray]:
    log = result.requests
    if metric == "tbt":
        if log.keep_gaps:
            return _ecdf(log.gaps_of(None))
        return _sketch_cdf(merged_sketch(log))
    finished = log.column("status") == int(Status.FINISHED)
    return _ecdf(log.column(metric)[finished])


def plot_latency_cdfs(results: dict, path, title: str | None = None) -> Path:
    """TTFT, TBT and E2E CDFs (ms, log x), one line per run label; dotted lines mark tier targets.

    TTFT and E2E are over finished requests, TBT over every gap (its sketch in sketch mode). All requests of
    each run are drawn (no warm-up trimming).
    """
    fig = Figure(figsize=(15, 4.4))
    axes = fig.subplots(1, 3)
    panels = (("ttft", "Time to first token (TTFT)"), ("tbt", "Time between tokens (TBT)"),
              ("e2e", "End-to-end latency (E2E)"))
    for ax, (metric, name) in zip(axes, panels):
        drawn = False
        for label, result in results.items():
            x, y = _latency_cdf(result, metric)
            if len(x):
                ax.step(x * 1000, y, where="post", label=label, linewidth=1.5)
                drawn = True
        targets = set()
        if metric in ("ttft", "tbt"):
            for result in results.values():
                t = result.requests.column(f"{metric}_slo")
                targets.update(np.unique(t[np.isfinite(t)]).tolist())
        for t in sorted(targets):
            ax.axvline(t * 1000, color="0.4", linestyle=":", linewidth=1)
            ax.annotate(f"target {t * 1000:g} ms", (t * 1000, 0.02), rotation=90, fontsize=7, color="0.3",
                        xytext=(3, 0), textcoords="offset points", va="bottom")
        if drawn:
            ax.set_xscale("log")
            _plain_log_ticks(ax.xaxis, *ax.get_xlim())
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="0.5")
        ax.set_title(name)
        ax.set_xlabel(f"{metric.upper()} (ms, log scale)")
        ax.set_ylabel("fraction ≤ x")
        ax.set_ylim(0, 1.01)
        ax.grid(True, which="both", alpha=0.3)
    if any(ax.get_legend_handles_labels()[0] for ax in axes):
        axes[0].legend(fontsize=8, loc="upper left")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def _binned(result, bins: np.ndarray):
    """Per time bin: KV utilisation (%) and requests running / waiting, duration-weighted over steps that
    start in the bin, summed over replicas (KV as Σ used / Σ total). NaN where no replica stepped."""
    s = result.steps
    cols = {k: np.asarray(v, dtype=np.float64) for k, v in s.columns().items()}
    nb = len(bins) - 1
    idx = np.clip(np.searchsorted(bins, cols["start"], side="right") - 1, 0, nb - 1)
    w = cols["duration"]
    kv_used = np.zeros(nb)
    kv_total = np.zeros(nb)
    running = np.zeros(nb)
    waiting = np.zeros(nb)
    any_step = np.zeros(nb, dtype=bool)
    for r in np.unique(cols["replica"]):
        m = cols["replica"] == r
        wt = np.bincount(idx[m], weights=w[m], minlength=nb)
        has = wt > 0
        safe = np.where(has, wt, 1.0)
        for acc, name in ((kv_used, "kv_used_blocks"), (kv_total, "kv_total_blocks"),
                          (running, "num_running"), (waiting, "num_waiting")):
            acc += np.where(has, np.bincount(idx[m], weights=w[m] * cols[name][m], minlength=nb) / safe, 0.0)
        any_step |= has
    with np.errstate(invalid="ignore", divide="ignore"):
        kv = np.where(any_step, 100 * kv_used / kv_total, np.nan)
    running[~any_step] = np.nan
    waiting[~any_step] = np.nan
    return kv, running, waiting


def plot_kv_usage(results: dict, path, title: str | None = None) -> Path:
    """KV-cache utilisation, running-batch size and waiting-queue length over simulated time, one line per
    run label (time-binned means; gaps where the engine was idle)."""
    fig = Figure(figsize=(12, 8.4))
    axes = fig.subplots(3, 1, sharex=True)
    for label, result in results.items():
        if not len(result.steps):
            continue
        start = np.frombuffer(result.steps.start, dtype=np.float64)
        end = float(max(result.end_time, start.max()))
        bins = np.linspace(0.0, end if end > 0 else 1.0, TIME_BINS + 1)
        mid = (bins[:-1] + bins[1:]) / 2
        kv, running, waiting = _binned(result, bins)
        axes[0].plot(mid, kv, label=label, linewidth=1.2)
        axes[1].plot(mid, running, label=label, linewidth=1.2)
        axes[2].plot(mid, waiting, label=label, linewidth=1.2)
    axes[0].set_ylabel("KV cache used (%)")
    axes[0].set_ylim(0, 105)
    axes[0].set_title("KV-cache utilisation")
    axes[1].set_ylabel("running requests")
    axes[1].set_title("Running batch (requests holding KV, all replicas)")
    axes[2].set_ylabel("waiting requests")
    axes[2].set_title("Waiting queue (all replicas)")
    axes[2].set_xlabel("simulated time (s)")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=8, loc="upper right")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def _get(row: dict, key: str):
    """``row[key]``, or a dotted path into nested dicts (``latency.ttft.p99``)."""
    if key in row:
        return row[key]
    cur = row
    for part in key.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _metric_value(row: dict, key: str) -> float | None:
    """The value to draw: latencies in ms, whether the row holds ``key`` in seconds or ``key_ms`` in ms."""
    v = _get(row, key)
    if v is not None:
        return float(v) * 1000 if is_time_column(key) else float(v)
    v = row.get(f"{key}_ms")
    return None if v is None else float(v)


def _is_time_metric(key: str) -> bool:
    return is_time_column(key) or key.endswith("_ms")


def _plain(v, _pos=None) -> str:
    return f"{v:g}"


def _plain_log_ticks(axis, lo: float, hi: float) -> None:
    """Log-axis ticks as plain numbers (100, not 10²); under ~1.5 decades the 2x and 5x ticks get labels too."""
    axis.set_major_formatter(FuncFormatter(_plain))
    if lo > 0 and hi / lo < 30:
        axis.set_minor_locator(LogLocator(subs=(2, 5)))
        axis.set_minor_formatter(FuncFormatter(_plain))
    else:
        axis.set_minor_formatter(FuncFormatter(lambda v, p: ""))


def _metric_label(key: str) -> str:
    base = key[:-3] if key.endswith("_ms") else key
    base = base[len("latency."):] if base.startswith("latency.") else base
    label = METRIC_LABELS.get(base) or METRIC_LABELS.get(base.replace(".", "_")) or \
        base.replace(".", " ").replace("_", " ")
    return f"{label} (ms)" if _is_time_metric(key) else label


def plot_sweep(rows: list[dict], x: str = "rate", metrics=SWEEP_METRICS, path=None, group: str = "scheduler",
               title: str | None = None) -> Path:
    """One panel per metric against ``x``, one line per value of ``group`` (the scheduler).

    ``rows`` are flat dicts (see ``summary_row``) or nested summaries with the labels added; a metric key may
    be a dotted path (``latency.ttft.p99``). Latencies are drawn in ms on a log y axis: a row may hold them
    in seconds under the key (``ttft_p99``) or in ms under ``<key>_ms`` (``ttft_p99_ms``).
    """
    if path is None:
        raise ValueError("plot_sweep needs path=, the PNG file to write")
    rows = list(rows)
    metrics = list(metrics)
    if not metrics:
        raise ValueError("plot_sweep needs at least one metric")
    ncols = min(len(metrics), 3)
    nrows = math.ceil(len(metrics) / ncols)
    fig = Figure(figsize=(5.2 * ncols, 4.0 * nrows))
    axes = np.atleast_1d(fig.subplots(nrows, ncols)).ravel()
    groups: dict = {}
    for r in rows:
        groups.setdefault(_get(r, group), []).append(r)
    x_label = {"rate": "arrival rate (req/s)"}.get(x, x.replace("_", " "))
    for ax, m in zip(axes, metrics):
        is_time = _is_time_metric(m)
        for g, rs in groups.items():
            pts = [(_get(r, x), _metric_value(r, m)) for r in rs]
            pts = sorted((float(a), b) for a, b in pts if a is not None and b is not None and math.isfinite(b))
            if not pts:
                continue
            xs, ys = np.array(pts).T
            ax.plot(xs, ys, marker="o", markersize=4, linewidth=1.5, label=str(g))
        if is_time and ax.get_lines():
            ax.set_yscale("log")
            _plain_log_ticks(ax.yaxis, *ax.get_ylim())
        ax.set_title(_metric_label(m).replace(" (ms)", ""))
        ax.set_xlabel(x_label)
        ax.set_ylabel(_metric_label(m))
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[len(metrics):]:
        ax.set_visible(False)
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=8, title=group)
    if title:
        fig.suptitle(title)
    return _save(fig, path)
