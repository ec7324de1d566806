"""KV offload through the command line: every bad tier, link, size, order and mode is one line on stderr naming the
input (exit 2); capacity takes the tiers; plan varies them as a candidate dimension and prices host memory."""
import json

import pytest

from llmsched.cli import main
from llmsched.hardware.prices import load_prices
from llmsched.plan.candidates import build_candidates, parse_offloads
from llmsched.plan.report import Deployment, offload_verdicts
from llmsched.run_config import RunConfig

SP = "simulate --workload shared-prefix --num-requests 4 --rate 2 --no-progress"
BAD = [
    (f"{SP} --kv-offload cpu:0GiB", ["--kv-offload cpu:0GiB", "cpu size '0GiB' must be above zero"]),
    (f"{SP} --kv-offload cpu:-5GiB", ["cpu size '-5GiB' must be above zero"]),
    (f"{SP} --kv-offload cpu:lots", ["cpu size 'lots'", "200GiB"]),
    (f"{SP} --kv-offload cpu:200GiB:link=bw=0GB/s;latency=1us", ["bw '0GB/s' must be above zero"]),
    (f"{SP} --kv-offload cpu:200GiB:link=bw=-2GB/s;latency=1us", ["must be above zero"]),
    (f"{SP} --kv-offload cpu:200GiB:link=bw=20GB/s;latency=0us", ["latency '0us' must be above zero"]),
    (f"{SP} --kv-offload cpu:200GiB:link=warp9", ["unknown link 'warp9'", "pcie-gen5"]),
    (f"{SP} --kv-offload disk:1TB", ["the first tier must be cpu"]),
    (f"{SP} --kv-offload cpu:10GiB,remote:1TB,disk:1TB", ["tiers out of order (cpu, remote, disk)"]),
    (f"{SP} --kv-offload cpu:10GiB,cpu:10GiB", ["tiers out of order"]),
    (f"{SP} --kv-offload tape:1TB", ["medium 'tape' is not one of cpu, disk, remote"]),
    (f"{SP} --kv-offload cpu:10GiB:speed=3", ["'speed=3'"]),
    (f"{SP} --kv-offload cpu:10GiB:chunk=20", ["chunk_tokens 20 is not a multiple of the KV block size 16"]),
    (f"{SP} --kv-offload cpu:1KiB", ["holds no chunk"]),
    (f"{SP} --gpu h100 --kv-offload cpu:3TiB", ["3TiB", "DGX H100", "2TiB of host memory"]),
    (f"{SP} --gpu h100 --replicas 8 --kv-offload cpu:300GiB", ["x 8 replica(s)", "at most 256GiB"]),
    (f"{SP} --kv-offload-mode fast --kv-offload cpu:1GiB", ["--kv-offload-mode fast", "vllm, lmcache"]),
    (f"{SP} --kv-offload-mode lmcache", ["--kv-offload-mode", "give them with --kv-offload"]),
    ("simulate --workload sharegpt --num-requests 4 --rate 2 --no-progress --kv-offload cpu:1GiB",
     ["--kv-offload cpu:1GiB", "name their prompts"]),
    (f"{SP} --kv-offload cpu:1GiB --no-prefix-caching", ["--kv-offload", "drop --no-prefix-caching"]),
    # policies whose plans do not count a tier's loads (they crashed, overran the cache or stalled before
    # 2026-11-30): refused before the run
    (f"{SP} --kv-offload cpu:1GiB --scheduler orca", ["scheduler 'orca' cannot run beside KV tiers",
                                                       "drop --kv-offload"]),
    (f"{SP} --kv-offload cpu:1GiB --scheduler infermax-ft", ["scheduler 'infermax-ft' cannot run beside KV tiers"]),
    (f"{SP} --kv-offload cpu:1GiB --scheduler rad-lowtbt", ["scheduler 'rad-lowtbt' cannot run beside KV tiers"]),
]


def test_compare_leaves_out_and_names_the_policies_that_cannot_run_beside_tiers(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(f"compare --workload shared-prefix --num-requests 6 --rate 2 --no-progress --kv-offload cpu:1GiB "
                f"--out {tmp_path / 'c'}".split()) == 0
    err = capsys.readouterr().err
    assert "not run with --kv-offload: " in err and "orca" in err and "fastertransformer" in err
    ran = {row["scheduler"] for row in json.loads((tmp_path / "c" / "results.json").read_text())}
    assert "orca" not in ran and {"vllm-chunked", "sarathi", "infermax"} <= ran


@pytest.mark.parametrize("args, expect", BAD, ids=[a.split("--no-progress")[-1].strip()[:50] for a, _ in BAD])
def test_bad_kv_offload_input_is_one_line(args, expect, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(args.split())
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for want in expect:
        assert want in err, f"{want!r} not in: {err}"


@pytest.mark.parametrize("text, expect", [
    ("[[tier]]\nmedium = \"cpu\"\nsize = \"0GiB\"\n", "must be above zero"),
    ("[[tier]]\nmedium = \"disk\"\nsize = \"1TB\"\n", "the first tier must be cpu"),
    ("[[tier]]\nmedium = \"cpu\"\n", "needs size"),
    ("tier = 3\n", "must hold only a list of tier tables"),
    ("[[tier]]\nmedium = \"cpu\"\nsize = \"1GiB\"\nlink = \"bw=0GB/s,latency=1us\"\n", "must be above zero"),
    ("[[tier]\n", "not valid TOML"),
])
def test_bad_tier_files_are_one_line(text, expect, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "tiers.toml"
    path.write_text(text)
    code = main(f"{SP} --kv-offload {path}".split())
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert expect in err and "tiers.toml" in err, err


def test_a_tier_file_and_a_config_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tiers = tmp_path / "tiers.toml"
    tiers.write_text('[[tier]]\nmedium = "cpu"\nsize = "1GiB"\nlink = "pcie-gen4"\n\n'
                     '[[tier]]\nmedium = "disk"\nsize = "4GiB"\nconcurrency = 2\n')
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'workload = "shared-prefix"\nnum_requests = 20\nrate = 4.0\nkv_offload = "{tiers}"\n'
                   f'kv_offload_mode = "lmcache"\n')
    assert main(["simulate", "--config", str(cfg), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["kv_offload"]["mode"] == "lmcache"
    assert [t["medium"] for t in summary["kv_offload"]["tiers"]] == ["cpu", "disk"]
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["kv_offload"]["tiers"][0]["link"]["name"] == "pcie-gen4"
    assert meta["kv_offload"]["tiers"][1]["concurrency"] == 2


def test_capacity_takes_the_tiers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["capacity", "--scheduler", "vllm-chunked", "--workload", "shared-prefix", "--num-requests", "60",
                 "--rate", "4", "--kv-offload", "cpu:2GiB", "--slo", "ttft_p99<=5s", "--no-cache", "--no-progress",
                 "--out", str(tmp_path / "cap")])
    assert code == 0
    data = json.loads((tmp_path / "cap" / "capacity.json").read_text())
    assert "kv_offload" in json.dumps(data)


def test_plan_varies_the_cpu_tier_and_prices_host_memory():
    prices = load_prices()
    assert prices.host_gib_hour == pytest.approx(0.004237)
    offloads = parse_offloads("none,cpu:256GiB,cpu:256GiB+disk:2TB")
    assert offloads == ["none", "cpu:256GiB", "cpu:256GiB,disk:2TB"]
    with pytest.raises(ValueError, match="--kv-offloads"):
        parse_offloads("none,cpu:0GiB")
    cands = build_candidates(["h100"], [1], ["vllm-chunked"], ["round-robin"], None, offloads)
    base = RunConfig(workload="shared-prefix")
    assert [c.host_gib(base) for c in cands] == [0.0, 256.0, 256.0]
    assert cands[1].config(base, 2.0, 3).kv_offload == "cpu:256GiB" and cands[0].config(base, 2.0, 3).kv_offload \
        is None
    assert "kv-offload cpu:256GiB" in cands[1].label

    def dep(cand, replicas, usd):
        return Deployment(cand.label, 2.0, replicas, replicas, usd, 1.0, 1.0, 1.0, {}, None)
    host = prices.host_gib_hour * 256  # $1.08 a replica-hour for 256 GiB
    lines = offload_verdicts([dep(cands[0], 4, 4 * 3.348), dep(cands[1], 3, 3 * (3.348 + host))], cands)
    assert len(lines) == 1 and "offload pays" in lines[0] and "3 replicas" in lines[0]
    lines = offload_verdicts([dep(cands[0], 3, 3 * 3.348), dep(cands[1], 3, 3 * (3.348 + host))], cands)
    assert "offload does not pay" in lines[0]
