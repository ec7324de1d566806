"""A 1P1D pair served as a user serves it (docs/disaggregation.md, "The real engine"): two `vllm serve` processes
with llmsched's plug-in (`--scheduler-cls`), one a KV producer and one a KV consumer of `ExampleConnector`
(`--kv-transfer-config`), driven over HTTP as a disaggregation proxy drives them: the prompt to the prefill
instance with `max_tokens=1`, then the request to the decode instance, which loads the prompt's KV and produces
the tokens. The decode instance's tokens are the ones the prefill instance decodes by itself (the same dummy
weights, greedy), so the KV crossed intact; each plug-in ran its policy's plan at every step."""
import json
import shutil
import tempfile
import urllib.request
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor

from tests.vllm_support import Server, launch_kv_instance, require_vllm

require_vllm()

START_TIMEOUT = 400  # seconds for both servers, starting side by side on a 2-core machine
TIMEOUT = 150
PROMPTS = [[3 + (i * 131 + k * 17) % 997 for k in range(70 + 37 * i)] for i in range(4)]
OUTPUT = 8


def launch(workdir, role: str, policy: str, store) -> Server:
    from llmsched.vllm.model import write_model
    return launch_kv_instance(workdir, write_model(workdir / "tiny"), role, policy, store, max_num_batched_tokens=256)


def complete(server: Server, prompt: list[int], max_tokens: int) -> list[int]:
    body = {"model": server.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "return_token_ids": True}
    request = urllib.request.Request(server.url + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as r:
        choice = json.loads(r.read())["choices"][0]
    assert choice["finish_reason"] == "length", choice
    return choice["token_ids"]


def test_a_served_1p1d_pair_decodes_what_the_prefill_instance_would():
    work = Path(tempfile.mkdtemp(prefix="pd-"))  # short: vLLM's IPC sockets live in its temp folder (107 bytes)
    store = work / "kv"
    store.mkdir()
    prefill = launch(work, "kv_producer", "vllm-chunked", store)
    decode = launch(work, "kv_consumer", "sarathi", store)
    try:
        for srv in (prefill, decode):
            srv.wait_ready(START_TIMEOUT)
        for prompt in PROMPTS:  # one at a time: ExampleConnector stores a prompt at its first chunk
            assert len(complete(prefill, prompt, 1)) == 1
        assert len(list(store.iterdir())) == len(PROMPTS)
        with ThreadPoolExecutor(len(PROMPTS)) as pool:  # the decode instance batches them
            decoded = list(pool.map(lambda p: complete(decode, p, OUTPUT), PROMPTS))
        alone = [complete(prefill, p, OUTPUT) for p in PROMPTS]
        assert decoded == alone and all(len(t) == OUTPUT for t in decoded)
        assert "External Cache Hit!" in decode.log_tail(10 ** 7)
    finally:
        leftovers = prefill.stop() + decode.stop()
    assert leftovers == []
    for srv, served in ((prefill, 2 * len(PROMPTS)), (decode, len(PROMPTS))):
        stats = json.loads((srv.records / "adapter.json").read_text())["stats"]
        assert stats["finished"] == served and stats["mismatch_steps"] == 0, stats
    shutil.rmtree(work, ignore_errors=True)
