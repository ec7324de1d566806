"""The view a policy reads is the same object in the simulator and inside vLLM: everything the simulator's
``ReplicaView`` offers, the plug-in's ``VLLMView`` offers too, so that a policy that reads a new field does not break
only when it serves (a missing ``kv_tiers`` once crashed vLLM's engine core on SLAI's first step)."""
from llmsched.engine.view import ReplicaView
from llmsched.vllm.live_view import VLLMView


def public(cls) -> set[str]:
    return {n for n in set(dir(cls)) | set(getattr(cls, "__slots__", ())) if not n.startswith("_")}


def test_the_plugin_view_offers_everything_the_simulators_view_does():
    assert public(ReplicaView) - public(VLLMView) == set()
