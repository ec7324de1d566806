"""The real-engine commands: ``run``, ``profile``, ``fidelity``, ``make-model`` (vLLM imported only when run)."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ..run_config import RUN_FIELDS
from ..run_field import API, declared
from ..vllm.launch import EngineConfig
from .run_options import (CLI, add_run_options, base_config, config_with_origins, scheduler_params, tuned_names,
                          tuned_settings, with_tuned)

# The run fields a real-engine run honours: its workload and policy, vLLM's limits, the summary's window. Every
# other run field (the simulator's GPU, topology, disaggregation, client, KV-tier and autoscaling models, closed
# loops, its speed switches) is refused, not silently ignored: a field added later is refused here until the
# real-engine run honours it. Closed loops and sessions are replayed through the source's completions
# (vllm/replay_source.py), as the simulator issues them.
REAL_RUN = ("scheduler", "scheduler_params", "model", "workload", "trace", "lengths", "rate", "num_requests",
            "duration", "arrival", "cv", "rate_schedule", "time_scale", "bench_command", "workload_params", "tiers",
            "tenants", "max_total_tokens", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
            "oracle", "prefix_caching", "warmup", "cooldown", "seed", "concurrency", "turns", "think_time")
SIM_ONLY = tuple(name for name in RUN_FIELDS if name not in REAL_RUN)
ENGINE = declared(EngineConfig)
ENGINE_LIMITS = ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size")  # also run fields


def add(sub) -> None:
    r = sub.add_parser("run", help="replay a workload through a real engine (vLLM) with an llmsched scheduler",
                       description="Replay a workload through vLLM in real time (arrivals as scheduled, outputs "
                                   "forced to the workload's lengths with ignore_eos) with the llmsched plug-in, "
                                   "and write the simulator's records (summary.json, requests.csv, steps.csv).")
    r.add_argument("--backend", choices=["vllm"], default="vllm", help="the engine (vllm)")
    r.add_argument("--scheduler", help="llmsched scheduler name (default vllm-chunked)")
    r.add_argument("--out", help="output folder")
    _add_engine_options(r)
    add_run_options(r, exclude=SIM_ONLY)
    r.set_defaults(func=run)

    p = sub.add_parser("profile", help="measure a real engine's step times and fit a batch-time profile",
                       description="Run probe batches (prefill chunks, decode counts, context lengths) through "
                                   "vLLM, fit the linear batch-time model and save it as a named profile.")
    p.add_argument("--backend", choices=["vllm"], default="vllm")
    p.add_argument("--model", required=True, help="model directory (see `llmsched make-model`)")
    p.add_argument("--name", help="save as this profile name (default: the path keyed by model, hardware and vLLM "
                                  "version, where the plug-in finds it)")
    p.add_argument("--repeats", type=int, default=1, help="run the probe grid this many times")
    p.add_argument("--out", help="also write the probe steps.csv here")
    _add_engine_options(p)
    for name in ENGINE_LIMITS:
        spec = ENGINE[name]
        p.add_argument(spec.flag_of(name), type=spec.kind, default=spec.default, help=f"{spec.help} (default "
                       f"{spec.default})")
    p.set_defaults(func=profile)

    f = sub.add_parser("fidelity", help="the same workload in vLLM and in the simulator: errors of the headline "
                                        "numbers",
                       description="Run a workload through vLLM and through the simulator (with the engine's "
                                   "fitted profile and limits); print real, simulated and relative error of "
                                   "median/P99 TTFT, TBT, E2E and of throughput.")
    f.add_argument("--backend", choices=["vllm"], default="vllm")
    f.add_argument("--scheduler", help="llmsched scheduler name (default vllm-chunked)")
    f.add_argument("--out", help="output folder (real/, sim/, fidelity.csv)")
    _add_engine_options(f)
    add_run_options(f, exclude=SIM_ONLY)
    f.set_defaults(func=fidelity)

    m = sub.add_parser("make-model", help="write a local model directory (config + tokenizer) for vLLM's dummy "
                                          "weights",
                       description="Write config.json and a locally trained tokenizer: 'tiny' (4 layers, for "
                                   "CPUs and tests) or any model preset's shape.")
    m.add_argument("--out", required=True, help="directory to write")
    m.add_argument("--shape", default="tiny", help="'tiny' or a model preset (e.g. llama-3-8b)")
    m.set_defaults(func=make_model)

    x = sub.add_parser("pd-proxy", help="a disaggregation proxy in front of a prefill and a decode vLLM instance",
                       description="Send each completion to the prefill instance with max_tokens=1, then to the "
                                   "decode instance, whose stream comes back (llmsched/vllm/pd_proxy.py); point vllm "
                                   "bench serve --base-url at it.")
    x.add_argument("--port", type=int, required=True)
    x.add_argument("--host", default="127.0.0.1")
    x.add_argument("--prefill", required=True, help="the prefill instance's base URL, e.g. http://127.0.0.1:8100")
    x.add_argument("--decode", required=True, help="the decode instance's base URL")
    x.add_argument("--connector", default="nixl",
                   help="the instances' KV connector: nixl (NixlConnector: kv_transfer_params passed on) or example "
                        "(ExampleConnector: nothing to pass)")
    x.set_defaults(func=pd_proxy)


def _add_engine_options(p) -> None:
    kv = ENGINE["kv_cache_mb"]
    p.add_argument(kv.flag_of("kv_cache_mb"), type=kv.kind, default=kv.default, help=kv.help)
    p.add_argument("--profile", dest="profile_name", help="step-time profile name: the view's batch-time model "
                                                          "(run), or the simulator's (fidelity)")
    p.add_argument("--workdir", help="folder for vLLM's temp and cache files (default: a new temp folder)")
    p.add_argument("--scale-lengths", type=float, default=1.0,
                   help="multiply the workload's prompt and output lengths (e.g. 0.1 on a CPU); requests longer "
                        "than --max-model-len are cut to fit")


def _split_config(args, default_scheduler="vllm-chunked"):
    """The run's RunConfig (its workload and policy) and the engine's config (its model directory and limits:
    the run options given, else the engine's defaults), from the run options checked once."""
    from ..run_config import RunConfig, check_field, checked_params
    base = dict(base_config(args))
    model = base.pop("model", None)
    check_model(model)
    if args.scheduler is not None:
        base["scheduler"] = check_field("scheduler", args.scheduler, CLI)
    else:
        base["scheduler"] = base.get("scheduler") or (tuned_names(args) or [default_scheduler])[0]
    base["scheduler_params"] = scheduler_params(args, [base["scheduler"]], base)[base["scheduler"]]
    base["scheduler_params"] = checked_params(base, params_origin(args))
    for record in tuned_settings(args, [base["scheduler"]]).values():  # what the user gave wins
        base = with_tuned(base, record, lambda key: config_with_origins(args)[1].get(key, API))
    engine = EngineConfig(model=model, kv_cache_mb=args.kv_cache_mb,
                          **{k: base.pop(k) for k in ENGINE_LIMITS if k in base})
    if not base.get("trace") and not base.get("num_requests") and not base.get("duration"):
        base["num_requests"] = 50
    base["max_model_len"] = engine.max_model_len
    cfg = RunConfig.checked(base)
    check_policy(cfg)
    return cfg, engine


def check_model(model) -> None:
    """--model must be a directory vLLM can start on: checked here, before vLLM is imported (tens of seconds)."""
    from ..vllm.model import model_dir_problem
    if not model or not Path(model).is_dir():
        raise ValueError(f"--model {model!r}: give a model directory (write one with `llmsched make-model --out DIR`)")
    problem = model_dir_problem(model)
    if problem:
        raise ValueError(f"--model {model}: {problem}; give a Hugging Face model directory (config.json and "
                         f"tokenizer files), or write one with `llmsched make-model --out DIR [--shape PRESET]`")


def check_policy(cfg) -> None:
    """The policy with its parameters, built once before the engine starts: a bad value or a policy that needs
    --oracle is a one-line error at once, not after vLLM has loaded the model (the plug-in builds it again)."""
    from ..schedulers.registry import create_scheduler
    policy = create_scheduler(cfg.scheduler, **cfg.scheduler_params)
    if policy.needs_oracle and not cfg.oracle:
        raise ValueError(f"--scheduler {cfg.scheduler}: it decides from true output lengths; add --oracle (vLLM "
                         f"then tells it each request's max_tokens)")


def run_setup(args):
    """``run``'s RunConfig and engine: prefix caching on, as vLLM and ``simulate`` default to
    (``--no-prefix-caching`` turns it off). ``fidelity`` does the same where the workload's prompts have
    identities (``vllm.fidelity.fidelity_engine``)."""
    cfg, engine = _split_config(args)
    return cfg, dataclasses.replace(engine, prefix_caching=cfg.prefix_caching)


def params_origin(args):
    """Where the run's scheduler parameters were written: the command line if --param was given."""
    return CLI if args.scheduler_params else config_with_origins(args)[1].get("scheduler_params", API)


def _start(args):
    from ..vllm.launch import set_in_process_env
    set_in_process_env(args.workdir)


def run(args) -> int:
    from ..metrics.summary import summarize, summary_row
    from ..metrics.writers import format_table, write_run
    from .runs import TABLE_COLUMNS, warn_rejections
    cfg, engine = run_setup(args)
    _start(args)
    from ..vllm.runner import run_vllm
    result, _ = run_vllm(cfg, engine, profile=args.profile_name, scale=args.scale_lengths)
    summ = summarize(result, warmup=cfg.warmup, cooldown=cfg.cooldown)
    print(format_table([summary_row(summ, scheduler=cfg.scheduler, rate=cfg.rate, wall_s=result.wall_time)],
                       TABLE_COLUMNS))
    stats = result.meta["adapter"]["stats"]
    print(f"vLLM steps {stats['steps']}, steps where vLLM differed from the plan: {stats['mismatch_steps']}")
    warn_rejections("run", summ)  # as simulate warns: a run that served few of its requests says why
    if args.out:
        write_run(result, summ, args.out)
        print(f"wrote {args.out}/summary.json, requests.csv, steps.csv, meta.json")
    return 0


def profile(args) -> int:
    from ..vllm.launch import make_llm
    from ..vllm.profiler import between_steps, profile as profile_engine, save
    check_model(args.model)
    engine = EngineConfig(model=args.model, kv_cache_mb=args.kv_cache_mb,
                          **{k: getattr(args, k) for k in ENGINE_LIMITS})
    _start(args)
    llm = make_llm(engine)
    cols, model, report = profile_engine(llm, engine, repeats=args.repeats)
    path = save(model, report, llm, engine, args.name)
    if args.out:
        import csv
        os.makedirs(args.out, exist_ok=True)
        with open(Path(args.out) / "steps.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(list(cols))
            w.writerows(zip(*cols.values()))
    c = model.coefficients
    print(f"profile of {args.model}: const {c['const'] * 1e3:.3f} ms + {c['per_token'] * 1e6:.2f} us/token + "
          f"{c['per_context'] * 1e9:.2f} ns/context token + {c['per_prefill'] * 1e6:.2f} us/prefill + "
          f"{c['per_decode'] * 1e6:.2f} us/decode + {c['has_prefill'] * 1e3:.3f} ms per step with a prefill")
    if model.wake is not None:
        print(f"cold start after idle: a step takes +{model.wake.slowdown * 100:.0f}% x (1 - exp(-idle / "
              f"{model.wake.tau * 1e3:.1f} ms))")
    print(f"fit: {report}; between steps (update, detokenisation, engine loop): "
          f"{between_steps(cols) * 100:.0f}% of a step's cycle (median)")
    print(f"wrote {path}")
    how = f" with LLMSCHED_PROFILE={args.name}" if args.name else ""
    print(f"the plug-in uses it for this model on this machine{how}; "
          f"simulate with --batch-time linear --bt-param file={path}")
    return 0


def fidelity(args) -> int:
    from ..metrics.summary import summarize
    from ..metrics.writers import format_table, write_run, write_table
    from ..vllm.fidelity import compare, fidelity_engine, overload, run_cycles, simulate_like
    from ..vllm.profiles import default_profile_path, load_profile_for, model_fingerprint
    cfg, engine = _split_config(args)
    _start(args)
    from ..vllm.launch import make_llm
    from ..vllm.profiler import between_steps, profile as profile_engine, save
    from ..vllm.runner import replay, request_tenants, workload_source
    from ..vllm.settings import load_settings

    def source():  # a fresh one for each run: sessions issue their later turns as the run's completions come
        return workload_source(cfg, engine.max_model_len, args.scale_lengths)
    real_source = source()
    requests = real_source.initial()  # its errors before vLLM starts
    engine = fidelity_engine(cfg, engine, requests)
    llm = make_llm(engine)
    hf = llm.llm_engine.vllm_config.model_config.hf_config
    if args.profile_name:
        _, path = load_profile_for(args.profile_name, model_fingerprint(hf))
        print(f"profile {path}")
    elif default_profile_path(engine.model, hf).exists():
        path = default_profile_path(engine.model, hf)
        print(f"profile {path} (found for this model, hardware and vLLM version)")
    else:
        cols, model, report = profile_engine(llm, engine)
        path = save(model, report, llm, engine)
        print(f"fitted a profile ({report}; {between_steps(cols) * 100:.0f}% of a cycle between steps), "
              f"wrote {path}")
    real = replay(llm, real_source, load_settings({}, scheduler=cfg.scheduler, scheduler_params=cfg.scheduler_params,
                                               tiers=cfg.tiers, tenants=request_tenants(requests), oracle=cfg.oracle))
    real_summary = summarize(real, warmup=cfg.warmup, cooldown=cfg.cooldown)
    behind = overload(real_source.issued, real)
    if behind:
        if args.out:
            write_run(real, real_summary, Path(args.out) / "real")
        print(f"the real run is overloaded: {behind}. Its latencies measure a growing backlog, so no errors are "
              f"reported; lower --rate or --scale-lengths (or raise the engine's limits) and run again")
        return 1
    sim, sim_summary = simulate_like(cfg, real.meta["adapter"], path, engine.max_model_len, sim_requests(source))
    rows = compare(real_summary, sim_summary)
    # The same simulation with the step time fitted to this run's own step cycles (see fidelity.run_cycles).
    from ..batchtime.linear import LinearBatchTime
    from ..vllm.profiler import PROFILE_TERMS
    own, own_report = LinearBatchTime.fit(run_cycles(real.steps), PROFILE_TERMS, loss="absolute")
    own.wake = LinearBatchTime.load(path).wake
    own_path = Path(args.workdir or ".") / "run-cycles-profile.json" if not args.out else \
        Path(args.out) / "run-cycles-profile.json"
    own_path.parent.mkdir(parents=True, exist_ok=True)
    own.save(own_path, own_report)
    sim2, sim2_summary = simulate_like(cfg, real.meta["adapter"], own_path, engine.max_model_len,
                                       sim_requests(source))
    rows2 = {r["metric"]: r for r in compare(real_summary, sim2_summary)}
    shown = [{"metric": r["metric"], "real": r["real"], "simulated": r["simulated"],
              "error_%": r["rel_error"] * 100, "sim_run_cycles": rows2[r["metric"]]["simulated"],
              "error2_%": rows2[r["metric"]]["rel_error"] * 100} for r in rows]
    print(f"{cfg.scheduler}, workload {cfg.trace or cfg.workload}, rate {cfg.rate} req/s, "
          f"{real_summary['counts']['finished']} requests (seconds, throughput in req/s and tokens/s); "
          f"'simulated' uses the profile, 'sim_run_cycles' step times fitted to this run's cycles ({own_report})")
    print(format_table(shown, ["metric", "real", "simulated", "error_%", "sim_run_cycles", "error2_%"]))
    if args.out:
        out = Path(args.out)
        write_run(real, real_summary, out / "real")
        write_run(sim, sim_summary, out / "sim")
        write_run(sim2, sim2_summary, out / "sim-run-cycles")
        write_table([{**r, "sim_run_cycles": rows2[r["metric"]]["simulated"],
                      "rel_error_run_cycles": rows2[r["metric"]]["rel_error"]} for r in rows],
                    out / "fidelity.csv", out / "fidelity.json")
        print(f"wrote {out}/real/, {out}/sim/, {out}/sim-run-cycles/, {out}/fidelity.csv")
    return 0


def sim_requests(source):
    """What the simulator replays of a fresh replay source: its requests when completions issue none (the list
    ``simulate_like`` copies), else the source itself, whose sessions continue from the simulated completions."""
    fresh = source()
    return fresh if fresh.has_follow_ups else fresh.initial()


def make_model(args) -> int:
    from ..vllm.model import write_model
    check_model_dir(args.out)
    try:
        out = write_model(args.out, args.shape)
    except ModuleNotFoundError as e:  # the tokenizer and the config class come with vLLM, an optional install
        raise ValueError(f"make-model needs the {e.name!r} package, which comes with vLLM: install it with "
                         f"scripts/install.sh (or pip install tokenizers transformers)") from None
    print(f"wrote {out}/config.json and a tokenizer; serve it with load_format='dummy' (random weights)")
    return 0


def check_model_dir(out: str) -> None:
    """--out must be a directory or a path one can become: a file there (or above it) is named with the fix."""
    path = Path(out)
    for place in (path, *path.parents):
        if place.exists() and not place.is_dir():
            where = "" if place == path else f" ({place} is a file)"
            raise ValueError(f"--out {out}{where}: make-model writes config.json and a tokenizer into a directory; "
                             f"give a new or existing directory, not a file")


def pd_proxy(args) -> int:
    from ..vllm.pd_proxy import serve
    serve(args.port, args.prefill, args.decode, args.connector, args.host)
    return 0
