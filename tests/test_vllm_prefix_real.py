"""`llmsched run` of a Mooncake slice through vLLM (CPU, tiny model): prompts built from the trace's hash_ids hit
vLLM's own prefix cache where the trace says they share blocks. Before, the length scaling dropped each request's
content and the prompts were made from request ids, so every request had cached_tokens 0."""
import csv
import json

import pytest

from llmsched.cli import main
from llmsched.run_config import RunConfig
from llmsched.vllm.runner import workload_requests
from tests.vllm_support import require_vllm

require_vllm()

MOONCAKE = "../shared/data/traces/mooncake/conversation_trace.jsonl"
ARGS = ["--trace", MOONCAKE, "--num-requests", "12", "--scale-lengths", "0.1", "--max-model-len", "1024"]


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_mooncake_slice_hits_vllms_prefix_cache_where_its_hash_ids_share(tmp_path):
    """At 0.1 a 512-token hash block is 51 tokens: the system prompt every request starts with (hash id 0) fills
    one 32-token KV block. vLLM finds it for requests after the first, and never more than the trace shares."""
    from llmsched.vllm.model import write_model
    model = write_model(tmp_path / "tiny")
    out = tmp_path / "out"
    code = main(["run", "--model", str(model), "--scheduler", "vllm-chunked", *ARGS, "--kv-cache-mb", "16",
                 "--workdir", str(tmp_path / "w"), "--out", str(out), "--no-progress"])
    assert code == 0
    reqs = workload_requests(RunConfig.checked({"trace": MOONCAKE, "num_requests": 12, "max_model_len": 1024}),
                             1024, 0.1)
    hashes = {r.id: r.content.block_hashes(32, r.prompt_len) for r in reqs}

    def shared(i):  # the most leading blocks request i shares with another request
        best = 0
        for j, other in hashes.items():
            if j != i:
                n = next((k for k, (a, b) in enumerate(zip(hashes[i], other)) if a != b), min(len(hashes[i]),
                                                                                               len(other)))
                best = max(best, n)
        return best

    rows = list(csv.DictReader(open(out / "requests.csv")))
    assert len(rows) == 12 and all(r["status_name"] == "FINISHED" for r in rows)
    cached = {int(r["id"]): int(r["cached_tokens"]) for r in rows}
    assert all(c <= 32 * shared(i) for i, c in cached.items())
    assert sum(1 for c in cached.values() if c > 0) >= 6  # most requests arrive after the first has run
    summary = json.load(open(out / "summary.json"))
    assert summary["prefix_cache"]["cached_tokens"] == sum(cached.values()) > 0
