"""The plug-in beside vLLM run without chunked prefill (``--no-enable-chunked-prefill``, vLLM CPU 0.32.0): a policy
that plans prompts in chunks is refused at start-up with what to do, since vLLM would not run its chunks;
``vllm-chunked`` with ``chunked_prefill=false`` runs there, every step its plan, prompts that do not fit the budget
left waiting a step as vLLM's own loop makes them."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.vllm_support import require_vllm

require_vllm()

REPO = Path(__file__).resolve().parents[1]

ENGINE = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from llmsched.vllm.launch import EngineConfig, engine_args, scheduler_of, set_in_process_env
    from llmsched.vllm.model import write_model
    work = Path(sys.argv[1])
    set_in_process_env(str(work / "work"))
    os.environ["LLMSCHED_SCHEDULER"] = "vllm-chunked"
    if sys.argv[2]:
        os.environ["LLMSCHED_PARAMS"] = sys.argv[2]
    model = write_model(work / "tiny")
    from vllm import LLM, SamplingParams
    cfg = EngineConfig(model=str(model), max_model_len=512, max_num_seqs=16, max_num_batched_tokens=512,
                       kv_cache_mb=16)
    try:
        llm = LLM(**engine_args(cfg), enable_chunked_prefill=False)
    except Exception as e:
        print("REFUSED", str(e).splitlines()[-1], flush=True)
        raise SystemExit(0)
    prompts = [{"prompt_token_ids": [3 + (i * 131 + k * 17) % 997 for k in range(n)]}
               for i, n in enumerate((300, 250, 100))]
    outs = llm.generate(prompts, SamplingParams(max_tokens=4, ignore_eos=True))
    stats = scheduler_of(llm).stats
    print("RAN", [len(o.outputs[0].token_ids) for o in outs], stats["finished"], stats["mismatch_steps"],
          stats["mismatches"], flush=True)
""")


def run(tmp_path, params: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", ENGINE, str(tmp_path), params], capture_output=True, text=True,
                          env=env, timeout=600, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    return out


def test_a_chunking_policy_is_refused_where_vllm_runs_prompts_whole(tmp_path):
    out = run(tmp_path, "")
    assert "REFUSED" in out and "plans prompts in chunks" in out and "chunked_prefill=false" in out, out[-3000:]


def test_vllm_chunked_without_chunks_runs_its_plan_beside_vllm(tmp_path):
    out = run(tmp_path, "chunked_prefill=false")
    # the 250-token prompt does not fit the 212 tokens the 300-token one leaves: it and the one behind it wait a
    # step, as vLLM's loop makes them; the plan says so, so no step differs
    assert "RAN [4, 4, 4] 3 0 []" in out, out[-3000:]
