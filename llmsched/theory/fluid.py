"""Ao et al.'s fluid equilibrium, WAIT's feasible thresholds and Nested WAIT's buffer, as ``llmsched theory fluid``
(llmsched/cli/theory_fluid.py) reports them."""
from __future__ import annotations

import numpy as np

from ..batchtime.registry import make_batch_time_model
from ..hardware.memory import kv_capacity_tokens
from ..run_config import RunConfig
from ..schedulers.wait.fluid_model import batch_cap_thresholds, feasible_cycle_times, fluid, parse_types
from ..schedulers.wait.iteration_time import wait_coefficients
from ..schedulers.wait.nested import memory_requirement, nested_thresholds, segments
from ..schedulers.wait.prompt_types import length_samples, parse_edges, types_from_lengths
from ..schedulers.wait.synthetic_workloads import WAIT_WORKLOADS
from .throughput_bound import engine_of, throughput_bound

# Ao, Luo, Simchi-Levi, Wang, "Optimizing LLM Inference: Fluid-Guided Online Scheduling with Memory Constraints",
# §6: every experiment simulates Llama2-7B on an NVIDIA A100 (in Vidur); the fluid theory and the reproduction
# default to that setting rather than the run's
PAPER_MODEL = "llama-2-7b"
PAPER_GPU = "a100"

POOR_FIT_R2 = 0.8  # below it a fit's line misdescribes the steps (a MoE's expert loads, R² -0.32 on Mixtral TP 2)


def compute(*, types: str | None = None, workload: str | None = None, rate: float | None = None, bins: int = 10,
            edges: str | None = None, d0: float | None = None, d1: float | None = None, model: str = PAPER_MODEL,
            gpu: str = PAPER_GPU, batch_time: str = RunConfig.batch_time, memory: float | None = None,
            batch_cap: int | None = None, delta: float = 0.01, horizon: float = 3600.0) -> dict:
    """The fluid equilibrium of the prompt ``types`` ("RATE:PROMPT:DECODE,...") or of a ``workload`` binned by
    output length; WAIT's feasible cycle times for a KV ``memory``; Nested WAIT's thresholds and the memory (14)
    that keeps overflow under ``delta`` over ``horizon`` seconds. Iteration time d0 + d1·KV tokens, given or
    fitted to ``model`` on ``gpu``."""
    if bool(types) == bool(workload):
        raise ValueError("give the prompt types with --types RATE:PROMPT:DECODE,... or --workload NAME (one of them)")
    if types:
        kinds = parse_types(types)
    elif workload in WAIT_WORKLOADS:
        wl = WAIT_WORKLOADS[workload]()
        wl = wl.scaled(rate / wl.rate) if rate else wl
        kinds = list(wl.types)
    else:
        if not rate:
            raise ValueError("--workload with a length preset or trace needs --rate (prompts/s)")
        prompts, outputs = length_samples(workload)
        kinds = types_from_lengths(prompts, outputs, rate, bins, parse_edges(edges) if edges else None)
    kinds = sorted(kinds, key=lambda t: t.decode)
    out = {"types": [[t.rate, t.prompt, t.decode] for t in kinds]}
    if d0 is not None:
        d1 = d1 or 0.0
        out["timing"] = {"d0": d0, "d1": d1, "source": "given"}
    else:
        kv_capacity_tokens(model, gpu)   # one line naming the fix where the model's weights do not fit the GPU
        bt = make_batch_time_model(batch_time, model, gpu)
        d0, d1, report = wait_coefficients(bt)
        out["timing"] = {"d0": d0, "d1": d1, "source": f"fit to {batch_time} {model} on {gpu}",
                         "fit": str(report),
                         "simulate_with": f"--batch-time linear --bt-param const={d0:.6g} --bt-param per_context={d1:.6g}"}
        if not report.r2 >= POOR_FIT_R2:
            out["timing"]["warning"] = (
                f"the line d0 + d1·KV explains little of {batch_time}'s step times for {model} on {gpu} "
                f"(R² {report.r2:.2f}): eq. (1), ρ and the thresholds below rest on it; give --d0/--d1 measured on "
                f"the deployment, or read the sound bound")
    eq = fluid(kinds, d0, d1)
    out["equilibrium"] = eq.as_dict()
    if "fit" in out["timing"]:
        out["sound_bound"] = sound_bound(kinds, model, gpu, batch_time)
    if memory is not None:
        window = feasible_cycle_times(kinds, d0, d1, memory)
        out["wait_feasible"] = None if window is None else {
            "tau_min": window[0], "tau_max": window[1],
            "n_min": [t.rate * window[0] for t in kinds], "n_max": [t.rate * window[1] for t in kinds]}
    segs = segments(kinds)
    prompt = sum(t.rate * t.prompt for t in kinds) / sum(t.rate for t in kinds)
    out["segments"] = [{"stages": [s.first, s.last], "rate": s.rate, "survive": s.survive} for s in segs]
    if batch_cap:
        n = nested_thresholds(segs, batch_cap)
        out["wait_thresholds"] = batch_cap_thresholds(kinds, batch_cap)
    else:
        n = [max(1, -int(-(s.rate * eq.T * 1.05) // 1)) for s in segs]  # fluid: n_s = ⌈Λ_s T*·1.05⌉
    for i in range(1, len(n)):
        n[i] = min(n[i], n[i - 1])
    out["nested_thresholds"] = n
    out["nested_memory"] = memory_requirement(prompt, segs, n, d0, d1, horizon, delta)
    return out


# a stable run serves at least this share of the offered work (llmsched/capacity/stability.py: backlog growth under 5%)
STABLE_SERVED_FRACTION = 0.95


def sound_bound(kinds, model: str, gpu: str, batch_time: str) -> dict:
    """The sound throughput bound (llmsched/theory/throughput_bound.py) of the types' lengths on ``model``/``gpu``
    under the batch-time model the fit came from, at its default engine limits: eq. (1) is a fit (no prefill
    compute, no per-token cost), so the fluid model can call a rate stable that no scheduler keeps up with in
    the simulator. The rate of the types against that bound, or why there is none."""
    rate = sum(t.rate for t in kinds)
    try:
        bt, limits = engine_of(RunConfig(model=model, gpu=gpu, batch_time=batch_time))
        rng = np.random.default_rng(0)
        pick = rng.choice(len(kinds), size=20000, p=[t.rate / rate for t in kinds])
        prompts = np.array([kinds[j].prompt for j in pick])
        outputs = np.array([kinds[j].decode + 1 for j in pick])   # l' decodes after the prefill's token
        bound = throughput_bound(bt, prompts, outputs, limits, served_fraction=STABLE_SERVED_FRACTION)
    except ValueError as e:
        return {"rate": rate, "requests_per_s": None, "why": str(e)}
    return {"rate": rate, "requests_per_s": bound.requests_per_s, "served_fraction": STABLE_SERVED_FRACTION,
            "above": rate > bound.requests_per_s}
