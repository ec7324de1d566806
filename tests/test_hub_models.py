"""Models people serve today by Hugging Face id (llmsched/hardware/hub_models.json): every id resolves to the shape
its model card publishes, an id and its config.json give the same spec, and the architectures it covers simulate."""
import json
import time

import pytest

from llmsched.experiment import run
from llmsched.hardware.hub_models import hub_table
from llmsched.hardware.models import model
from llmsched.run_config import RunConfig

# published total parameters (billions) and the tolerance of the card's rounding; text decoders only where the
# card's figure includes a vision tower, which is not modelled (the figure is then an upper bound)
PUBLISHED = {
    "meta-llama/Llama-3.3-70B-Instruct": (70.6, 0.01),     # model card: 70B; Llama-3.1-70B's shape, 70.55B
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (109, 0.02),      # 109B total with the vision tower, 17B active
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": (400, 0.01),  # 400B total, 17B active
    "Qwen/Qwen3-8B": (8.2, 0.01), "Qwen/Qwen3-235B-A22B": (235, 0.01),
    "Qwen/Qwen2.5-7B-Instruct": (7.61, 0.01), "Qwen/Qwen2.5-72B-Instruct": (72.7, 0.01),
    "deepseek-ai/DeepSeek-V3": (671, 0.01), "openai/gpt-oss-20b": (20.91, 0.01), "openai/gpt-oss-120b": (116.83, 0.01),
    "google/gemma-3-1b-it": (1.0, 0.01), "mistralai/Mistral-Small-24B-Instruct-2501": (23.6, 0.01),
    "mistralai/Mixtral-8x22B-Instruct-v0.1": (141, 0.01),
}
# published parameters a token (billions): model cards; gpt-oss's card counts the unembedding, not the embedding
ACTIVE = {"meta-llama/Llama-4-Scout-17B-16E-Instruct": 17, "meta-llama/Llama-4-Maverick-17B-128E-Instruct": 17,
          "Qwen/Qwen3-235B-A22B": 22, "mistralai/Mixtral-8x22B-Instruct-v0.1": 39}


def test_every_shipped_id_names_its_config_and_resolves():
    table = hub_table()
    assert len(table) >= 25
    for hub_id, entry in table.items():
        assert entry["source"] == f"https://huggingface.co/{hub_id}/blob/main/config.json" and entry["checked"]
        spec = model(hub_id)
        assert spec.name == hub_id and entry["source"] in spec.source
        assert model(hub_id.lower()) is spec          # case-insensitive, built once


def test_the_architectures_the_issue_names_are_covered():
    specs = {hub_id: model(hub_id) for hub_id in hub_table()}
    assert any(s.kv_heads < s.heads and not s.is_moe for s in specs.values())           # dense GQA
    assert any(s.is_moe and s.shared_expert_ffn for s in specs.values())                # MoE with shared experts
    assert any(s.is_mla for s in specs.values())                                         # MLA
    assert any(s.sliding_window and s.sliding_layers == s.layers // 2 for s in specs.values())  # alternating
    assert any(s.sliding_window and s.sliding_layers < s.layers for s in specs.values())  # hybrid local/global
    for needed in ("Llama-3.3-70B", "Llama-4-Scout", "Llama-4-Maverick", "Qwen3-8B", "Qwen3-235B-A22B",
                   "Qwen2.5-72B", "DeepSeek-V3", "DeepSeek-R1", "gpt-oss-20b", "gpt-oss-120b", "gemma-3-27b",
                   "Mistral-Small", "Mixtral-8x22B"):
        assert any(needed in hub_id for hub_id in specs), needed
    for preset_id in ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct",
                      "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-32B", "mistralai/Mixtral-8x7B-Instruct-v0.1"):
        model(preset_id)                                # presets take their own ids


@pytest.mark.parametrize("hub_id", sorted(PUBLISHED))
def test_parameter_counts_match_the_model_cards(hub_id):
    total, tolerance = PUBLISHED[hub_id]
    assert model(hub_id).params / 1e9 == pytest.approx(total, rel=tolerance)
    if hub_id in ACTIVE:
        assert model(hub_id).active_params / 1e9 == pytest.approx(ACTIVE[hub_id], rel=0.05)


def test_shapes_read_from_the_configs():
    scout, maverick = model("meta-llama/Llama-4-Scout-17B-16E-Instruct"), \
        model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert (scout.moe_layers, scout.experts, scout.experts_per_token, scout.shared_expert_ffn) == (48, 16, 1, 8192)
    assert (maverick.moe_layers, maverick.dense_layers, maverick.ffn) == (24, 24, 16384)
    assert (scout.sliding_window, scout.sliding_layers) == (8192, 36)     # chunked attention on 3 of 4 layers
    oss = model("openai/gpt-oss-120b")
    assert oss.expert_weight_bytes == 4.25 / 8 and oss.weight_dtype_bytes == 2
    assert oss.weight_bytes / 2**30 == pytest.approx(60.8, rel=0.01)       # the checkpoint's 60.8 GiB on disk
    assert (oss.sliding_window, oss.sliding_layers, oss.head_dim) == (128, 18, 64)
    gemma = model("google/gemma-3-27b-it")
    assert (gemma.sliding_layers, gemma.kv_bytes_per_token, gemma.tied_embeddings) == (52, 507_904, True)
    v3 = model("deepseek-ai/DeepSeek-R1")
    assert v3.kv_bytes_per_token == 70_272 and v3.weight_dtype_bytes == 1


def test_an_id_and_its_config_json_give_the_same_spec(tmp_path):
    for hub_id in ("openai/gpt-oss-20b", "google/gemma-3-12b-it", "meta-llama/Llama-4-Scout-17B-16E-Instruct"):
        config = dict(hub_table()[hub_id]["config"])
        if config["model_type"] in ("llama4_text", "gemma3_text") and hub_id != "google/gemma-3-1b-it":
            wrapper = {"llama4_text": "llama4", "gemma3_text": "gemma3"}[config["model_type"]]
            config = {"model_type": wrapper, "architectures": config["architectures"], "text_config": config,
                      "vision_config": {"hidden_size": 1152}, "torch_dtype": "bfloat16"}
        path = tmp_path / hub_id.replace("/", "_") / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(config))
        a, b = model(hub_id), model(str(path))
        shape = {k: v for k, v in a.__dict__.items() if k not in ("name", "source")}
        assert shape == {k: v for k, v in b.__dict__.items() if k not in ("name", "source")}


@pytest.mark.parametrize("hub_id, gpu, tp", [("openai/gpt-oss-20b", "h100", 1), ("google/gemma-3-27b-it", "h100", 1),
                                             ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "h200", 2),
                                             ("deepseek-ai/DeepSeek-V3", "h200", 8),
                                             ("Qwen/Qwen3-235B-A22B", "h200", 4)])
def test_a_shipped_model_simulates_by_its_id(hub_id, gpu, tp):
    result = run(RunConfig(model=hub_id, gpu=gpu, tp=tp, num_requests=30, rate=4.0, scheduler="vllm-chunked"))
    finished = result.requests.column("status") == 3
    assert finished.all() and result.meta["kv_blocks"] > 100
    assert result.meta["batch_time"]["gpu_model"]["model"] == (hub_id if tp == 1 else f"{hub_id}-tp{tp}")


def test_an_id_simulates_as_fast_as_its_config_json(tmp_path):
    """The same spec object, the same steps: the id's run and the config.json's take the same wall time (ten
    alternating runs, the medians within the shared machine's noise)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hub_table()["Qwen/Qwen3-8B"]["config"]))
    times = {"id": [], "config": []}
    rows = {}
    for _ in range(5):
        for label, name in (("id", "Qwen/Qwen3-8B"), ("config", str(path))):
            t = time.perf_counter()
            result = run(RunConfig(model=name, gpu="h100", num_requests=200, rate=6.0, scheduler="vllm-chunked"))
            times[label].append(time.perf_counter() - t)
            rows[label] = len(result.steps)
    assert rows["id"] == rows["config"]
    med = {k: sorted(v)[2] for k, v in times.items()}
    assert med["id"] < 1.5 * med["config"] and med["config"] < 1.5 * med["id"]


@pytest.mark.parametrize("hub_id, preset", [
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b"), ("meta-llama/Meta-Llama-3-8B-Instruct", "llama-3-8b"),
    ("meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1-70b"), ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b"),
    ("meta-llama/Meta-Llama-3.1-8B-Instruct-tp2", "llama-3.1-8b-tp2")])
def test_renamed_and_chat_repos_resolve_to_their_presets(hub_id, preset):
    """vLLM bench results name the repos as they were called when they ran: Meta-Llama-3.1-8B-Instruct is now
    Llama-3.1-8B-Instruct, the same config."""
    assert model(hub_id) == model(preset)
