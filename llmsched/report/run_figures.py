"""Figures of runs and sweeps: latency CDFs, KV use over time, metrics against the arrival rate. Few series share
one panel; many get one row of panels per scheduler family, the baselines in grey in each (``style``). A series
whose data is identical to an earlier one says so in its label, since one line then hides the other."""
from __future__ import annotations

import math

import numpy as np

from ..metrics.latency_stats import merged_sketch
from ..metrics.writers import is_time_column
from ..request import Status
from .sheet import Sheet
from .families import display, draw_groups, family_groups, family_order, same_as, titled
from .style import styles, with_points
from .ticks import plain_log_ticks

CDF_POINTS = 600  # points per CDF line, whatever the number of samples: under a pixel apart in y on a panel
TIME_BINS = 600  # time bins of the KV-usage plot
TIER_LINES = {"cpu": "--", "disk": "-.", "remote": ":"}  # KV tiers below the GPU on the KV panel
CDF_PANELS = (("ttft", "Time to first token (TTFT)"), ("tbt", "Time between tokens (TBT)"),
              ("e2e", "End-to-end latency (E2E)"))
KV_PANELS = (("KV cache used (%)", "KV-cache utilisation"), ("running requests", "Running batch (all replicas)"),
             ("waiting requests", "Waiting queue (all replicas)"))

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


# --- latency CDFs -----------------------------------------------------------------------------------------------

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


def latency_cdf(result, metric: str) -> tuple[np.ndarray, np.ndarray]:
    log = result.requests
    if metric == "tbt":
        if log.keep_gaps:
            return _ecdf(log.gaps_of(None))
        return _sketch_cdf(merged_sketch(log))
    finished = log.column("status") == int(Status.FINISHED)
    return _ecdf(log.column(metric)[finished])


def plot_latency_cdfs(results: dict, path, title: str | None = None, families: dict | None = None):
    """TTFT, TBT and E2E CDFs (ms, log x), one line per run label; dotted lines mark tier targets.

    TTFT and E2E are over finished requests, TBT over every gap (its sketch in sketch mode). All requests of
    each run are drawn (no warm-up trimming).
    """
    return latency_cdf_sheet(results, title, families).save(path)


def latency_cdf_sheet(results: dict, title: str | None = None, families: dict | None = None) -> Sheet:
    styled = styles(results, families)
    curves = {label: [latency_cdf(res, m) for m, _ in CDF_PANELS] for label, res in results.items()}
    twins = same_as({label: [a for xy in curves[label] for a in xy] for label in family_order(styled)})
    groups = family_groups(styled)
    sheet = Sheet(len(groups), len(CDF_PANELS), title=title, share="col")

    def draw(ax, c, label, kw, _reference):
        x, y = curves[label][c]
        if len(x):
            ax.step(x * 1000, y, where="post", **kw)

    draw_groups(sheet, styled, groups, len(CDF_PANELS), draw, twins)
    targets = {}
    for metric in ("ttft", "tbt"):
        found = set()
        for result in results.values():
            t = result.requests.column(f"{metric}_slo")
            found.update(np.unique(t[np.isfinite(t)]).tolist())
        targets[metric] = sorted(found)
    for r, (family, _) in enumerate(groups):
        for c, (metric, name) in enumerate(CDF_PANELS):
            ax = sheet.axes[r][c]
            for t in targets.get(metric, ()):
                ax.axvline(t * 1000, color="0.4", linestyle=":", linewidth=1)
                ax.annotate(f"target {t * 1000:g} ms", (t * 1000, 0.02), rotation=90, fontsize=7, color="0.3",
                            xytext=(3, 0), textcoords="offset points", va="bottom")
            ax.set_title(titled(name, family), fontsize=10)
            ax.set_xlabel(f"{metric.upper()} (ms, log scale)")
            ax.set_ylabel("fraction ≤ x")
            ax.set_ylim(0, 1.01)
            ax.grid(True, which="both", alpha=0.3)
    for c in range(len(CDF_PANELS)):
        column = [sheet.axes[r][c] for r in range(len(groups))]
        if any(len(curve[c][0]) for curve in curves.values()):
            column[0].set_xscale("log")
            for ax in column:
                plain_log_ticks(ax.xaxis, *ax.get_xlim())
        else:
            for ax in column:
                ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="0.5")
    return sheet


# --- KV use over time -------------------------------------------------------------------------------------------

def binned(result, bins: np.ndarray):
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


def tier_binned(result, bins: np.ndarray) -> dict:
    """Per KV tier below the GPU (runs with ``--kv-offload``), its share held (%) per time bin, summed over replicas
    (Σ chunks held / Σ chunks): from each replica's tier samples (engine/kv_tiers.py ``usage``)."""
    rows = [row["kv_offload"] for row in getattr(result, "replica_stats", ()) if "kv_offload" in row]
    if not rows:
        return {}
    nb = len(bins) - 1
    out = {}
    for i, tier in enumerate(rows[0]["tiers"]):
        used = np.zeros(nb)
        total = 0.0
        seen = np.zeros(nb, dtype=bool)
        for row in rows:
            samples = np.asarray(row.get("usage") or [(0.0,) + (0,) * len(row["tiers"])], dtype=np.float64)
            idx = np.clip(np.searchsorted(bins, samples[:, 0], side="right") - 1, 0, nb - 1)
            count = np.bincount(idx, minlength=nb)
            mean = np.bincount(idx, weights=samples[:, i + 1], minlength=nb) / np.where(count, count, 1)
            last = np.maximum.accumulate(np.where(count > 0, np.arange(nb), -1))  # a bin without a sample: the last
            used += np.where(last >= 0, mean[np.maximum(last, 0)], 0.0)
            seen |= last >= 0
            total += row["tiers"][i]["chunks"]
        out[tier["medium"]] = np.where(seen, 100 * used / total, np.nan)
    return out


def plot_kv_usage(results: dict, path, title: str | None = None, families: dict | None = None):
    """KV-cache utilisation, running-batch size and waiting-queue length over simulated time, one line per
    run label (time-binned means; gaps where the engine was idle)."""
    return kv_usage_sheet(results, title, families).save(path)


def kv_usage_sheet(results: dict, title: str | None = None, families: dict | None = None) -> Sheet:
    styled = styles(results, families)
    series = {}
    tiers = {}  # label -> medium -> a KV tier's share held over time (runs with --kv-offload)
    for label, result in results.items():
        if not len(result.steps):
            series[label] = None
            continue
        start = result.steps.column("start")
        end = float(max(result.end_time, start.max()))
        bins = np.linspace(0.0, end if end > 0 else 1.0, TIME_BINS + 1)
        series[label] = ((bins[:-1] + bins[1:]) / 2, *binned(result, bins))
        tiers[label] = tier_binned(result, bins)
    twins = same_as({label: list(series[label]) for label in family_order(styled) if series[label] is not None})
    groups = family_groups(styled)
    if len(groups) == 1:  # few runs: the three measures stacked, each panel wide
        sheet = Sheet(3, 1, panel=(9.0, 2.3), title=title, share="col")
        for label, s in series.items():
            for c in range(3):
                if s is not None:
                    sheet.axes[c][0].plot(s[0], s[c + 1], **styled[label].line(label=display(label, twins),
                                                                                   linewidth=1.2))
            for medium, share in tiers.get(label, {}).items():  # the tiers below the GPU, on the KV panel
                kw = styled[label].line(label=f"{display(label, twins)}: {medium} tier", linewidth=1.0)
                sheet.axes[0][0].plot(s[0], share, **{**kw, "linestyle": TIER_LINES.get(medium, ":")})
        sheet.legend()
        cells = [(sheet.axes[c][0], c, "") for c in range(3)]
    else:
        sheet = Sheet(len(groups), 3, panel=(4.2, 2.4), title=title, share="col")

        def draw(ax, c, label, kw, _reference):
            if series[label] is not None:
                ax.plot(series[label][0], series[label][c + 1], **{**kw, "linewidth": min(kw["linewidth"], 1.2)})
                for medium, share in tiers.get(label, {}).items() if c == 0 else ():
                    ax.plot(series[label][0], share, **{**kw, "linewidth": 1.0, "label": None,
                                                        "linestyle": TIER_LINES.get(medium, ":")})

        draw_groups(sheet, styled, groups, 3, draw, twins)
        cells = [(sheet.axes[r][c], c, family) for r, (family, _) in enumerate(groups) for c in range(3)]
    tops = {}  # a family's own lines set the scale of its counts; a grey baseline above them leaves the panel
    for r, (family, members) in enumerate(groups):
        for c in (1, 2):
            values = [np.nanmax(series[m][c + 1]) for m in members
                      if series[m] is not None and np.isfinite(series[m][c + 1]).any()]
            tops[family, c] = max(values, default=0.0)
    for ax, c, family in cells:
        ylabel, name = KV_PANELS[c]
        ax.set_title(titled(name, family), fontsize=10)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("simulated time (s)")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(0, 105) if c == 0 else ax.set_ylim(0, max(tops[family, c] * 1.08, 1.0))
    return sheet


# --- metrics against the arrival rate ---------------------------------------------------------------------------

def get(row: dict, key: str):
    """``row[key]``, or a dotted path into nested dicts (``latency.ttft.p99``)."""
    if key in row:
        return row[key]
    cur = row
    for part in key.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def metric_value(row: dict, key: str) -> float | None:
    """The value to draw: latencies in ms, whether the row holds ``key`` in seconds or ``key_ms`` in ms."""
    v = get(row, key)
    if v is not None:
        return float(v) * 1000 if is_time_column(key) else float(v)
    v = row.get(f"{key}_ms")
    return None if v is None else float(v)


def is_time_metric(key: str) -> bool:
    return is_time_column(key) or key.endswith("_ms")


def metric_label(key: str) -> str:
    base = key[:-3] if key.endswith("_ms") else key
    base = base[len("latency."):] if base.startswith("latency.") else base
    label = METRIC_LABELS.get(base) or METRIC_LABELS.get(base.replace(".", "_")) or \
        base.replace(".", " ").replace("_", " ")
    return f"{label} (ms)" if is_time_metric(key) else label


def plot_sweep(rows: list[dict], x: str = "rate", metrics=SWEEP_METRICS, path=None, group: str = "scheduler",
               title: str | None = None, families: dict | None = None):
    """One panel per metric against ``x``, one line per value of ``group`` (the scheduler).

    ``rows`` are flat dicts (see ``summary_row``) or nested summaries with the labels added; a metric key may
    be a dotted path (``latency.ttft.p99``). Latencies are drawn in ms on a log y axis: a row may hold them
    in seconds under the key (``ttft_p99``) or in ms under ``<key>_ms`` (``ttft_p99_ms``).
    """
    if path is None:
        raise ValueError("plot_sweep needs path=, the PNG file to write")
    return sweep_sheet(rows, x, metrics, group, title, families).save(path)


def sweep_sheet(rows, x="rate", metrics=SWEEP_METRICS, group="scheduler", title=None, families=None) -> Sheet:
    rows = list(rows)
    metrics = list(metrics)
    if not metrics:
        raise ValueError("plot_sweep needs at least one metric")
    by_group: dict = {}
    for r in rows:
        by_group.setdefault(str(get(r, group)), []).append(r)
    points = {}
    for g, rs in by_group.items():
        for m in metrics:
            pts = [(get(r, x), metric_value(r, m)) for r in rs]
            pts = sorted((float(a), b) for a, b in pts if a is not None and b is not None and math.isfinite(b))
            points[g, m] = np.array(pts).T if pts else None
    styled = styles(by_group, families)
    twins = same_as({g: [p for m in metrics for p in (points[g, m] if points[g, m] is not None else [])]
                     for g in family_order(styled)})
    groups = family_groups(styled)
    x_label = {"rate": "arrival rate (req/s)"}.get(x, x.replace("_", " "))
    if len(groups) == 1:
        ncols = min(len(metrics), 3)
        nrows = math.ceil(len(metrics) / ncols)
        sheet = Sheet(nrows, ncols, panel=(3.8, 2.8), title=title)
        cells = [(sheet.axes[i // ncols][i % ncols], m, "") for i, m in enumerate(metrics)]
        for ax, m, _ in cells:
            for g in by_group:
                if points[g, m] is not None:
                    ax.plot(*points[g, m], **with_points(styled[g].line(label=display(g, twins))))
        for i in range(len(metrics), nrows * ncols):
            sheet.axes[i // ncols][i % ncols].set_visible(False)
        sheet.legend(title=group)
    else:
        sheet = Sheet(len(groups), len(metrics), panel=(3.4, 2.5), title=title, share="col")

        def draw(ax, c, g, kw, _reference):
            if points[g, metrics[c]] is not None:
                ax.plot(*points[g, metrics[c]], **with_points(kw))

        draw_groups(sheet, styled, groups, len(metrics), draw, twins)
        cells = [(sheet.axes[r][c], m, family) for r, (family, _) in enumerate(groups) for c, m in enumerate(metrics)]
    for ax, m, family in cells:
        if is_time_metric(m) and ax.get_lines():
            ax.set_yscale("log")
            plain_log_ticks(ax.yaxis, *ax.get_ylim())
        ax.set_title(titled(metric_label(m).replace(" (ms)", ""), family), fontsize=10)
        ax.set_xlabel(x_label)
        ax.set_ylabel(metric_label(m))
        ax.grid(True, which="both", alpha=0.3)
    return sheet
