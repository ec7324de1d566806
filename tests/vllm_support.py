"""Shared by the vLLM tests: skip when vLLM is not importable, except under CI (LLMSCHED_REQUIRE_VLLM=1)."""
import os

import pytest

from llmsched.vllm import vllm_available


def require_vllm():
    ok, why = vllm_available()
    if not ok:
        if os.environ.get("LLMSCHED_REQUIRE_VLLM") == "1":
            pytest.fail(f"LLMSCHED_REQUIRE_VLLM=1 but {why}")
        pytest.skip(why)
