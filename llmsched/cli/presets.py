"""``llmsched presets``: everything a run can name (models, GPUs, workloads, schedulers, routers, batch-time
models), with where it comes from."""
from __future__ import annotations


def add(sub) -> None:
    r = sub.add_parser("presets", help="list models, GPUs, workloads, schedulers, routers and their sources")
    r.add_argument("--json", action="store_true", help="print as JSON")
    r.set_defaults(func=presets)


def presets(args) -> int:
    import json
    data = all_presets()
    print(json.dumps(data, indent=2, default=str) if args.json else format_presets(data))
    return 0


def all_presets() -> dict:
    from ..batchtime.named import profile_names
    from ..batchtime.registry import BATCH_TIME_MODELS
    from ..hardware.gpus import GPUS
    from ..hardware.hub_models import hub_table
    from ..hardware.memory import kv_bytes_per_token
    from ..hardware.models import MODELS
    from ..hardware.prices import load_prices
    from ..routing.registry import router_classes
    from ..schedulers.registry import scheduler_info, scheduler_names
    from ..workload.lengths.length_presets import LENGTH_PRESETS
    prices = load_prices()

    return {
        "models": {n: {"layers": m.layers, "hidden": m.hidden, "heads": m.heads, "kv_heads": m.kv_heads,
                       "head_dim": m.head_dim, "ffn": m.ffn, "vocab": m.vocab, "params": m.params, "tp": m.tp,
                       "max_model_len": m.max_model_len, "kv_bytes_per_token": kv_bytes_per_token(m),
                       "experts": m.experts, "experts_per_token": m.experts_per_token, "expert_ffn": m.expert_ffn,
                       "source": m.source} for n, m in MODELS.items()},
        "hub_models": {n: {"architecture": e["architecture"], "source": e["source"], "checked": e["checked"]}
                       for n, e in hub_table().items()},
        "gpus": {n: {"bf16_tflops": g.flops / 1e12, "fp8_tflops": g.fp8_flops / 1e12, "interconnect": g.interconnect,
                     "mem_bw_gbs": g.mem_bw / 1e9, "mem_gib": g.mem_bytes / 2**30,
                     "usd_per_gpu_hour": prices.usd_per_hour.get(n), "price_source": prices.sources.get(n),
                     "source": g.source} for n, g in GPUS.items()},
        "workloads": {n: {k: v for k, v in info.items() if k != "path"} for n, info in LENGTH_PRESETS.items()},
        "generators": {"shared-prefix": {
            "description": "--workload shared-prefix: system prompts shared by groups of prompts, optional multi-turn "
                           "chat; --wl-param num_groups, num_prompts_per_group, system_prompt_len, question_len, "
                           "output_len, enable_multi_turn_chat",
            "source": "kubernetes-sigs/inference-perf shared_prefix_datagen.py @ 7b902f7"}},
        "arrivals": {"poisson": "Poisson arrivals at --rate", "gamma": "gamma inter-arrivals, --cv burstiness",
                     "constant": "evenly spaced at --rate", "trace": "--trace FILE replays real arrival times",
                     "closed-loop": "--concurrency N: a new request when one finishes",
                     "sessions": "--concurrency N --turns T --think-time S: each user's turns carry the "
                                 "conversation so far"},
        "batch_time_models": {**{n: info["summary"] for n, info in BATCH_TIME_MODELS.items()},
                              **{n: stored_profile(n) for n in profile_names() if n not in BATCH_TIME_MODELS}},
        "schedulers": {n: public(scheduler_info(n)) for n in scheduler_names() if not n.startswith("test-")},
        "routers": {n: cls.summary for n, cls in router_classes().items()},
    }


def stored_profile(name: str) -> str:
    """A stored batch-time profile's line: its kind, parameters and calibration runs."""
    from ..batchtime.named import load_profile
    profile = load_profile(name)
    params = ", ".join(f"{k}={v}" for k, v in profile["params"].items())
    runs = ", ".join(profile.get("calibrated_on", [])) or "not recorded"
    return f"stored profile: {profile['kind']} with {params or 'its defaults'} (calibrated on {runs}; {profile['path']})"


def public(info: dict) -> dict:
    """A scheduler's settable parameters only (dataclass fields named _x are its internal state)."""
    return {**info, "params": {k: v for k, v in info["params"].items() if not k.startswith("_")}}


def format_presets(data: dict) -> str:
    lines = []
    lines.append("MODELS")
    for n, m in data["models"].items():
        mlp = (f"{m['experts']} experts x {m['expert_ffn']}, {m['experts_per_token']} a token" if m["experts"]
               else f"ffn {m['ffn']}")
        lines.append(f"  {n:<18} {m['layers']}L h{m['hidden']} heads {m['heads']}/{m['kv_heads']} {mlp} "
                     f"tp{m['tp']} ctx {m['max_model_len']}  KV {m['kv_bytes_per_token'] // 1024} KiB/token")
        lines.append(f"  {'':<18} source: {m['source']}")
    lines.append("\nHUGGING FACE IDS (--model ID; their config.json facts ship with llmsched; presets take their "
                 "own ids too)")
    for n, m in data.get("hub_models", {}).items():
        lines.append(f"  {n:<46} {m['architecture']}")
        lines.append(f"  {'':<46} source: {m['source']} (checked {m['checked']})")
    lines.append("\nGPUS")
    for n, g in data["gpus"].items():
        price = f", ${g['usd_per_gpu_hour']:.2f}/GPU-hour" if g.get("usd_per_gpu_hour") else ", no price listed"
        fp8 = f" ({g['fp8_tflops']:.0f} fp8)" if g["fp8_tflops"] else ""
        lines.append(f"  {n:<14} {g['bf16_tflops']:.0f} TFLOP/s bf16{fp8}, {g['mem_bw_gbs']:.0f} GB/s, "
                     f"{g['mem_gib']:.0f} GiB, {g['interconnect']}{price}   source: {g['source']}")
    lines.append("\nWORKLOADS (length presets; pair with --rate and --arrival)")
    for n, w in data["workloads"].items():
        lines.append(f"  {n:<22} {w.get('description', '')}")
        lines.append(f"  {'':<22} source: {w.get('source', '')}")
    lines.append("\nGENERATORS (workloads with prompt identities; --workload NAME)")
    for n, w in data.get("generators", {}).items():
        lines.append(f"  {n:<22} {w['description']}")
        lines.append(f"  {'':<22} source: {w['source']}")
    lines.append("\nARRIVALS")
    for n, text in data["arrivals"].items():
        lines.append(f"  {n:<14} {text}")
    lines.append("\nBATCH-TIME MODELS (--batch-time)")
    for n, text in data["batch_time_models"].items():
        lines.append(f"  {n:<20} {text}")
    lines.append("\nSCHEDULERS (--scheduler; parameters with --param KEY=VALUE)")
    for n, s in data["schedulers"].items():
        params = ", ".join(f"{k}={v}" for k, v in s["params"].items()) or "(no parameters)"
        lines.append(f"  {n:<18} {s['summary']}")
        lines.append(f"  {'':<18} params: {params}")
        lines.append(f"  {'':<18} source: {s['source']}")
    lines.append("\nROUTERS (--router, with --replicas N)")
    for n, text in data["routers"].items():
        lines.append(f"  {n:<18} {text}")
    return "\n".join(lines)
