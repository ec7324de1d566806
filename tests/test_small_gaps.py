"""Five small gaps closed together: SLAI beside requests a KV tier loaded, what --max-total-tokens clipped, --rate-
schedule stages as inference-perf sends them, capacity's served share, and bad input to the commands (the last in
tests/data/bad_inputs.toml)."""
from __future__ import annotations

import warnings

import pytest

from llmsched.run_config import RunConfig

from test_fuzz_conservation import _check

# --- 1. SLAI with a prefix cache and KV tiers --------------------------------------------------------------------
# Multi-turn chat over a tight GPU cache with host-memory tiers below it: a request preempted by recompute, whose
# prompt and output the cache still holds, keys at or below 0 for shortest-prefill-first; ahead of the requests a
# tier loaded (which hold their blocks while they wait) it needed its cached blocks back and the replica idled.
SHARED_CHAT = dict(workload="shared-prefix", kv_offload="cpu:64MiB", max_num_batched_tokens=2048)
SPF_STALL = dict(SHARED_CHAT, router="vllm-dp-fresh", rate=24.349932325764616, num_requests=58,
                 workload_params={"num_groups": 1, "num_prompts_per_group": 3, "system_prompt_len": 600,
                                  "question_len": 100, "output_len": 20, "enable_multi_turn_chat": True},
                 max_num_seqs=16, max_model_len=8192, num_blocks=288, seed=365379823)
# One decode short of a block, the rest of the cache held by a request a tier loaded: SLAI's plan preempting the
# decode (itself: no paused prefill to take from) was dropped as a plan of preemptions alone, and nothing moved.
SELF_PREEMPT_STALL = dict(SHARED_CHAT, model="qwen3-14b", gpu="h200", router="prefix-hash",
                          router_params={"prefix_blocks": 64, "load_factor": 1.25}, rate=23.321622259394992,
                          num_requests=35, workload_params={"num_groups": 1, "num_prompts_per_group": 2,
                                                            "system_prompt_len": 300, "question_len": 100,
                                                            "output_len": 200, "enable_multi_turn_chat": False},
                          max_num_seqs=4, max_num_batched_tokens=512, max_model_len=8192, num_blocks=41,
                          swap_space_gb=0.01, seed=579003161)


def checked(fields: dict) -> str | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _check(RunConfig(**fields))


@pytest.mark.parametrize("name", ["slai", "slai-priority", "slai-spf-fixed"])
def test_slai_admits_the_requests_holding_kv_first(name):
    """Every request finishes or is rejected with a reason, none by the stall guard, no replica idles holding work
    (the fuzz's guarantees): SLAI's orders put the requests a tier loaded first, as vLLM 0.32 drains its
    KV-holding queue first, and shortest-prefill-first orders the rest."""
    assert checked({**SPF_STALL, "scheduler": name}) is None


@pytest.mark.parametrize("name", ["slai-fcfs", "slai"])
def test_slai_preempts_a_decode_short_of_a_block_for_a_loaded_request(name):
    assert checked({**SELF_PREEMPT_STALL, "scheduler": name}) is None


# --- 2. what --max-total-tokens clipped ---------------------------------------------------------------------------
def lengths_of(result):
    """Prompt and output lengths by request id (the log holds rows in the order requests left the run)."""
    log = result.requests
    order = log.column("id").argsort(kind="stable")
    return log.column("prompt_len")[order].tolist(), log.column("output_len")[order].tolist()


@pytest.mark.parametrize("source", [dict(rate=20.0), dict(concurrency=8), dict(rate=20.0, arrival="gamma", cv=2.0)])
def test_max_total_tokens_counts_the_requests_it_clips(source):
    """The count is each request's own: the same run without the cap draws the same lengths uncut, and the requests
    whose prompt exceeds limit-1 or whose prompt+output exceeds the limit are the ones counted; the capped run's
    requests all fit, and the cut ones end exactly at the limit."""
    from llmsched.experiment import run
    from llmsched.metrics.summary import summarize
    limit = 1024
    base = dict(scheduler="sarathi", workload="sharegpt", num_requests=150, seed=7, **source)
    raw = lengths_of(run(RunConfig(**base)))
    capped_run = run(RunConfig(**base, max_total_tokens=limit))
    prompts, outputs = lengths_of(capped_run)
    over = [p > limit - 1 or p + o > limit for p, o in zip(*raw)]
    assert 0 < sum(over) < len(over)
    assert all(p + o <= limit for p, o in zip(prompts, outputs))
    assert all(p + o == limit for (p, o), cut in zip(zip(prompts, outputs), over) if cut)
    section = summarize(capped_run)["max_total_tokens"]
    assert (section["limit"], section["drawn"], section["clipped"]) == (limit, 150, sum(over))
    assert "max_total_tokens" not in summarize(run(RunConfig(**base, max_total_tokens=None)))


def test_simulate_prints_and_writes_the_clipped_count(tmp_path, capsys):
    import json
    from llmsched.cli.commands import main
    main(["simulate", "--workload", "sharegpt", "--rate", "20", "--num-requests", "60", "--max-total-tokens", "512",
          "--seed", "3", "--no-progress", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "summary.json").read_text())["max_total_tokens"]
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("max_total_tokens 512:")]
    assert line == [f"max_total_tokens 512: clipped {written['clipped']} of 60 requests (prompt to 511 tokens at "
                    f"most, then the output to the rest)"]
    assert 0 < written["clipped"] < 60


def test_max_total_tokens_help_says_how_it_clips():
    from llmsched.run_field import declared
    text = declared(RunConfig)["max_total_tokens"].help
    assert "cut to N-1" in text and "output to N minus the prompt" in text


# --- 3. --rate-schedule stages as inference-perf sends them -----------------------------------------------------
def stage_times(schedule: str, arrival: str, seed: int = 1, **more):
    from llmsched.experiment import build_source
    return build_source(RunConfig(workload="sharegpt", rate=None, rate_schedule=schedule, arrival=arrival,
                                  seed=seed, **more)).arrival_times


def test_inference_perf_stages_send_int_rate_times_duration_each():
    """inference-perf's run_stage sends int(rate x duration) requests a stage; its constant timer scales
    exponential gaps to fill the stage, so the last lands on the stage's end."""
    for seed in range(5):
        t = stage_times("stages:2.5@30,0.5@3,7@20", "inference-perf", seed)
        assert len(t) == 75 + 1 + 140
        assert (t[:75] > 0).all() and t[74] == pytest.approx(30.0)
        assert (t[75] > 30) and t[75] == pytest.approx(33.0)
        assert (t[76:] > 33).all() and t[-1] == pytest.approx(53.0)
        assert (t[:-1] <= t[1:]).all()
    # the default keeps its Poisson count (mean 216): the same stages, another count for some seed
    assert {len(stage_times("stages:2.5@30,0.5@3,7@20", "poisson", seed)) for seed in range(5)} != {216}


def test_an_inference_perf_file_times_its_stages_by_its_load_type(tmp_path):
    """load.type poisson: a Poisson count a second, each second's requests spread over it, until the stage's
    int(rate x duration) are sent; the stages (with the file's 1 s interval and 1 s lead between them) keep
    their counts."""
    path = tmp_path / "load.yaml"
    path.write_text("load:\n  type: poisson\n  stages:\n    - rate: 4\n      duration: 10\n"
                    "    - rate: 1\n      duration: 5\n")
    t = stage_times(str(path), "inference-perf", num_requests=45)
    assert len(t) == 45 and (t[:-1] <= t[1:]).all()
    with pytest.raises(ValueError, match="send 45 requests in all"):
        stage_times(str(path), "inference-perf", num_requests=46)


@pytest.mark.parametrize("fields, words", [
    (dict(rate_schedule="0:2,30:4", num_requests=10), "give --rate-schedule 'stages:RATE@SECONDS"),
    (dict(rate=2.0, num_requests=10), "give --rate-schedule 'stages:RATE@SECONDS"),
    (dict(rate_schedule="stages:2@30;burst:at=5,x=2,for=5"), "have no bursts"),
    (dict(rate_schedule="stages:0.1@5,0.2@4"), "every stage sends int(rate x duration) = 0"),
])
def test_inference_perf_arrival_refuses_what_it_cannot_send(fields, words):
    from llmsched.experiment import build_source
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")) as e:
        build_source(RunConfig(**{"rate": None, **fields, "arrival": "inference-perf"}))
    assert "\n" not in str(e.value)


# --- 4. capacity: a stable probe admits 95% of its window's work --------------------------------------------------
B200_CODE = dict(model="mistral-7b", gpu="b200", tp=2, scheduler="vtc", kv_cache_dtype="fp8",
                 trace="../shared/data/traces/AzureLLMInferenceTrace_code.csv", max_num_batched_tokens=1024,
                 max_num_seqs=128, num_requests=300)


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
@pytest.mark.parametrize("rate, verdict, low, high", [(16.0, "stable", 0.99, 1.0), (64.0, "overloaded", 0.6, 0.75)])
def test_a_short_bursty_probe_is_judged_by_the_work_it_admits(rate, verdict, low, high):
    """300 requests of the Azure code trace (Mistral-7B TP2/B200, vtc): at 64 req/s the clumped arrivals keep the
    trend's t-statistic negative (-1.5), and the probe was called stable while it finished 60% of its window's
    work in the window; it admits 68% of it, so it is overloaded now. At 16 req/s it admits all of it (and
    finishes 88% in the window, the rest in flight at its end): still stable."""
    from llmsched.capacity.probe import measure_point, probe_config
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record = measure_point(probe_config(RunConfig(**B200_CODE), rate, 0))
    stability = record["stability"]
    assert stability["t_stat"] < 3  # the trend alone calls it stable
    assert low <= stability["admitted_share"] <= high
    assert stability["verdict"] == verdict


def test_the_admitted_share_sets_the_verdict_at_the_trends_thresholds():
    """Steady arrivals and no growth of outstanding work in the trend's eyes; the admitted share alone gives
    stable at 95% and above, backlogged from 85%, overloaded below."""
    import numpy as np
    from llmsched.capacity.stability import trend
    arrival = np.linspace(0.0, 100.0, 1001)
    leave = arrival + 1.0
    work = np.full(len(arrival), 100.0)
    for share, verdict in ((1.0, "stable"), (0.96, "stable"), (0.9, "backlogged"), (0.6, "overloaded")):
        admitted = arrival.copy()
        admitted[np.arange(len(arrival)) % 100 >= round(share * 100)] = np.nan  # never admitted
        out = trend(arrival, leave, work, 10.0, 90.0, admitted)
        assert out["admitted_share"] == pytest.approx(share, abs=0.011)
        assert out["verdict"] == verdict
    assert "admitted_share" not in trend(arrival, leave, work, 10.0, 90.0)  # the floor's: the trend alone
