"""The fleet layer (llmsched/fleet/): a one-pool fleet is a plain run byte for byte, the fleet's own event loop
(sim/fleet_loop.py) gives the plain loop's rows on a fleet that does not change, heterogeneous pools run and route,
--stream works for a fleet, and a request's path may take a second stage in another pool."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from llmsched.cli import main
from llmsched.experiment import RunConfig, build_replicas, build_source, run, workload_params
from llmsched.fleet.fleet import Fleet
from llmsched.fleet.path import OnePath, Path as FleetPath, Stage
from llmsched.fleet.pool import Pool
from llmsched.fleet_setup import build_fleet, pool_configs
from llmsched.metrics.steps import StepLog
from llmsched.metrics.summary import summarize
from llmsched.request import Request, Status
from llmsched.routing.registry import make_router
from llmsched.sim.fleet_loop import simulate_fleet
from llmsched.sim.simulator import simulate

from run_files import without_wall_time

TWO_POOLS = """\
router = "least-outstanding"

[pools.a100]
gpu = "a100"
replicas = 2

[pools.h100]
gpu = "h100"
replicas = 1
"""


def cli_run(tmp_path: Path, label: str, *args: str) -> dict:
    out = tmp_path / label
    assert main(["simulate", *args, "--out", str(out), "--no-progress"]) == 0
    files = {name: (out / name).read_bytes() for name in ("requests.csv", "steps.csv")}
    files["summary.json"] = json.loads((out / "summary.json").read_text())
    files["meta.json"] = json.loads((out / "meta.json").read_text())
    return files


def rows(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode())))


def without_pool_column(data: bytes) -> bytes:
    """requests.csv less its third column, the pool (after id and replica, two integers; a pool's name has no comma
    or quote), byte for byte otherwise."""
    lines = data.split(b"\r\n")
    assert lines[0].split(b",")[:3] == [b"id", b"replica", b"pool"]
    return b"\r\n".join(b",".join(line.split(b",", 3)[:2] + line.split(b",", 3)[3:]) if line else line
                         for line in lines)


@pytest.mark.parametrize("args", [
    ["--replicas", "4", "--router", "least-load", "--rate", "10", "--num-requests", "120", "--num-blocks", "1500",
     "--tiers", "paid:tbt=0.1:share=0.2,free:tbt=0.5"],
    ["--replicas", "3", "--rate", "8", "--num-requests", "120", "--num-blocks", "600"],  # round-robin: lanes
    ["--replicas", "2", "--concurrency", "12", "--num-requests", "80", "--scheduler", "vllm"],
])
def test_a_one_pool_fleet_is_the_plain_run_byte_for_byte(tmp_path, args):
    replicas = args[args.index("--replicas") + 1]
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(f"[pools.main]\nreplicas = {replicas}\n")
    plain_args = [a for a in args]
    fleet_args = [a for i, a in enumerate(args) if a != "--replicas" and (i == 0 or args[i - 1] != "--replicas")]
    plain = cli_run(tmp_path, "plain", *plain_args)
    pooled = cli_run(tmp_path, "fleet", "--fleet", str(fleet), *fleet_args)
    assert pooled["steps.csv"] == plain["steps.csv"]
    assert b"pool" not in plain["requests.csv"].split(b"\r\n")[0]
    assert without_pool_column(pooled["requests.csv"]) == plain["requests.csv"]
    fleet_section = pooled["summary.json"].pop("fleet")
    assert "fleet" not in plain["summary.json"]
    assert without_wall_time(pooled["summary.json"]) == without_wall_time(plain["summary.json"])
    pool = fleet_section["pools"]["main"]
    assert pool["finished"] + pool["rejected"] + pool["unfinished"] == plain["summary.json"]["counts"]["offered"]
    assert pool["billed_replica_s"] == pytest.approx(int(replicas) * plain["summary.json"]["run"]["end_time"])
    assert pooled["meta.json"]["fleet"]["pools"]["main"]["replicas"] == int(replicas)
    assert "fleet" not in plain["meta.json"]


def plain_and_fleet_loop(cfg: RunConfig):
    """``cfg`` run by ``simulate`` (one event loop, no lanes) and by the fleet's loop on the same replicas."""
    source = build_source(cfg)
    replicas = build_replicas(cfg, workload_params(cfg, source))
    plain = simulate(source, replicas, make_router(cfg.router, cfg.router_params), horizon=cfg.horizon, seed=cfg.seed,
                     lanes=False)
    fleet = Fleet.single(cfg.replicas)
    state = build_fleet(cfg, fleet, build_source(cfg), StepLog(), pool_configs(cfg, fleet))
    looped = simulate_fleet(build_source(cfg), state, horizon=cfg.horizon, seed=cfg.seed)
    return plain, looped


LOOP_CONFIGS = {
    "least-outstanding": dict(replicas=3, router="least-outstanding", rate=12.0, num_requests=100, num_blocks=400),
    "kv-pressure-swap": dict(replicas=2, router="round-robin", rate=20.0, num_requests=80, num_blocks=250,
                             preemption_mode="swap", scheduler="vllm"),
    "closed-loop": dict(replicas=2, router="least-load", concurrency=10, num_requests=60),
    "horizon-tiers": dict(replicas=3, router="random", rate=25.0, num_requests=150, horizon=4.0,
                          tiers="paid:ttft=1:tbt=0.1:share=0.3,free:ttft=5:tbt=0.5"),
    "async-vllm-v1": dict(replicas=2, router="vllm-dp-latest", rate=10.0, num_requests=80, batch_time="vllm-v1",
                          scheduler="vllm-chunked"),
    "prefix-affinity": dict(replicas=3, router="prefix-affinity", workload="shared-prefix", rate=8.0,
                            workload_params={"num_groups": 3, "num_prompts_per_group": 4, "system_prompt_len": 600,
                                             "question_len": 30, "output_len": 20}, scheduler="vllm-chunked"),
}


@pytest.mark.parametrize("name", sorted(LOOP_CONFIGS))
def test_the_fleet_loop_gives_the_plain_loops_rows_when_nothing_joins_or_leaves(name):
    plain, looped = plain_and_fleet_loop(RunConfig(**LOOP_CONFIGS[name]))
    assert len(plain.requests) > 0
    for key, col in plain.requests.cols.items():
        assert looped.requests.cols[key].tobytes() == col.tobytes(), key
    assert plain.requests.reasons == looped.requests.reasons
    for key, col in plain.steps.columns().items():
        assert np.array_equal(np.asarray(looped.steps.columns()[key]), np.asarray(col), equal_nan=True), key
    assert looped.end_time == plain.end_time
    assert [r["steps"] for r in looped.replica_stats] == [r["steps"] for r in plain.replica_stats]
    assert looped.fleet["pools"]["default"]["replicas_made"] == LOOP_CONFIGS[name]["replicas"]


def test_two_heterogeneous_pools_run_and_route(tmp_path):
    fleet = tmp_path / "two.toml"
    fleet.write_text(TWO_POOLS)
    files = cli_run(tmp_path, "two", "--fleet", str(fleet), "--model", "llama-3-8b", "--rate", "9",
                    "--num-requests", "240")
    rows = globals()["rows"](files["requests.csv"])
    assert len(rows) == 240 and all(r["status_name"] == "FINISHED" for r in rows)
    by_pool = {(r["replica"], r["pool"]) for r in rows}
    assert by_pool == {("0", "a100"), ("1", "a100"), ("2", "h100")}  # indices across the fleet, pools in order
    served = {k: sum(1 for r in rows if r["replica"] == k) for k in "012"}
    # least-outstanding over both pools: the H100 (3.35 TB/s of HBM3 and 989 dense BF16 TFLOP/s, against the A100's
    # 2.04 TB/s and 312) drains its requests faster, so it takes more of them than either A100
    assert served["2"] > max(served["0"], served["1"])
    pools = files["summary.json"]["fleet"]["pools"]
    assert pools["a100"]["finished"] == served["0"] + served["1"] and pools["h100"]["finished"] == served["2"]
    meta = files["meta.json"]["fleet"]
    assert meta["routers"] == {"serve": "least-outstanding"}
    assert meta["pools"]["a100"]["batch_time"]["gpu"] == "a100" and meta["pools"]["h100"]["batch_time"]["gpu"] == "h100"
    steps = globals()["rows"](files["steps.csv"])
    assert {s["replica"] for s in steps} == {"0", "1", "2"}


def test_pools_take_their_own_scheduler_and_the_run_keeps_its_parameters_for_its_own(tmp_path):
    fleet = tmp_path / "mixed.toml"
    fleet.write_text('[pools.chunked]\nreplicas = 1\n\n[pools.plain]\nscheduler = "vllm"\nreplicas = 1\n')
    cfg = RunConfig.from_dict({"fleet": str(fleet), "scheduler": "sarathi", "scheduler_params": {"token_budget": 256},
                               "rate": 4.0, "num_requests": 40})
    configs = pool_configs(cfg, cfg.fleet.value)
    assert configs["chunked"].scheduler_params == {"token_budget": 256}
    assert configs["plain"].scheduler == "vllm" and configs["plain"].scheduler_params == {}
    result = run(cfg)
    assert result.meta["fleet"]["pools"]["plain"]["scheduler"]["name"] == "vllm"
    assert summarize(result)["counts"]["finished"] == 40


def test_a_fleet_streams(tmp_path):
    fleet = tmp_path / "scaled.toml"
    fleet.write_text(TWO_POOLS + "\n[[scale]]\nat = 5.0\npool = \"h100\"\nreplicas = 2\n")
    common = ["--fleet", str(fleet), "--rate", "9", "--num-requests", "120", "--sketch", "--latency-boundary", "engine"]
    kept = cli_run(tmp_path, "kept", *common)
    out = tmp_path / "streamed"
    assert main(["simulate", *common, "--stream", "--out", str(out), "--no-progress"]) == 0
    assert (out / "requests.csv").read_bytes() == kept["requests.csv"]
    assert (out / "steps.csv").read_bytes() == kept["steps.csv"]
    streamed = json.loads((out / "summary.json").read_text())
    for name, pool in kept["summary.json"]["fleet"]["pools"].items():
        for key in ("finished", "rejected", "unfinished", "aborted", "replicas_made", "billed_gpu_s"):
            assert streamed["fleet"]["pools"][name][key] == pool[key]


@pytest.mark.parametrize("stream", [False, True])
def test_each_pools_counts_add_up_to_its_requests_with_aborts(tmp_path, stream):
    """A client timeout aborts requests in their pools: each pool counts them (finished + rejected + unfinished +
    aborted = the requests it ended), kept or streamed alike, and the pools together are the run's requests."""
    out = tmp_path / "run"
    args = ["simulate", "--disaggregate", "1P1D", "--num-requests", "120", "--rate", "6", "--client-timeout", "5",
            "--out", str(out), "--no-progress"] + (["--stream"] if stream else [])
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    table = rows((out / "requests.csv").read_bytes())
    assert summary["counts"]["aborted"] > 0
    total = 0
    for name, pool in summary["fleet"]["pools"].items():
        mine = [r for r in table if r["pool"] == name]
        assert pool["aborted"] == sum(r["status_name"] == "ABORTED" for r in mine)
        assert pool["finished"] + pool["rejected"] + pool["unfinished"] + pool["aborted"] == len(mine)
        total += len(mine)
    assert total == summary["counts"]["offered"] == 120


def test_a_second_stage_in_another_pool_takes_the_request_on():
    """The hook a disaggregated path needs, with a handoff of our own (not a KV transfer): the first stage serves
    the prompt and one token (as vLLM's disaggregation proxy sends the prefill instance ``max_tokens=1``), then the
    request enters the second pool 0.25 s later as a new request of its whole length; only that one is recorded,
    on its second-pool replica, and its latency counts from the client's send."""
    delay = 0.25
    stage_ends: dict[int, float] = {}

    def first_stage_only(req: Request) -> Request:
        return Request(req.id, req.arrival, req.prompt_len, 1, req.tier, req.tenant, req.content)

    def handoff(req: Request, now: float):
        stage_ends[req.id] = now
        assert req.status is Status.FINISHED and req.num_generated == 1
        return originals[req.id], now + delay

    class FirstStage:
        """The run's source with each request's first stage in its place."""

        def __init__(self, source):
            self.source = source
            self.done_adds_requests = False

        def initial(self):
            for r in self.source.initial():
                originals[r.id] = r
                yield first_stage_only(r)

        def on_done(self, req, now):
            return self.source.on_done(req, now)

    originals: dict[int, Request] = {}
    two_stage = FleetPath((Stage("first"), Stage("second")), (handoff,))
    fleet = Fleet((Pool("front", 1, role="first"), Pool("back", 2, role="second")), paths=OnePath(two_stage))
    cfg = RunConfig(rate=4.0, num_requests=30, router="round-robin", latency_boundary="engine", batch_time="roofline")
    state = build_fleet(cfg, fleet, build_source(cfg), StepLog(), pool_configs(cfg, fleet))
    result = simulate_fleet(FirstStage(build_source(cfg)), state, seed=cfg.seed)
    log = result.requests
    assert len(log) == 30 and sorted(log.cols["id"]) == list(range(30))
    assert set(log.cols["status"]) == {int(Status.FINISHED)}
    assert len(stage_ends) == 30
    assert set(log.cols["replica"]) == {1, 2}  # the back pool's replicas (the front one is replica 0)
    assert state.replicas[0].num_steps > 0 and result.fleet["pools"]["front"]["busy_s"] > 0
    for i, rid in enumerate(log.cols["id"]):
        r = originals[rid]
        assert r.first_scheduled >= stage_ends[rid] + delay
        assert log.cols["arrival"][i] == r.arrival < stage_ends[rid]
        assert log.cols["generated"][i] == r.output_len
    assert result.fleet["busy_s"] > 0


def test_a_fleet_refuses_what_it_cannot_run(tmp_path):
    fleet = tmp_path / "f.toml"
    fleet.write_text("[pools.a]\nreplicas = 2\n")
    with pytest.raises(ValueError, match="replicas does not apply together with fleet"):
        RunConfig(fleet=str(fleet), replicas=3)
    with pytest.raises(ValueError, match="dp does not apply together with fleet"):
        RunConfig(fleet=str(fleet), dp=2)
    assert RunConfig(fleet=str(fleet), dp=1).fleet.value.pools[0].replicas == 2


def test_the_pool_fields_are_run_fields():
    from llmsched.fleet.pool import POOL_FIELDS
    from llmsched.run_config import RUN_FIELDS
    assert set(POOL_FIELDS) <= set(RUN_FIELDS)
    assert np.all([name not in POOL_FIELDS for name in ("rate", "trace", "seed", "horizon", "dp", "fleet")])


def test_the_fleet_file_in_the_docs_runs(tmp_path):
    """docs/fleet.md's example, as written (a shorter run: both of its scale events still happen)."""
    import re
    doc = (Path(__file__).resolve().parents[1] / "docs" / "fleet.md").read_text()
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(re.search(r"```toml\n(.*?)```", doc, re.S).group(1))
    assert "llmsched simulate --fleet fleet.toml --model llama-3-8b --rate 12 --duration 600" in doc
    files = cli_run(tmp_path, "doc", "--fleet", str(fleet), "--model", "llama-3-8b", "--rate", "12",
                    "--duration", "450")
    section = files["summary.json"]["fleet"]
    assert section["scale_events"] == 2 and section["unrouted"] == 0
    h100 = section["pools"]["h100"]
    assert h100["replicas_made"] == 3 and h100["replicas_max"] == 3
    rows = [(r["t"], r["serving"], r["draining"]) for r in h100["timeline"]]
    assert rows[:6] == [(0.0, 1, 0), (60.0, 1, 0), (80.0, 1, 0), (120.0, 1, 0), (125.0, 3, 0), (400.0, 1, 2)]
    assert files["meta.json"]["fleet"]["pools"]["h100"]["scheduler"]["name"] == "vllm-chunked"


def test_a_pool_whose_limits_its_policy_can_never_run_under_is_refused_before_the_run():
    """deferred-prefill's K must fit the batch size C (max_num_seqs by default): a second pool with max_num_seqs 1
    is refused when the fleet is built, naming the pool. Before, the policy found out at its first step, in the
    middle of the run (the full-size fuzz's seed 7051)."""
    cfg = RunConfig(scheduler="deferred-prefill", scheduler_params={"K": 4}, workload="sharegpt", rate=2.0,
                    num_requests=20)
    fleet = Fleet((Pool("a", 1), Pool("b", 1, fields={"max_num_seqs": 1})))
    with pytest.raises(ValueError, match=r"pool 'b': deferred-prefill: K=4 exceeds the batch size C=1"):
        build_fleet(cfg, fleet, build_source(cfg), StepLog())
