"""`llmsched fidelity`'s checks on a real run's records (no vLLM needed): overload detection, the run's cycles."""
from array import array

from llmsched.metrics.requests import RequestLog
from llmsched.metrics.steps import StepLog
from llmsched.request import Request, Status
from llmsched.sim.simulator import RunResult
from llmsched.vllm.fidelity import overload, run_cycles


def records(finish_of, queue_of, n=40, rate=2.0, steps=60):
    """A run of ``n`` requests arriving every 1/rate s, request i finishing at ``finish_of(i, arrival)``, and
    ``steps`` back-to-back 0.1 s steps with ``queue_of(k)`` requests waiting after step k."""
    reqs = [Request(i, i / rate, 50, 20) for i in range(n)]
    log = RequestLog()
    for r in reqs:
        r.status = Status.FINISHED
        r.first_token = r.arrival + 0.05
        r.finish = r.last_token = finish_of(r.id, r.arrival)
        r.token_times = array("d", [r.first_token, r.finish])
        r.num_generated = 2
        log.record(r)
    st = StepLog()
    for k in range(steps):
        st.add(0, 0.1 * k, 0.08, 10, 1, 2, 100, 4, 31, queue_of(k), 2, 0)
    return reqs, RunResult(log, st, 0.1 * steps, 1.0)


def test_a_run_that_keeps_up_is_not_overloaded():
    reqs, result = records(lambda i, a: a + 0.4, lambda k: 1)
    assert overload(reqs, result) is None


def test_throughput_below_the_offered_rate_is_an_overload():
    reqs, result = records(lambda i, a: 1.0 * i + 0.4, lambda k: 1)  # served at 1 req/s, offered 2 req/s
    why = overload(reqs, result)
    assert why and "of the 2.00 req/s offered" in why


def test_a_growing_queue_is_an_overload():
    reqs, result = records(lambda i, a: a + 0.4, lambda k: k // 4)
    why = overload(reqs, result)
    assert why and "queue grew" in why


def test_run_cycles_are_start_to_next_start_of_busy_steps():
    _, result = records(lambda i, a: a + 0.4, lambda k: 0 if k == 10 else 1)
    st = result.steps
    st.arrays()["num_running"][10] = 0  # the engine went idle after step 10: that gap is not a cycle
    cols = run_cycles(st)
    # left out: the last step (no next start), step 10 (the engine went idle after it), and the steps that start
    # cold, the first and step 11 (their slowdown is the profile's wake term, not a cycle to fit)
    assert len(cols["duration"]) == len(st) - 4
    assert all(abs(d - 0.1) < 1e-9 for d in cols["duration"])
    assert set(cols) == {"duration", "prefill_tokens", "num_prefills", "num_decodes", "context_sum"}
