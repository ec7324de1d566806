"""summary.json's figures recomputed independently from requests.csv (and each request's kept gaps), on runs the other
tests do not list: SLO tiers with rejections, tenants, client timeouts, a horizon cut, a prefix cache, a warm-up and
cool-down window, a single request, one-token outputs, sessions, disaggregation and vLLM's stream_interval; and the
same per-request data fed to ``vllm bench serve``'s own ``calculate_metrics`` (vllm/benchmarks/serve.py), whose
definitions the summary's follow (docs/metrics.md lists each definition and its source)."""
import csv
import functools
import math

import numpy as np
import pytest

from llmsched.experiment import run
from llmsched.metrics.summary import summarize
from llmsched.metrics.writers import write_run
from llmsched.run_config import RunConfig

BASE = dict(model="llama-3-8b", gpu="a100", seed=5)
TIERS = "paid:ttft=0.5:tbt=0.1:share=0.3,free:tpot=0.05"
RUNS = {
    "tiers-rejections": dict(rate=30.0, num_requests=150, tiers=TIERS, max_model_len=2048),
    "tenants": dict(tenants="a:rate=6,b:rate=2:weight=2", num_requests=120, scheduler="vtc",
                    tiers="std:ttft=1:tbt=0.1"),
    "client-timeout": dict(rate=40.0, num_requests=150, client_timeout=8.0, tiers="std:ttft=2:tpot=0.1"),
    "horizon": dict(rate=20.0, num_requests=150, horizon=10.0, tiers="std:ttft=1:tbt=0.2"),
    "prefix-cache": dict(workload="shared-prefix", rate=5.0, num_requests=80, tiers="std:ttft=0.2:tpot=0.03"),
    "window": dict(rate=10.0, num_requests=150, warmup=3.0, cooldown=3.0, tiers="std:ttft=0.3:tpot=0.04"),
    "single": dict(rate=1.0, num_requests=1),
    "one-token": dict(rate=8.0, num_requests=60, tiers="std:ttft=0.5:tpot=0.02:tbt=0.05"),  # lengths: one_token()
    "sessions": dict(concurrency=8, turns=3, num_requests=60, think_time=1.0),
    "disaggregated": dict(disaggregate="1P1D", rate=4.0, num_requests=60, tiers="std:ttft=0.5:tpot=0.05"),
    "stream-interval": dict(num_requests=60, stream_interval=4, tenants="a:rate=6,b:rate=2",
                            tiers="std:tbt=0.05"),
    "engine-boundary": dict(rate=12.0, num_requests=80, latency_boundary="engine", tiers="std:ttft=0.3:tpot=0.03"),
}


def one_token(tmp) -> str:
    """A length file where every third request asks for one output token (TPOT undefined, one token, no gaps)."""
    path = tmp / "lengths.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n" +
                    "".join(f"{200 + 37 * i},{1 if i % 3 == 0 else 20 + 7 * i}\n" for i in range(30)))
    return str(path)


@functools.lru_cache(maxsize=None)
def outcome(name: str, tmp_root: str):
    """(rows of requests.csv, the run's kept gaps, its summary, end time, the run's config) of run ``name``."""
    from pathlib import Path
    tmp = Path(tmp_root) / name
    tmp.mkdir(parents=True, exist_ok=True)
    extra = dict(RUNS[name])
    if name == "one-token":
        extra["lengths"] = one_token(tmp)
    cfg = RunConfig(**BASE, **extra)
    result = run(cfg)
    summary = summarize(result, warmup=cfg.warmup, cooldown=cfg.cooldown)
    write_run(result, summary, tmp)
    with open(tmp / "requests.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    gaps = np.frombuffer(result.requests.gaps, dtype=np.float64).copy()
    return rows, gaps, summary, float(result.end_time), cfg, result


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("truths"))


def percentile(values, q: float) -> float:
    """Hyndman and Fan's type 7 (linear between order statistics): the rule of numpy's default, ``vllm bench
    serve`` (np.percentile) and inference-perf (np.percentile), written out here so the summary's is checked, not
    reused."""
    v = sorted(values)
    if not v:
        return math.nan
    h = (len(v) - 1) * q / 100
    lo = math.floor(h)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def stats(values) -> dict:
    v = [x for x in values if math.isfinite(x)]
    if not v:
        return {"count": 0}
    return {"count": len(v), "mean": sum(v) / len(v), "p50": percentile(v, 50), "p90": percentile(v, 90),
            "p99": percentile(v, 99), "max": max(v)}


def close(ours: dict, truth: dict, what: str, rel: float = 1e-9):
    assert ours["count"] == truth["count"], what
    for k, v in truth.items():
        assert ours[k] == pytest.approx(v, rel=rel, abs=1e-12), f"{what} {k}"


def num(row, key) -> float:
    return float(row[key])


class Truth:
    """The summary's figures from requests.csv and the gaps, by the definitions of docs/metrics.md."""

    def __init__(self, rows, gaps, end_time, warmup, cooldown):
        self.rows = rows
        client = "queued" in rows[0]  # a client-boundary run keeps the engine's stamps beside the client's
        arrival = [num(r, "arrival") for r in rows]
        lo, hi = min(arrival) + warmup, max(arrival) - cooldown
        self.win = [r for r in rows if lo <= num(r, "arrival") <= hi]
        self.fin = [r for r in self.win if r["status_name"] == "FINISHED"]

        def left(r):  # when it left: the client's receipt of its last token, else the engine's stamp
            if client and r["status_name"] == "FINISHED":
                return num(r, "arrival") + num(r, "e2e")
            return num(r, "finish") if math.isfinite(num(r, "finish")) else end_time
        self.span = max(map(left, self.win)) - min(num(r, "arrival") for r in self.win)
        self.gaps = {r["id"]: gaps[int(r["gap_offset"]):int(r["gap_offset"]) + int(r["num_gaps"])] for r in rows}

    def good(self, r, metric: str) -> bool:
        if r["status_name"] != "FINISHED":
            return False
        target = num(r, f"{metric}_slo")
        if math.isnan(target):
            return True
        if metric == "tbt":  # SLAI's tolerance: at most 1% of the request's gaps above the target
            return int((self.gaps[r["id"]] > target).sum()) <= 0.01 * int(r["num_gaps"])
        value = num(r, metric)
        return math.isnan(value) or value <= target  # a one-token request has no TPOT: met, as vLLM counts it 0


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_summary_is_what_requests_csv_says(name, root):
    rows, gaps, s, end_time, cfg, _ = outcome(name, root)
    t = Truth(rows, gaps, end_time, cfg.warmup, cfg.cooldown)
    c = s["counts"]
    assert c["offered"] == len(t.win) and c["finished"] == len(t.fin)
    for status in ("rejected", "unfinished", "aborted"):
        assert c.get(status, 0) == sum(r["status_name"] == status.upper() for r in t.win), status
    assert s["window"]["span"] == pytest.approx(t.span, rel=1e-12)
    for m in ("ttft", "tpot", "e2e"):
        close(s["latency"][m], stats(num(r, m) for r in t.fin), m)
    # TPOT = (E2E - TTFT)/(output - 1) per finished request with two tokens or more (vLLM's, excluding the first)
    for r in t.fin:
        out = int(r["output_len"])
        assert int(r["generated"]) == out
        if out > 1:
            assert num(r, "tpot") == pytest.approx((num(r, "e2e") - num(r, "ttft")) / (out - 1), rel=1e-9)
        else:
            assert math.isnan(num(r, "tpot")) and int(r["num_gaps"]) == 0
    # TBT: every gap of every measured request, finished or not; each request's misses recounted from its gaps
    window_gaps = np.concatenate([t.gaps[r["id"]] for r in t.win])
    close(s["latency"]["tbt"], stats(window_gaps.tolist()), "tbt")
    for r in rows:
        target = num(r, "tbt_slo")
        misses = int((t.gaps[r["id"]] > target).sum()) if math.isfinite(target) else 0
        assert int(r["tbt_misses"]) == misses
    # throughput over the span, of finished requests' tokens (vllm bench serve: completed requests / duration)
    th = s["throughput"]
    assert th["requests_per_s"] == pytest.approx(len(t.fin) / t.span, rel=1e-12)
    assert th["output_tokens_per_s"] == pytest.approx(sum(int(r["generated"]) for r in t.fin) / t.span, rel=1e-12)
    assert th["input_tokens_per_s"] == pytest.approx(sum(int(r["prompt_len"]) for r in t.fin) / t.span, rel=1e-12)
    # goodput: measured requests that met every target they have, per second of span; the fraction over offered
    good = [r for r in t.win if all(t.good(r, m) for m in ("ttft", "tpot", "tbt"))]
    assert s["goodput"]["good_requests"] == len(good)
    assert s["goodput"]["requests_per_s"] == pytest.approx(len(good) / t.span, rel=1e-12)
    assert s["goodput"]["fraction"] == pytest.approx(len(good) / len(t.win), rel=1e-12)
    for tier, sec in s["tiers"].items():
        mine = [r for r in t.win if r["tier_name"] == tier]
        assert sec["offered"] == len(mine)
        for m in ("ttft", "tpot", "tbt"):
            has = any(math.isfinite(num(r, f"{m}_slo")) for r in mine)
            want = sum(t.good(r, m) for r in mine) / len(mine) if has else math.nan
            assert sec["attainment"][m] == pytest.approx(want, rel=1e-12, nan_ok=True), (tier, m)
        tier_gaps = np.concatenate([t.gaps[r["id"]] for r in mine])
        assert sec["tbt_p99"] == pytest.approx(percentile(tier_gaps.tolist(), 99), rel=1e-9)
    if "cached_tokens" in rows[0]:
        cached = sum(int(r["cached_tokens"]) for r in t.fin)
        assert s["prefix_cache"]["hit_rate"] == pytest.approx(cached / sum(int(r["prompt_len"]) for r in t.fin))
    if "tenant" in rows[0]:
        check_tenants(s, t)


def check_tenants(s, t):
    """VTC's service (Sheng et al., "Fairness in Serving Large Language Models", OSDI 2024, §3): 1 per prompt token
    and 2 per output token a tenant was served, over its weight; Jain's index (Jain, Chiu and Hawe, DEC-TR-301,
    1984) over those."""
    weighted = []
    for name, sec in s["tenants"].items():
        mine = [r for r in t.win if r["tenant"] == name]
        served = [r for r in mine if math.isfinite(num(r, "first_token")) and int(r["generated"]) > 0]
        service = sum(int(r["prompt_len"]) + 2 * int(r["generated"]) for r in served)
        assert sec["service"] == pytest.approx(service, rel=1e-12), name
        weighted.append(service / sec["weight"])
    jain = sum(weighted) ** 2 / (len(weighted) * sum(x * x for x in weighted))
    assert s["fairness"]["jain"] == pytest.approx(jain, rel=1e-12)


def test_a_client_boundary_span_covers_the_last_response():
    """One request measured at the client: the span, and so every rate, runs until its last token reached the client
    (vllm bench serve's benchmark duration ends at the last response), so it is at least that request's E2E; it
    ended at the engine's finish, one output delay (about 3 ms) short, and the request rate was above 1/E2E."""
    result = run(RunConfig(**BASE, rate=1.0, num_requests=1))
    s = summarize(result)
    e2e = s["latency"]["e2e"]["max"]
    assert s["window"]["span"] == pytest.approx(e2e, rel=1e-12)
    assert s["throughput"]["requests_per_s"] == pytest.approx(1 / e2e, rel=1e-12)
    assert s["littles_law"]["mean_sojourn"] == pytest.approx(e2e, rel=1e-12)


def test_validate_serving_times_the_replay_where_it_times_the_log():
    """validate-serving's simulated throughput: output tokens over first send to last response at the client, as the
    measured log's (arrival + E2E); it divided by first send to the engine's last finish."""
    from llmsched.validate.serving import simulated
    result = run(RunConfig(**BASE, rate=6.0, num_requests=40))
    log = result.requests
    sim = simulated(result, with_itl=True)
    span = float((log.column("arrival") + log.column("e2e")).max() - log.column("arrival").min())
    assert sim["throughput"]["span_s"] == pytest.approx(span, rel=1e-12)
    assert sim["throughput"]["span_s"] > float(log.column("finish").max() - log.column("arrival").min())


@pytest.mark.parametrize("name", ["tiers-rejections", "one-token", "client-timeout", "engine-boundary"])
def test_vllm_bench_serve_computes_the_same_figures(name, root):
    """The run's requests as ``vllm bench serve`` records them (RequestFuncOutput: success, latency = E2E, ttft, itl
    = the inter-token gaps, output_tokens) through vLLM's own ``calculate_metrics`` with the summary's span as the
    benchmark duration and the run's TTFT and TPOT targets as its goodput config: the same TTFT, TPOT, ITL and E2E
    means and percentiles, request and output-token throughput, and goodput (without a TBT target, which vLLM does
    not have). A request that did not finish is vLLM's failed request: in no latency, not good."""
    serve = pytest.importorskip("vllm.benchmarks.serve")
    from vllm.benchmarks.datasets import SampleRequest
    from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput
    rows, gaps, s, end_time, cfg, _ = outcome(name, root)
    t = Truth(rows, gaps, end_time, cfg.warmup, cfg.cooldown)
    outputs, inputs = [], []
    for r in t.win:
        ok = r["status_name"] == "FINISHED"
        outputs.append(RequestFuncOutput(success=ok, latency=num(r, "e2e") if ok else 0.0,
                                         output_tokens=int(r["generated"]) if ok else 0,
                                         ttft=num(r, "ttft") if ok else 0.0, itl=t.gaps[r["id"]].tolist() if ok else [],
                                         prompt_len=int(r["prompt_len"]), start_time=num(r, "arrival")))
        inputs.append(SampleRequest(prompt="", prompt_len=int(r["prompt_len"]), expected_output_len=1))
    targets = {m: num(t.win[0], f"{m}_slo") for m in ("ttft", "tpot")}
    goodput = {m: v * 1000 for m, v in targets.items() if math.isfinite(v)}  # vLLM takes milliseconds
    metrics, _ = serve.calculate_metrics(inputs, outputs, s["window"]["span"], None, [50.0, 90.0, 99.0], goodput)
    assert metrics.completed == s["counts"]["finished"]
    assert metrics.request_throughput == pytest.approx(s["throughput"]["requests_per_s"], rel=1e-12)
    assert metrics.output_throughput == pytest.approx(s["throughput"]["output_tokens_per_s"], rel=1e-12)
    if goodput and not any(math.isfinite(num(r, "tbt_slo")) for r in t.win):
        assert metrics.request_goodput == pytest.approx(s["goodput"]["requests_per_s"], rel=1e-12)
    for ours, theirs in (("ttft", "ttft"), ("tpot", "tpot"), ("e2e", "e2el")):
        assert getattr(metrics, f"mean_{theirs}_ms") == pytest.approx(1000 * s["latency"][ours]["mean"], rel=1e-9)
        assert getattr(metrics, f"median_{theirs}_ms") == pytest.approx(1000 * s["latency"][ours]["p50"], rel=1e-9)
        for q, v in getattr(metrics, f"percentiles_{theirs}_ms"):
            assert v == pytest.approx(1000 * s["latency"][ours][f"p{q:g}"], rel=1e-9), (ours, q)
    finished_gaps = np.concatenate([t.gaps[r["id"]] for r in t.fin])
    for q, v in metrics.percentiles_itl_ms:  # vLLM's ITL: the gaps of successful requests only
        assert v == pytest.approx(1000 * percentile(finished_gaps.tolist(), q), rel=1e-9), q
    if len(t.fin) == len(t.win):  # every request finished: our TBT is vLLM's ITL
        assert metrics.mean_itl_ms == pytest.approx(1000 * s["latency"]["tbt"]["mean"], rel=1e-9)
        for q, v in metrics.percentiles_itl_ms:
            assert v == pytest.approx(1000 * s["latency"]["tbt"][f"p{q:g}"], rel=1e-9)
