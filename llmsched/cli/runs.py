"""Running a command's configs (in this process or a process pool, with a progress bar) and their table rows."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..run_config import RunConfig

TABLE_COLUMNS = ["scheduler", "finished", "rejected", "ttft_p50", "ttft_p99", "tbt_p99", "tpot_p50", "e2e_p50",
                 "throughput_rps", "output_tps", "goodput_rps", "slo_attainment", "preemptions", "wall_s"]


def table_columns(rows: list[dict], columns: list[str] = TABLE_COLUMNS) -> list[str]:
    """``columns``, with ``aborted`` after ``rejected`` where a client timeout ended some request of a row."""
    if not any(row.get("aborted") for row in rows) or "rejected" not in columns:
        return columns
    at = columns.index("rejected") + 1
    return [*columns[:at], "aborted", *columns[at:]]


def run_one(cfg: RunConfig):
    from ..experiment import run
    from ..metrics.summary import summarize
    result = run(cfg)
    return result, summarize(result, warmup=cfg.warmup, cooldown=cfg.cooldown)


def run_many(configs: list[RunConfig], jobs: int, progress: bool):
    from tqdm import tqdm

    from ..executors import worker_pool
    from ..fleet_setup import check_pool_schedulers
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    for cfg in configs:  # what a run's start refuses, before any run
        check_pool_schedulers(cfg)
    bar = tqdm(total=len(configs), unit="run", desc="runs", disable=not progress, leave=False)
    results = []
    if jobs == 1 or len(configs) == 1:
        for cfg in configs:
            results.append(run_one(cfg))
            bar.update()
    else:
        with worker_pool(jobs) as pool:
            futures = [pool.submit(run_one, cfg) for cfg in configs]
            for f in futures:
                results.append(f.result())
                bar.update()
    bar.close()
    return results


def split_names(text: str, option: str = "--schedulers") -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise ValueError(f"{option} {text!r}: the list is empty, no scheduler named; give comma-separated names, "
                         f"e.g. vllm,sarathi")
    return names


def summary_row(cfg: RunConfig, result, summary: dict) -> dict:
    """One table row: the run's labels, its flat summary, and the simulator's own speed."""
    from ..metrics.summary import summary_row as flat_row
    return flat_row(summary, scheduler=cfg.scheduler, rate=cfg.rate, wall_s=result.wall_time,
                    sim_steps_per_s=len(result.steps) / result.wall_time if result.wall_time else float("nan"))


def schedulers_label(cfg: RunConfig, result) -> str:
    """The run's scheduler, or each pool's where a fleet's pools run different ones (``--decode-pool
    scheduler=vllm``, a fleet file's pools), so a printed row does not credit one policy with another's work."""
    pools = (result.meta.get("fleet") or {}).get("pools") or {}
    names = {pool: (info.get("scheduler") or {}).get("name") for pool, info in pools.items()}
    if len(set(names.values())) <= 1:
        return cfg.scheduler
    return ",".join(f"{pool}={name}" for pool, name in names.items())


def check_out_dir(path, option: str = "--out") -> None:
    """An output folder that can be made (or is there): refused before any run when it, or a folder above it, is
    a file, rather than after the runs when their files are written."""
    if path is None:
        return
    for above in (Path(path), *Path(path).parents):
        if above.exists():
            if not above.is_dir():
                what = "a file" if above == Path(path) else f"{above} is a file"
                raise ValueError(f"{option} {path}: {what}, not a folder; give a folder (made if missing)")
            return


def check_out_file(path, option: str, example: str = "out.json") -> None:
    """A file to write at the end of a run, refused before the runs where it is a folder or a folder above it is
    a file (rather than after the runs, when it is written)."""
    if path is None:
        return
    if Path(path).is_dir():
        raise ValueError(f"{option} {path}: a folder, not a file; give a file name (e.g. {Path(path) / example})")
    for above in Path(path).parents:
        if above.exists():
            if not above.is_dir():
                raise ValueError(f"{option} {path}: {above} is a file, not a folder; give a path in a folder")
            return


def print_length_cap(summary: dict) -> None:
    """One line under the run's table: how many requests --max-total-tokens clipped (summary.json's
    max_total_tokens), when the run had the cap."""
    cap = summary.get("max_total_tokens")
    if cap is not None:
        print(f"max_total_tokens {cap['limit']}: clipped {cap['clipped']} of {cap['drawn']} requests "
              f"(prompt to {cap['limit'] - 1} tokens at most, then the output to the rest)")


def say_engine_unknown(command: str, args) -> None:
    """After a run of a --trace whose log names its model but no meta.json gives its engine: say which engine was
    simulated and how to give the run's own (said after the run, so that an error of the run stays one line)."""
    import sys
    if getattr(args, "trace_engine_unknown", None):
        print(f"llmsched {command}: {args.trace_engine_unknown}", file=sys.stderr)


def warn_rejections(command: str, summary: dict, label: str = "") -> None:
    """A warning on stderr when a notable share of the run's requests were rejected: why, and the fix."""
    import sys
    from ..metrics.rejections import NOTABLE_SHARE, rejection_note
    counts = summary["counts"]
    rejected, offered = counts["rejected"], counts["offered"]
    if offered and rejected >= NOTABLE_SHARE * offered:
        print(f"llmsched {command}: warning: {label}{rejection_note(rejected, offered, counts['reasons'])}",
              file=sys.stderr)
