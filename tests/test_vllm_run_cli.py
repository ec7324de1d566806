"""`llmsched run` through vLLM (CPU, tiny model) as a user runs it: the command line, not the library."""
import csv

from llmsched.cli import main
from tests.vllm_support import require_vllm

require_vllm()


def test_run_that_rejects_most_requests_warns_and_says_why(tmp_path, capsys):
    """`vllm` does not chunk prompts: with a 64-token step every ShareGPT prompt over 64 tokens can never run. The
    run ended with a table (1 finished, 7 rejected) and no word on why; `simulate` warns, and so does `run` now."""
    from llmsched.vllm.model import write_model
    model = write_model(tmp_path / "tiny")
    out = tmp_path / "out"
    code = main(["run", "--model", str(model), "--scheduler", "vllm", "--workload", "sharegpt", "--rate", "20",
                 "--num-requests", "8", "--scale-lengths", "0.1", "--max-model-len", "512", "--kv-cache-mb", "4",
                 "--max-num-batched-tokens", "64", "--max-num-seqs", "4", "--workdir", str(tmp_path / "w"),
                 "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = list(csv.DictReader(open(out / "requests.csv")))
    rejected = [r for r in rows if r["status_name"] == "REJECTED"]
    assert len(rows) == 8 and len(rejected) >= 4  # every request accounted for, finished or rejected
    assert all(r["status_name"] == "FINISHED" and int(r["prompt_len"]) <= 64 or r in rejected for r in rows)
    assert all("exceeds 64 tokens" in r["reason"] and "raise --max-num-batched-tokens" in r["reason"]
               for r in rejected)
    warning = [line for line in captured.err.splitlines() if line.startswith("llmsched run: warning: ")]
    assert len(warning) == 1, captured.err
    assert f"{len(rejected)} of 8 requests" in warning[0] and "does not chunk prompts" in warning[0]
