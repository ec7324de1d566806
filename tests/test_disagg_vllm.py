"""A 1P1D pair on vLLM CPU 0.32.0 with llmsched's plug-in on both sides (docs/disaggregation.md, "The real
engine"): the prefill instance runs under the plug-in and its KV connector (``ExampleConnector``, a shared folder)
stores every prompt's KV; the decode instance, under the plug-in with another llmsched policy, loads it and decodes
the same tokens a colocated engine does (so the KV it loaded is the prompt's), each side running its policy's plan
exactly (the decode side's plan knows the connector's hit). A decode instance whose connector loads asynchronously,
as NIXL's does on a GPU (tests/async_kv_connector.py), decodes the same tokens under the plug-in."""
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
    model = write_model(work / "tiny")
    from vllm import LLM, SamplingParams
    from vllm.config import KVTransferConfig
    store = work / "kv"
    store.mkdir()
    prompts = [{"prompt_token_ids": [3 + (i * 131 + k * 17) % 997 for k in range(70 + 37 * i)]} for i in range(4)]
    # ExampleConnector stores a prompt's KV at its first chunk: a budget that holds every prompt keeps each whole
    # greedy: a sampled token would depend on the random stream's order, so on the batches a policy forms (RAD's
    # prompts one at a time shift every request's draws), not only on the KV; the greedy one is the KV's alone
    GREEDY = SamplingParams(max_tokens=8, ignore_eos=True, temperature=0.0)
    config = EngineConfig(model=str(model), max_model_len=512, max_num_seqs=16, max_num_batched_tokens=1024,
                          kv_cache_mb=16)

    def engine(role, policy, connector="ExampleConnector", whole=False):
        os.environ["LLMSCHED_SCHEDULER"] = policy
        if role is None:
            return LLM(**engine_args(config))
        kv = KVTransferConfig(kv_connector=connector, kv_role=role,
                              kv_connector_module_path="tests.async_kv_connector" if connector != "ExampleConnector"
                              else None, kv_connector_extra_config={"shared_storage_path": str(store),
                                                                    "whole_prompt": whole})
        return LLM(**engine_args(config), kv_transfer_config=kv)

    def report(side, llm):
        stats = scheduler_of(llm).stats
        print(side, type(scheduler_of(llm)).__module__, stats["finished"], stats["mismatch_steps"],
              stats["mismatches"], stats["parked_for_loads"], flush=True)

    prefill = engine("kv_producer", "vllm-chunked")
    outs = prefill.generate(prompts, SamplingParams(max_tokens=1, ignore_eos=True))
    print("PREFILLED", [len(o.outputs[0].token_ids) for o in outs], flush=True)
    report("PREFILL", prefill)
    print("STORED", len(os.listdir(store)), flush=True)
    del prefill
    decode = engine("kv_consumer", "sarathi")
    outs = decode.generate(prompts, GREEDY)
    print("DECODED", [list(o.outputs[0].token_ids) for o in outs], flush=True)
    report("DECODE", decode)
    del decode
    loading = engine("kv_consumer", "vllm-chunked", "AsyncFolderConnector")  # loads as NIXL does: parked, then run
    outs = loading.generate(prompts, GREEDY)
    print("ASYNC_DECODED", [list(o.outputs[0].token_ids) for o in outs], flush=True)
    report("ASYNC_DECODE", loading)
    del loading
    fair = engine("kv_consumer", "vtc", "AsyncFolderConnector")  # a tenant policy's decode side, loads landing
    outs = fair.generate(prompts, GREEDY)
    print("VTC_DECODED", [list(o.outputs[0].token_ids) for o in outs], flush=True)
    report("VTC_DECODE", fair)
    del fair
    whole = engine("kv_consumer", "sarathi", "AsyncFolderConnector", whole=True)  # NIXL's count: every prompt token
    outs = whole.generate(prompts, GREEDY)
    print("WHOLE_COUNTS", [len(o.outputs[0].token_ids) for o in outs], flush=True)
    report("WHOLE_DECODE", whole)
    del whole
    tiled = engine("kv_consumer", "rad", "AsyncFolderConnector")  # RAD's decode side (Bari et al.), loads landing
    outs = tiled.generate(prompts, GREEDY)
    print("RAD_DECODED", [list(o.outputs[0].token_ids) for o in outs], flush=True)
    report("RAD_DECODE", tiled)
    del tiled
    orca = engine("kv_consumer", "orca", "AsyncFolderConnector")  # max_model_len reservations beside landed KV
    outs = orca.generate(prompts, GREEDY)
    print("ORCA_DECODED", [list(o.outputs[0].token_ids) for o in outs], flush=True)
    report("ORCA_DECODE", orca)
    del orca
    ranked = engine("kv_consumer", "infermax-rank-i", "AsyncFolderConnector")  # Kim et al.'s ranked group, M
    outs = ranked.generate(prompts, GREEDY)
    print("RANKED_DECODED", [list(o.outputs[0].token_ids) for o in outs], flush=True)
    report("RANKED_DECODE", ranked)
    del ranked
    import tests.colocated_only  # a policy of a user's own that plans waiting requests as holding nothing
    warned = engine("kv_consumer", tests.colocated_only.NAME)  # warned of
    del warned
    colocated = engine(None, "vllm-chunked")
    outs = colocated.generate(prompts, GREEDY)
    print("COLOCATED", [list(o.outputs[0].token_ids) for o in outs], flush=True)
""")


def line(out: str, head: str) -> str:
    found = [s for s in out.splitlines() if s.startswith(head + " ")]
    assert found, out[-3000:]
    return found[0][len(head) + 1:]


def test_a_1p1d_pair_runs_under_the_plug_in_on_both_sides_and_decodes_as_colocated(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", PAIR, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=900, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert line(out, "PREFILLED") == "[1, 1, 1, 1]" and line(out, "STORED") == "4"
    # each side under the plug-in, every request finished, every step the policy's plan (no mismatch)
    assert line(out, "PREFILL") == "llmsched.vllm.adapter 4 0 [] 0"
    assert line(out, "DECODE") == "llmsched.vllm.adapter 4 0 [] 0"
    assert out.count("External Cache Hit!") >= 4
    decoded = line(out, "DECODED")
    assert decoded == line(out, "COLOCATED") and decoded.count(",") == 4 * 8 - 1
    # an asynchronous load (tests/async_kv_connector.py): each request parked while its KV lands, then planned by
    # the policy as holding it (before, the plug-in never ran a landed request: the engine spun on empty steps)
    assert line(out, "ASYNC_DECODE") == "llmsched.vllm.adapter 4 0 [] 4"
    assert line(out, "ASYNC_DECODED") == decoded
    assert line(out, "VTC_DECODE") == "llmsched.vllm.adapter 4 0 [] 4" and line(out, "VTC_DECODED") == decoded
    # a hit of every prompt token, as NIXL counts a remote prefill: vLLM recomputes the last, and so plans the policy
    assert line(out, "WHOLE_DECODE") == "llmsched.vllm.adapter 4 0 [] 4"
    assert line(out, "WHOLE_COUNTS") == "[8, 8, 8, 8]"
    # RAD admits one prompt at a time (Bari et al.), so fewer are parked for their loads than the 4 above
    rad = line(out, "RAD_DECODE")
    assert rad.startswith("llmsched.vllm.adapter 4 0 [] ") and int(rad.split()[-1]) >= 1
    assert line(out, "RAD_DECODED") == decoded
    assert line(out, "ORCA_DECODE").startswith("llmsched.vllm.adapter 4 0 [] ")
    assert line(out, "ORCA_DECODED") == decoded and "and scheduler 'orca'" not in out
    assert line(out, "RANKED_DECODE").startswith("llmsched.vllm.adapter 4 0 [] ")
    assert line(out, "RANKED_DECODED") == decoded and "and scheduler 'infermax-rank-i'" not in out
    assert "receives KV through a connector (kv_role kv_consumer), and scheduler 'test-colocated-only'" in out
    assert "and scheduler 'sarathi'" not in out and "and scheduler 'vllm-chunked'" not in out
    assert "and scheduler 'vtc'" not in out and "and scheduler 'rad'" not in out
