"""The llmsched plug-in's own cost per ``schedule()`` call inside vLLM, next to vLLM's stock scheduler.

Two in-process engines on a tiny random-weight Llama, one with vLLM's stock scheduler and one with the plug-in,
get the same requests (64, 128, 256 at a time, all decoding: the steady state of a busy server) and are stepped
alternately, so both see the same machine load. Every ``schedule()`` call is timed in CPU time of the calling
thread (time the process spends descheduled by other jobs does not count); the plug-in's time is split into vLLM's
own ``schedule()`` (which the plug-in calls after shaping its inputs), the policy's ``schedule(view)`` and the
adapter (mirroring vLLM's requests into the view, applying and checking the plan, recording the step).
``update_from_output()`` is timed too (the plug-in records tokens there).

Each (policy, size) is measured in ``--rounds`` rounds of ``--steps`` step pairs, the rounds interleaved over the
whole run (round 1 of every policy and size, then round 2, ...), so that a burst of load from other jobs lands in one
round of many rows rather than in all rounds of one row. A row's ratio is the median of its per-round ratios (each
compares calls of the same minutes), printed with their range; its times are medians over all rounds' calls. A waiting policy's idle calls (a plan with no work: the
engine sleeps until the policy's ``wait_until``) schedule nothing and have no stock counterpart: the stock engine
steps only after a plug-in call that scheduled tokens, the idle calls are counted and left out of the medians. By
default the plug-in spins through idle calls instead of sleeping (the adapter's ``MAX_SLEEP`` set to 0): a step after
a sleep runs on caches other jobs have had the core to evict, a cost of idling, not of the plug-in's code, and the
stock step it is compared with follows no sleep. ``--idle-sleep`` keeps the sleep.

    python benchmarks/bench_vllm_overhead.py [--sizes 64,128,256] [--steps 20] [--rounds 5] [--policies sarathi,slai]
                                             [--idle-sleep]

Target: the plug-in's total schedule time within 1.2x stock. Figures are medians per call, in ms.
"""
from __future__ import annotations

import argparse
import atexit
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

# One policy per scheduler family, each with its defaults (FairBatching's predictor from the plug-in's online
# batch-time fit), except SLAI's seat caps, raised so that every request runs; vtc, wfq and priority with tenants.
DEFAULT_POLICIES = ("vllm-chunked,vllm,sarathi,slai,fairbatching,rad,deferred-prefill,infermax,nested-wait,vtc,wfq,"
                    "priority")
POLICY_PARAMS = {"slai": {"max_active": 256, "max_decodes": 256}}
# the tenant policies get four tenants (requests take them in turn), with weights or priority classes
POLICY_TENANTS = {"vtc": "a,b:weight=2,c,d:weight=0.5", "wfq": "a,b:weight=2,c,d:weight=0.5",
                  "priority": "a:priority=0,b:priority=1,c:priority=1,d:priority=2"}
PROMPT = 16
MAX_LEN = 256
KEYS = ("stock", "stock_update", "total", "vllm", "policy", "update")
GIVE_UP = 30.0  # s; a row's round ends after this long even if the policy scheduled fewer steps (held back)


def engines(max_seqs: int):
    """(stock LLM, plug-in LLM) in this process."""
    from llmsched.vllm.launch import PLUGIN, EngineConfig, make_llm, set_in_process_env
    from llmsched.vllm.model import write_model
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    work = set_in_process_env(tempfile.mkdtemp(prefix="bench-vllm-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    model = str(write_model(os.path.join(work, "tiny")))
    common = dict(model=model, max_model_len=MAX_LEN, max_num_seqs=max_seqs, max_num_batched_tokens=2048,
                  kv_cache_mb=160)
    return make_llm(EngineConfig(scheduler_cls=None, **common)), make_llm(EngineConfig(scheduler_cls=PLUGIN, **common))


def measure(sizes: list[int], steps: int, policies: list[str], rounds: int = 1, idle_sleep: bool = False) -> list[dict]:
    from vllm import SamplingParams
    from vllm.v1.core.sched.scheduler import Scheduler as VLLMScheduler

    from llmsched.vllm import adapter
    from llmsched.vllm.launch import prompt_ids, scheduler_of
    from llmsched.vllm.settings import load_settings

    if not idle_sleep:
        adapter.MAX_SLEEP = 0.0

    stock_llm, plug_llm = engines(max(sizes))
    stock, plug = scheduler_of(stock_llm), scheduler_of(plug_llm)
    clock = time.thread_time
    on = [False]
    times: dict[str, list] = {}  # the current row's samples
    call: dict[str, float] = {}  # the plug-in call in progress: its parts
    worked = [False]  # whether the plug-in's last schedule() scheduled tokens
    idle: list[float] = []

    def part(fn, key, only=None):
        """Time ``fn`` into the plug-in call in progress (kept only if that call schedules tokens)."""
        def wrapper(*a, **k):
            if only is not None and a[0] is not only:
                return fn(*a, **k)
            t = clock()
            out = fn(*a, **k)
            call[key] = clock() - t
            return out
        return wrapper

    def plug_schedule(fn):
        def wrapper(*a, **k):
            call.clear()
            t = clock()
            out = fn(*a, **k)
            dt = clock() - t
            worked[0] = out.total_num_scheduled_tokens > 0
            if on[0]:
                if worked[0]:
                    times["total"].append(dt)
                    for key, v in call.items():
                        times[key].append(v)
                else:
                    idle.append(dt)
            return out
        return wrapper

    def timed(fn, key, when=None):
        def wrapper(*a, **k):
            t = clock()
            out = fn(*a, **k)
            if on[0] and (when is None or when()):
                times[key].append(clock() - t)
            return out
        return wrapper

    inner = VLLMScheduler.schedule
    VLLMScheduler.schedule = part(inner, "vllm", only=plug)  # vLLM's own schedule() inside the plug-in
    stock.schedule = timed(stock.schedule, "stock")
    stock.update_from_output = timed(stock.update_from_output, "stock_update")
    plug.schedule = plug_schedule(plug.schedule)
    plug.update_from_output = timed(plug.update_from_output, "update", when=lambda: worked[0])
    rows = {}
    rid = 0
    try:
        for rnd in range(rounds):
            for policy in policies:
                tenants = POLICY_TENANTS.get(policy)
                plug.configure(load_settings({}, scheduler=policy, scheduler_params=POLICY_PARAMS.get(policy, {}),
                                             tenants=tenants), record=False)
                names = [t.split(":")[0] for t in tenants.split(",")] if tenants else []
                pol = plug.llmsched_policy
                pol.schedule = part(pol.schedule, "policy")
                for n in sizes:
                    ids = [str(rid + i) for i in range(n)]
                    rid += n
                    for llm in (stock_llm, plug_llm):
                        eng = llm.llm_engine
                        for i in ids:
                            extra = {"tenant": names[int(i) % len(names)]} if names else None
                            eng.add_request(i, {"prompt_token_ids": prompt_ids(PROMPT, int(i))},
                                            SamplingParams(max_tokens=MAX_LEN - PROMPT, ignore_eos=True,
                                                           extra_args=extra))
                        s = scheduler_of(llm)
                        for _ in range(300):  # until every request decodes (or the policy's own caps hold some back)
                            eng.step()
                            if len(s.running) == n and all(r.num_output_tokens > 0 for r in s.running):
                                break
                    row = rows.setdefault((policy, n), {"policy": policy, "requests": n, "mismatch_steps": 0,
                                                        "idle_calls": 0, "idle_ms": [], "round_ratios": [],
                                                        "samples": {k: [] for k in KEYS}})
                    times = {k: [] for k in KEYS}
                    idle.clear()
                    mismatches = plug.stats["mismatch_steps"]
                    on[0] = True
                    done = 0
                    give_up = time.monotonic() + GIVE_UP
                    while done < steps and time.monotonic() < give_up:
                        plug_llm.llm_engine.step()
                        if worked[0]:
                            stock_llm.llm_engine.step()
                            done += 1
                    on[0] = False
                    row["running"] = len(plug.running)
                    row["mismatch_steps"] += plug.stats["mismatch_steps"] - mismatches
                    row["idle_calls"] += len(idle)
                    row["idle_ms"] += [t * 1e3 for t in idle]
                    for k, v in times.items():
                        row["samples"][k] += v
                    if times["total"]:
                        row["round_ratios"].append(_median(times["total"]) / _median(times["stock"]))
                    for llm in (stock_llm, plug_llm):
                        llm.llm_engine.abort_request(ids)
                        while llm.llm_engine.has_unfinished_requests():
                            llm.llm_engine.step()
                    ratio = row["round_ratios"][-1] if times["total"] else math.nan
                    print(f"  round {rnd + 1}: {policy} {n}: stock {_median(times['stock']) * 1e3:.3f} ms, plug-in "
                          f"{_median(times['total']) * 1e3:.3f} ms, ratio {ratio:.2f}"
                          + (f" ({len(idle)} idle calls)" if idle else ""), file=sys.stderr, flush=True)
    finally:
        VLLMScheduler.schedule = inner
    out = []
    for row in rows.values():
        samples = row.pop("samples")
        row["ratio"] = _median(row["round_ratios"])
        row.update({k + "_ms": _median(v) * 1e3 for k, v in samples.items()})
        row["steps"] = len(samples["total"])
        row["idle_ms"] = _median(row["idle_ms"])
        out.append(row)
    return out


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="64,128,256", help="running requests per measurement")
    p.add_argument("--steps", type=int, default=20, help="timed steps per round, measurement and engine")
    p.add_argument("--rounds", type=int, default=5, help="rounds over all policies and sizes (interleaved in time)")
    p.add_argument("--policies", default=DEFAULT_POLICIES, help="llmsched policies to time in the plug-in")
    p.add_argument("--idle-sleep", action="store_true", help="keep the adapter's sleep in a waiting policy's idle "
                   "calls (default: spin through them)")
    p.add_argument("--json", help="also write the rows here")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    policies = [s for s in args.policies.split(",") if s]
    if args.steps < 1 or args.rounds < 1:
        p.error("--steps and --rounds must be >= 1")
    t0 = time.time()
    rows = measure(sizes, args.steps, policies, args.rounds, args.idle_sleep)
    print(f"schedule() per call: median CPU ms over {args.rounds} rounds of {args.steps} decode steps (load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {time.time() - t0:.0f} s; idle calls "
          f"{'sleep' if args.idle_sleep else 'spin'})")
    print("('running' is what the policy's defaults let run of the requests given (x/y: x of y); 'ratio':")
    print(" the median of the per-round ratios plug-in/stock, 'rounds' their range; 'idle': the plug-in's calls that")
    print(" scheduled nothing, a waiting policy's, left out of the medians)")
    print(f"{'policy':<17}{'running':>8}{'stock':>8}{'plug-in':>9}{'ratio':>7}{'rounds':>11}{'  of which: vLLM':>17}"
          f"{'policy':>8}{'adapter':>9}{'  update: stock':>16}{'plug-in':>9}{'idle':>6}")
    for r in rows:
        adapter = r["total_ms"] - r["vllm_ms"] - r["policy_ms"]
        spread = r["round_ratios"]
        spread = f"{min(spread):.2f}-{max(spread):.2f}" if spread else "-"
        running = str(r["running"]) if r["running"] == r["requests"] else f"{r['running']}/{r['requests']}"
        print(f"{r['policy']:<17}{running:>8}{r['stock_ms']:>8.3f}{r['total_ms']:>9.3f}"
              f"{r['ratio']:>7.2f}{spread:>11}{r['vllm_ms']:>17.3f}{r['policy_ms']:>8.3f}"
              f"{adapter:>9.3f}{r['stock_update_ms']:>16.3f}{r['update_ms']:>9.3f}{r['idle_calls']:>6}")
    worst = max(r["ratio"] for r in rows)
    print(f"worst ratio {worst:.2f} (target <= 1.2)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
