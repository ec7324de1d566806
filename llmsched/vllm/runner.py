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
from .content_ids import content_ids
from .replay_source import Listed, ReplaySource
from .reply_waits import ReplyWaits
from .launch import PROMPT_VOCAB, EngineConfig, make_llm, prompt_ids, scheduler_of
from .settings import TENANT_KEY, TIER_KEY, load_settings


def replay(llm, requests, settings, horizon: float | None = None, progress=None) -> RunResult:
    """Run ``requests`` through ``llm`` with ``settings``; returns records. ``requests`` is a list (by arrival) or a
    source (``replay_source.ReplaySource``): a request that leaves the run (finished, or rejected by the plug-in)
    is passed to its ``on_done``, and the requests that returns (a session's next turn) enter at their arrival
    time, their prompts carrying the tokens vLLM generated for the turns before (``content_ids``); a replayed
    conversation's later turn waits for the reply it quotes (``reply_waits``)."""
    import heapq
    from vllm import SamplingParams
    source = Listed(requests) if isinstance(requests, (list, tuple)) else requests
    sched = scheduler_of(llm)
    settings.arrival = "stamp"  # requests count from when they were due (the simulator's arrival)
    eng = llm.llm_engine
    warm_up(eng, sched, settings, getattr(source, "sent_before", None))
    sched.configure(settings, record=True)
    pending = [(r.arrival, k, r) for k, r in enumerate(source.initial())]
    waits = ReplyWaits([r for _, _, r in pending])  # a replayed conversation's later turns quote earlier replies
    heapq.heapify(pending)
    order = len(pending)
    live: dict[str, object] = {}  # vLLM id -> the request, while a completion may issue more or be quoted
    replies: dict[int, list[int]] = {}  # reply id -> the tokens vLLM generated for it
    follow = source.has_follow_ups
    t0 = time.time()
    sched.set_clock_origin(t0)
    wall0 = time.perf_counter()
    while pending or eng.has_unfinished_requests():
        now = time.time() - t0
        if horizon is not None and now > horizon:
            break
        while pending and pending[0][0] <= now:
            r = heapq.heappop(pending)[2]
            if waits.hold(r):  # (sent once the reply it quotes has come)
                continue
            extra = {TIER_KEY: r.tier.name}
            if r.tenant is not None:
                extra[TENANT_KEY] = r.tenant.name
            params = SamplingParams(max_tokens=r.output_len, ignore_eos=True, temperature=0.0, extra_args=extra)
            eng.add_request(str(r.id), {"prompt_token_ids": request_ids(r, replies)}, params,
                            arrival_time=t0 + r.arrival)
            if follow or waits.quotes(r):
                live[str(r.id)] = r
        if eng.has_unfinished_requests():
            outputs = eng.step()
            if live:
                done_at = time.time() - t0
                for out in outputs:
                    if not out.finished:
                        continue
                    r = live.pop(out.request_id, None) or live.pop(out.request_id.rsplit("-", 1)[0], None)
                    if r is None:
                        continue
                    if r.content is not None:
                        if out.outputs:
                            replies[r.content.reply] = list(out.outputs[0].token_ids)
                        for held in waits.answered(r.content.reply):
                            held.arrival = max(held.arrival, done_at)  # sent when its client had the reply
                            heapq.heappush(pending, (held.arrival, order, held))
                            order += 1
                    for nxt in source.on_done(r, done_at) if follow else ():
                        heapq.heappush(pending, (nxt.arrival, order, nxt))
                        order += 1
            if progress:
                progress(sched)
        elif pending:
            time.sleep(max(0.0, min(pending[0][0] - (time.time() - t0), 0.05)))
    end = time.time() - t0
    if eng.has_unfinished_requests():  # stopped at the horizon
        for vid in sched.mirrored_ids():
            eng.abort_request([vid.rsplit("-", 1)[0]])
        while eng.has_unfinished_requests():
            eng.step()
    if follow and live and horizon is None:
        raise RuntimeError(f"real run: requests {sorted(live)[:5]} left vLLM without a final output, so their "
                           f"sessions' next turns were not sent")
    if waits.held and horizon is None:
        held = sorted(r.id for rs in waits.held.values() for r in rs)
        raise RuntimeError(f"real run: requests {held[:5]} were held for the replies they quote, which never came")
    log, steps = sched.records
    figures = sched.llmsched_policy.stats()
    result = RunResult(log, steps, end, time.perf_counter() - wall0,
                       replica_stats=[{"replica": 0, "policy": figures}] if figures else [])
    result.meta = {"backend": "vllm", "adapter": sched.describe(), "issued": len(source.issued)}
    return result


def warm_up(eng, sched, settings, sent) -> None:
    """Run the prompt the benchmark sent before the run (``sent``: ``bench_warmups.SentBefore``; None: none) to its
    end, unrecorded, as it did: the run's first request then finds it in vLLM's prefix cache. One engine: the copies
    after the first would only find it cached (the simulator warms one replica per copy, for DP ranks)."""
    if sent is None:
        return
    from vllm import SamplingParams
    from ..request import Request
    sched.configure(settings, record=False)
    r = Request(-1, 0.0, sent.prompt_len, 1, content=sent.content(None))
    params = SamplingParams(max_tokens=1, ignore_eos=True, temperature=0.0, extra_args={TIER_KEY: r.tier.name})
    eng.add_request("warmup", {"prompt_token_ids": request_ids(r)}, params)
    while eng.has_unfinished_requests():
        eng.step()


def request_ids(r, replies: dict | None = None) -> list[int]:
    """The prompt token ids sent for request ``r``: from its content where it has one (``content_ids``: requests
    sharing a prefix send the same ids, so vLLM's prefix cache finds it; an earlier turn's reply sends what vLLM
    generated for it, from ``replies``), else ids of its own (by its id)."""
    if r.content is not None:
        return content_ids(r.content, r.prompt_len, PROMPT_VOCAB, replies)
    return prompt_ids(r.prompt_len, r.id)


def request_tenants(requests) -> tuple:
    """The distinct tenants of ``requests``, in order of first appearance (the plug-in's settings for a replay)."""
    seen = {}
    for r in requests:
        if r.tenant is not None:
            seen.setdefault(r.tenant.name, r.tenant)
    return tuple(seen.values())


def workload_source(cfg: RunConfig, max_model_len: int, scale: float = 1.0) -> ReplaySource:
    """The workload of ``cfg`` as the real engine replays it (``replay_source.py``): lengths times ``scale`` (a CPU
    serves short requests), prompt + output capped to ``max_model_len``, sessions' later turns issued as their
    earlier turns leave the run."""
    return ReplaySource(build_source(cfg), max_model_len, scale)


def workload_requests(cfg: RunConfig, max_model_len: int, scale: float = 1.0):
    """The first requests of ``cfg``'s workload as the real engine replays it (``workload_source``)."""
    return workload_source(cfg, max_model_len, scale).initial()


def run_vllm(cfg: RunConfig, engine: EngineConfig, llm=None, horizon: float | None = None,
             profile: str | None = None, scale: float = 1.0) -> tuple[RunResult, object]:
    """One real-engine run of ``cfg``'s scheduler and workload; returns the records and the LLM (for reuse).

    The workload and the plug-in's settings are built before the engine starts (tens of seconds on a CPU), so a
    trace that cannot be replayed as asked fails at once."""
    source = workload_source(cfg, engine.max_model_len, scale)
    requests = source.initial()
    settings = load_settings({}, scheduler=cfg.scheduler, scheduler_params=cfg.scheduler_params,
                             tiers=cfg.tiers, tenants=request_tenants(requests), oracle=cfg.oracle, profile=profile)
    llm = llm or make_llm(engine)
    result = replay(llm, source, settings, horizon=horizon)
    result.meta.update({"config": {k: v for k, v in vars(cfg).items()}, "engine": vars(engine)})
    return result, llm
