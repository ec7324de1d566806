"""One small case run step by step two ways: through llmsched's replica (its policy and KV manager) and through vLLM
0.32's own v1 ``Scheduler`` and ``KVCacheManager``, with no model behind it (the scheduler's decisions depend only
on the requests' token counts, their token ids and the sampled tokens, which the driver supplies). Each step is
reduced to what both decide: the tokens each request gets, the requests preempted, and at each admission the
tokens found in the prefix cache. Timings are not compared.

A case is a list of ``Arrival(step, prompt tokens, output_len)``: the request joins the queue before that step is
scheduled (step 0 is the first). Request i's sampled tokens are all ``REPLY + i``, so two requests never share a
reply, as llmsched's ``Content`` names each reply by its request.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from llmsched.batchtime.linear import LinearBatchTime
from llmsched.content import Content, Space, piece_id
from llmsched.engine.config import ReplicaConfig
from llmsched.engine.replica import Replica
from llmsched.request import Request
from llmsched.schedulers.registry import create_scheduler

REPLY = 3000


@dataclass(frozen=True)
class Arrival:
    step: int
    tokens: tuple  # the prompt's token ids
    output_len: int


@dataclass
class Step:
    tokens: dict  # request index -> tokens scheduled
    preempted: list = field(default_factory=list)  # request indices, in the order preempted
    hits: dict = field(default_factory=dict)  # request index -> cached tokens found at its admission (if > 0)
    free: int | None = None  # free KV blocks after the step was scheduled (recorded where the caller asks)

    def __repr__(self):
        extra = (f" preempt={self.preempted}" if self.preempted else "") + (f" hits={self.hits}" if self.hits else "")
        return f"{self.tokens}{extra}" + (f" free={self.free}" if self.free is not None else "")


@dataclass(frozen=True)
class Limits:
    """vLLM's limits; ``num_blocks`` usable blocks (vLLM's pool holds one more: its null block)."""
    num_blocks: int
    block_size: int = 16
    max_num_seqs: int = 8
    max_num_batched_tokens: int = 64
    max_model_len: int = 1024
    prefix_caching: bool = False


def prompt(first: int, n: int) -> tuple:
    """``n`` token ids from ``first`` (ids below REPLY)."""
    assert first + n < REPLY
    return tuple(range(first, first + n))


# --- llmsched ---------------------------------------------------------------------------------------------------
def sim_steps(case, limits: Limits, scheduler: str = "vllm-chunked", params: dict | None = None,
              max_steps: int = 200, groups=None, blocks: bool = False) -> list[Step]:
    """``groups``: the model's windowed KV cache groups (hardware/kv_groups.py's KVGroups); ``blocks``: each step
    records the free blocks once it was scheduled."""
    cfg = ReplicaConfig(num_blocks=limits.num_blocks, block_size=limits.block_size,
                        max_num_seqs=limits.max_num_seqs, max_num_batched_tokens=limits.max_num_batched_tokens,
                        max_model_len=limits.max_model_len, prefix_caching=limits.prefix_caching,
                        fast_forward=False, check_invariants=True, kv_groups=groups)
    policy = create_scheduler(scheduler, **(params or {}))
    rep = Replica(0, policy, LinearBatchTime(const=1.0), cfg)
    reqs = []
    for i, a in enumerate(case):
        content = Content.of_tokens(a.tokens, piece_id(Space.REPLY, i)) if limits.prefix_caching else None
        reqs.append(Request(i, float(a.step), len(a.tokens), a.output_len, content=content))
    steps, now, done = [], 0.0, 0
    for s in range(max_steps):
        for r in reqs:
            if case[r.id].step == s:
                rep.add(r, now)
        waiting = {r.id for r in rep.waiting}
        duration = rep.start_step(now)
        if duration is None:
            if done == len(reqs):
                break
            steps.append(Step({}, free=rep.kv.free if blocks else None))
            now += 1.0
            continue
        plan = rep.clock.plan
        tokens = {r.id: n for r, n in plan.prefills}
        tokens.update({r.id: 1 for r in plan.decodes})
        step = Step(dict(sorted(tokens.items())), sorted(r.id for r in plan.preempt))
        step.hits = {r.id: r.num_computed for r, _ in plan.prefills if r.id in waiting and r.num_computed}
        steps.append(step)
        now += duration
        rep.end_step(now)
        done += len(rep.take_completed())
        if blocks:
            step.free = rep.kv.free
    return steps


# --- vLLM -------------------------------------------------------------------------------------------------------
def vllm_scheduler(limits: Limits, model_dir: str, full_isl: bool = True, groups=None, chunked: bool = True):
    """vLLM 0.32's v1 Scheduler as the engine core builds it (FCFS, chunked prefill), over a pool of
    ``limits.num_blocks + 1`` blocks (the null block is the extra one). ``groups``: a KVGroups, whose full-attention
    and sliding-window or chunked-local groups vLLM's hybrid KV cache manager then keeps (one layer each: the
    scheduler counts blocks, not bytes). ``chunked``: vLLM's ``enable_chunked_prefill``."""
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.structured_output import StructuredOutputManager
    mc = ModelConfig(model=model_dir, dtype="float32", seed=0, max_model_len=limits.max_model_len)
    sc = SchedulerConfig(max_num_seqs=limits.max_num_seqs, max_num_batched_tokens=limits.max_num_batched_tokens,
                         max_model_len=limits.max_model_len, enable_chunked_prefill=chunked, is_encoder_decoder=False,
                         scheduler_reserve_full_isl=full_isl)
    cc = CacheConfig(block_size=limits.block_size, enable_prefix_caching=limits.prefix_caching)
    vc = VllmConfig(model_config=mc, scheduler_config=sc, cache_config=cc)
    blocks = limits.num_blocks + 1
    kc = KVCacheConfig(num_blocks=blocks, kv_cache_tensors=[], kv_cache_groups=kv_cache_groups(limits, groups))
    cc.num_gpu_blocks = blocks
    return Scheduler(vllm_config=vc, kv_cache_config=kc, structured_output_manager=StructuredOutputManager(vc),
                     block_size=limits.block_size, log_stats=True)


def kv_cache_groups(limits: Limits, groups) -> list:
    """vLLM's KVCacheGroupSpecs: one full-attention layer, or ``groups``' groups of one layer each."""
    import torch
    from vllm.v1.kv_cache_interface import (ChunkedLocalAttentionSpec, FullAttentionSpec, KVCacheGroupSpec,
                                            SlidingWindowSpec)
    shape = dict(block_size=limits.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32)
    if groups is None:
        return [KVCacheGroupSpec(["layer"], FullAttentionSpec(**shape))]
    if groups.chunked:
        local = ChunkedLocalAttentionSpec(attention_chunk_size=groups.window, **shape)
    else:
        local = SlidingWindowSpec(sliding_window=groups.window, **shape)
    return ([KVCacheGroupSpec([f"full.{i}"], FullAttentionSpec(**shape)) for i in range(groups.full)]
            + [KVCacheGroupSpec([f"local.{i}"], local) for i in range(groups.local)])


def vllm_steps(case, limits: Limits, model_dir: str, full_isl: bool = True, max_steps: int = 200,
               groups=None, blocks: bool = False, chunked: bool = True) -> list[Step]:
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request as VRequest
    init_none_hash(sha256)
    hasher = get_request_block_hasher(limits.block_size, sha256)
    sched = vllm_scheduler(limits, model_dir, full_isl, groups, chunked)
    steps, finished = [], 0
    for s in range(max_steps):
        for i, a in enumerate(case):
            if a.step == s:
                sp = SamplingParams(max_tokens=a.output_len, ignore_eos=True)
                sched.add_request(VRequest(str(i), list(a.tokens), sp, None, arrival_time=float(s),
                                           block_hasher=hasher))
        waiting = [r.request_id for r in sched.requests.values() if r.status.name in ("WAITING", "PREEMPTED")]
        out = sched.schedule()
        new_hits = {}
        for rid in waiting:
            n = out.num_scheduled_tokens.get(rid)
            if n and sched.requests[rid].num_computed_tokens - n:
                new_hits[int(rid)] = sched.requests[rid].num_computed_tokens - n
        tokens = {int(k): v for k, v in out.num_scheduled_tokens.items()}
        preempted = [int(x) for x in out.preempted_req_ids] if out.preempted_req_ids else []
        if not tokens and finished == len(case) and s >= max(a.step for a in case):
            break
        ids = list(out.num_scheduled_tokens)
        sampled = []
        for rid in ids:
            r = sched.requests[rid]
            sampled.append([REPLY + int(rid)] if r.num_computed_tokens >= r.num_tokens else [])
        result = ModelRunnerOutput(req_ids=ids, req_id_to_index={k: j for j, k in enumerate(ids)},
                                   sampled_token_ids=sampled, logprobs=None, prompt_logprobs_dict={},
                                   pooler_output=[])
        outputs = sched.update_from_output(out, result)
        for eco in outputs.values():
            finished += len(eco.finished_requests or ()) if hasattr(eco, "finished_requests") else 0
            finished += sum(1 for o in eco.outputs if o.finish_reason is not None)
        free = sched.kv_cache_manager.block_pool.get_num_free_blocks() if blocks else None  # its finished freed
        steps.append(Step(dict(sorted(tokens.items())), sorted(preempted), new_hits, free))
    return steps


def shared_prefix_case(seed: int) -> tuple[Limits, list]:
    """A random small case with a prefix cache: 3 to 7 requests over the first 7 steps, each a prompt of 16 to 48
    leading tokens of one of three shared prefixes and a tail of its own, on a cache of 8 to 16 blocks (so
    evictions, preemptions and same-step hits happen), with varied token budgets and seat caps."""
    import random
    rnd = random.Random(seed)
    prefixes = [prompt(1 + 100 * k, rnd.choice([16, 24, 32, 48])) for k in range(3)]
    case = []
    for i in range(rnd.randint(3, 7)):
        head = rnd.choice(prefixes)[: rnd.choice([16, 32, 48])]
        case.append(Arrival(rnd.randint(0, 6), head + prompt(1000 + 60 * i, rnd.randint(1, 40)), rnd.randint(1, 12)))
    case.sort(key=lambda a: a.step)
    limits = Limits(rnd.randint(8, 16), prefix_caching=True, max_num_batched_tokens=rnd.choice([32, 64, 128]),
                    max_num_seqs=rnd.choice([2, 4, 8]))
    return limits, case
