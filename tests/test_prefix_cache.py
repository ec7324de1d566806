"""The prefix cache in the KV owner (engine/prefix_cache.py) and in runs: vLLM v1's rules one by one, the exact
target (a cache that evicts nothing finds what the offline count finds, request by request), and runs without
content untouched."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from llmsched.content import Content, Space, piece_id
from llmsched.engine.prefix_cache import PrefixCachingKVManager
from llmsched.experiment import carries_content, run
from llmsched.metrics.summary import summarize
from llmsched.request import Request
from llmsched.run_config import RunConfig
from llmsched.workload.traces.prefix_stats import prefix_stats
from llmsched.workload.traces.readers import DataFileNotFound, resolve_data_file

SHARED = 1


def req(rid: int, pieces, output: int = 4) -> Request:
    content = Content.of_pieces(pieces, piece_id(Space.REPLY, rid))
    return Request(rid, 0.0, content.length, output, content=content)


def prefill(kv: PrefixCachingKVManager, r: Request) -> int:
    """Admit ``r`` as the replica does: its hit, then its prompt's remaining tokens computed. Returns the hit."""
    hit = kv.lookup(r)
    kv.admit(r, hit)
    n = r.prompt_len - r.num_computed
    kv.allocate_chunks([(r, n)])
    r.num_computed += n
    return len(hit) * kv.block_size


def test_hits_are_whole_blocks_and_never_the_whole_prompt():
    kv = PrefixCachingKVManager(100, 16)
    a = req(0, [(SHARED, 64)])
    assert prefill(kv, a) == 0
    kv.release(a)
    assert prefill(kv, req(1, [(SHARED, 64)])) == 48  # 4 blocks seen; the last token is computed again
    assert prefill(kv, req(2, [(SHARED, 40), (7, 30)])) == 32  # a block that ends past the shared text misses


def test_a_shared_block_is_held_once_and_freed_when_its_last_holder_leaves():
    kv = PrefixCachingKVManager(100, 16)
    a, b = req(0, [(SHARED, 64), (2, 10)]), req(1, [(SHARED, 64), (3, 10)])
    prefill(kv, a)
    assert prefill(kv, b) == 64
    assert kv.free == 100 - (4 + 1 + 1)  # 4 shared blocks once, each request's own last block
    assert kv.frees(a) == 1  # preempting a would free only its own block
    kv.release(a)
    assert kv.free == 95
    kv.release(b)
    assert kv.free == 100 and len(kv.lru) == 4  # the four shared blocks stay cached, free
    kv.check([])


def test_cached_blocks_are_evicted_last_and_least_recently_freed_first():
    kv = PrefixCachingKVManager(8, 16)
    a, b = req(0, [(10, 48)]), req(1, [(11, 48)])
    prefill(kv, a)
    prefill(kv, b)
    kv.release(a)  # a's 3 blocks cached first
    kv.release(b)
    assert kv.anon_free == 2 and len(kv.lru) == 6
    c = req(2, [(12, 64)])
    prefill(kv, c)  # 4 blocks: the 2 uncached ones, then the two least recently freed: a's tail, then its middle
    assert kv.cached_tokens(req(3, [(11, 48)])) == 32  # b's prompt still cached (its last token recomputed)
    assert kv.cached_tokens(req(4, [(10, 48)])) == 16  # of a, only its first block is left
    kv.check([c])


def test_recompute_finds_its_own_blocks_and_swap_counts_shared_blocks_once():
    kv = PrefixCachingKVManager(40, 16, swap_blocks=40)
    a, b = req(0, [(SHARED, 64), (2, 20)]), req(1, [(SHARED, 64), (3, 20)])
    prefill(kv, a)
    prefill(kv, b)
    kv.release(a)  # preempted by recompute: its blocks stay cached
    a.num_computed = 0
    assert prefill(kv, a) == 80
    assert kv.swap_out(b)
    assert kv.free == 40 - 6 and kv.swap_free == 40 - 6  # a holds its 6 blocks; b's 6 are on the host
    kv.swap_in(b)  # b's 4 blocks shared with a cost nothing; its own 5th (cached, free) and last (anew) cost one each
    assert kv.free == 40 - 6 - 2 and kv.swap_free == 40
    kv.check([a, b])


def test_the_hash_table_is_bounded_by_the_cache():
    kv = PrefixCachingKVManager(16, 16)
    for i in range(200):
        r = req(i, [(1000 + i, 100)])
        prefill(kv, r)
        kv.release(r)
    assert len(kv.cached) <= 16 and len(kv.lru) <= 16 and not kv.held and not kv.pieces


def shared_prefix_config(**kw) -> RunConfig:
    params = {"num_groups": 3, "num_prompts_per_group": 4, "system_prompt_len": 300, "question_len": 50,
              "output_len": 30, "enable_multi_turn_chat": True}
    return RunConfig(scheduler=kw.pop("scheduler", "vllm-chunked"), workload="shared-prefix", workload_params=params,
                     check_invariants=True, **kw)


class Seen:
    """A request source that keeps every request it issues (a multi-turn session's later turns come from
    ``on_done``), for the offline count of the same requests."""

    def __init__(self, source):
        self.source, self.issued = source, []
        self.done_adds_requests = getattr(source, "done_adds_requests", False)

    def initial(self):
        for r in self.source.initial():
            self.issued.append(r)
            yield r

    def on_done(self, req, now):
        more = self.source.on_done(req, now)
        self.issued.extend(more)
        return more


def run_seen(cfg: RunConfig):
    from llmsched.experiment import build_replicas, build_source, workload_params
    from llmsched.metrics.requests import RequestLog
    from llmsched.routing.registry import make_router
    from llmsched.sim.simulator import simulate
    source = Seen(build_source(cfg))
    result = simulate(source, build_replicas(cfg, workload_params(cfg, source.source)), make_router(cfg.router),
                      seed=cfg.seed, log=RequestLog(cached=True))
    issued = sorted(source.issued, key=lambda r: (r.arrival, r.id))
    offline = prefix_stats(issued, cfg.block_size, keep=True)
    cached = dict(zip(result.requests.column("id").tolist(), result.requests.column("cached_tokens").tolist()))
    return [cached[r.id] for r in issued], offline


def test_without_eviction_a_run_finds_the_offline_count_request_by_request():
    """At a rate where each request ends before the next arrives, a cache of ample blocks finds exactly what the
    offline count (workload/traces/prefix_stats.py) finds: earlier prompts and replies, leading whole blocks."""
    ours, offline = run_seen(shared_prefix_config(rate=0.05, num_requests=60, num_blocks=20000))
    assert ours == offline.cached.tolist()
    assert offline.cached_tokens > 0


def test_mooncake_without_eviction_matches_the_offline_count():
    try:
        resolve_data_file("conversation_trace.jsonl")
    except DataFileNotFound:
        pytest.skip("the Mooncake conversation trace is not in the data folder")
    cfg = RunConfig(scheduler="vllm-chunked", model="llama-3.1-8b", trace="conversation_trace.jsonl", rate=0.02,
                    num_requests=120, num_blocks=200_000, max_model_len=131072)
    ours, offline = run_seen(cfg)
    assert ours == offline.cached.tolist()
    assert offline.cached_tokens > 0


def test_a_small_cache_finds_less_and_caching_off_finds_nothing():
    ample = summarize(run(shared_prefix_config(rate=4.0, num_requests=80, num_blocks=4000)))["prefix_cache"]
    small = summarize(run(shared_prefix_config(rate=4.0, num_requests=80, num_blocks=120)))["prefix_cache"]
    assert 0 < small["hit_rate"] < ample["hit_rate"]
    off = run(shared_prefix_config(rate=4.0, num_requests=80, num_blocks=4000, prefix_caching=False))
    assert "prefix_cache" not in summarize(off) and "cached_tokens" not in off.requests.cols


def test_caching_lowers_ttft_on_shared_prompts():
    on = summarize(run(shared_prefix_config(rate=6.0, num_requests=150, num_blocks=4000)))
    off = summarize(run(shared_prefix_config(rate=6.0, num_requests=150, num_blocks=4000, prefix_caching=False)))
    assert on["latency"]["ttft"]["mean"] < off["latency"]["ttft"]["mean"]


def test_runs_without_content_keep_the_counting_manager_and_their_files(tmp_path):
    cfg = RunConfig(scheduler="sarathi", rate=4.0, num_requests=50)
    assert not carries_content(cfg)
    from llmsched.metrics.writers import write_run
    result = run(cfg)
    out = write_run(result, summarize(result), tmp_path / "run")
    assert "cached_tokens" not in (out / "requests.csv").read_text().splitlines()[0]
    assert "prefix_cache" not in json.loads((out / "summary.json").read_text())


def test_every_scheduler_runs_with_the_cache_on_shared_prefixes():
    from llmsched.schedulers.registry import scheduler_info, scheduler_names
    for name in (n for n in scheduler_names() if not n.startswith("test-")):  # not other tests' own policies
        info = scheduler_info(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = summarize(run(shared_prefix_config(scheduler=name, rate=20.0, num_requests=60, num_blocks=300,
                                                   oracle=bool(info["needs_oracle"]))))
        assert s["counts"]["finished"] + s["counts"]["rejected"] == 60, name
        assert s["prefix_cache"]["cached_tokens"] > 0, name


def test_steps_log_the_tokens_their_admissions_found_cached(tmp_path):
    """steps.csv's cached_tokens: per step, the prompt tokens the requests it admitted found cached. Over a run
    without preemption its sum is requests.csv's; with preemptions (a small cache) it also counts re-admissions,
    as each replica's cached_tokens does; a streamed run writes the same file; without a cache, no column."""
    from llmsched.metrics.writers import write_run
    cfg = shared_prefix_config(rate=4.0, num_requests=60, num_blocks=4000, keep_gaps=False, latency_boundary="engine")
    result = run(cfg)
    per_step = np.asarray(result.steps.columns()["cached_tokens"])
    assert per_step.sum() == result.requests.column("cached_tokens").sum() > 0
    assert 0 < np.count_nonzero(per_step) < len(per_step)
    kept = (write_run(result, summarize(result), tmp_path / "kept") / "steps.csv").read_text()
    run(cfg, stream=True, out=tmp_path / "streamed")
    assert (tmp_path / "streamed" / "steps.csv").read_text() == kept
    assert kept.splitlines()[0].endswith(",cached_tokens")
    tight = run(shared_prefix_config(rate=8.0, num_requests=60, num_blocks=100))
    preempted = sum(s["preemptions"] for s in tight.replica_stats)
    step_sum = int(np.asarray(tight.steps.columns()["cached_tokens"]).sum())
    assert step_sum == sum(s["cached_tokens"] for s in tight.replica_stats)
    assert preempted == 0 or step_sum >= tight.requests.column("cached_tokens").sum()
    off = run(shared_prefix_config(rate=4.0, num_requests=20, num_blocks=4000, prefix_caching=False))
    assert "cached_tokens" not in off.steps.columns()
