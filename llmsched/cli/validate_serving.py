"""``llmsched validate-serving``: replay real serving runs in the simulator and say how far it is from them."""
from __future__ import annotations

import csv
import json
import shlex
from pathlib import Path

from ..hardware.front_end import FRONT_ENDS
from ..run_config import RunConfig
from ..validate.serving import METRICS, STATS, pct, validate
from ..validate.serving_run import load_runs
from .serve_engine import SERVE_COMMAND_HELP, VLLM_VERSION_HELP, serve_engine

DEFAULT_BATCH_TIME = RunConfig.batch_time  # the run field's default (vllm-v1), declared once
BENCH_COMMAND_HELP = ("the `vllm bench serve --flag ...` line of a result saved without meta.json: its dataset flags "
                      "say which prompts began with the same tokens (random with --random-prefix-len, "
                      "prefix_repetition), which the replay's prefix cache then finds, and --num-warmups and "
                      "--ready-check-timeout-sec what it sent before the run")


def add(sub) -> None:
    p = sub.add_parser(
        "validate-serving", help="replay real vLLM runs (per-request logs) and report the simulator's error",
        description="Replay each run folder (requests.jsonl or a `vllm bench serve --save-result --save-detailed` "
                    "JSON, meta.json with the engine arguments, config.json) with exactly its arrivals and "
                    "lengths through vllm-chunked and the vllm-v1 engine model; print and write real vs simulated "
                    "mean/P50/P90/P99 TTFT, TPOT, ITL and E2E, throughput, and each error (validation.json, "
                    "validation.csv, cdf.png in --out). --calibrate NAME first fits efficiency terms on the "
                    "--fit runs (default the first), stores them as a profile --batch-time NAME takes, and "
                    "labels every run calibration or validation.")
    p.add_argument("runs", nargs="+", metavar="DIR", help="a run's folder, or its log file (repeatable)")
    p.add_argument("--out", help="output folder (default: print only)")
    p.add_argument("--gpu", help="GPU preset of the runs whose meta.json names none (e.g. h200)")
    p.add_argument("--model", help="model preset, where config.json / meta.json's model is not one llmsched reads")
    p.add_argument("--serve-command", metavar="COMMAND", help=SERVE_COMMAND_HELP.format(what="runs"))
    p.add_argument("--vllm-version", metavar="X.Y.Z", help=VLLM_VERSION_HELP.format(what="runs"))
    p.add_argument("--bench-command", metavar="COMMAND", help=BENCH_COMMAND_HELP)
    p.add_argument("--log", help="the per-request log's file name in each folder (default requests.jsonl, else "
                                 "the one bench-result .json)")
    p.add_argument("--latency-boundary", choices=("client", "engine"),
                   help="compare at the client or in the engine (default: where each log measured: a requests.jsonl "
                        "in the engine, vllm bench serve, GuideLLM and inference-perf reports at the client; a "
                        "requests.jsonl with client_sent/client_first/client_last stamps can be read at either)")
    p.add_argument("--front-end", choices=tuple(FRONT_ENDS),
                   help="the front end of a client-side replay (default: meta.json's front_end, else vllm-async-llm "
                        "for an engine run with skip_tokenizer_init, else vllm-serve)")
    p.add_argument("--batch-time", default=None,
                   help=f"batch-time kind or stored profile (default {DEFAULT_BATCH_TIME})")
    p.add_argument("--bt-param", action="append", default=[], metavar="KEY=VALUE",
                   help="batch-time model parameter (repeatable)")
    p.add_argument("--decode-bt-param", action="append", default=[], metavar="KEY=VALUE",
                   help="a 1P1D run's decode instance's own batch-time parameter, over --bt-param (repeatable; a "
                        "CPU capture's instances each have their step model: meta.json cpu_step_model)")
    p.add_argument("--calibrate", metavar="NAME", help="fit --fit-terms on the --fit runs and store profile NAME")
    p.add_argument("--fit", action="append", default=[], metavar="DIR",
                   help="a calibration run (repeatable; default the first run)")
    p.add_argument("--fit-terms", default="compute_eff,mem_eff",
                   help="comma-separated terms of the GPU model to fit (default compute_eff,mem_eff)")
    p.add_argument("--profiles", metavar="DIR", help="where --calibrate writes the profile (default "
                                                     "$LLMSCHED_BATCH_TIME_PROFILES or ~/.llmsched/batch-time)")
    p.set_defaults(func=cmd_validate_serving)


def fit_command(args) -> str:
    """The command that fits the profile again: the calibration runs and every option the fit depends on."""
    words = ["llmsched", "validate-serving", *(args.fit or args.runs[:1]), "--calibrate", args.calibrate]
    for flag, value in (("--gpu", args.gpu), ("--model", args.model), ("--log", args.log),
                        ("--serve-command", args.serve_command), ("--vllm-version", args.vllm_version),
                        ("--bench-command", args.bench_command),
                        ("--latency-boundary", args.latency_boundary), ("--front-end", args.front_end)):
        if value:
            words += [flag, value]
    if args.batch_time not in (None, DEFAULT_BATCH_TIME):
        words += ["--batch-time", args.batch_time]
    for param in args.bt_param:
        words += ["--bt-param", param]
    for param in args.decode_bt_param:
        words += ["--decode-bt-param", param]
    if args.fit_terms != "compute_eff,mem_eff":
        words += ["--fit-terms", args.fit_terms]
    return shlex.join(words)


def cmd_validate_serving(args) -> int:
    from ..batchtime.named import check_name, load_profile, save_profile
    from ..config_fields import parse_params
    params = parse_params(args.bt_param, "--bt-param") if args.bt_param else {}
    decode_params = parse_params(args.decode_bt_param, "--decode-bt-param") if args.decode_bt_param else None
    serve = serve_engine(args)
    runs = [run for folder in args.runs
            for run in load_runs(folder, args.log, args.latency_boundary, serve, args.bench_command)]
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"two runs have the same folder name ({', '.join(names)}); give each its own name")
    asked = args.batch_time or DEFAULT_BATCH_TIME
    batch_time, calibrated_on, fit_record = asked, [], None
    if args.calibrate:
        from ..validate.serving_calibrate import calibrate, profile_payload
        check_name(args.calibrate)
        fit = ([run for folder in args.fit
                for run in load_runs(folder, args.log, args.latency_boundary, serve, args.bench_command)]
               if args.fit else runs[:1])
        terms = tuple(t.strip() for t in args.fit_terms.split(",") if t.strip())
        if not terms:
            raise ValueError("--fit-terms: name at least one term (e.g. compute_eff,mem_eff)")
        fitted, fit_record = calibrate(fit, args.gpu, batch_time, params, terms, args.model)
        fit_record["command"] = fit_command(args)
        path = save_profile(args.calibrate, profile_payload(args.calibrate, params, fitted, fit_record),
                            Path(args.profiles) if args.profiles else None)
        print(f"calibrated {', '.join(f'{k} = {v:g}' for k, v in fitted.items())} on {', '.join(r.name for r in fit)} "
              f"(rms log error {fit_record['rms_log_error_before']:.4f} -> {fit_record['rms_log_error_after']:.4f}); "
              f"wrote {path}")
        batch_time, calibrated_on = fit_record["kind"], fit_record["calibrated_on"]
        params = {**params, **fitted}
    else:
        profile = load_profile(batch_time)
        calibrated_on = list(profile.get("calibrated_on", [])) if profile else []
    rows = []
    for run in runs:
        row = validate(run, args.gpu, batch_time, params, args.model, args.front_end,
                       decode_batch_time_params=decode_params)
        row["split"] = "calibration" if run.name in calibrated_on else "validation"
        row["profile"] = args.calibrate or (asked if asked != batch_time else None)
        rows.append(row)
    print(format_report(rows))
    if args.out:
        from ..report.validation_figures import plot_validation_cdfs
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_report(rows, out, fit_record)
        plot_validation_cdfs(rows, out / "cdf.png")
        print(f"wrote {out / 'validation.json'}, {out / 'validation.csv'}, {out / 'cdf.png'}")
    return 0


def format_report(rows: list[dict]) -> str:
    lines = []
    for row in rows:
        where = (f"at the client through {row['front_end']}" if row.get("latency_boundary") == "client" else
                 "in the engine")
        pd = f", {row['disaggregate']}" if row.get("disaggregate") else ""
        lines.append(f"{row['run']} ({row['split']}): {row['model']} on {row['gpu']}, tp {row['tp']}, dp {row['dp']}"
                     f"{' + EP' if row['expert_parallel'] else ''}{pd}, vLLM {row['vllm_version'] or '(latest)'}, "
                     f"{row['requests']} requests, batch time {row['profile'] or row['batch_time']}, measured {where}")
        lines.append(f"  {'metric':<14}" + "".join(f"{s:>26}" for s in STATS))
        for metric in METRICS:
            real, sim, err = row["real"][metric], row["simulated"][metric], row["errors"][metric]
            if real["p50"] is None:
                continue
            cells = "".join(f"{real[s] * 1e3:>9.1f} {sim[s] * 1e3:>8.1f} {err[s]:>+6.1f}%" for s in STATS)
            lines.append(f"  {metric + ' (ms)':<14}{cells}")
        real, sim, err = row["real"]["throughput"], row["simulated"]["throughput"], row["errors"]["throughput"]
        lines.append(f"  throughput     {real['output_tps']:.0f} -> {sim['output_tps']:.0f} tok/s "
                     f"({err['output_tps']:+.1f}%), {real['rps']:.3f} -> {sim['rps']:.3f} req/s ({err['rps']:+.1f}%)")
        if "prefix_cache" in row:
            lines.append("  " + format_prefix_cache(row["prefix_cache"]))
        failed = row.get("failures")
        if failed and failed["timeout_s"] is None:
            lines.append(f"  failures       {failed['real']} at the client, not compared: {failed['replayed']} "
                         f"replayed with the tokens they got, {failed['not_replayed']} not replayed")
        elif failed and (failed["real"] or failed["simulated"]):
            lines.append(f"  failures       {failed['real']} -> {failed['simulated']} of {row['requests']} requests "
                         f"(the client's timeout, {failed['timeout_s']:g} s)")
        met = [f"{name} {t['error_pct']:+.1f}% {'ok' if t['met'] else 'MISS'} (±{t['bound_pct']:g}%)"
               if t["met"] is not None else f"{name} not compared" for name, t in row["targets"].items()]
        for note in row["notes"]:
            lines.append(f"  note: {note}")
        lines.append("  targets: " + "; ".join(met))
    lines.append("(each cell: real, simulated, error)")
    return "\n".join(lines)


def format_prefix_cache(cache: dict) -> str:
    """Real and simulated hit rate (cached prompt tokens / prompt tokens) and the simulated one's error in points."""
    sim = cache["simulated"]
    real = cache["real"]
    said = (f"{real['hit_rate']:.1%} -> {sim['hit_rate']:.1%} ({cache['error_points']:+.1f} points), "
            f"{real['cached_tokens']} -> {sim['cached_tokens']}" if real else
            f"not measured (no num_cached_tokens) -> {sim['hit_rate']:.1%}, {sim['cached_tokens']}")
    notes = "".join(f"; {note}" for note in cache["notes"])
    return f"prefix cache   hit rate {said} of {sim['prompt_tokens']} prompt tokens cached{notes}"


def write_report(rows: list[dict], out: Path, fit_record: dict | None) -> None:
    payload = {"runs": [{k: v for k, v in row.items() if k != "samples"} for row in rows]}
    if fit_record:
        payload["calibration"] = fit_record
    (out / "validation.json").write_text(json.dumps(payload, indent=2) + "\n")
    with (out / "validation.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "split", "metric", "statistic", "real", "simulated", "error_pct"])
        for row in rows:
            for metric in METRICS + ("throughput",):
                keys = ("output_tps", "rps") if metric == "throughput" else STATS
                for k in keys:
                    real, sim = row["real"][metric][k], row["simulated"][metric][k]
                    if real is None:
                        continue
                    err = row["errors"][metric][k]
                    w.writerow([row["run"], row["split"], metric, k, f"{real:.6g}", f"{sim:.6g}", pct_cell(err)])
            w.writerows(prefix_cache_rows(row))
            if row.get("failures"):
                w.writerow([row["run"], row["split"], "failures", "count", row["failures"]["real"],
                            row["failures"]["simulated"], ""])


def prefix_cache_rows(row: dict) -> list[list]:
    """The CSV rows of a run's prefix-cache hit rate and cached prompt tokens (the real cells empty where the log
    has no num_cached_tokens); none for a run without one."""
    cache = row.get("prefix_cache")
    if not cache:
        return []
    real, sim = cache["real"] or {}, cache["simulated"]
    return [[row["run"], row["split"], "prefix_cache", "hit_rate",
             f"{real['hit_rate']:.6g}" if real else "", f"{sim['hit_rate']:.6g}", pct_cell(cache["error_pct"])],
            [row["run"], row["split"], "prefix_cache", "cached_tokens", real.get("cached_tokens", ""),
             sim["cached_tokens"], pct_cell(pct(sim["cached_tokens"], real.get("cached_tokens")))]]


def pct_cell(err: float | None) -> str:
    return "" if err is None else f"{err:.2f}"
