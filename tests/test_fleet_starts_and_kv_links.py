"""A fleet's pools at the run's start and the link between its pools: an autoscaled pool of a fleet file or of
``--disaggregate xPyD`` starts at its minimum (as a plain run does); the summary's timeline and ``replicas_max``
count the starting replicas even where an autoscaler gives some up at t = 0; no NVLink joins two GPU types."""
from __future__ import annotations

import pytest

from llmsched.experiment import RunConfig, build_source
from llmsched.fleet_setup import fleet_of, simulate_fleet_config
from llmsched.hardware.links import kv_link, link

ENGINE = dict(latency_boundary="engine", batch_time="roofline")
PD_FILE = ('[pools.p]\nrole = "prefill"\ngpu = "h100"\nreplicas = 1\n'
           '[pools.d]\nrole = "decode"\ngpu = "a100"\nreplicas = 2\n')


def sizes(**fields) -> dict:
    return {p.name: p.replicas for p in fleet_of(RunConfig(**{**ENGINE, **fields})).pools}


def test_an_autoscaled_xpyd_pool_starts_at_its_minimum():
    assert sizes(disaggregate="1P1D", autoscaler="kpa", min_replicas=2) == {"prefill": 2, "decode": 2}
    assert sizes(disaggregate="3P1D", autoscaler="kpa", min_replicas=2) == {"prefill": 3, "decode": 2}
    assert sizes(disaggregate="1P1D", autoscaler="kpa", min_replicas=2,
                 prefill_pool={"min_replicas": 4}) == {"prefill": 4, "decode": 2}  # a pool's own bound wins
    assert sizes(disaggregate="1P1D") == {"prefill": 1, "decode": 1}  # no autoscaler: xPyD as written


def test_an_autoscaled_fleet_file_pool_starts_at_its_minimum(tmp_path):
    path = tmp_path / "pd.toml"
    path.write_text(PD_FILE)
    assert sizes(fleet=str(path), autoscaler="kpa", min_replicas=2) == {"p": 2, "d": 2}
    assert sizes(fleet=str(path), autoscaler="kpa", min_replicas=3) == {"p": 3, "d": 3}
    assert sizes(fleet=str(path)) == {"p": 1, "d": 2}


def test_an_autoscaled_pool_above_its_maximum_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"^--disaggregate 20P1D: pool 'prefill' starts with 20 replicas, above its "
                                         r"max_replicas 16: .*raise max_replicas \(--max-replicas\)$"):
        fleet_of(RunConfig(**ENGINE, disaggregate="20P1D", autoscaler="kpa"))
    path = tmp_path / "big.toml"
    path.write_text("[pools.s]\nreplicas = 5\n")
    with pytest.raises(ValueError, match="big.toml: pool 's' starts with 5 replicas, above its max_replicas 4"):
        fleet_of(RunConfig(**ENGINE, fleet=str(path), autoscaler="kpa", max_replicas=4))


def test_the_disaggregated_run_serves_its_minimum_from_the_start():
    cfg = RunConfig(**ENGINE, disaggregate="1P1D", autoscaler="kpa", min_replicas=2, duration=30, rate=2,
                    cold_start=5)
    result, _ = simulate_fleet_config(cfg, build_source(cfg))
    for name, pool in result.fleet["pools"].items():
        assert (pool["replicas_at_start"], pool["replicas_made"]) == (2, 2), name
        assert pool["timeline"][0]["serving"] == 2 and pool["timeline"][0]["provisioning"] == 0


def test_a_pool_shrunk_at_t0_shows_its_start_then_the_shrink():
    """The predictive autoscaler sizes the pool at t = 0, before any other change: the timeline's first row is the
    run's three replicas, the next (also t = 0) the one it keeps; replicas_max counts the three."""
    cfg = RunConfig(**ENGINE, autoscaler="predictive", replicas=3, duration=20, rate=6, workload="azure-conv",
                    cold_start=10)
    result, _ = simulate_fleet_config(cfg, build_source(cfg))
    pool = result.fleet["pools"]["default"]
    rows = pool["timeline"]
    assert (rows[0]["t"], rows[0]["serving"]) == (0.0, 3)
    assert (rows[1]["t"], rows[1]["serving"]) == (0.0, 1)
    assert pool["replicas_max"] == pool["replicas_at_start"] == 3


def test_a_pool_unchanged_at_t0_has_one_t0_row():
    cfg = RunConfig(**ENGINE, autoscaler="kpa", replicas=2, duration=20, rate=2, cold_start=5)
    result, _ = simulate_fleet_config(cfg, build_source(cfg))
    rows = result.fleet["pools"]["default"]["timeline"]
    assert rows[0] == {"t": 0.0, "provisioning": 0, "loading": 0, "warm": 0, "serving": 2, "draining": 0}
    assert all(row["t"] > 0 for row in rows[1:])


def test_no_nvlink_between_two_gpu_types():
    for text in ("same-node", "nvlink5", "nvlink3", "NVLink4"):
        with pytest.raises(ValueError, match=r"h100 \(prefill\) and a100 \(decode\) share no NVLink domain .*"
                                             r"give a network link: ib-400g"):
            kv_link(text, "h100", "a100")
    with pytest.raises(ValueError, match=r"l40s \(prefill\) and h100 \(decode\) share no NVLink"):
        kv_link("same-node", "l40s", "h100")  # either side's NVLink: no domain holds both
    assert kv_link("same-node", "h100", "h100") == link("same-node", "h100")  # one type: its own NVLink
    assert kv_link("same-node", "a100", "a100").name == "nvlink3"
    assert kv_link("same-node", "l40s", "l4") == link("same-node", "l4")  # PCIe cards: the decode card's PCIe
    assert kv_link("ib-400g", "h100", "a100").name == "ib-400g"
    assert kv_link("roce-200g", "h100", "a100").name == "ib-200g"


def test_a_mixed_gpu_run_refuses_an_nvlink_and_defaults_to_the_network(tmp_path):
    cfg = RunConfig(**ENGINE, disaggregate="1P1D", kv_link="same-node", prefill_gpu="h100", decode_gpu="a100",
                    num_requests=4, rate=2)
    with pytest.raises(ValueError, match=r"^--disaggregate 1P1D: --kv-link from pool 'prefill' to pool 'decode': "
                                         r"link 'same-node': h100 \(prefill\) and a100 \(decode\) share no NVLink"):
        simulate_fleet_config(cfg, build_source(cfg))
    path = tmp_path / "pd.toml"
    path.write_text(PD_FILE)
    cfg = RunConfig(**ENGINE, fleet=str(path), kv_link="nvlink4", num_requests=4, rate=2)
    with pytest.raises(ValueError, match="pd.toml: --kv-link from pool 'p' to pool 'd': link 'nvlink4'"):
        simulate_fleet_config(cfg, build_source(cfg))
    cfg = RunConfig(**ENGINE, disaggregate="1P1D", prefill_gpu="h100", decode_gpu="a100", num_requests=4, rate=2)
    _, state = simulate_fleet_config(cfg, build_source(cfg))
    assert state.transfers.link.name == "ib-400g"
    cfg = RunConfig(**ENGINE, disaggregate="1P1D", kv_link="same-node", gpu="h100", num_requests=4, rate=2)
    _, state = simulate_fleet_config(cfg, build_source(cfg))
    assert state.transfers.link.name == "nvlink4"
