"""`llmsched run` of multi-turn sessions through vLLM (CPU, tiny model): every turn is sent, each later turn when
the turn before it has finished, its prompt the conversation so far with the tokens vLLM generated, so the prefix
cache finds the earlier turn's prompt *and reply*. Before, only each session's first turn was sent (4 of 12)."""
import csv
import json

from llmsched.cli import main
from tests.vllm_support import require_vllm

require_vllm()

SYSTEM, QUESTION, OUTPUT, BLOCK = 100, 50, 20, 32
ARGS = ["--workload", "shared-prefix", "--wl-param", "num_groups=2", "--wl-param", "num_prompts_per_group=2",
        "--wl-param", f"system_prompt_len={SYSTEM}", "--wl-param", f"question_len={QUESTION}",
        "--wl-param", f"output_len={OUTPUT}", "--wl-param", "enable_multi_turn_chat=true", "--rate", "4",
        "--num-requests", "12", "--max-model-len", "1024", "--kv-cache-mb", "16", "--block-size", str(BLOCK)]


def test_every_turn_is_sent_and_follow_ups_hit_the_earlier_turns_reply(tmp_path):
    from llmsched.vllm.model import write_model
    model = write_model(tmp_path / "tiny")
    out = tmp_path / "out"
    code = main(["run", "--model", str(model), "--scheduler", "vllm-chunked", *ARGS, "--workdir",
                 str(tmp_path / "w"), "--out", str(out), "--no-progress"])
    assert code == 0
    rows = sorted(csv.DictReader(open(out / "requests.csv")), key=lambda r: int(r["id"]))
    assert [int(r["id"]) for r in rows] == list(range(12)) and all(r["status_name"] == "FINISHED" for r in rows)
    first = SYSTEM + SYSTEM + QUESTION  # round 1: the context (system prompt), then system prompt and question
    step = OUTPUT + SYSTEM + QUESTION  # each later round adds the reply and the prompt again
    prompts = [int(r["prompt_len"]) for r in rows]
    assert sorted(prompts) == sorted([first] * 4 + [first + step] * 4 + [first + 2 * step] * 4)
    by_id = {int(r["id"]): r for r in rows}
    follow = [r for r in rows if int(r["prompt_len"]) > first]
    for r in follow:
        # a later turn arrives after its predecessor finished: it is issued from that completion
        before = int(r["prompt_len"]) - step
        earlier = [p for p in by_id.values() if int(p["prompt_len"]) == before
                   and float(p["finish"]) <= float(r["arrival"]) + 1e-6]
        assert earlier, f"request {r['id']} arrived before any turn it could follow had finished"
        # vLLM cached the earlier turn's prompt and all but the last reply token (never computed): every full
        # block of that is found. Reply tokens drawn instead of vLLM's own would stop the hit at the prompt.
        assert int(r["cached_tokens"]) == (before + OUTPUT - 1) // BLOCK * BLOCK
    assert any((before := int(r["prompt_len"]) - step + OUTPUT - 1) // BLOCK > (before - OUTPUT + 1) // BLOCK
               for r in follow)  # at least one turn's hit reaches into the reply
    summary = json.load(open(out / "summary.json"))
    assert summary["counts"]["offered"] == 12
    assert summary["prefix_cache"]["cached_tokens"] == sum(int(r["cached_tokens"]) for r in rows)
