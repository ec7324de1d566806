"""A config.json's ``layer_types``: one known type a layer, and a window for the sliding ones. A short or unknown
list was read as full attention (a gpt-oss with 3 types got 12x the KV cache); now it is a one-line error naming
the file and the field, while the shipped configs and transformers' own writings of them still load."""
import json
from pathlib import Path

import pytest

from llmsched.hardware import model
from llmsched.hardware.hf_config import spec_fields

HUB = json.loads((Path(__file__).parents[1] / "llmsched" / "hardware" / "hub_models.json").read_text())["models"]


def write(tmp_path: Path, hub_id: str, **fields) -> Path:
    """The shipped config of ``hub_id`` with ``fields`` changed (None: removed), as a config.json."""
    data = {**HUB[hub_id]["config"], **fields}
    for key in [k for k, v in fields.items() if v is None]:
        data.pop(key)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return path


GOSS = "openai/gpt-oss-20b"
ALTERNATING = ["sliding_attention", "full_attention"] * 12


@pytest.mark.parametrize("fields, wanted", [
    ({"layer_types": ALTERNATING[:3]}, "layer_types has length 3 but num_hidden_layers = 24; give one type a layer"),
    ({"layer_types": ["bogus"] * 24}, 'layer_types[0] = "bogus" is not a layer type llmsched models for gpt_oss; '
                                      "use one of full_attention, sliding_attention"),
    ({"layer_types": ["full_attention"] * 23 + ["linear_attention"]}, 'layer_types[23] = "linear_attention"'),
    ({"layer_types": "sliding_attention"}, "layer_types = \"sliding_attention\" is not a list"),
    ({"sliding_window": None}, "sliding_window is missing but layer_types names 12 sliding_attention layers; give "
                               "the window in tokens"),
    ({"sliding_window": 0}, "sliding_window = 0 is not an integer >= 1"),
])
def test_a_wrong_layer_types_is_a_one_line_error_naming_the_file(tmp_path, fields, wanted):
    path = write(tmp_path, GOSS, **fields)
    with pytest.raises(ValueError) as e:
        spec_fields(path)
    assert str(e.value).startswith(f"{path}: ") and wanted in str(e.value), e.value


def test_a_null_window_with_sliding_layers_is_named_null(tmp_path):
    data = {**HUB[GOSS]["config"], "sliding_window": None}
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="sliding_window is null but layer_types names 12"):
        spec_fields(tmp_path)


def test_a_llama_with_a_short_layer_types_is_refused(tmp_path):
    path = write(tmp_path, "meta-llama/Llama-3.2-1B-Instruct", sliding_window=128, layer_types=["sliding_attention"])
    with pytest.raises(ValueError, match=r"layer_types has length 1 but num_hidden_layers = 16"):
        spec_fields(path)


def test_the_cli_refuses_it_in_one_line(tmp_path, capsys):
    from llmsched.cli import main
    path = write(tmp_path, GOSS, layer_types=ALTERNATING[:3])
    code = main(["simulate", "--model", str(path), "--gpu", "h100", "--num-requests", "5", "--out",
                 str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "layer_types has length 3" in err, err


def test_every_shipped_model_still_loads():
    for hub_id in HUB:
        assert model(hub_id).layers > 0


def test_transformers_own_layer_types_read_as_before(tmp_path):
    """transformers writes layer_types for Qwen3 (all full, no window: use_sliding_window false), gpt-oss and
    Llama-4 (chunked on the RoPE layers): each reads as the config without them does."""
    layers = HUB["Qwen/Qwen3-8B"]["config"]["num_hidden_layers"]
    typed = model(str(write(tmp_path, "Qwen/Qwen3-8B", sliding_window=None, layer_types=["full_attention"] * layers)))
    plain = model("Qwen/Qwen3-8B")
    assert (typed.sliding_window, typed.kv_bytes_per_token) == (0, plain.kv_bytes_per_token)
    goss = model(str(write(tmp_path, GOSS)))
    assert (goss.sliding_window, goss.sliding_layers) == (128, 12)
    scout = HUB["meta-llama/Llama-4-Scout-17B-16E-Instruct"]["config"]
    text = scout.get("text_config", scout)
    layers, interval = text["num_hidden_layers"], text.get("no_rope_layer_interval", 4)
    types = ["chunked_attention" if (i + 1) % interval else "full_attention" for i in range(layers)]
    plain = model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    data = json.loads(json.dumps(scout))
    (data["text_config"] if "text_config" in data else data)["layer_types"] = types
    (tmp_path / "scout.json").write_text(json.dumps(data))
    with_types = model(str(tmp_path / "scout.json"))
    assert (with_types.sliding_window, with_types.sliding_layers) == (plain.sliding_window, plain.sliding_layers)
    assert plain.sliding_layers > 0
