"""``llmsched compare --disaggregate``: every scheduler that can run a decode pool is compared, the rest are named
and left out (as with --kv-offload), instead of the first one that cannot stopping the command. Every built-in
policy runs one; a policy of a user's own may not (``Scheduler.serves_transferred_kv``)."""
import json

from llmsched.cli import main
from llmsched.schedulers.infermax.infermax import InferMax
from llmsched.schedulers.registry import create_scheduler
from tests.colocated_only import NAME


def test_compare_leaves_out_and_names_the_policies_that_cannot_run_a_decode_pool(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(InferMax, "serves_transferred_kv", False)  # as a policy that plans none would
    assert main(f"compare --disaggregate 1P1D --num-requests 6 --rate 2 --no-progress "
                f"--out {tmp_path / 'c'}".split()) == 0
    err = capsys.readouterr().err
    assert "not run with --disaggregate: " in err and "infermax-rank-org" in err
    ran = {row["scheduler"] for row in json.loads((tmp_path / "c" / "results.json").read_text())}
    assert not any(name.startswith("infermax") for name in ran)
    assert {"vllm", "vllm-chunked", "sarathi", "fairbatching", "rad", "orca"} <= ran
    assert all(create_scheduler(name).serves_transferred_kv for name in ran)


def test_every_built_in_policy_runs_a_decode_pool(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(f"compare --disaggregate 1P1D --schedulers infermax-rank-i,infermax-rank-org,vllm --num-requests 6 "
                f"--rate 2 --no-progress --out {tmp_path / 'c'}".split()) == 0
    assert "not run with" not in capsys.readouterr().err
    rows = json.loads((tmp_path / "c" / "results.json").read_text())
    assert {row["scheduler"] for row in rows} == {"infermax-rank-i", "infermax-rank-org", "vllm"}


def test_a_decode_pool_scheduler_of_its_own_lets_every_policy_run_the_prefill_pool(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(f"compare --disaggregate 1P1D --decode-pool scheduler=sarathi --schedulers {NAME},vllm "
                f"--num-requests 6 --rate 2 --no-progress --out {tmp_path / 'c'}".split()) == 0
    assert "not run with" not in capsys.readouterr().err
    ran = {row["scheduler"] for row in json.loads((tmp_path / "c" / "results.json").read_text())}
    assert ran == {NAME, "vllm"}
