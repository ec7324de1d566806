"""llmsched inside vLLM: the ``scheduler_cls`` plug-in, real-engine runs, profiling, fidelity, local models.

``llmsched.vllm.Scheduler`` is imported on first use, so the rest of llmsched works without vLLM installed.
"""
from __future__ import annotations


def __getattr__(name):
    if name == "Scheduler":
        from .adapter import Scheduler
        return Scheduler
    raise AttributeError(f"module 'llmsched.vllm' has no attribute {name!r}")


def vllm_available() -> tuple[bool, str]:
    """Whether vLLM imports here, and why not."""
    try:
        import vllm  # noqa: F401
        from vllm.v1.core.sched.scheduler import Scheduler  # noqa: F401
    except Exception as e:  # noqa: BLE001 (any import failure means: not usable here)
        return False, f"vLLM is not importable ({type(e).__name__}: {e}); install it with scripts/install.sh"
    return True, ""
