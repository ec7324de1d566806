"""Cache-aware routing measured (docs/prefix-routing.md): the same workload through each router on N replicas, with
the prefix cache's hit rate, TTFT and load spread per router, and the hit rate of one cache of the replicas' total
size serving the same requests one after another (the reference the affinity router's hit rate is held to).

    python scripts/prefix_routing.py OUT --trace conversation_trace.jsonl --num-requests 3000 [--rate R]
    python scripts/prefix_routing.py OUT --workload shared-prefix --wl-param num_groups=16 ... --rate 40

Every run is one `llmsched simulate` command (printed, with its folder under OUT); the table goes to OUT/table.md
and OUT/table.json. Options after the known ones are passed to every run as they are.
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROUTERS = ("round-robin", "least-load", "prefix-affinity", "prefix-hash")


def simulate(out: Path, router: str, common: list[str], replicas: int) -> dict:
    folder = out / router.replace("=", "-").replace(" ", "_")
    name, *params = router.split(" ")
    cmd = [sys.executable, "-m", "llmsched", "simulate", *common, "--replicas", str(replicas), "--router", name,
           *[x for p in params for x in ("--router-param", p)], "--no-progress", "--out", str(folder)]
    print("$ llmsched " + " ".join(cmd[3:]), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    summary = json.loads((folder / "summary.json").read_text())
    meta = json.loads((folder / "meta.json").read_text())
    return {"router": router, **row(summary, folder / "requests.csv", replicas), "kv_blocks": meta["kv_blocks"],
            "block_size": meta["block_size"]}


def row(summary: dict, requests: Path, replicas: int) -> dict:
    count = defaultdict(int)
    computed = defaultdict(int)
    with open(requests) as f:
        for r in csv.DictReader(f):
            i = int(r["replica"])
            count[i] += 1
            computed[i] += int(r["prompt_len"]) - int(r.get("cached_tokens") or 0)
    counts = [count[i] for i in range(replicas)]
    work = [computed[i] for i in range(replicas)]
    mean = sum(work) / replicas
    cache = summary.get("prefix_cache", {})
    ttft = summary["latency"]["ttft"]
    return {"hit_rate": cache.get("hit_rate"), "ttft_p50_ms": 1e3 * ttft["p50"], "ttft_p99_ms": 1e3 * ttft["p99"],
            "finished": summary["counts"]["finished"], "rejected": summary["counts"]["rejected"],
            "requests_min_max": [min(counts), max(counts)],
            "prefill_max_over_mean": max(work) / mean if mean else float("nan")}


def one_cache_hit_rate(common: list[str], total_blocks: int, block_size: int) -> float:
    """One prefix cache of ``total_blocks`` serving the run's requests one at a time in arrival order (each prompt
    and reply computed at once, then freed to the LRU): the hit rate of a cache as large as all the replicas'."""
    from llmsched.cli.commands import build_parser
    from llmsched.cli.run_options import run_configs
    from llmsched.engine.prefix_cache import PrefixCachingKVManager
    from llmsched.experiment import build_source
    args = build_parser().parse_args(["simulate", *common])
    cfg = run_configs(args, [args.scheduler or "sarathi"])[0]
    requests = build_source(cfg).initial()
    kv = PrefixCachingKVManager(total_blocks, block_size)
    cached = prompt = 0
    for req in requests:
        hit = kv.lookup(req)
        kv.admit(req, hit)
        cached += len(hit) * block_size
        prompt += req.prompt_len
        kv.allocate(req, req.prompt_len)
        req.num_computed = req.prompt_len + req.output_len
        kv.allocate(req, req.num_computed)
        kv.release(req)
    return cached / prompt


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--replicas", type=int, default=8)
    p.add_argument("--routers", default=",".join(ROUTERS),
                   help="comma-separated; a router's parameters after a space: 'prefix-affinity report_delay=1'")
    p.add_argument("--no-one-cache", action="store_true", help="skip the one-cache reference (closed loops, "
                                                                  "multi-turn sources: their requests come later)")
    args, common = p.parse_known_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [simulate(args.out, r.strip(), common, args.replicas) for r in args.routers.split(",")]
    one = None
    if not args.no_one_cache:
        one = one_cache_hit_rate(common, rows[0]["kv_blocks"] * args.replicas, rows[0]["block_size"])
    lines = ["| router | hit rate | of one cache | TTFT p50 (ms) | TTFT p99 (ms) | requests per replica (min-max) | "
             "computed prefill, max/mean |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        share = f"{r['hit_rate'] / one:.0%}" if one else "-"
        lines.append(f"| {r['router']} | {r['hit_rate']:.1%} | {share} | {r['ttft_p50_ms']:,.0f} | "
                     f"{r['ttft_p99_ms']:,.0f} | {r['requests_min_max'][0]}-{r['requests_min_max'][1]} | "
                     f"{r['prefill_max_over_mean']:.2f} |")
    if one is not None:
        lines.append(f"| one cache of {rows[0]['kv_blocks'] * args.replicas:,} blocks | {one:.1%} | 100% | | | | |")
    table = "\n".join(lines)
    print(table)
    (args.out / "table.md").write_text(table + "\n")
    (args.out / "table.json").write_text(json.dumps({"rows": rows, "one_cache_hit_rate": one}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
