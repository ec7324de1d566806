"""`llmsched run --trace` of a multi-turn client's log through vLLM (CPU, tiny model): each later turn sends the turn
before it with the tokens vLLM generated for its reply, so vLLM's prefix cache finds the reply too, as it did in
the captured run (tests/data/cpu_aiperf_multiturn: AIPerf's chat requests carried the replies). Before, a replayed
log's later turns sent made-up tokens for the reply, and vLLM found only the earlier prompt."""
import csv
import json
from pathlib import Path

from llmsched.cli import main
from tests.vllm_support import require_vllm

require_vllm()

RUN = Path(__file__).parent / "data" / "cpu_aiperf_multiturn" / "rate-4"


def test_a_later_turn_finds_the_reply_vllm_generated_for_the_turn_before(tmp_path):
    from llmsched.vllm.model import write_model
    model = write_model(tmp_path / "tiny")
    out = tmp_path / "out"
    code = main(["run", "--model", str(model), "--scheduler", "vllm-chunked", "--trace", str(RUN / "requests.jsonl"),
                 "--num-requests", "9", "--max-model-len", "1024", "--kv-cache-mb", "16",
                 "--workdir", str(tmp_path / "w"), "--out", str(out), "--no-progress"])
    assert code == 0
    rows = sorted(csv.DictReader(open(out / "requests.csv")), key=lambda r: int(r["id"]))
    captured = [json.loads(line) for line in (RUN / "requests.jsonl").read_text().splitlines()][:9]
    assert len(rows) == 9 and all(r["status_name"] == "FINISHED" for r in rows)
    assert [int(r["prompt_len"]) for r in rows] == [c["input_toks"] for c in captured]
    # 224 and 448: the turn before, prompt and all but the last of its reply's tokens, in whole blocks
    assert [int(r["cached_tokens"]) for r in rows] == [c["num_cached_tokens"] for c in captured]
    assert {int(r["cached_tokens"]) for r in rows} == {0, 224, 448}
