"""The plug-in's operator settings and tier choice (no vLLM needed)."""
import pytest

from llmsched.vllm.settings import load_settings, tier_of


def test_settings_from_environment_and_tier_fallback():
    s = load_settings({"LLMSCHED_SCHEDULER": "sarathi", "LLMSCHED_SCHEDULER_PARAMS": '{"token_budget": 256}',
                       "LLMSCHED_TIERS": "paid:tbt=0.1:share=0.05,free:tbt=0.5"})
    assert (s.scheduler, s.scheduler_params, s.default_tier.name) == ("sarathi", {"token_budget": 256}, "free")
    assert tier_of({"tier": "paid"}, s) == (s.tiers[0], True)
    assert tier_of({"tier": "gold"}, s) == (s.default_tier, False)
    assert tier_of(None, s) == (s.default_tier, True)


@pytest.mark.parametrize("env, fragment", [
    ({"LLMSCHED_SCHEDULER_PARAMS": "{token_budget: 1}"}, "not JSON"),
    ({"LLMSCHED_TIERS": "paid:tbt=0.1", "LLMSCHED_DEFAULT_TIER": "gold"}, "default tier 'gold'"),
    ({"LLMSCHED_PARAMS": "token_budget"}, "LLMSCHED_PARAMS.*KEY=VALUE"),
    ({"LLMSCHED_ARRIVAL": "client"}, "LLMSCHED_ARRIVAL 'client'"),
])
def test_bad_settings_name_the_input(env, fragment):
    with pytest.raises(ValueError, match=fragment):
        load_settings(env)


def test_server_command_and_environment_carry_the_cpu_settings(tmp_path):
    from llmsched.vllm.launch import PLUGIN, EngineConfig, serve_command, serve_env
    cmd = serve_command(EngineConfig(model="m", block_size=64, kv_cache_mb=16), 8123)
    args = cmd[3:]
    flags = {a: (b if not b.startswith("--") else True) for a, b in zip(args, [*args[1:], "--"])
             if a.startswith("--")}
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert {"--host": "127.0.0.1", "--port": "8123", "--block-size": "64", "--kv-cache-memory-bytes": str(16 << 20),
            "--load-format": "dummy", "--scheduler-cls": PLUGIN,
            "--middleware": "llmsched.vllm.http.TierCheck"}.items() <= flags.items()
    assert flags["--enforce-eager"] is True and flags["--no-enable-prefix-caching"] is True
    env = serve_env(str(tmp_path), {"LLMSCHED_SCHEDULER": "slai"},
                    base={"PATH": "/bin", "LLMSCHED_TIERS": "stale", "VLLM_CPU_OMP_THREADS_BIND": "0-1"})
    assert env["LLMSCHED_SCHEDULER"] == "slai" and "LLMSCHED_TIERS" not in env  # only the settings given
    assert env["TMPDIR"] == str(tmp_path / "tmp") and (tmp_path / "cache").is_dir()
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1" and env["HF_HUB_OFFLINE"] == "1" and env["PATH"] == "/bin"


def test_param_style_settings_merge_over_json_and_parse_values():
    s = load_settings({"LLMSCHED_SCHEDULER": "fairbatching", "LLMSCHED_SCHEDULER_PARAMS": '{"ttft_slo": 1.0, "a": 1}',
                       "LLMSCHED_PARAMS": "ttft_slo=0.25 capacity=token online_refit=false"})
    assert s.scheduler_params == {"ttft_slo": 0.25, "a": 1, "capacity": "token", "online_refit": False}


def test_the_api_server_check_names_the_valid_tiers():
    from llmsched.vllm.http import tier_error
    tiers = ["paid", "free"]
    assert tier_error(b'{"prompt": "x", "vllm_xargs": {"tier": "paid"}}', tiers) is None
    assert tier_error(b'{"prompt": "x"}', tiers) is None and tier_error(b"not json", tiers) is None
    msg = tier_error(b'{"vllm_xargs": {"tier": "gold"}}', tiers)
    assert "unknown tier 'gold'" in msg and "valid tiers: paid, free" in msg


def test_every_llmsched_variable_the_repository_reads_is_known_to_the_plugin_check():
    """The plug-in refuses unknown ``LLMSCHED_*`` variables as typos, so a switch set by the test suite or CI
    (``LLMSCHED_CHECK_FIGURES`` once was not) must be listed, or every real-engine test fails at start-up."""
    import re
    from pathlib import Path
    from llmsched.vllm.settings import OTHER_VARIABLES, PLUGIN_VARIABLES
    root = Path(__file__).resolve().parents[1]
    files = [*root.glob("llmsched/**/*.py"), *root.glob("tests/**/*.py"), *root.glob("scripts/*"), root / ".ci/run"]
    used = {name for path in files if path.is_file()
            for name in re.findall(r"\bLLMSCHED_[A-Z_]*[A-Z]\b", path.read_text(errors="ignore"))}
    assert used - set(PLUGIN_VARIABLES + OTHER_VARIABLES) == set()
