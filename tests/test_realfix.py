"""Real-engine replay of sessions without vLLM (replay_source.py, content_ids' replies), capacity's fixed
rejections, sweep --tenants, and the serving readers' unread fields."""
import pytest

from llmsched.content import Content, Space, piece_id
from llmsched.run_config import RunConfig
from llmsched.vllm.content_ids import content_ids
from llmsched.vllm.runner import workload_source

MULTI_TURN = {"num_groups": 2, "num_prompts_per_group": 3, "system_prompt_len": 100, "question_len": 50,
              "output_len": 20, "enable_multi_turn_chat": True}


def test_a_reply_piece_sends_the_generated_tokens_and_continues_with_its_draw_past_them():
    reply = piece_id(Space.REPLY, 7)
    turn = Content.of_pieces([(piece_id(Space.TEXT, 1), 5)], reply).then(4, [(piece_id(Space.TEXT, 2), 3)], 99)
    drawn = content_ids(turn, 12, 1000)
    assert content_ids(turn, 12, 1000, {reply: [11, 12, 13, 14, 15]}) == drawn[:5] + [11, 12, 13, 14] + drawn[9:]
    assert content_ids(turn, 12, 1000, {reply: [11, 12]}) == drawn[:5] + [11, 12] + drawn[7:]  # one short: draws


def test_the_replay_source_issues_every_turn_from_completions_scaled_and_cut():
    cfg = RunConfig.checked({"workload": "shared-prefix", "workload_params": MULTI_TURN, "rate": 3.0,
                             "num_requests": 30})
    source = workload_source(cfg, 300, scale=0.5)
    first = source.initial()
    assert len(first) == 6 and source.has_follow_ups  # before: these 6 were all a real run sent
    queue, seen = list(first), []
    while queue:
        r = queue.pop(0)
        seen.append(r)
        assert r.prompt_len + r.output_len <= 300 and r.content.length >= r.prompt_len
        queue += source.on_done(r, r.arrival + 1.0)
    assert sorted(r.id for r in seen) == list(range(30)) and len(source.issued) == 30
    later = [r for r in seen if r.id >= 6]
    assert all(r.arrival >= 1.0 for r in later)  # each issued after its predecessor's end
    # rounds of 250, 420, 590, 760, 930 tokens are 125, 210, 295, ... at 0.5; 295 + 10 > 300: cut to 300 // 2
    assert sorted({r.prompt_len for r in seen}) == [125, 150, 210]


def test_a_list_source_issues_nothing_more():
    cfg = RunConfig.checked({"workload": "sharegpt", "rate": 3.0, "num_requests": 5})
    source = workload_source(cfg, 4096)
    assert not source.has_follow_ups and len(source.initial()) == 5


def test_capacity_does_not_bisect_on_rejections_no_rate_can_fix():
    """ShareGPT over a 7700-token context: 12 of 808 measured requests never fit (4.6% of the work, under the 5%
    that stops a search). Their backlog was counted in each probe's stability, so servable queues growing 0.4% of
    the arriving work were called backlogged and the search ended at 2.25 req/s; with 4 such requests (8000-token
    context) it found 3.02. Now the two agree within 5% and the note reports the fixed rejections."""
    from llmsched.capacity.rate_search import find_capacity
    from llmsched.capacity.slo import parse_slos

    def capacity(context):
        base = RunConfig(workload="sharegpt", max_model_len=context, num_requests=1000, tiers="all:ttft=30")
        return find_capacity(base, parse_slos("ttft_p50<=5"))

    fixed, few = capacity(7700), capacity(8000)
    assert fixed.capacity == pytest.approx(few.capacity, rel=0.05)
    assert all(p.records[0]["counts"]["never_served"] == 12 and not p.hopeless for p in fixed.probes)
    assert "12 of 808 measured requests can never be served, at any rate" in fixed.note
    assert "exceed max_model_len 7700" in fixed.note


def test_sweep_with_tenants_runs_each_rate_as_the_tenants_total_with_per_tenant_columns(tmp_path):
    """`sweep --tenants` was refused ('a sweep has no one rate to vary'). Each rate is now the tenants' total,
    their mix kept (heavy 4 : light 1, as a capacity probe scales it); each row has each tenant's latencies."""
    import json

    from llmsched.cli import main
    out = tmp_path / "sw"
    assert main(["sweep", "--tenants", "heavy:rate=8,light:rate=2:weight=2", "--rates", "2,6", "--num-requests",
                 "200", "--schedulers", "vtc", "--out", str(out), "--no-progress"]) == 0
    rows = json.load(open(out / "sweep.json"))
    assert [r["rate"] for r in rows] == [2, 6]
    assert all({"ttft_p99_heavy", "ttft_p99_light", "service_heavy", "service_light", "jain"} <= set(r)
               for r in rows)
    low, high = rows
    assert high["ttft_p99_heavy"] > low["ttft_p99_heavy"]  # the same requests offered three times faster


def test_sweep_tenant_configs_keep_the_mix():
    from llmsched.cli.sweep import tenant_configs
    from llmsched.workload.tenants.streams import total_rate
    base = RunConfig(tenants="heavy:rate=8,light:rate=2", num_requests=50)
    configs, totals = tenant_configs([base], [1.0, 5.0])
    assert totals == [1.0, 5.0]
    for cfg, total in zip(configs, totals):
        streams = {s.name: s.rate for s in cfg.tenants.value}
        assert total_rate(cfg.tenants.value) == pytest.approx(total)
        assert streams["heavy"] == pytest.approx(4 * streams["light"])


def bench_folder(tmp_path, **fields):
    """The CPU capture's vllm bench serve result (30 requests at 2 req/s) with ``fields`` changed, as a run."""
    import json
    import shutil
    from pathlib import Path
    src = Path(__file__).parent / "data" / "cpu_client_run" / "rate-2"
    folder = tmp_path / "run"
    folder.mkdir(parents=True)
    for name in ("meta.json", "config.json"):
        shutil.copy(src / name, folder / name)
    bench = {**json.loads((src / "bench.json").read_text()), **fields}
    (folder / "bench.json").write_text(json.dumps(bench))
    return folder, bench


def test_a_bench_runs_sending_fields_are_used_or_warned_about(tmp_path):
    """request_rate, burstiness, max_concurrency and ignore_eos were never read: a run capped at 4 requests in
    flight (a closed loop) was replayed as if sent on a schedule, without a word."""
    from llmsched.validate.serving_run import load_runs
    folder, _ = bench_folder(tmp_path)
    notes = load_runs(folder)[0].log.notes
    assert "sent at 2 req/s (gamma burstiness 1); replayed at the recorded send times" in notes
    assert not any(n.startswith("warning") or "warning:" in n for n in notes)
    capped, _ = bench_folder(tmp_path / "capped", max_concurrency=4, ignore_eos=False)
    notes = load_runs(capped)[0].log.notes
    assert any(n.startswith("max_concurrency 4 with sends on a schedule: the client held at most 4 requests in "
                            "flight") and "warning:" in n and "rerun the benchmark without --max-concurrency" in n
               for n in notes)
    closed, _ = bench_folder(tmp_path / "closed", max_concurrency=4, request_rate="inf")
    run = load_runs(closed)[0]  # every request sent at once, 4 in flight: replayed as that closed loop
    assert run.log.in_flight == 4 and not any("warning:" in n for n in run.log.notes)
    assert any(n.startswith("ignore_eos false") for n in notes)
    loose, _ = bench_folder(tmp_path / "loose", max_concurrency=30)  # a cap of every request never bound
    assert not any("max_concurrency" in n for n in load_runs(loose)[0].log.notes)


def test_a_guidellm_benchmarks_strategy_is_named_and_a_closed_loop_replayed_as_one(tmp_path):
    import json
    from llmsched.validate.serving_run import load_runs
    from tests.test_client_logs import guidellm_report
    folder, bench = bench_folder(tmp_path)
    (folder / "bench.json").unlink()
    for kind, cap in (("poisson", None), ("concurrent", 4)):
        report = guidellm_report(bench)
        strategy = {"type_": kind, **({"streams": cap} if cap else {})}
        report["benchmarks"][0]["args"] = {"profile": {"type_": "sweep"}, "strategy": strategy}
        report["benchmarks"][0]["request_totals"] = {"successful": 30, "incomplete": 0, "errored": 0, "total": 30}
        (folder / "benchmarks.json").write_text(json.dumps(report))
        log = load_runs(folder)[0].log
        named = [n for n in log.notes if n.startswith(f"GuideLLM {kind} strategy of a sweep profile")]
        assert len(named) == 1 and "warning:" not in named[0] and log.in_flight == cap
