"""Sliding-window and chunked-local attention layers in KV memory, against vLLM 0.32's hybrid KV cache manager.

vLLM groups such a model's layers into KV cache groups of one page size (kv_cache_utils.py
``_get_kv_cache_groups_uniform_page_size``), sizes one block pool by a group's layers
(``get_kv_cache_config_from_groups``), and frees the blocks that left a sliding window or a local-attention chunk at
each allocation (single_type_kv_cache_manager.py ``remove_skipped_blocks``). llmsched's hardware/kv_groups.py and
engine/kv_windows.py model that; these tests hold them to vLLM's own functions and its own Scheduler and
KVCacheManager, step by step (tests/engine_cases.py), with the real models' groups."""
from __future__ import annotations

import os
from dataclasses import replace

import pytest

from llmsched.engine.config import ReplicaConfig
from llmsched.engine.kv_windows import WindowedKVCacheManager
from llmsched.hardware.gpus import gpu
from llmsched.hardware.kv_groups import KVGroups, kv_groups
from llmsched.hardware.kv_sizing import kv_cache
from llmsched.hardware.models import model
from llmsched.request import Request
from tests.engine_cases import Arrival, Limits, prompt, sim_steps, vllm_steps

A, P = Arrival, prompt

WINDOWED = ["openai/gpt-oss-20b", "openai/gpt-oss-120b", "google/gemma-3-1b-it", "google/gemma-3-4b-it",
            "google/gemma-3-12b-it", "google/gemma-3-27b-it", "meta-llama/Llama-4-Scout-17B-16E-Instruct",
            "meta-llama/Llama-4-Maverick-17B-128E-Instruct"]


# --- without vLLM: the groups and the counts, derived by hand --------------------------------------------------------
def test_groups_of_the_shipped_windowed_models():
    """gpt-oss: 12 sliding + 12 full layers -> two groups of 12; Gemma-3-27B: 52 sliding + 10 full -> six sliding
    groups and one full group of 10; Llama-4 Scout: 36 chunked + 12 full -> three chunked groups and one full."""
    assert kv_groups(model("openai/gpt-oss-20b")) == KVGroups(1, 1, 128, False, 12, 24)
    assert kv_groups(model("google/gemma-3-27b-it")) == KVGroups(1, 6, 1024, False, 10, 62)
    assert kv_groups(model("meta-llama/Llama-4-Scout-17B-16E-Instruct")) == KVGroups(1, 3, 8192, True, 12, 48)
    assert kv_groups(model("llama-3-8b")) is None


def test_a_request_holds_the_blocks_of_its_window_in_a_sliding_group():
    """Window 128, blocks of 16, one full and one sliding group: a 1000-token prompt in one chunk holds 63 + 63;
    its first decode frees the sliding group's blocks before token 1000 - 127 (54 whole blocks) and takes none
    (token 1000 is in block 62): 63 + 9."""
    kv = WindowedKVCacheManager(1000, 16, 0, KVGroups(1, 1, 128, False, 12, 24), 2048, 4096)
    r = Request(0, 0.0, 1000, 10)
    assert kv.blocks_for(1000) == 63 + 63
    kv.allocate_chunks([(r, 1000)])
    assert r.num_blocks == 126 and kv.free == 1000 - 126
    r.num_computed = 1000
    assert kv.extra_blocks(r, 1001) == -54
    kv.allocate_decodes([r])
    assert r.num_blocks == 63 + 9 and kv.free == 1000 - 72


def test_a_chunked_group_frees_a_chunk_when_the_next_begins_and_admission_is_capped():
    """Chunk 8192: at 8192 computed tokens the first chunk's 512 blocks leave every chunked group. A fresh request's
    whole-sequence gate counts a chunked group at most ceil(min(8192 + 2048, max_model_len) / 16) = 640 blocks
    (vLLM's max_admission_blocks_per_request, one batch in flight)."""
    kv = WindowedKVCacheManager(10_000, 16, 0, KVGroups(1, 3, 8192, True, 12, 48), 2048, 32768)
    assert kv.blocks_for(20_000) == 1250 + 3 * 640
    r = Request(0, 0.0, 9000, 10)
    kv.allocate_chunks([(r, 8192)])
    r.num_computed = 8192
    assert r.num_blocks == 4 * 512
    kv.allocate_chunks([(r, 808)])
    assert r.num_blocks == 563 + 3 * (563 - 512)


def test_sizing_counts_vllms_blocks_of_a_groups_layers():
    """The same KV memory in blocks of one page per layer of a group: gpt-oss-20b's 24 layers in groups of 12 give
    twice the blocks; a model without windows is sized as before."""
    spec, device = model("openai/gpt-oss-20b"), gpu("h100")
    args = dict(block_size=16, max_num_seqs=256, max_num_batched_tokens=2048, vllm_engine=True)
    full = kv_cache(spec, device, **args)
    grouped = kv_cache(spec, device, **args, groups=kv_groups(spec))
    assert grouped.blocks == full.budget.kv_bytes // (16 * spec.kv_bytes_per_token_per_gpu // 2)
    assert full.blocks * 2 <= grouped.blocks <= full.blocks * 2 + 1
    llama = model("llama-3-8b")
    assert kv_cache(llama, device, **args) == kv_cache(llama, device, **args, groups=kv_groups(llama))


def test_a_chunked_model_needs_its_chunk():
    with pytest.raises(ValueError, match="chunked_local needs sliding_window"):
        replace(model("llama-3-8b"), chunked_local=True)


def test_a_run_counts_the_groups_only_where_its_scheduler_and_cache_do():
    """vllm-chunked takes the groups (and twice gpt-oss-20b's blocks); sarathi and a prefix cache keep the
    all-full count, and meta.json's kv_cache says why."""
    from llmsched.experiment import replica_parts, windowed_groups
    from llmsched.run_config import RunConfig
    cfg = RunConfig(model="openai/gpt-oss-20b", gpu="h100", scheduler="vllm-chunked", num_requests=10)
    groups, why = windowed_groups(cfg, model(cfg.model), caching=False)
    assert groups == kv_groups(model(cfg.model)) and why == ""
    _, config = replica_parts(cfg)
    _, full = replica_parts(replace(cfg, scheduler="sarathi"))
    assert config.kv_groups == groups and full.kv_groups is None and not config.fast_forward
    assert 2 * full.num_blocks <= config.num_blocks <= 2 * full.num_blocks + 1
    assert "scheduler 'sarathi' plans one block per 16 tokens" in windowed_groups(
        replace(cfg, scheduler="sarathi"), model(cfg.model), caching=False)[1]
    assert "prefix cache" in windowed_groups(cfg, model(cfg.model), caching=True)[1]
    assert "swapping" in windowed_groups(replace(cfg, preemption_mode="swap"), model(cfg.model), caching=False)[1]
    assert windowed_groups(replace(cfg, model="llama-3-8b"), model("llama-3-8b"), caching=False) == (None, "")


def test_a_disaggregated_fleet_counts_every_layer_as_its_transfers_do():
    """Each pool of a disaggregated run keeps the all-full count (its pool configs drop ``disaggregate``, so the
    fleet says so), as its transfers carry every layer's KV: the decode instance holds what crossed the link.
    Before, the pools took vllm-chunked's windowed groups (about 6x the blocks) while the link carried every layer."""
    import numpy as np

    from llmsched.experiment import run
    from llmsched.run_config import RunConfig
    cfg = RunConfig(model="google/gemma-3-12b-it", gpu="h100", scheduler="vllm-chunked", disaggregate="1P1D",
                    num_requests=3, rate=1.0, workload="sharegpt", seed=0)
    result = run(cfg)
    spec = model(cfg.model)
    full = replica_parts_blocks(replace(cfg, disaggregate=None, scheduler="sarathi"))
    for pool in result.meta["fleet"]["pools"].values():
        assert pool["kv_blocks"] == full and "disaggregated" in pool["kv_cache"]["windows"]
    log = result.requests
    assert len(log.column("prompt_len")) == 3
    blocks = -(-log.column("prompt_len") // cfg.block_size)  # whole blocks of every layer
    assert np.array_equal(log.column("transfer_bytes"), blocks * cfg.block_size * spec.kv_bytes_per_token)


def replica_parts_blocks(cfg) -> int:
    from llmsched.experiment import replica_parts
    return replica_parts(cfg)[1].num_blocks


def test_windowed_groups_refuse_what_they_do_not_count():
    groups = kv_groups(model("openai/gpt-oss-20b"))
    with pytest.raises(ValueError, match="prefix cache"):
        ReplicaConfig(num_blocks=100, prefix_caching=True, kv_groups=groups)
    with pytest.raises(ValueError, match="swapping"):
        ReplicaConfig(num_blocks=100, preemption_mode="swap", kv_groups=groups)
    with pytest.raises(ValueError, match="scheduler 'sarathi' counts one KV block per 16 tokens"):
        sim_steps([A(0, P(1, 20), 2)], Limits(50), scheduler="sarathi", groups=groups)


# --- vLLM's own functions and scheduler ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vllm_config(tmp_path_factory):
    from tests.vllm_support import require_vllm
    require_vllm()
    from llmsched.vllm.model import write_model
    from tests.engine_cases import vllm_scheduler
    # the tiny model's 4096 positions: the Llama-4 case runs past a 8192-token chunk (no model computes here)
    os.environ.setdefault("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    model_dir = str(write_model(tmp_path_factory.mktemp("kv-hybrid") / "tiny"))
    vc = vllm_scheduler(Limits(20), model_dir).vllm_config
    vc.cache_config.kv_cache_layout = "LBNHC"  # FlashAttention's NHD, the layout a GPU engine core resolves
    return model_dir, vc


def layer_specs(spec):
    """vLLM's KVCacheSpec of each layer of ``spec`` on one GPU: its local layers where the family puts them
    (gpt-oss: even layers; Gemma-3: all but every sixth; Llama-4: all but every fourth)."""
    import torch
    from vllm.v1.kv_cache_interface import ChunkedLocalAttentionSpec, FullAttentionSpec, SlidingWindowSpec
    shape = dict(block_size=16, num_kv_heads=spec.kv_heads_per_gpu, head_size=spec.head_dim, dtype=torch.bfloat16)
    every = {"gpt-oss": 2, "gemma-3": 6, "Llama-4": 4}
    n = next(k for name, k in every.items() if name in spec.name)
    local = [i for i in range(spec.layers) if (i + 1) % n] if n != 2 else list(range(0, spec.layers, 2))
    assert len(local) == spec.sliding_layers
    out = {f"layer.{i}": FullAttentionSpec(**shape) for i in range(spec.layers)}
    for i in local:
        out[f"layer.{i}"] = (ChunkedLocalAttentionSpec(attention_chunk_size=spec.sliding_window, **shape)
                             if spec.chunked_local else SlidingWindowSpec(sliding_window=spec.sliding_window, **shape))
    return out


@pytest.mark.parametrize("name", WINDOWED)
def test_groups_and_pool_are_vllms(vllm_config, name):
    """vLLM's get_kv_cache_groups and get_kv_cache_config_from_groups on the model's layers (no GPU needed): the
    same groups by kind and size, and the same num_blocks for the memory of an H100 less gpt-oss-20b's weights."""
    from vllm.v1.core.kv_cache_utils import get_kv_cache_config_from_groups, get_kv_cache_groups
    from vllm.v1.kv_cache_interface import FullAttentionSpec
    _, vc = vllm_config
    spec = model(name)
    ours = kv_groups(spec)
    groups = get_kv_cache_groups(vc, layer_specs(spec))
    full = [len(g.layer_names) for g in groups if type(g.kv_cache_spec) is FullAttentionSpec]
    local = [len(g.layer_names) for g in groups if type(g.kv_cache_spec) is not FullAttentionSpec]
    assert (len(full), len(local)) == (ours.full, ours.local)
    assert max(full + local) == ours.group_layers
    memory = 60 * 2**30 + 12_345
    assert get_kv_cache_config_from_groups(vc, groups, memory).num_blocks == memory // ours.block_bytes(spec, 16)


def both(case, limits, groups, full_isl=True, max_steps=400):
    from tests.engine_cases import sim_steps as ours
    params = None if full_isl else {"reserve_full_isl": False}
    return (ours(case, limits, params=params, groups=groups, blocks=True, max_steps=max_steps),
            vllm_steps(case, limits, MODEL_DIR[0], full_isl=full_isl, groups=groups, blocks=True,
                       max_steps=max_steps))


MODEL_DIR: list = []

# KV pressure: the pool is short of what the requests hold at their longest, so requests are preempted
CASES = {
    # gpt-oss-20b's groups (window 128): prompts past the window, decodes crossing blocks in both groups
    "gpt-oss-20b": ("openai/gpt-oss-20b", Limits(34, max_num_batched_tokens=96, max_model_len=1024),
                    [A(0, P(1, 200), 60), A(0, P(300, 150), 60), A(1, P(600, 40), 90), A(3, P(800, 120), 40)]),
    # Gemma-3-27B's seven groups (six sliding, window 1024)
    "gemma-3-27b": ("google/gemma-3-27b-it", Limits(800, max_num_batched_tokens=512, max_model_len=4096),
                    [A(0, P(1, 1500), 40), A(0, P(1600, 1200), 40), A(2, P(100, 700), 60)]),
    # Llama-4 Scout's chunked local attention (chunk 8192): a prompt crossing a chunk frees the first chunk
    "llama-4-scout": ("meta-llama/Llama-4-Scout-17B-16E-Instruct",
                      Limits(2400, max_num_batched_tokens=2048, max_model_len=16384),
                      [A(0, tuple(range(9000)), 200), A(1, tuple(range(3000)), 300), A(2, P(1, 2500), 200),
                       A(3, P(1, 2000), 150)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("full_isl", [True, False])
def test_vllm_chunked_holds_the_blocks_vllm_holds_step_by_step(vllm_config, name, full_isl):
    """The same tokens, preemptions and free blocks at every step as vLLM's Scheduler with the model's KV cache
    groups (one layer each: the scheduler counts blocks); the case is under KV pressure (someone is preempted or
    waits) and counting every layer as full attention decides differently."""
    MODEL_DIR[:] = [vllm_config[0]]
    label, limits, case = CASES[name]
    groups = kv_groups(model(label))
    ours, theirs = both(case, limits, groups, full_isl)
    assert [repr(s) for s in ours] == [repr(s) for s in theirs]
    assert any(s.preempted for s in ours) or min(s.free for s in ours) < limits.num_blocks // 10
    assert [s.tokens for s in sim_steps(case, limits, params=None if full_isl else {"reserve_full_isl": False},
                                        max_steps=400)] != [s.tokens for s in ours]


def test_the_throughput_bound_holds_over_a_windowed_run():
    """The sound bound (llmsched/theory/throughput_bound.py, linear batch time) counts a windowed cache's KV slots
    as its full-attention groups hold them (twice the all-full count's context for gpt-oss); a saturated
    gpt-oss-120b run on one H100, where that term binds, stays under it."""
    from llmsched.experiment import run
    from llmsched.metrics.summary import summarize
    from llmsched.run_config import RunConfig
    from llmsched.theory.throughput_bound import bound_for_config
    cfg = RunConfig(model="openai/gpt-oss-120b", gpu="h100", scheduler="vllm-chunked", batch_time="linear",
                    workload="arxiv-summarization", rate=30.0, num_requests=300, seed=1)
    bound = bound_for_config(cfg)
    served = summarize(run(cfg))["throughput"]["requests_per_s"]
    assert bound.binding == "KV memory"  # the term the groups change binds
    assert 0 < served <= bound.requests_per_s


def drawn_case(seed: int):
    """A random case under KV pressure: groups (1-2 full, 1-6 local, a sliding window or a chunk not always a
    multiple of the block), limits and arrivals."""
    import numpy as np
    rng = np.random.default_rng(seed)
    chunked = bool(rng.integers(2))
    window = int(rng.choice([64, 96, 128, 200])) if chunked else int(rng.choice([17, 32, 100, 128, 256]))
    groups = KVGroups(int(rng.integers(1, 3)), int(rng.integers(1, 7)), window, chunked, 1, 2)
    budget = int(rng.choice([32, 64, 128]))
    case, first = [], 1
    for i in range(int(rng.integers(3, 7))):
        n = int(rng.integers(5, 400))
        case.append(A(int(rng.integers(0, 6)), P(first, n), int(rng.integers(1, 80))))
        first += n
    longest = max(len(a.tokens) + a.output_len for a in case)
    limits = Limits(int((groups.full + groups.local) * -(-longest // 16) * rng.uniform(1.05, 2.5)),
                    max_num_seqs=int(rng.integers(2, 9)), max_num_batched_tokens=budget, max_model_len=1024)
    return groups, limits, case


@pytest.mark.parametrize("seed", range(12))
def test_drawn_windowed_cases_decide_as_vllm(vllm_config, seed):
    MODEL_DIR[:] = [vllm_config[0]]
    groups, limits, case = drawn_case(seed)
    for full_isl in (True, False):
        ours, theirs = both(case, limits, groups, full_isl, max_steps=600)
        assert [repr(s) for s in ours] == [repr(s) for s in theirs], (seed, full_isl, groups, limits)
