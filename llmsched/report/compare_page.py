"""``compare``'s report page: the run's settings, every scheduler's row in a table that sorts on any column
(SLO attainment and goodput highlighted, the best marked), the figures, and a section per scheduler family with
what each scheduler is and which ones gave identical results. One file, nothing loaded from elsewhere."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from ..metrics.writers import is_time_column
from .html import escape, image, page, table
from .style import FAMILIES, OTHER, family_of

KEY = ("goodput_rps", "slo_attainment")  # what a comparison under SLOs is decided by
COLUMNS = ("scheduler", "family", "goodput_rps", "slo_attainment", "finished", "rejected", "ttft_p50", "ttft_p99",
           "tbt_p99", "tpot_p50", "e2e_p50", "throughput_rps", "output_tps", "preemptions")
UNTIMED = ("wall_s", "sim_steps_per_s")  # how fast the simulator ran, not what the scheduler did
HIDDEN_SETTINGS = ("scheduler", "scheduler_params", "keep_gaps", "fast_forward", "lanes", "check_invariants")


def write_compare_report(path, rows: list[dict], configs, figures: list[Path]) -> Path:
    """``rows`` are compare's table rows (``summary_row``), ``configs`` the runs' RunConfigs in the same order."""
    path = Path(path)
    tiers = sorted({c[len("attain_"):] for r in rows for c in r if c.startswith("attain_")})
    keys = list(KEY) + [f"attain_{t}" for t in tiers]
    columns = list(COLUMNS[:4]) + keys[2:] + list(COLUMNS[4:]) + [f"tbt_p99_{t}" for t in tiers]
    rows = [{**r, "family": family_of(r["scheduler"])} for r in rows]
    twins = identical(rows)
    best = {k: max((r[k] for r in rows if isinstance(r.get(k), float) and not math.isnan(r[k])), default=None)
            for k in keys}  # of all the schedulers, also in a family's section
    cfg = configs[0]
    parts = [f"<h1>llmsched compare</h1><p>{escape(_headline(cfg, rows))}</p>", _contents(rows)]
    parts.append("<h2 id='settings'>Settings</h2>" + _settings(cfg, configs))
    parts.append("<h2 id='results'>Results</h2><p>Latencies in ms. Highlighted: goodput (requests/s that met "
                 "every target they have; rejected and unfinished requests miss) and SLO attainment; the best "
                 "value of each is marked. Click a column's header to sort by it.</p>"
                 + _table(rows, columns, keys, best, twins))
    parts.append("<h2 id='figures'>Figures</h2>" + "".join(
        f"<h3>{escape(f.name)}</h3>" + image(f.read_bytes(), f.stem.replace("_", " ")) for f in figures))
    for family in [f for f in FAMILIES + (OTHER,) if any(r["family"] == f for r in rows)]:
        members = [r for r in rows if r["family"] == family]
        parts.append(f"<h2 id='{_anchor(family)}'>{escape(family)}</h2>" + _family(members, keys, best, twins))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page("llmsched compare", parts), encoding="utf-8")
    return path


def identical(rows: list[dict]) -> dict[str, str]:
    """Scheduler -> the first earlier one whose every result column is the same (the runs were identical)."""
    first, out = {}, {}
    for r in rows:
        key = tuple(sorted((k, repr(v)) for k, v in r.items() if k not in ("scheduler", "family") + UNTIMED))
        if key in first:
            out[r["scheduler"]] = first[key]
        first.setdefault(key, r["scheduler"])
    return out


def cell(column: str, value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value * 1000:.1f}" if is_time_column(column) else f"{value:.4g}"
    return str(value)


def _head(column: str) -> str:
    return f"{column} (ms)" if is_time_column(column) else column


def _table(rows, columns, keys, best, twins) -> str:
    head = [_head(c) for c in columns]
    body = []
    for r in rows:
        cells = [cell(c, r.get(c)) + (" ★" if c in keys and r.get(c) == best[c] else "") for c in columns]
        if r["scheduler"] in twins:
            cells[0] += f" (= {twins[r['scheduler']]})"
        body.append(cells)
    numeric = [_head(c) for c in columns if c not in ("scheduler", "family")]
    return table(head, body, numeric=numeric, key=[_head(k) for k in keys])


def _family(members, keys, best, twins) -> str:
    from ..schedulers.registry import scheduler_info
    items = []
    for r in members:
        info = scheduler_info(r["scheduler"])
        same = f" Identical results to <b>{escape(twins[r['scheduler']])}</b>." if r["scheduler"] in twins else ""
        items.append(f"<li><b>{escape(r['scheduler'])}</b>: {escape(info['summary'])} "
                     f"<i>({escape(info['source'])})</i>.{same}</li>")
    columns = ["scheduler"] + keys + ["ttft_p50", "ttft_p99", "tbt_p99", "throughput_rps"]
    return f"<ul>{''.join(items)}</ul>" + _table(members, columns, keys, best, twins)


def _headline(cfg, rows) -> str:
    load = f"rate {cfg.rate:g} req/s" if cfg.rate else (f"{cfg.concurrency} users" if cfg.concurrency else
                                                         "as traced")
    best = max(rows, key=lambda r: (r.get("goodput_rps") or 0.0))
    return (f"{len(rows)} schedulers: {cfg.model} on {cfg.gpu} (x{cfg.replicas}), workload "
            f"{cfg.trace or cfg.workload}, {load}, seed {cfg.seed}. Highest goodput: {best['scheduler']} "
            f"({best['goodput_rps']:.4g} req/s).")


def _contents(rows) -> str:
    families = [f for f in FAMILIES + (OTHER,) if any(r["family"] == f for r in rows)]
    links = [("settings", "Settings"), ("results", "Results"), ("figures", "Figures")] + \
        [(_anchor(f), f) for f in families]
    return "<p>" + " · ".join(f"<a href='#{a}'>{escape(t)}</a>" for a, t in links) + "</p>"


def _anchor(family: str) -> str:
    return "family-" + "".join(ch if ch.isalnum() else "-" for ch in family)


def _settings(cfg, configs) -> str:
    items = [(k, v) for k, v in dataclasses.asdict(cfg).items() if k not in HIDDEN_SETTINGS and v not in (None, {})]
    params = [(c.scheduler, c.scheduler_params) for c in configs if c.scheduler_params]
    items += [(f"{name} parameters", ", ".join(f"{k}={v}" for k, v in p.items())) for name, p in params]
    return "<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in items) + "</dl>"
