"""capacity with a client timeout: requests the client gives up on are unserved work at every rate (capacity/
stability.py), so a timeout shorter than the requests' own service leaves no rate; the note says that, not only
"overloaded"."""
from __future__ import annotations

from llmsched.capacity.rate_search import find_capacity
from llmsched.capacity.slo import parse_slos
from llmsched.run_config import RunConfig


def test_a_timeout_shorter_than_the_requests_own_service_is_named_as_the_reason_no_rate_meets():
    """ShareGPT's outputs on Llama-3-8B/A100: with a 5 s client timeout about half the requests outlast it even
    alone (the longest outputs take 5 s of decode steps), so every probe sheds them; before, the note said only
    'stability: overloaded' down to 0.0025 req/s. With a 60 s timeout the same search finds a capacity."""
    slos = parse_slos("ttft_p90<=2")
    short = find_capacity(RunConfig(workload="sharegpt", num_requests=300, client_timeout=5.0), slos)
    assert short.capacity is None
    low = min(short.probes, key=lambda p: p.rate)
    counts = low.records[0]["counts"]
    assert counts["aborted"] > 0.3 * counts["measured"]
    assert f"{counts['aborted']} of {counts['measured']} measured requests were aborted by the client timeout" \
        in short.note
    assert "raise --client-timeout" in short.note
    long = find_capacity(RunConfig(workload="sharegpt", num_requests=300, client_timeout=60.0), slos)
    assert long.capacity is not None and long.capacity > 1.0
    assert all(p.records[0]["counts"]["aborted"] == 0 for p in long.probes if p.meets)


def test_a_disaggregated_fleet_with_a_client_timeout_has_a_capacity():
    """The fleet loop aborts too (sim/fleet_loop.py): a 1P1D capacity search with a 15 s client timeout runs, its
    probes count the requests the timeout ended, and shedding them does not pass for keeping up: the capacity is
    below the one without a timeout (ShareGPT's longest outputs take most of 15 s on an A100 decode instance)."""
    slos = parse_slos("ttft_p90<=2")
    cfg = RunConfig(workload="sharegpt", num_requests=300, disaggregate="1P1D")
    free = find_capacity(cfg, slos)
    timed = find_capacity(cfg.with_values(client_timeout=15.0), slos)
    assert free.capacity is not None and timed.capacity is not None
    assert 0.3 * free.capacity < timed.capacity < free.capacity
    assert any(p.records[0]["counts"].get("aborted", 0) > 0 for p in timed.probes)
