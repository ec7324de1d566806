"""Replay a workload through vLLM in real time, with the same records as the simulator.

Each request enters at its arrival time (``arrival_time`` is set to the scheduled instant, so TTFT counts from
when the request was due even if a step was running) with a prompt of its length and ``max_tokens`` equal to its
output length under ``ignore_eos``; its tier travels in ``extra_args``. The plug-in records requests and steps
exactly as the simulator's replica does, so ``summarize`` and ``write_run`` apply unchanged.
"""
from __future__ import annotations

import time

from ..experiment import RunConfig, build_source
from ..sim.simulator import RunResult
from .engine import EngineConfig, make_llm, prompt_ids, scheduler_of
from .settings import TIER_KEY, load_settings


def replay(llm, requests, settings, horizon: float | None = None, progress=None) -> RunResult:
    """Run ``requests`` (llmsched ``Request``s, by arrival) through ``llm`` with ``settings``; returns records."""
    from vllm import SamplingParams
    sched = scheduler_of(llm)
    sched.configure(settings, record=True)
    eng = llm.llm_engine
    pending = sorted(requests, key=lambda r: r.arrival)
    t0 = time.time()
    sched.set_clock_origin(t0)
    wall0 = time.perf_counter()
    i = 0
    while i < len(pending) or eng.has_unfinished_requests():
        now = time.time() - t0
        if horizon is not None and now > horizon:
            break
        while i < len(pending) and pending[i].arrival <= now:
            r = pending[i]
            params = SamplingParams(max_tokens=r.output_len, ignore_eos=True, temperature=0.0,
                                    extra_args={TIER_KEY: r.tier.name})
            eng.add_request(str(r.id), {"prompt_token_ids": prompt_ids(r.prompt_len, r.id)}, params,
                            arrival_time=t0 + r.arrival)
            i += 1
        if eng.has_unfinished_requests():
            eng.step()
            if progress:
                progress(sched)
        elif i < len(pending):
            time.sleep(max(0.0, min(pending[i].arrival - (time.time() - t0), 0.05)))
    end = time.time() - t0
    if eng.has_unfinished_requests():  # stopped at the horizon
        for vid in list(sched._mirrors):
            eng.abort_request([vid.rsplit("-", 1)[0]])
        while eng.has_unfinished_requests():
            eng.step()
    log, steps = sched.records
    result = RunResult(log, steps, end, time.perf_counter() - wall0)
    result.meta = {"backend": "vllm", "adapter": sched.describe()}
    return result


def workload_requests(cfg: RunConfig, max_model_len: int):
    """The workload of ``cfg`` with prompt + output capped to ``max_model_len`` (the engine's context)."""
    if cfg.max_total_tokens is None or cfg.max_total_tokens > max_model_len:
        cfg.max_total_tokens = max_model_len
    return build_source(cfg).initial()


def run_vllm(cfg: RunConfig, engine: EngineConfig, llm=None, horizon: float | None = None,
             profile: str | None = None) -> tuple[RunResult, object]:
    """One real-engine run of ``cfg``'s scheduler and workload; returns the records and the LLM (for reuse)."""
    llm = llm or make_llm(engine)
    settings = load_settings({}, scheduler=cfg.scheduler, scheduler_params=cfg.scheduler_params,
                             tiers=cfg.tiers, oracle=cfg.oracle, profile=profile)
    result = replay(llm, workload_requests(cfg, engine.max_model_len), settings, horizon=horizon)
    result.meta.update({"config": {k: v for k, v in vars(cfg).items()}, "engine": vars(engine)})
    return result, llm
