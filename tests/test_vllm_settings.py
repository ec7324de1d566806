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
])
def test_bad_settings_name_the_input(env, fragment):
    with pytest.raises(ValueError, match=fragment):
        load_settings(env)
