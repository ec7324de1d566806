"""Cases a second user sweep of the commands, the library API and validate-serving's inputs found: each failed
before its fix (see the commit that added it)."""
import pytest

from llmsched.cli import main
from llmsched.workload.traces.readers import DataFileNotFound
from tests.cli_support import one_line_error
from tests.conftest import shared_data_dir


def test_sweep_with_tenants_names_the_rates_the_user_gave(capsys):
    """`sweep --rates 1,2 --tenants ...` said 'drop --rate', an option the user never gave; a multi-tenant sweep
    now runs (tests/test_realfix.py), each rate the tenants' total, and a tenant without its rate=R (which fixes
    its share of the total) is named."""
    err = one_line_error(["sweep", "--rates", "1,2", "--tenants", "a:rate=1,b", "--num-requests", "10",
                          "--no-progress"], capsys)
    assert "tenant 'b' needs rate=R" in err
    assert "--rate " not in err and "--rate;" not in err and not err.rstrip().endswith("--rate")


def test_make_model_over_a_file_names_the_path_and_the_fix(tmp_path, capsys):
    """`make-model --out EXISTING_FILE` said only 'File exists'."""
    pytest.importorskip("tokenizers")
    file = tmp_path / "model"
    file.write_text("")
    err = one_line_error(["make-model", "--out", str(file)], capsys)
    assert f"--out {file}" in err and "give a new or existing directory" in err
    err = one_line_error(["make-model", "--out", str(file / "sub")], capsys)
    assert f"({file} is a file)" in err


def test_simulate_warns_when_most_requests_are_rejected_and_says_why(capsys):
    """`simulate --trace` of Mooncake's conversations on Llama-3-8B rejected 46% of the requests (longer than its
    8192-token context) with no word on stderr; the same here with a 600-token context over ShareGPT's lengths."""
    assert main(["simulate", "--workload", "sharegpt", "--max-model-len", "600", "--num-requests", "100",
                 "--no-progress"]) == 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("llmsched simulate: warning: ") and len(err.splitlines()) == 1, err
    assert "of 100 requests" in err and "were rejected" in err
    assert "exceed max_model_len 600" in err and "a model with a longer context" in err


def test_capacity_that_finds_no_rate_names_the_rejections(capsys):
    """`capacity --trace conversation_trace.jsonl` said only 'no rate meets the SLOs ... no SLO values reached'
    when every probe failed because most requests can never fit the model's context."""
    assert main(["capacity", "--workload", "sharegpt", "--max-model-len", "600", "--num-requests", "100",
                 "--no-progress", "--slo", "ttft_p50<=2s"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if "capacity: none" in l)
    assert "were rejected" in line and "exceed max_model_len 600" in line and "a model with a longer context" in line


PLAN = ["plan", "--workload", "shared-prefix", "--num-requests", "150", "--target-rate", "75", "--gpus", "a100",
        "--schedulers", "sarathi", "--max-replicas", "1", "--no-cache", "--no-progress"]


def test_plan_does_not_prune_with_a_bound_a_prefix_cache_beats(tmp_path, capsys):
    """`plan --workload shared-prefix` pruned sarathi on one A100 at 75 req/s (full-prompt bound 69.6 req/s), yet
    that probe, run, is stable at 75: the cache's hits skip the shared system prompts' prefill. With the cache
    off, the bound holds and still prunes."""
    import json
    assert main(PLAN + ["--json", str(tmp_path / "plan.json")]) == 0
    out = capsys.readouterr().out
    plan = json.loads((tmp_path / "plan.json").read_text())
    (cand,) = plan["candidates"]
    assert cand["pruned"] == "" and cand["bound_rps_per_replica"] is None
    assert any("prefix cache over shared prompts" in n for n in cand["notes"])
    assert [d["replicas"] for d in plan["cheapest"]] == [1]  # met at the rate the bound said it could not
    assert "not pruned for want of a sound bound: 1 candidate (a prefix cache over shared prompts" in out
    assert main(PLAN + ["--no-prefix-caching"]) == 1  # no deployment: the only candidate is pruned
    assert "pruned (bound: needs >= 2 replicas" in capsys.readouterr().out


DOCS = __import__("pathlib").Path(__file__).resolve().parents[1] / "docs"


def python_blocks():
    import re
    for page in sorted(DOCS.glob("*.md")):
        if page.name == "architecture.md":  # its scheduler registers a name: tests/test_docs_example.py runs it
            continue
        for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), re.S)):
            yield pytest.param(page.name, code, id=f"{page.name}-{i}")


@pytest.mark.parametrize("page, code", list(python_blocks()))
def test_every_python_example_in_the_docs_runs_as_written(page, code, monkeypatch):
    """A user copies the library examples of docs/*.md; each must run as written, from the repository root."""
    monkeypatch.chdir(DOCS.parent)
    try:
        exec(compile(code, f"docs/{page}", "exec"), {"__name__": "__docs__"})
    except DataFileNotFound:
        if shared_data_dir() is None:
            pytest.skip("the example reads ../shared/data, which is absent")
        raise


PROFILES = DOCS.parent.parent / "shared" / "data" / "profiles"


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_validate_timing_names_the_line_of_a_bad_or_truncated_profile(tmp_path, capsys):
    """A truncated Splitwise perf_model.csv or Vidur mlp.csv ended in a TypeError traceback, a bad cell in
    'invalid literal for int()' naming no file; a steps.csv with a NaN duration or negative counts was read."""
    splitwise = (PROFILES / "splitwise_dgx_perf_model.csv").read_text()
    vidur = (PROFILES / "vidur_a100_meta-llama_Meta-Llama-3-8B_mlp.csv").read_text()
    header, first = splitwise.splitlines()[:2]
    cases = {
        "perf_model.csv": (splitwise[:3000], "line 29: tensor_parallel is None"),
        "bad_perf_model.csv": (header + "\n" + first.rsplit(",", 1)[0] + ",x\n", "line 2: tensor_parallel is 'x'"),
        "vidur_a100_meta-llama_Meta-Llama-3-8B_mlp.csv": (vidur[:20000], "line 31: num_tokens is None"),
        "nan_steps.csv": ("duration,prefill_tokens,num_prefills,num_decodes,context_sum\nnan,100,1,0,100\n",
                          "line 2: duration nan"),
        "neg_steps.csv": ("duration,prefill_tokens,num_prefills,num_decodes,context_sum\n0.01,100,-1,0,100\n",
                          "line 2: duration 0.01, prefill_tokens 100, num_prefills -1"),
    }
    for name, (text, want) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        err = one_line_error(["validate-timing", "--data", str(path), "--model", "llama-3-8b", "--gpu", "a100",
                              "--out", str(tmp_path / "out")], capsys)
        assert f"{path} {want}" in err, err


@pytest.mark.parametrize("name, text", [
    ("run.toml", 'scheduler = "vllm"\nrate = 3.0\nnum_requests = 20\n'
                 'scheduler_params = { token_budget = 256, order = "spf" }\n'),
    ("run.yaml", "scheduler: vllm\nrate: 3.0\nnum_requests: 20\nscheduler_params: {token_budget: 256, order: spf}\n"),
])
def test_the_command_line_wins_over_the_config_file(name, text, tmp_path):
    """README: 'the command line wins'. A flag replaces the file's value; a --param KEY=VALUE replaces that key of
    the file's table only, and the file's other keys stay."""
    import json
    config = tmp_path / name
    config.write_text(text.replace('"vllm"', '"sarathi"').replace("vllm", "sarathi"))
    out = tmp_path / "out"
    assert main(["simulate", "--config", str(config), "--rate", "5", "--param", "token_budget=512",
                 "--no-progress", "--out", str(out)]) == 0
    ran = json.loads((out / "meta.json").read_text())["config"]
    assert ran["rate"] == 5.0 and ran["num_requests"] == 20 and ran["scheduler"] == "sarathi"
    assert ran["scheduler_params"] == {"token_budget": 512, "order": "spf"}


def test_a_config_key_that_is_the_commands_own_option_says_to_give_the_flag(tmp_path, capsys):
    """`plan --config` with target_rate, or capacity's slo, was an 'unknown key' with a list of 80 run fields."""
    config = tmp_path / "plan.toml"
    config.write_text("num_requests = 20\ntarget_rate = 5\n")
    err = one_line_error(["plan", "--config", str(config), "--gpus", "a100", "--no-cache"], capsys)
    assert f"config file {config}:2: target_rate is `llmsched plan`'s own option" in err
    assert "give --target-rate on the command line" in err
    config.write_text('slo = "ttft_p50<=2s"\nresolution = 0.5\n')
    err = one_line_error(["capacity", "--config", str(config)], capsys)
    assert "slo, resolution are `llmsched capacity`'s own options" in err and "--slo --resolution" in err


def test_a_config_file_that_is_not_utf8_is_named(tmp_path, capsys):
    """A config saved as UTF-16 said only "'utf-8' codec can't decode byte 0xff in position 0"."""
    config = tmp_path / "run.toml"
    config.write_bytes("rate = 3.0\n".encode("utf-16"))
    err = one_line_error(["simulate", "--config", str(config)], capsys)
    assert f"config file {config}: not UTF-8 text" in err and "save it as UTF-8" in err
