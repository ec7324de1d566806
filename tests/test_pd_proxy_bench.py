"""A 1P1D pair measured at the client as a user measures one: two `vllm serve` processes with llmsched's plug-in
under `ExampleConnector` (a KV producer and a KV consumer), `llmsched.vllm.pd_proxy` in front of them, and `vllm
bench serve --save-result --save-detailed` sending vLLM's random dataset at a rate through the proxy. Every request
is answered with the tokens it asked for, the decode instance loads every prompt's KV (no prompt recomputed there),
and each plug-in ran its policy's plan at every step: the pipeline a GPU 1P1D capture runs (with NixlConnector)."""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.vllm_support import Server, free_port, launch_kv_instance, require_vllm

require_vllm("aiohttp")

START_TIMEOUT = 400  # seconds for both servers, starting side by side on a 2-core machine
NUM_PROMPTS, INPUT, OUTPUT = 12, 96, 8


def bench(model: Path, port: int, out: Path) -> dict:
    """`vllm bench serve` through its module (the CPU wheel's console script finds no package metadata)."""
    code = ("import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
            "from vllm.benchmarks.serve import add_cli_args, main; p = FlexibleArgumentParser(); add_cli_args(p); "
            "main(p.parse_args(sys.argv[1:]))")
    words = ["--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}", "--model", str(model), "--tokenizer",
             str(model), "--dataset-name", "random", "--random-input-len", str(INPUT), "--random-output-len",
             str(OUTPUT), "--num-prompts", str(NUM_PROMPTS), "--request-rate", "4", "--seed", "0", "--ignore-eos",
             "--save-result", "--save-detailed", "--result-dir", str(out), "--result-filename", "bench.json",
             "--num-warmups", "0"]
    proc = subprocess.run([sys.executable, "-c", code, *words], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "bench.json").read_text())


def test_vllm_bench_serve_through_the_proxy_measures_a_1p1d_pair():
    from llmsched.vllm.model import write_model
    work = Path(tempfile.mkdtemp(prefix="pdb-"))  # short: vLLM's IPC sockets live in its temp folder (107 bytes)
    store = work / "kv"
    store.mkdir()
    model = write_model(work / "tiny")
    # a budget that holds every prompt in flight: ExampleConnector stores a prompt's KV at its first chunk
    prefill = launch_kv_instance(work, model, "kv_producer", "vllm-chunked", store, max_num_batched_tokens=2048)
    decode = launch_kv_instance(work, model, "kv_consumer", "sarathi", store, max_num_batched_tokens=2048)
    proxy_port = free_port()
    proxy = Server([sys.executable, "-m", "llmsched", "pd-proxy", "--port", str(proxy_port), "--prefill",
                    prefill.url, "--decode", decode.url, "--connector", "example"], None, work / "proxy.log",
                   proxy_port)
    try:
        for srv in (prefill, decode, proxy):
            srv.wait_ready(START_TIMEOUT)
        result = bench(model, proxy_port, work)
        hits = decode.log_tail(10 ** 8).count("External Cache Hit!")
    finally:
        leftovers = prefill.stop() + decode.stop() + proxy.stop()
    assert leftovers == []
    assert result["completed"] == NUM_PROMPTS and result["failed"] == 0 and not any(result["errors"])
    assert result["output_lens"] == [OUTPUT] * NUM_PROMPTS
    # (a token whose text is empty streams no chunk, so a request has at most OUTPUT - 1 gaps: random weights)
    assert all(t > 0 for t in result["ttfts"]) and all(0 < len(gaps) <= OUTPUT - 1 for gaps in result["itls"]), \
        [len(gaps) for gaps in result["itls"]]
    # the decode instance found the prompts' KV in the store: ExampleConnector logs a hit each time its scheduler
    # asks for a request whose prompt is stored (one folder a prompt's block-aligned tokens: vLLM's random dataset
    # may draw two prompts alike there, on a vocabulary this small)
    assert hits >= NUM_PROMPTS and len(list(store.iterdir())) >= NUM_PROMPTS // 2, hits
    for srv, served in ((prefill, NUM_PROMPTS), (decode, NUM_PROMPTS)):
        stats = json.loads((srv.records / "adapter.json").read_text())["stats"]
        assert stats["finished"] >= served and stats["mismatch_steps"] == 0, stats
    shutil.rmtree(work, ignore_errors=True)
