"""`reproduce splitwise --pd-first-token`: Splitwise's prompt machine answers first by default; vLLM's proxy (the
decode instance) is the ablation docs/disaggregation.md's column B runs."""
from __future__ import annotations

from llmsched.reproduce.splitwise import FIRST_TOKEN, configs, model_file


def test_the_first_token_is_the_prompt_machines_unless_asked(tmp_path, shared_data):
    model = model_file(tmp_path)
    trace = str(shared_data / "traces" / "AzureLLMInferenceTrace_conv.csv")
    assert FIRST_TOKEN == "prefill"
    for first in ("prefill", "decode"):
        designs = configs("iso-power", 20.0, trace, 50, 0, model, "vllm-v1", first)
        split = [cfg for name, cfgs in designs.items() if name.startswith("Splitwise") for cfg in cfgs]
        colocated = [cfg for name, cfgs in designs.items() if name.startswith("Baseline") for cfg in cfgs]
        assert split and all(cfg.pd_first_token == first and cfg.disaggregate for cfg in split)
        assert colocated and all(not cfg.disaggregate for cfg in colocated)
