"""Nested WAIT's capacity against vLLM and Sarathi on the LMSYS lengths, with the shared capacity definition.

The §6 runs in ``authors.py`` drain a saturated queue, where "throughput" depends on the metric and on what is
counted at the end. A capacity (the highest Poisson rate at which a run is stable and meets the SLOs,
``llmsched.capacity``: bracket and bisection, stability from the trend of outstanding work, unfinished requests
counted as misses) compares the policies on the serving question instead. Run in the authors' setting
(``authors.AUTHORS``: their KV, timing, per-scheduler limits) and in ours (Llama-2-7B on an A100, roofline timing,
one B = max_num_seqs and one token budget for every policy, as the paper states).
"""
from __future__ import annotations

from ...capacity import find_capacities, parse_slos
from ...experiment import RunConfig
from .authors import AUTHORS, VLLM_CONTEXT

LMSYS = "lmsys_chat_1m_lengths_sample_input_lt500_output_lt600.csv"
EDGES = ",".join(str(e) for e in range(50, 501, 50))  # the paper's 10 bins of 50 tokens (§6.2)

OURS = dict(model="llama-2-7b", gpu="a100", batch_time="roofline", num_blocks=None, block_size=16)


def _policies(setting: str, B: int) -> dict[str, tuple[str, dict, dict]]:
    nested = {"edges": EDGES, "batch_cap": B}
    fluid = {"edges": EDGES, "rule": "fluid-random", "slack": 0.01}
    if setting == "authors":
        free = dict(max_num_seqs=1 << 14, max_num_batched_tokens=1 << 22)  # the booking-limit schedulers have none
        base = dict(max_num_seqs=B, max_num_batched_tokens=4096)
    else:
        free = base = dict(max_num_seqs=B, max_num_batched_tokens=RunConfig.max_num_batched_tokens)
    return {"nested-wait Alg. 2, B rule": ("nested-wait", nested, free),
            "nested-wait budget gate (authors' code), B rule": ("nested-wait", {**nested, "gate": "budget"}, free),
            "nested-wait Alg. 2, fluid-random": ("nested-wait", fluid, free),
            "nested-wait entry gate, fluid-random": ("nested-wait", {**fluid, "gate": "entry"}, free),
            "vllm": ("vllm", {}, {**base, "max_model_len": VLLM_CONTEXT} if setting == "authors" else base),
            "sarathi": ("sarathi", {"token_budget": 512}, base)}


def lmsys_capacities(setting: str, B: int, num_requests: int, slos: str = "", resolution: float = 0.05,
                     start: float = 20.0) -> list[dict]:
    """Capacity (req/s) of each policy on the LMSYS lengths in ``setting`` ("authors" or "ours")."""
    s = AUTHORS if setting == "authors" else OURS
    bases = {label: RunConfig(scheduler=name, scheduler_params=params, model=s["model"], gpu=s["gpu"],
                              batch_time=s["batch_time"], num_blocks=s["num_blocks"], block_size=s["block_size"],
                              lengths=LMSYS, rate=start, num_requests=num_requests, oracle=name == "wait", **limits,
                              latency_boundary="engine")
             for label, (name, params, limits) in _policies(setting, B).items()}
    results = find_capacities(bases, parse_slos(slos) if slos else [], resolution=resolution)
    rows = []
    for label, r in results.items():
        lo, hi = r.interval
        rows.append({"setting": setting, "B": B, "scheduler": label, "slos": slos or "stable",
                     "capacity_rps": r.capacity if r.capacity is not None else float("nan"),
                     "bracket": f"[{lo:.3g}, {hi:.3g})", "probes": len(r.probes), "note": r.note})
    return rows
