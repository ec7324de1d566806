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
from ..workload.content_scale import scaled_content
from .content_ids import content_ids
from .launch import PROMPT_VOCAB, EngineConfig, make_llm, prompt_ids, scheduler_of
from .settings import TENANT_KEY, TIER_KEY, load_settings


def replay(llm, requests, settings, horizon: float | None = None, progress=None) -> RunResult:
    """Run ``requests`` (llmsched ``Request``s, by arrival) through ``llm`` with ``settings``; returns records."""
    from vllm import SamplingParams
    sched = scheduler_of(llm)
    settings.arrival = "stamp"  # requests count from when they were due (the simulator's arrival)
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
            extra = {TIER_KEY: r.tier.name}
            if r.tenant is not None:
                extra[TENANT_KEY] = r.tenant.name
            params = SamplingParams(max_tokens=r.output_len, ignore_eos=True, temperature=0.0, extra_args=extra)
            eng.add_request(str(r.id), {"prompt_token_ids": request_ids(r)}, params, arrival_time=t0 + r.arrival)
            i += 1
        if eng.has_unfinished_requests():
            eng.step()
            if progress:
                progress(sched)
        elif i < len(pending):
            time.sleep(max(0.0, min(pending[i].arrival - (time.time() - t0), 0.05)))
    end = time.time() - t0
    if eng.has_unfinished_requests():  # stopped at the horizon
        for vid in sched.mirrored_ids():
            eng.abort_request([vid.rsplit("-", 1)[0]])
        while eng.has_unfinished_requests():
            eng.step()
    log, steps = sched.records
    figures = sched.llmsched_policy.stats()
    result = RunResult(log, steps, end, time.perf_counter() - wall0,
                       replica_stats=[{"replica": 0, "policy": figures}] if figures else [])
    result.meta = {"backend": "vllm", "adapter": sched.describe()}
    return result


def request_ids(r) -> list[int]:
    """The prompt token ids sent for request ``r``: from its content where it has one (``content_ids``: requests
    sharing a prefix send the same ids, so vLLM's prefix cache finds it), else ids of its own (by its id)."""
    if r.content is not None:
        return content_ids(r.content, r.prompt_len, PROMPT_VOCAB)
    return prompt_ids(r.prompt_len, r.id)


def request_tenants(requests) -> tuple:
    """The distinct tenants of ``requests``, in order of first appearance (the plug-in's settings for a replay)."""
    seen = {}
    for r in requests:
        if r.tenant is not None:
            seen.setdefault(r.tenant.name, r.tenant)
    return tuple(seen.values())


def workload_requests(cfg: RunConfig, max_model_len: int, scale: float = 1.0):
    """The workload of ``cfg``, prompt and output lengths times ``scale`` (a CPU serves short requests), with
    prompt + output capped to ``max_model_len`` (the engine's context). A request's content is scaled with its
    prompt (``workload/content_scale.py``: each piece shorter, none dropped but those that round to no tokens) and
    cut with it, so what requests share survives both."""
    from ..request import Request
    if not scale > 0:
        raise ValueError(f"length scale must be > 0, got {scale}")
    reqs = build_source(cfg).initial()
    if scale != 1.0:
        reqs = [scaled(r, scale) for r in reqs]
    out = []
    for r in reqs:
        if r.prompt_len + r.output_len > max_model_len:
            prompt = max(1, min(r.prompt_len, max_model_len // 2))
            r = Request(r.id, r.arrival, prompt, max(1, min(r.output_len, max_model_len - prompt)), r.tier, r.tenant,
                        None if r.content is None else r.content.cut(prompt))
        out.append(r)
    return out


def scaled(r, scale: float):
    """Request ``r`` with its prompt, output and content times ``scale``."""
    from ..request import Request
    prompt = max(1, round(r.prompt_len * scale))
    content = None if r.content is None else scaled_content(r.content, scale, prompt)
    return Request(r.id, r.arrival, prompt, max(1, round(r.output_len * scale)), r.tier, r.tenant, content)


def run_vllm(cfg: RunConfig, engine: EngineConfig, llm=None, horizon: float | None = None,
             profile: str | None = None, scale: float = 1.0) -> tuple[RunResult, object]:
    """One real-engine run of ``cfg``'s scheduler and workload; returns the records and the LLM (for reuse).

    The workload and the plug-in's settings are built before the engine starts (tens of seconds on a CPU), so a
    trace that cannot be replayed as asked fails at once."""
    requests = workload_requests(cfg, engine.max_model_len, scale)
    settings = load_settings({}, scheduler=cfg.scheduler, scheduler_params=cfg.scheduler_params,
                             tiers=cfg.tiers, tenants=request_tenants(requests), oracle=cfg.oracle, profile=profile)
    llm = llm or make_llm(engine)
    result = replay(llm, requests, settings, horizon=horizon)
    result.meta.update({"config": {k: v for k, v in vars(cfg).items()}, "engine": vars(engine)})
    return result, llm
