"""The gaming case (a capacity won by leaving work undone), old definition against new (docs/capacity.md).

Shortest-prompt-first schedulers on the azure-conv lengths, Mistral-7B on an RTX 6000 Ada (the SLAI
reproduction's engine settings, 5% paying users). The old definition is the SLAI reproduction's before it moved
to llmsched.capacity: sweep rates, run each for DURATION seconds with the horizon at the end of arrivals, and
call a rate good when the median TTFT over *finished* requests is <= 0.5 s and both tiers' P99 TBT meet their
targets. The new one is ``llmsched capacity`` with the same targets. Also prints every scheduler's throughput
at 8 req/s offered (what the GPU serves when overloaded).

    python scripts/capacity_gaming.py [--duration 600] [--jobs 2]
"""
from __future__ import annotations

import argparse
import time

from llmsched.capacity import ProbeCache, find_capacities, parse_slos
from llmsched.executors import make_executor
from llmsched.experiment import RunConfig, run
from llmsched.metrics.summary import summarize
from llmsched.reproduce.slai import BASE, tiers

SCHEDULERS = ("sarathi", "sarathi-spf", "slai-spf-fixed", "slai")
OLD_RATES = (2.0, 4.0, 6.0, 8.0, 10.0)
SLOS = "ttft_p50<=0.5s,paid.tbt_p99<=0.1s,free.tbt_p99<=0.5s"


def config(name: str, rate: float, duration: float) -> RunConfig:
    return RunConfig(scheduler=name, rate=rate, duration=duration, tiers=tiers(0.05),
                     **{**BASE, "workload": "azure-conv"})


def old_row(spec) -> dict:
    name, rate, duration = spec
    cfg = config(name, rate, duration)
    s = summarize(run(RunConfig(**{**cfg.__dict__, "horizon": duration})))
    return {"scheduler": name, "rate": rate, "ttft_p50_finished": s["latency"]["ttft"]["p50"],
            "paid": s["tiers"]["paid"]["tbt_p99"], "free": s["tiers"]["free"]["tbt_p99"],
            "finished": s["counts"]["finished"], "offered": s["counts"]["offered"],
            "served_rps": s["throughput"]["requests_per_s"]}


def old_meets(r: dict) -> bool:
    return r["ttft_p50_finished"] <= 0.5 and r["paid"] <= 0.1 and r["free"] <= 0.5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    with make_executor("local", jobs=args.jobs) as ex:
        old = ex.map(old_row, [(n, r, args.duration) for n in SCHEDULERS for r in OLD_RATES])
        bases = {n: config(n, 2.0, args.duration) for n in SCHEDULERS}
        new = find_capacities(bases, parse_slos(SLOS), executor=ex, cache=ProbeCache(args.cache))
    print(f"old definition: median TTFT over finished requests <= 0.5 s, P99 TBT paying <= 0.1 s, free <= 0.5 s "
          f"({args.duration:g} s runs, horizon at the last arrival)")
    print("| scheduler | rate | median TTFT of finished (s) | finished/offered | served req/s | old verdict |")
    print("|---|---|---|---|---|---|")
    for r in old:
        print(f"| {r['scheduler']} | {r['rate']:g} | {r['ttft_p50_finished']:.2f} | {r['finished']}/{r['offered']} "
              f"| {r['served_rps']:.2f} | {'meets' if old_meets(r) else 'fails'} |")
    print(f"\nnew definition: llmsched capacity --slo '{SLOS}'")
    print("| scheduler | old capacity (req/s) | new capacity (req/s) | interval | probes | first failing probe |")
    print("|---|---|---|---|---|---|")
    for n in SCHEDULERS:
        rows = [r for r in old if r["scheduler"] == n]
        good = [r["rate"] for r in rows if old_meets(r)]
        top = max(OLD_RATES)
        old_cap = ("≥ " if top in good else "") + f"{max(good):g}" if good else "none"
        res = new[n]
        hi = min((p for p in res.probes if not p.meets), key=lambda p: p.rate, default=None)
        fail = (f"{hi.rate:g}: {hi.verdict}, median TTFT {hi.values['ttft_p50']:.2f} s, "
                f"{', '.join(hi.failed)}") if hi else "—"
        print(f"| {n} | {old_cap} | {res.capacity if res.capacity is not None else 'none'} | "
              f"[{res.interval[0]:g}, {res.interval[1]:g}) | {len(res.probes)} | {fail} |")
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
