"""`llmsched run --trace` of a vllm bench serve result through vLLM (CPU, tiny model) sends what the benchmark sent
before its run (its first prompt, ``--num-warmups 2`` in tests/data/cpu_prefix_bench), unrecorded: the run's first
request then finds its prompt in vLLM's own prefix cache, as it did in the captured run; without the warm-ups it
finds nothing."""
import csv
import json
import shutil
from pathlib import Path

from llmsched.cli import main
from tests.vllm_support import require_vllm

require_vllm()

RUN = Path(__file__).parent / "data" / "cpu_prefix_bench" / "prefix-repetition"


def first_request(folder: Path, tmp_path: Path, name: str) -> tuple[int, dict]:
    from llmsched.vllm.model import write_model
    model = write_model(tmp_path / "tiny")
    out = tmp_path / name
    code = main(["run", "--model", str(model), "--scheduler", "vllm-chunked", "--trace", str(folder / "bench.json"),
                 "--num-requests", "3", "--max-model-len", "1024", "--kv-cache-mb", "16",
                 "--workdir", str(tmp_path / "w"), "--out", str(out), "--no-progress"])
    assert code == 0
    rows = list(csv.DictReader(open(out / "requests.csv")))
    assert len(rows) == 3 and all(r["status_name"] == "FINISHED" for r in rows)
    first = next(r for r in rows if r["id"] == "0")
    return int(first["prompt_len"]), first


def test_the_benchmarks_warmup_is_sent_before_the_run_and_not_recorded(tmp_path):
    prompt, warm = first_request(RUN, tmp_path, "warm")
    assert prompt - 32 <= int(warm["cached_tokens"]) <= prompt  # all but (at most) the block vLLM computes again
    cold = tmp_path / "cold"
    shutil.copytree(RUN, cold)
    meta = json.loads((cold / "meta.json").read_text())
    meta["client"].pop("num_warmups")  # vLLM 0.32 sent nothing before the run then
    (cold / "meta.json").write_text(json.dumps(meta))
    _, first = first_request(cold, tmp_path, "cold")
    assert int(first["cached_tokens"]) == 0
