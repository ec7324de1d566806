"""KV tiers below the GPU cache (engine/kv_tiers.py) in the replica: a prefix evicted from the GPU is reloaded from
host memory rather than recomputed, in vLLM's connector (the request waits for an asynchronous load) and in
LMCache's (the step waits for it), with TTFTs checked against hand arithmetic; whole runs with every tier kind keep
their KV accounting exact; the tiers have no writer outside the KV manager's component; without --kv-offload the
files have no tier column."""
import ast
import csv
import json
from pathlib import Path

import pytest

import llmsched
from llmsched.batchtime.base import Batch
from llmsched.batchtime.registry import make_batch_time_model
from llmsched.content import Content, Space, piece_id
from llmsched.engine.offload_plan import plan_offload
from llmsched.engine.offload_spec import parse_kv_offload
from llmsched.engine.plan import BatchPlan
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.experiment import run
from llmsched.hardware.gpus import gpu
from llmsched.hardware.models import model
from llmsched.metrics.stream_summary import summarize_stream
from llmsched.metrics.summary import summarize
from llmsched.metrics.writers import write_run
from llmsched.request import Request, Status
from llmsched.routing.registry import make_router
from llmsched.run_config import RunConfig
from llmsched.schedulers import create_scheduler
from llmsched.schedulers.base import Scheduler
from llmsched.sim.simulator import simulate
from llmsched.workload.workload import OpenLoop

M, G = model("llama-3.1-8b"), gpu("h100")
BT = make_batch_time_model("roofline", M, G)
X, W = piece_id(Space.NAMED, 1), piece_id(Space.NAMED, 2)


def reload_run(mode: str, offload: str = "cpu:10GiB"):
    """A (3,200 tokens) runs; two fillers push its blocks out of a 400-block GPU cache; B repeats A's prompt and
    adds 100 tokens. Returns B and the replica."""
    plan = plan_offload(parse_kv_offload(offload), mode, M, G, 1, 16) if offload else None
    cfg = ReplicaConfig(num_blocks=400, block_size=16, max_model_len=131072, prefix_caching=True,
                        kv_offload=plan, check_invariants=True)
    rep = Replica(0, create_scheduler("vllm-chunked"), BT, cfg)
    reqs = [Request(0, 0.0, 3200, 2, content=Content.of_pieces([(X, 3200)], reply=10)),
            Request(1, 1.0, 3200, 2, content=Content.of_pieces([(piece_id(Space.NAMED, 3), 3200)], reply=11)),
            Request(2, 2.0, 3200, 2, content=Content.of_pieces([(piece_id(Space.NAMED, 4), 3200)], reply=12)),
            Request(3, 3.0, 3300, 2, content=Content.of_pieces([(X, 3200), (W, 100)], reply=13))]
    simulate(OpenLoop(reqs), [rep], make_router("round-robin"))
    assert all(r.status is Status.FINISHED for r in reqs)
    return reqs[3], rep


def test_vllm_mode_reloads_the_prefix_from_host_memory():
    b, rep = reload_run("vllm")
    assert b.num_cached == 3200 and b.tier_cached == (3200,)  # all 200 blocks from host memory, none on the GPU
    # 200 blocks of 2 MiB over PCIe Gen5 (52.6 GB/s), 1 us latency, one 3.5 us copy a block; then B's 100 tokens
    load = 1e-6 + 200 * 3.5e-6 + 200 * 2**21 / 52.6e9
    step = BT.step_time(Batch([100], [3200], []))
    assert b.first_token - b.arrival == pytest.approx(load + step, rel=1e-9)
    stats = rep.kv.tiers.stats(10.0)
    assert stats["loads"] == 1 and stats["slow_loads"] == 0
    assert stats["tiers"][0]["hit_tokens"] == 3200 and stats["tiers"][0]["loaded_bytes"] == 200 * 2**21
    # without the tier B computes its whole prompt: far slower than the load
    b0, _ = reload_run("vllm", offload=None)
    assert b0.num_cached == 0
    assert b0.first_token - b0.arrival > 4 * (load + step)  # 90.8 ms against 18.8


def test_lmcache_mode_loads_inside_the_step():
    b, rep = reload_run("lmcache")
    # LMCache keeps full 256-token chunks: A's 3,200 tokens are 12 of them (3,072 tokens), loaded whole
    assert b.num_cached == 3072 and b.tier_cached == (3072,)
    load = 1e-6 + 12 * 3.5e-6 + 12 * 256 * 131072 / 52.6e9
    step = BT.step_time(Batch([228], [3072], []))
    assert b.first_token - b.arrival == pytest.approx(load + step, rel=1e-9)
    assert rep.kv.tiers.stats(10.0)["sync_time_s"] > load  # A's and the fillers' stores waited in their steps too


def test_a_load_slower_than_recomputing_is_counted():
    _, rep = reload_run("vllm", offload="cpu:10GiB:link=bw=0.05GB/s;latency=1us;write_bw=50GB/s")
    assert rep.kv.tiers.stats(10.0)["slow_loads"] == 1


def test_a_disk_tier_promotes_into_host_memory():
    """Host memory too small for A (1 GiB: 512 chunks of 2 MiB, evicted by the fillers), a disk tier behind it: B's
    prefix comes from disk, through host memory."""
    b, rep = reload_run("vllm", offload="cpu:1GiB,disk:100GiB")
    assert b.tier_cached[1] > 0 and b.num_cached == 3200
    disk = rep.kv.tiers.stats(10.0)["tiers"][1]
    assert disk["loaded_bytes"] > 0 and disk["stored_chunks"] >= 200


@pytest.mark.parametrize("mode", ["vllm", "lmcache", "lmcache-layerwise"])
@pytest.mark.parametrize("scheduler", ["vllm-chunked", "sarathi", "vllm", "fcfs", "vtc", "infermax",
                                       "infermax-sarathi-pc"])
def test_whole_runs_keep_exact_accounting(mode, scheduler, tmp_path):
    """Shared prefixes in multi-turn chat, a GPU cache far too small and small tiers that evict: the KV and tier
    accounting checked after every step, every request finished, the files written."""
    cfg = RunConfig(scheduler=scheduler, model="llama-3-8b", gpu="a100", workload="shared-prefix",
                    workload_params={"enable_multi_turn_chat": True, "system_prompt_len": 700, "question_len": 300,
                                     "num_groups": 6, "num_prompts_per_group": 4},
                    rate=6.0, num_requests=150, num_blocks=300,
                    kv_offload="cpu:1GiB,disk:4GiB", kv_offload_mode=mode, check_invariants=True, seed=3)
    result = run(cfg)
    write_run(result, summarize(result), tmp_path)
    rows = list(csv.DictReader(open(tmp_path / "requests.csv")))
    assert len(rows) == 150 and all(r["status_name"] in ("FINISHED", "REJECTED") for r in rows)
    for r in rows:
        parts = int(r["cached_tokens_gpu"]) + int(r["cached_tokens_cpu"]) + int(r["cached_tokens_disk"])
        assert parts == int(r["cached_tokens"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    off = summary["kv_offload"]
    assert off["mode"] == mode and [t["medium"] for t in off["tiers"]] == ["cpu", "disk"]
    assert off["tiers"][0]["stored_chunks"] > 0
    assert sum(t["cached_tokens"] for t in off["tiers"]) > 0  # the tiers served hits


def test_without_the_option_nothing_changes_in_the_files(tmp_path):
    cfg = RunConfig(scheduler="vllm-chunked", model="llama-3-8b", gpu="a100", workload="shared-prefix",
                    rate=4.0, num_requests=60, num_blocks=400)
    result = run(cfg)
    write_run(result, summarize(result), tmp_path)
    header = (tmp_path / "requests.csv").read_text().splitlines()[0]
    assert header.endswith(",cached_tokens") and "cached_tokens_" not in header
    assert "kv_offload" not in json.loads((tmp_path / "summary.json").read_text())


def test_a_streamed_run_writes_the_split_and_keeps_its_records_bounded(tmp_path):
    cfg = RunConfig(scheduler="vllm-chunked", model="llama-3-8b", gpu="a100", workload="shared-prefix",
                    workload_params={"enable_multi_turn_chat": True}, rate=6.0, num_requests=120, num_blocks=300,
                    kv_offload="cpu:0.5GiB", keep_gaps=False, latency_boundary="engine")  # a stream measures at the engine
    result = run(cfg, stream=True, out=tmp_path)
    assert "kv_offload" in summarize_stream(result)
    header = (tmp_path / "requests.csv").read_text().splitlines()[0]
    assert header.endswith("cached_tokens,cached_tokens_gpu,cached_tokens_cpu")
    assert result.replica_stats[0]["kv_offload"]["tiers"][0]["chunks_held"] <= \
        result.replica_stats[0]["kv_offload"]["tiers"][0]["chunks"]


# --- one writer ---------------------------------------------------------------------------------------------------
# The tiers' state (engine/tier_store.py) changes only through the KV manager's component (engine/kv_tiers.py):
# no other module calls a store's changing verbs or builds one, and only the KV manager holds the component.
CHANGES = {"insert", "insert_ranges", "complete", "pin", "pin_ranges", "rerank", "rerank_ranges", "evict"}
OWNERS = {"engine/kv_tiers.py", "engine/tier_store.py"}


def tier_writes(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CHANGES:
            base = ast.unparse(node.func.value)
            if "stores" in base or "store" == base.split(".")[-1] or "tiers" in base:
                yield node.lineno, ast.unparse(node.func)
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(("TierStore", "KVTiers")):
            yield node.lineno, ast.unparse(node.func)


def test_only_the_kv_managers_component_writes_tier_state():
    root = Path(llmsched.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in OWNERS:
            continue
        for line, call in tier_writes(ast.parse(path.read_text())):
            if rel == "engine/replica.py" and call == "KVTiers":  # built for the manager, handed to it whole
                continue
            found.append(f"{rel}:{line}: {call}")
    assert not found, "KV tier state changed outside engine/kv_tiers.py:\n" + "\n".join(found)


def test_the_tier_write_finder_sees_the_forms_used():
    code = "self.stores[0].insert(k, s, 0, 3)\nstore.rerank(k, s, 0, 1)\nkv.tiers.stores[1].evict(2)\n" \
           "t = TierStore(4)\nbook.insert(3)\n"
    assert [c for _, c in tier_writes(ast.parse(code))] == ["self.stores[0].insert", "store.rerank",
                                                           "kv.tiers.stores[1].evict", "TierStore"]


def test_per_request_records_leave_with_their_requests():
    """The tiers keep records only of requests in flight: after a run nothing is left, and each tier holds at most
    its chunks (memory bounded by the tiers' sizes, whatever the run's length)."""
    cfg = RunConfig(scheduler="vllm-chunked", model="llama-3-8b", gpu="a100", workload="shared-prefix",
                    workload_params={"enable_multi_turn_chat": True, "system_prompt_len": 700, "question_len": 300,
                                     "num_groups": 6, "num_prompts_per_group": 4},
                    rate=6.0, num_requests=150, num_blocks=300, kv_offload="cpu:1GiB,disk:4GiB")
    from llmsched.experiment import build_replicas, build_source, simulate_config, workload_params
    source = build_source(cfg)
    reps = build_replicas(cfg, workload_params(cfg, source))
    simulate_config(cfg, source, reps)
    tiers = reps[0].kv.tiers
    for name in ("pieces", "stored", "seen", "loads", "looked", "finishing"):
        assert not getattr(tiers, name), f"{name} kept {len(getattr(tiers, name))} records after the run"
    for store in tiers.stores:
        store.check()
        assert store.used <= store.capacity
        assert sum(len(v) for v in store.table.values()) <= store.used
    assert len(tiers.usage) <= 1200


class Then(Scheduler):
    """vllm-chunked's plans until a test hands it plans of its own (``script``), one an ask."""

    name = "then"

    def __init__(self):
        self.inner, self.script = create_scheduler("vllm-chunked"), []

    def schedule(self, view):
        return self.script.pop(0)(view) if self.script else self.inner.schedule(view)


def test_a_request_preempted_by_a_plan_that_became_loads_alone_can_run_in_the_next():
    """A plan preempts R and admits B, whose whole prompt is in host memory: B's admission becomes a load (vLLM's
    WAITING_FOR_REMOTE_KVS), nothing is left to run, and the policy is asked again at the same step count; its next
    plan lists R, which is waiting again. Before, R was refused as "listed twice or preempted" (fuzz seed 64,941,
    fairbatching-fb on a prefill pool with tiers)."""
    plan = plan_offload(parse_kv_offload("cpu:10GiB"), "vllm", M, G, 1, 16)
    policy = Then()
    rep = Replica(0, policy, BT, ReplicaConfig(num_blocks=400, block_size=16, max_model_len=131072,
                                               prefix_caching=True, kv_offload=plan, check_invariants=True))
    first = [Request(0, 0.0, 3200, 2, content=Content.of_pieces([(X, 3200)], reply=10))]
    first += [Request(i, float(i), 3200, 2, content=Content.of_pieces([(piece_id(Space.NAMED, 2 + i), 3200)],
                                                                        reply=10 + i)) for i in (1, 2)]
    simulate(OpenLoop(first), [rep], make_router("round-robin"))  # X in host memory, pushed off the GPU
    t = 5.0
    r = Request(5, t, 100, 50, content=Content.of_pieces([(piece_id(Space.NAMED, 9), 100)], reply=15))
    rep.add(r, t)
    for _ in range(3):
        t += rep.start_step(t)
        rep.end_step(t)
    b = Request(6, t, 3200, 2, content=Content.of_pieces([(X, 3200)], reply=16))
    rep.add(b, t)
    policy.script = [lambda v: BatchPlan(preempt=[r], prefills=[(b, 512)]),
                     lambda v: BatchPlan(prefills=[(r, r.remaining_prefill)])]
    assert rep.start_step(t) is not None and not policy.script  # both asked at this scheduling point
    assert r.status is Status.RUNNING and r.preemptions == 1 and b in rep.loading


def test_a_loaded_head_lets_its_blocks_go_for_the_prompts_a_prefill_instance_sent_behind_it():
    """A decode instance with tiers: B's 3,200-token prefix loads from host memory while a prompt a prefill instance
    sent (195 blocks) lands, and B's load lands ahead of it; B needs 7 more blocks, 5 are free, nothing runs. The
    blocks behind the head are the sent prompt's, which have no other copy, so B lets its loaded ones go (they stay
    in the GPU prefix cache) and waits behind it; the sent prompt, which needs no new block, runs first. Before, the
    replica let go only loaded requests behind the head and waited for ever (the conservation fuzz's seed 52 with
    vllm-chunked or sarathi on the decode pool of a fleet with a decider and tiers)."""
    plan = plan_offload(parse_kv_offload("cpu:10GiB"), "vllm", M, G, 1, 16)
    rep = Replica(0, create_scheduler("vllm-chunked"), BT, ReplicaConfig(
        num_blocks=400, block_size=16, max_model_len=131072, prefix_caching=True, kv_offload=plan,
        check_invariants=True))
    first = [Request(0, 0.0, 3200, 2, content=Content.of_pieces([(X, 3200)], reply=10))]
    first += [Request(i, float(i), 3200, 2, content=Content.of_pieces([(piece_id(Space.NAMED, 2 + i), 3200)],
                                                                        reply=10 + i)) for i in (1, 2)]
    simulate(OpenLoop(first), [rep], make_router("round-robin"))  # X in host memory, pushed off the GPU
    t = 5.0
    b = Request(3, t, 3300, 2, content=Content.of_pieces([(X, 3200), (W, 100)], reply=13))
    sent = Request(4, t, 3120, 2)
    rep.add(b, t)
    assert rep.start_step(t) is None and b in rep.loading
    rep.receive(sent, t)
    assert rep.start_step(t) is None  # the scheduling point reserves the sent prompt's blocks
    for r in rep.take_reserved():
        rep.loaded(r, t)  # its transfer takes no time here
    assert sent.num_blocks == 195
    started = []
    while rep.num_outstanding:
        t = max(t, rep.clock.wake_at or t)
        d = rep.start_step(t)
        if d is None:
            assert rep.loading, f"idle with work left: {[r.id for r in rep.waiting]}, {rep.kv.free} blocks free"
            continue
        started += [r for r, _ in rep.clock.plan.prefills if r not in started]
        t += d
        rep.end_step(t)
        rep.take_completed()
    assert started[0] is sent and b.status is sent.status is Status.FINISHED
    assert rep.kv.tiers.released_loads == 1
