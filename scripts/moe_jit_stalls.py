"""Diagnostic: the H200 MoE run's mid-run stalls and what the replay gives when it is told of them.

vLLM compiles a Triton kernel the first time it runs with a new set of constexpr tile sizes. The fused-MoE
kernel's tiles follow the step's token count M (``try_get_optimal_moe_config``: the nearest key of the tuned file
``E=128,N=768,device_name=NVIDIA_H200.json`` for Qwen3-30B-A3B on an H200). Start-up runs M = 1..256 (CUDA-graph
capture sizes) and M = max_num_batched_tokens (the memory-profiling run), so the configs keyed 512 and 1024
(BLOCK_SIZE_M 64 and 128 with GROUP_SIZE_M 16) are first compiled mid-run, two kernels each (gate/up and down
GEMM). The steps.csv of the run shows the stalls (a gap between engine steps of > 0.5 s while requests run; the
dense runs have none). This script prints them and replays the run with the measured stall total spread over
those first uses (a diagnostic with a figure read off the run, not a model: no term of llmsched is changed).

    python scripts/moe_jit_stalls.py tests/data/gpu_runs/h200-qwen3-30b-a3b [--bt-param compute_eff=0.72 ...]
"""
import argparse
import csv
from pathlib import Path

from llmsched.batchtime.roofline import RooflineBatchTime
from llmsched.experiment import run as run_config
from llmsched.validate.serving import measured, replay_config, simulated
from llmsched.validate.serving_run import load_run

# BLOCK_SIZE_M (GROUP_SIZE_M 16 marked by .1) of the tuned H200 file's keys; the nearest key to M is used
H200_E128_N768 = {1: 16, 2: 16, 4: 16, 8: 16, 16: 16, 24: 16, 32: 16, 48: 16, 64: 16, 96: 16, 128: 16, 256: 32,
                  512: 64, 1024: 128.1, 1536: 128, 2048: 128, 3072: 128, 4096: 128.1}
KERNELS_PER_CONFIG = 2


def config_of(tokens: int) -> float:
    return H200_E128_N768[min(H200_E128_N768, key=lambda k: abs(k - tokens))]


def stalls(run_dir: Path, gap: float = 0.5) -> list[tuple[float, float]]:
    rows = [r for r in csv.DictReader(open(run_dir / "steps.csv")) if r["iteration_ts"]]
    t0, out = float(rows[0]["iteration_ts"]), []
    for a, b in zip(rows, rows[1:]):
        d = float(b["iteration_ts"]) - float(a["iteration_ts"])
        if d > gap and int(b["running"] or 0) > 0:
            out.append((float(a["iteration_ts"]) - t0, d))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--bt-param", action="append", default=[])
    args = p.parse_args()
    found = stalls(Path(args.run))
    for at, d in found:
        print(f"stall at {at:.1f} s: {d * 1000:.0f} ms")
    warmed = {config_of(m) for m in list(range(1, 257)) + [2048]}
    cold = sorted({config_of(m) for m in range(257, 2048)} - warmed)
    per_kernel = sum(d for _, d in found) / (len(cold) * KERNELS_PER_CONFIG)
    print(f"{len(found)} stalls, {sum(d for _, d in found):.2f} s; configs first used mid-run: {len(cold)} "
          f"({len(cold) * KERNELS_PER_CONFIG} kernels): {per_kernel:.2f} s a kernel")
    seen, plain = set(warmed), RooflineBatchTime.sum_step_time

    def with_compiles(self, prefill_new, prefill_ctx, num_decodes, context_sum):
        t = plain(self, prefill_new, prefill_ctx, num_decodes, context_sum)
        config = config_of(sum(prefill_new) + num_decodes)
        if config not in seen:
            seen.add(config)
            t += KERNELS_PER_CONFIG * per_kernel
        return t

    RooflineBatchTime.sum_step_time = with_compiles
    params = {k: float(v) for k, v in (a.split("=", 1) for a in args.bt_param)}
    run = load_run(args.run, None)
    sim = simulated(run_config(replay_config(run, None, "vllm-v1", params, None)), with_itl=False)
    real = measured(run)
    for metric, stat in (("ttft", "p50"), ("tpot", "p50"), ("e2e", "p50"), ("throughput", "output_tps"),
                         ("ttft", "p90")):
        r, s = real[metric][stat], sim[metric][stat]
        print(f"{metric} {stat}: {r:.4g} -> {s:.4g} ({100 * (s / r - 1):+.1f}%)")


if __name__ == "__main__":
    main()
