"""A 1P1D pair on vLLM CPU 0.32.0 with llmsched's plug-in on both sides (docs/disaggregation.md, "The real
engine"): the prefill instance runs under the plug-in and its KV connector (``ExampleConnector``, a shared folder)
stores every prompt's KV; the decode instance finds every prompt there, and then vLLM's CPU build cannot load it
(the connector's layout is not the CPU backend's). The test pins that outcome, so a vLLM that loads it fails here
and says to make this a full 1P1D run."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.vllm_support import require_vllm

require_vllm()

REPO = Path(__file__).resolve().parents[1]

PAIR = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from llmsched.vllm.launch import EngineConfig, engine_args, scheduler_of, set_in_process_env
    from llmsched.vllm.model import write_model
    work = Path(sys.argv[1])
    set_in_process_env(str(work / "work"))
    os.environ["LLMSCHED_SCHEDULER"] = "vllm-chunked"
    model = write_model(work / "tiny")
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    store = work / "kv"
    store.mkdir()
    prompts = [{"prompt_token_ids": [3 + (i * 131 + k * 17) % 997 for k in range(70 + 37 * i)]} for i in range(4)]

    def engine(role):
        cfg = EngineConfig(model=str(model), max_model_len=512, max_num_seqs=16, max_num_batched_tokens=256,
                           kv_cache_mb=16)
        kv = KVTransferConfig(kv_connector="ExampleConnector", kv_role=role,
                              kv_connector_extra_config={"shared_storage_path": str(store)})
        return LLM(**engine_args(cfg), kv_transfer_config=kv)

    prefill = engine("kv_producer")
    print("SCHEDULER", type(scheduler_of(prefill)).__module__, flush=True)
    outs = prefill.generate(prompts, SamplingParams(max_tokens=1, ignore_eos=True))
    print("PREFILLED", [len(o.outputs[0].token_ids) for o in outs], scheduler_of(prefill).stats["finished"],
          flush=True)
    print("STORED", len(os.listdir(store)), flush=True)
    del prefill
    decode = engine("kv_consumer")
    outs = decode.generate(prompts, SamplingParams(max_tokens=8, ignore_eos=True))
    print("DECODED", [len(o.outputs[0].token_ids) for o in outs], flush=True)
""")


def test_a_1p1d_pair_prefills_under_the_plug_in_and_vllm_cpu_cannot_load_the_kv(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", PAIR, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=900, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert "SCHEDULER llmsched.vllm.adapter" in out, out[-3000:]
    assert "PREFILLED [1, 1, 1, 1] 4" in out and "STORED 4" in out, out[-3000:]
    assert out.count("External Cache Hit!") >= 4, out[-3000:]
    assert "DECODED" not in out, ("vLLM's CPU build now loads a transferred prompt's KV: make this a full 1P1D "
                                  "run with the plug-in on both sides (docs/disaggregation.md)")
    assert "shape mismatch" in out and "example_connector.py" in out, out[-3000:]
