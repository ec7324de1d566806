"""A sweep of random command lines, as a new user would try them: does any run lose a request, stop midway, or end
in a traceback?

Each seed draws one ``llmsched simulate`` command line: any scheduler (with --oracle where it needs one), any
router and 1-8 replicas, model/GPU pairs from presets and config.json files, open loops (Poisson, gamma, constant,
a rate schedule), closed loops (with sessions of several turns), tenants of weights far apart (and the fair
policies), the shared-prefix workload and a Mooncake trace with prefix caching on or off, token budgets below the
concurrency and of a few tokens, tiny and large KV caches, swap, every overflow mode, fp8 KV; since 2026-11-30
(drawn after all the others, so a seed's earlier choices are unchanged) also disaggregated and autoscaled fleets,
client timeouts and KV tiers below the GPU. It runs in this process through ``llmsched.cli.main`` with ``--out``,
and is one of:

* ``ok``: exit 0, requests.csv holds every request that entered (each finished, or rejected or aborted with a
  reason);
* ``refused``: exit 2 with one line on stderr, before the simulation started (a configuration it cannot run);
* ``aborted``: an error after the simulation started (a run stopped midway: its output lost);
* ``lost``: exit 0 but requests.csv lacks requests, or holds one neither finished nor rejected with a reason;
* ``inconsistent`` (since 2026-11-30): a finished request whose times contradict each other: a first token before
  its arrival or after its finish, a TTFT above its E2E, a negative TPOT (latencies are the client's by default);
* ``traceback``: an exception escaped the command, or an error of more than one line.

    python scripts/random_configs.py [--count 500] [--first 0] [--jobs 2] [--show 10]
    python scripts/random_configs.py --replay SEED     # print the command line and run it

The targets are 0 lost, 0 inconsistent, 0 aborted and 0 tracebacks.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import io
import multiprocessing
import shlex
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "data" / "configs"
PAIRS = (("llama-3-8b", "a100"), ("llama-2-7b", "h100"), ("mistral-7b", "l20"), ("qwen3-14b", "h200"),
         ("llama-3-70b-tp4", "h100"), (str(CONFIGS / "deepseek-v2-lite"), "h200"),
         (str(CONFIGS / "codellama-34b"), "h200"))
WORKLOADS = ("sharegpt", "azure-conv", "azure-code", "lmsys", "arxiv-summarization")
ROUTERS = ("round-robin", "random", "least-outstanding", "least-load", "prefix-affinity", "prefix-hash")
LINKS = ("nvlink4", "ib-100g", "ib-400g", "pcie", "same-node", "bw=1e8,latency=0.01")
AUTOSCALERS = ("hpa", "kpa", "dynamo-sla", "saturation", "predictive")
TIERS = ("paid:tbt=0.1:share=0.3,free:tbt=0.5", "gold:ttft=1:tpot=0.05:share=0.5,bronze:ttft=5")
MOONCAKE = "conversation_trace.jsonl"  # found as --trace finds it (../shared/data/traces/mooncake)


def schedulers() -> list[str]:
    from llmsched.schedulers.registry import create_scheduler, scheduler_names
    return [n for n in scheduler_names() if type(create_scheduler(n)).__module__.startswith("llmsched.")]


def command(seed: int) -> tuple[list[str], int | None]:
    """The command line of ``seed`` and how many requests it offers (None: as many as the trace holds, up to n)."""
    from llmsched.schedulers.registry import scheduler_info
    rng = np.random.default_rng([40, seed])
    pick = lambda xs: xs[int(rng.integers(len(xs)))]  # noqa: E731
    name = pick(schedulers())
    model, gpu = pick(PAIRS)
    args = ["simulate", "--scheduler", name, "--model", model, "--gpu", gpu, "--seed", str(int(rng.integers(1 << 30))),
            "--no-progress"]
    if scheduler_info(name)["needs_oracle"] or rng.random() < 0.2:
        args.append("--oracle")
    n = int(rng.integers(10, 61))
    loop = pick(("poisson", "poisson", "gamma", "constant", "schedule", "closed", "closed", "tenants", "trace",
                 "shared-prefix"))
    concurrency = None
    if loop == "closed":
        concurrency = int(rng.integers(1, 65))
        args += ["--workload", pick(WORKLOADS), "--concurrency", str(concurrency), "--num-requests", str(n)]
        if rng.random() < 0.3:
            args += ["--turns", str(int(rng.integers(2, 5))), "--think-time", str(pick((0, 0.5)))]
    elif loop == "schedule":
        args += ["--workload", pick(WORKLOADS), "--rate-schedule",
                 f"0:{rng.uniform(1, 20):.3g},1:{rng.uniform(1, 80):.3g}", "--num-requests", str(n)]
    elif loop == "tenants":
        k = int(rng.integers(2, 4))
        spec = ",".join(f"t{i}:rate={np.exp(rng.uniform(0, 4)):.3g}:weight={np.exp(rng.uniform(-13.8, 13.8)):.3g}"
                        for i in range(k))
        args += ["--workload", pick(WORKLOADS), "--tenants", spec, "--num-requests", str(n)]
        if rng.random() < 0.6:
            args[2] = name = pick(("vtc", "wfq", "priority"))
    elif loop == "trace":
        args += ["--trace", MOONCAKE, "--rate", f"{np.exp(rng.uniform(0, 4)):.3g}", "--num-requests", str(n)]
    elif loop == "shared-prefix":
        args += ["--workload", "shared-prefix", "--rate", f"{rng.uniform(1, 50):.3g}", "--num-requests", str(n)]
        for key, values in (("num_groups", (1, 2, 5)), ("num_prompts_per_group", (1, 3, 8)),
                            ("system_prompt_len", (8, 100, 600)), ("question_len", (1, 30, 300)),
                            ("output_len", (1, 20, 200))):
            args += ["--wl-param", f"{key}={pick(values)}"]
    else:
        args += ["--workload", pick(WORKLOADS), "--rate", f"{np.exp(rng.uniform(0, 4.6)):.3g}", "--num-requests",
                 str(n)]
        if loop != "poisson":
            args += ["--arrival", loop] + (["--cv", str(pick((0.5, 2.0, 4.0)))] if loop == "gamma" else [])
    replicas = int(pick((1, 1, 1, 2, 3, 4, 8)))
    if replicas > 1:
        args += ["--replicas", str(replicas), "--router", pick(ROUTERS)]
    seats = int(pick((1, 2, 4, 16, 64, 256)))
    budget = int(pick((256, 512, 2048, 8192)))
    if rng.random() < 0.4:  # budgets below the concurrency, and of a few tokens
        budget = int(rng.integers(1, max(2, (concurrency or 64))))
        seats = max(seats, concurrency or 64)
        if "--workload" in args and "shared-prefix" not in args:
            args[args.index("--workload") + 1] = "lmsys"  # 41% of its prompts have at most 16 tokens
    args += ["--max-num-seqs", str(seats), "--max-num-batched-tokens", str(budget)]
    if rng.random() < 0.5 and loop != "shared-prefix":  # shared-prefix's lengths are its parameters
        args += ["--max-total-tokens", str(int(pick((64, 256, 1024, 4096))))]
    if rng.random() < 0.5:
        args += ["--num-blocks", str(int(np.exp(rng.uniform(np.log(2), np.log(20000)))))]
    if rng.random() < 0.3:
        args += ["--block-size", str(pick((8, 32)))]
    if rng.random() < 0.3:
        args += ["--preemption-mode", "swap", "--swap-space-gb", str(pick((0.0, 0.001, 0.1, 4.0)))]
    if rng.random() < 0.3:
        args += ["--overflow", pick(("evict-newest", "evict-newest-recompute"))]
    if rng.random() < 0.2:
        args += ["--tiers", pick(TIERS)]
    if rng.random() < 0.2:
        args += ["--no-prefix-caching"]
    if rng.random() < 0.1:
        args += ["--kv-cache-dtype", "fp8"]
    fleet = rng.random()
    if fleet < 0.2:  # prefill and decode pools
        drop_replicas(args)
        args += ["--disaggregate", pick(("1P1D", "2P1D", "1P2D")), "--kv-link", pick(LINKS),
                 "--pd-decider", pick(("always", "always", "llm-d", "dynamo"))]
        if rng.random() < 0.3:
            args += ["--kv-connector", "layerwise"]
    elif fleet < 0.3:  # replicas that come and go, with a start-up short enough to matter in a short run
        drop_replicas(args)
        args += ["--autoscaler", pick(AUTOSCALERS), "--min-replicas", "1", "--max-replicas",
                 str(int(rng.integers(1, 5))), "--cold-start", f"{rng.uniform(0.1, 5):.3g}"]
    if rng.random() < 0.3:
        args += ["--client-timeout", str(pick((0.2, 1.0, 5.0, 60.0)))]
    tiers_fit = loop in ("trace", "shared-prefix") and "--no-prefix-caching" not in args
    if rng.random() < 0.3 and tiers_fit:  # tiers keep cached prefixes: prompts with identities (a disaggregated
        # fleet's prefill pool keeps them)
        args += ["--kv-offload", pick(("cpu:1GiB", "cpu:50GiB", "cpu:2GiB,disk:20GiB")),
                 "--kv-offload-mode", pick(("vllm", "lmcache"))]
    return args, n


def drop_replicas(args: list[str]) -> None:
    """A fleet sizes its own pools: no --replicas or --router."""
    for flag in ("--replicas", "--router"):
        if flag in args:
            at = args.index(flag)
            del args[at:at + 2]


def outcome(seed: int) -> tuple[int, str, str]:
    """(seed, kind, detail): see the module docstring."""
    import llmsched.experiment as experiment
    from llmsched.cli import main
    args, n = command(seed)
    started = []
    simulate = experiment.simulate_config

    def watched(*a, **k):
        started.append(True)
        return simulate(*a, **k)
    experiment.simulate_config = watched
    err = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(err):
                warnings.simplefilter("ignore")
                code = main(args + ["--out", str(out)])
        except BaseException:  # noqa: BLE001 - a traceback is what this sweep looks for
            return seed, "traceback", traceback.format_exc(limit=-3)
        finally:
            experiment.simulate_config = simulate
        text = err.getvalue().strip()
        lines = [line for line in text.splitlines() if ": warning: " not in line]
        if code != 0:
            if len(lines) != 1:
                return seed, "traceback", text[-2000:]
            return seed, "aborted" if started else "refused", lines[0]
        return (seed, *lost(out, n))


def lost(out: Path, n: int) -> tuple[str, str]:
    """("ok", "") or ("lost", what) from the run's requests.csv: every request that entered, each finished, or
    rejected or aborted with a reason (no run here has a horizon)."""
    with open(out / "requests.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    problems = [] if len(rows) == n else [f"{len(rows)} of {n} requests in requests.csv"]
    for r in rows:
        status = r["status_name"]
        if status not in ("FINISHED", "REJECTED", "ABORTED"):
            problems.append(f"request {r['id']} left {status}")
        elif status in ("REJECTED", "ABORTED") and not r["reason"]:
            problems.append(f"request {r['id']} rejected without a reason")
    if problems:
        return "lost", "; ".join(problems[:3])
    odd = [f"request {r['id']}: {why}" for r in rows if r["status_name"] == "FINISHED" for why in contradictions(r)]
    return ("inconsistent", "; ".join(odd[:3])) if odd else ("ok", "")


def contradictions(r: dict) -> list[str]:
    """What a finished request's times say against each other (a nanosecond of rounding allowed)."""
    t = {k: float(r[k]) if r.get(k) not in (None, "") else float("nan")
         for k in ("arrival", "first_token", "finish", "ttft", "e2e", "tpot")}
    eps = 1e-9
    out = []
    if t["first_token"] < t["arrival"] - eps or t["first_token"] > t["finish"] + eps:
        out.append(f"first token {t['first_token']!r} outside arrival {t['arrival']!r} .. finish {t['finish']!r}")
    if t["ttft"] > t["e2e"] + eps:
        out.append(f"TTFT {t['ttft']!r} above E2E {t['e2e']!r}")
    if t["tpot"] < -eps:
        out.append(f"TPOT {t['tpot']!r} negative")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--show", type=int, default=10, help="refusal reasons and failures to print")
    p.add_argument("--replay", type=int, help="print and run one seed's command line")
    a = p.parse_args()
    if a.replay is not None:
        print("llmsched " + shlex.join(command(a.replay)[0]))
        print(outcome(a.replay)[1:])
        return 0
    seeds = range(a.first, a.first + a.count)
    with multiprocessing.get_context("spawn").Pool(a.jobs) as pool:
        results = pool.map(outcome, seeds, chunksize=4)
    kinds = collections.Counter(kind for _, kind, _ in results)
    print(f"{a.count} random command lines from seed {a.first}: " +
          ", ".join(f"{kinds[k]} {k}" for k in ("ok", "refused", "aborted", "lost", "inconsistent", "traceback")))
    reasons = collections.Counter(detail.split(": error: ", 1)[-1][:90] for _, kind, detail in results
                                  if kind == "refused")
    for reason, count in reasons.most_common(a.show):
        print(f"  refused x{count}: {reason}")
    bad = [(s, k, d) for s, k, d in results if k in ("aborted", "lost", "inconsistent", "traceback")]
    for seed, kind, detail in bad[:a.show]:
        print(f"\n{kind} (seed {seed}): llmsched {shlex.join(command(seed)[0])}\n  {detail}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
