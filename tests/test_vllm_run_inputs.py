"""`llmsched run` / `profile` / `fidelity` refuse what vLLM cannot start on before the engine starts: each case was
found by running every scheduler through the plug-in. Before, a model directory without config.json ended, 19 s
in, in a pydantic dump ('1 validation error for ModelConfig ... Invalid repository ID'), one without a tokenizer
38 s in with 'Couldn't instantiate the backend tokenizer' naming no file, and a bad policy parameter or a policy
that needs true lengths stopped only after vLLM had loaded the model (about 40 s here), the latter saying to set
LLMSCHED_ORACLE=1, the server's switch, not `--oracle`. None of these tests needs vLLM: the engine must not start."""
import json

import pytest

import llmsched.cli.real_engine as real_engine
import llmsched.vllm.launch as launch
import llmsched.vllm.runner as runner
from llmsched.cli import main
from tests.cli_support import one_line_error

RUN = ["run", "--workload", "sharegpt", "--rate", "4", "--num-requests", "4", "--scale-lengths", "0.1",
       "--max-model-len", "512"]
TINY_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
               "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
               "vocab_size": 4096, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}


@pytest.fixture(autouse=True)
def no_engine(monkeypatch):
    """A run that gets as far as starting vLLM fails the test: every case here is refused before that."""
    def started(*args, **kwargs):
        raise AssertionError("vLLM was started for an input that should have been refused first")
    monkeypatch.setattr(runner, "make_llm", started)
    monkeypatch.setattr(launch, "make_llm", started)  # fidelity's


def model_dir(tmp_path, config=TINY_CONFIG, tokenizer=True):
    d = tmp_path / "model"
    d.mkdir()
    if config is not None:
        (d / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    if tokenizer:
        (d / "tokenizer.json").write_text("{}")
    return d


@pytest.mark.parametrize("command", ["run", "profile", "fidelity"])
def test_model_dir_without_config_json(tmp_path, capsys, command):
    d = model_dir(tmp_path, config=None)
    args = [command, "--model", str(d)] + (RUN[1:] if command != "profile" else [])
    err = one_line_error(args, capsys)
    assert f"--model {d}: {d} has no config.json" in err and "llmsched make-model --out DIR" in err


def test_model_dir_without_tokenizer(tmp_path, capsys):
    d = model_dir(tmp_path, tokenizer=False)
    err = one_line_error(RUN + ["--model", str(d)], capsys)
    assert f"{d} has no tokenizer (none of tokenizer.json, tokenizer.model" in err


def test_model_config_that_is_not_json(tmp_path, capsys):
    d = model_dir(tmp_path, config='{"hidden_size": 25')
    err = one_line_error(RUN + ["--model", str(d)], capsys)
    assert f"{d / 'config.json'} is not JSON" in err


def test_bad_policy_parameter_is_refused_before_the_engine_starts(tmp_path, capsys):
    d = model_dir(tmp_path)
    err = one_line_error(RUN + ["--model", str(d), "--scheduler", "sarathi", "--param", "order=bogus"], capsys)
    assert "sarathi: order must be one of ('fcfs', 'spf'), got 'bogus'" in err
    err = one_line_error(RUN + ["--model", str(d), "--scheduler", "vtc", "--param", "kv_reserve=2"], capsys)
    assert "kv_reserve must be in [0, 1)" in err


@pytest.mark.parametrize("name", ["wait", "infermax-oracle", "infermax-rank-o"])
def test_policy_that_needs_true_lengths_names_the_flag(tmp_path, capsys, name):
    d = model_dir(tmp_path)
    err = one_line_error(RUN + ["--model", str(d), "--scheduler", name], capsys)
    assert f"--scheduler {name}: it decides from true output lengths; add --oracle" in err
    assert "LLMSCHED_ORACLE" not in err


def test_a_good_setting_reaches_the_engine(tmp_path, monkeypatch):
    """The checks refuse only what is wrong: the same model with a good policy gets as far as starting vLLM."""
    monkeypatch.setattr(real_engine, "_start", lambda args: None)  # vLLM's environment stays out of this process
    d = model_dir(tmp_path)
    with pytest.raises(AssertionError, match="vLLM was started"):
        main(RUN + ["--model", str(d), "--scheduler", "wait", "--oracle"])


@pytest.mark.parametrize("command", ["run", "fidelity"])
def test_a_trace_that_cannot_be_replayed_as_asked_fails_before_the_engine_starts(tmp_path, capsys, command,
                                                                                  monkeypatch):
    """Mooncake's conversation trace opens with requests at one timestamp: its first 10 cannot be rescaled to a
    rate. That error came after vLLM had started (about 20 s here)."""
    monkeypatch.setattr(real_engine, "_start", lambda args: None)
    d = model_dir(tmp_path)
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(f'{{"timestamp": 0, "input_length": {100 + i}, "output_length": 20, "hash_ids": [{i}]}}\n'
                             for i in range(10)))
    err = one_line_error([command, "--model", str(d), "--trace", str(trace), "--rate", "4", "--scale-lengths", "0.1",
                          "--max-model-len", "512"], capsys)
    assert "the trace spans no time" in err and "leave it out" in err
