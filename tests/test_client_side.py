"""Latencies where the client measures them: the send time kept beside the engine's stamps, the front end's costs,
vLLM's stream_interval, client timeouts, and the engine boundary unchanged."""
import math

import numpy as np
import pytest

from llmsched.experiment import run
from llmsched.hardware.front_end import SERVE, FrontEnd, front_end
from llmsched.metrics.summary import summarize
from llmsched.request import Request, Status
from llmsched.run_config import RunConfig
from llmsched.workload.client_sends import client_sends
from llmsched.workload.workload import OpenLoop

SMALL = dict(model="llama-3-8b", gpu="a100", rate=4.0, num_requests=60, seed=3)


def columns(result, *names):
    log = result.requests
    return [log.column(n).copy() for n in names]


def test_client_boundary_without_a_front_end_is_the_engine_boundary():
    """With no front end and an engine that admits at once, the client's figures are the engine's: the same rows."""
    at_once = {**SMALL, "batch_time": "roofline"}  # vllm-v1 admits after the step in flight (async scheduling)
    engine = run(RunConfig(**at_once, latency_boundary="engine"))
    client = run(RunConfig(**at_once, latency_boundary="client", front_end="none"))
    for name in ("id", "arrival", "first_token", "finish", "ttft", "e2e"):
        a, b = columns(engine, name)[0], columns(client, name)[0]
        assert np.array_equal(a, b, equal_nan=True), name
    # TPOT as vllm bench serve computes it, (E2E - TTFT)/(output - 1): the engine's up to rounding
    np.testing.assert_allclose(columns(client, "tpot")[0], columns(engine, "tpot")[0], rtol=1e-9)
    assert np.array_equal(columns(client, "queued")[0], columns(engine, "arrival")[0])
    assert np.array_equal(columns(client, "engine_ttft")[0], columns(engine, "ttft")[0], equal_nan=True)


def test_the_client_sees_the_front_end_on_both_sides_of_the_engine():
    result = run(RunConfig(**{**SMALL, "gpu": "h100"}, scheduler="vllm-chunked", batch_time="vllm-v1"))
    sent, queued, first, finish, ttft, e2e, engine_ttft, prompt, status = columns(
        result, "arrival", "queued", "first_token", "finish", "ttft", "e2e", "engine_ttft", "prompt_len", "status")
    done = status == int(Status.FINISHED)
    assert done.all()
    fe = front_end("vllm-serve")
    # the request reaches the engine after its front-end path, and waits there for the step in flight
    assert (queued - sent >= np.array([fe.request_delay(p) for p in prompt]) - 1e-12).all()
    assert (queued - sent > fe.request_delay(1) + 1e-4).any()  # some found a step in flight (async admission)
    np.testing.assert_allclose(engine_ttft, first - queued)
    out_first = ttft - (first - sent)
    out_last = e2e - (finish - sent)
    for out in (out_first, out_last):  # fixed part plus the per-request part of the step's batch
        assert (out >= fe.output_fixed + fe.output_per_request - 1e-12).all()
        assert (out <= fe.output_fixed + fe.output_per_request * 1024).all()
    assert out_last.max() > out_last.min()  # batches differ from step to step
    summary = summarize(result)
    assert summary["run"]["latency_boundary"] == "client"
    assert summary["latency"]["ttft"]["p50"] > summary["engine_latency"]["ttft"]["p50"]
    assert result.meta["front_end"]["name"] == "vllm-serve"


def test_the_last_chunk_never_reaches_the_client_before_the_first(tmp_path):
    """A stream reaches its client in order. The first chunk's path is the longer one (the stream's start), so with
    a one-token output, or decode steps shorter than that difference, finish + output delay would come before first
    token + first output delay: E2E under TTFT and a negative TPOT. The E2E is then the TTFT."""
    fe = front_end("vllm-serve")
    assert fe.first_output_delay(1) > fe.output_delay(1)  # what makes the case possible
    trace = tmp_path / "trace.csv"
    trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" +
                     "".join(f"{0.05 * i},64,{1 if i % 2 else 4}\n" for i in range(20)))
    result = run(RunConfig(trace=str(trace), rate=None, model="meta-llama/Llama-3.2-1B-Instruct", gpu="h200",
                           scheduler="vllm-chunked", latency_boundary="client"))
    ttft, e2e, tpot, output = columns(result, "ttft", "e2e", "tpot", "output_len")
    assert (e2e >= ttft).all() and (tpot[output > 1] >= 0).all()
    one = output == 1
    assert one.sum() == 10 and np.array_equal(e2e[one], ttft[one])  # a one-token stream: its one chunk


def test_a_long_prompt_sent_first_can_reach_the_engine_second():
    slow = FrontEnd("slow-tokeniser", "a slow tokeniser, for this test", request_fixed=1e-3, per_prompt_token=1e-5)
    long, short = Request(0, 0.0, 4000, 10), Request(1, 0.001, 10, 10)
    order = list(client_sends(OpenLoop([long, short]), slow).initial())
    assert [r.id for r in order] == [1, 0]
    assert long.sent == 0.0 and long.arrival == pytest.approx(0.041)
    assert short.sent == 0.001 and short.arrival == pytest.approx(0.0021)


def test_stream_interval_sends_tokens_in_chunks():
    base = dict(**SMALL, front_end="none")
    one = run(RunConfig(**base))
    four = run(RunConfig(**base, stream_interval=4))
    gaps1, gaps4 = one.requests.column("num_gaps"), four.requests.column("num_gaps")
    assert np.array_equal(gaps4, -(-gaps1 // 4))  # one gap per chunk after the first token
    for log in (one.requests, four.requests):  # every request's gaps still add up to its first-to-last span
        off, n = log.column("gap_offset"), log.column("num_gaps")
        gaps = np.frombuffer(log.gaps, dtype=np.float64)
        spans = np.array([gaps[o:o + k].sum() for o, k in zip(off, n)])
        ok = log.column("status") == int(Status.FINISHED)
        np.testing.assert_allclose(spans[ok], (log.column("tpot") * (log.column("output_len") - 1))[ok], rtol=1e-9)
    np.testing.assert_array_equal(one.requests.column("ttft"), four.requests.column("ttft"))
    assert summarize(four)["latency"]["tbt"]["p50"] > 3 * summarize(one)["latency"]["tbt"]["p50"]


@pytest.mark.parametrize("extra", [dict(), dict(scheduler="vllm-chunked", batch_time="vllm-v1", gpu="h100"),
                                   dict(concurrency=40)])
def test_a_client_timeout_aborts_requests_and_frees_their_kv(extra):
    cfg = {**SMALL, "rate": 40.0, "num_requests": 200, "check_invariants": True, **extra}
    if cfg.get("concurrency"):
        del cfg["rate"]
    free = run(RunConfig(**cfg))
    result = run(RunConfig(**cfg, client_timeout=20.0))
    status = result.requests.column("status")
    aborted = status == int(Status.ABORTED)
    assert aborted.any() and len(status) == 200  # every request accounted: finished, aborted (or rejected)
    assert ((status == int(Status.FINISHED)) | aborted | (status == int(Status.REJECTED))).all()
    sent, finish = result.requests.column("arrival"), result.requests.column("finish")
    assert (finish[aborted] >= sent[aborted] + 20.0).all()  # aborted after the timeout, when the engine heard it
    assert all("client timeout" in result.requests.reasons[i] for i in result.requests.column("id")[aborted])
    summary, before = summarize(result), summarize(free)
    assert summary["counts"]["aborted"] == int(aborted.sum())
    assert summary["goodput"]["good_requests"] <= int((status == int(Status.FINISHED)).sum())
    assert (status == int(Status.FINISHED)).any()
    # the aborted requests' KV went back (check_invariants checked the blocks at every step): the engine stops
    # working on them, so the run ends sooner than when every request was served
    assert result.end_time < free.end_time
    assert before["counts"].get("aborted") is None


def test_a_stream_refuses_the_client_boundary():
    with pytest.raises(ValueError, match="--latency-boundary engine"):
        run(RunConfig(**SMALL, keep_gaps=False), stream=True)


@pytest.mark.parametrize("fleet", [dict(), dict(disaggregate="1P1D")])
def test_a_streamed_run_counts_its_aborts_as_a_plain_one_does(fleet):
    """plan-day's days are streamed: a client timeout there counts the same aborts, misses in goodput."""
    from llmsched.metrics.stream_summary import summarize_stream
    cfg = RunConfig(**{**SMALL, "rate": 40.0, "num_requests": 200, **fleet}, keep_gaps=False,
                    latency_boundary="engine", client_timeout=20.0)
    plain, streamed = summarize(run(cfg)), summarize_stream(run(cfg, stream=True))
    assert streamed["counts"]["aborted"] == plain["counts"]["aborted"] > 0
    assert streamed["counts"]["finished"] == plain["counts"]["finished"]
    assert streamed["goodput"]["good_requests"] == plain["goodput"]["good_requests"]


def test_each_front_end_term_is_checked():
    with pytest.raises(ValueError, match="output_fixed"):
        FrontEnd("x", "a bad term, for this test", output_fixed=-1.0)
    with pytest.raises(ValueError, match="unknown front end"):
        front_end("nginx")
    assert SERVE.request_delay(1000) > SERVE.request_delay(10) > 0
    assert math.isclose(SERVE.output_delay(0), SERVE.output_fixed)


def test_a_closed_loop_client_sends_its_next_turn_after_the_last_byte_and_its_think_time():
    result = run(RunConfig(workload="azure-conv", concurrency=3, turns=4, think_time=2.0, num_requests=24,
                           rate=None, num_blocks=20000, model="llama-3.1-8b"))
    sent, finish = result.requests.column("arrival"), result.requests.column("finish")
    fe = front_end("vllm-serve")
    for a in sent[sent > 0]:  # sent after an engine finish + the output path (at least its fixed part) + 2 s
        lag = a - 2.0 - finish
        assert ((lag >= fe.output_fixed - 1e-9) & (lag <= fe.output_delay(1024))).any()


def test_the_tables_show_aborted_requests_only_where_a_timeout_ended_some(capsys):
    from llmsched.cli import main
    args = ["simulate", "--num-requests", "120", "--rate", "40", "--no-progress"]
    assert main(args) == 0
    assert "aborted" not in capsys.readouterr().out.splitlines()[0]
    assert main(args + ["--client-timeout", "10"]) == 0
    header, _, row = capsys.readouterr().out.splitlines()[:3]
    names, cells = header.split(), row.split()
    assert names[:4] == ["scheduler", "finished", "rejected", "aborted"]
    assert int(cells[1]) + int(cells[2]) + int(cells[3]) == 120 and int(cells[3]) > 0
