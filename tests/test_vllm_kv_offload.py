"""What blocks vLLM's CPU KV offloading beside the plug-in on vLLM's CPU build (0.32.0): an engine started with
``--kv-offloading-size`` (the native OffloadingConnector) fails while it registers its KV caches, before any
request, in vllm/v1/kv_offload/cpu/spec.py (``CPUOffloadingSpec.get_worker``): "CPU Offloading is currently only
supported on CUDA-alike and XPU GPUs". The other native connector (``VLLM_USE_SIMPLE_KV_OFFLOAD=1``) fails in
vllm/v1/simple_kv_offload/worker.py (``register_kv_caches``: ``torch.cuda.Stream.priority_range`` on a build
without CUDA), and LMCache is not installed (it needs CUDA too). So no test here can show a prefix reloaded rather
than recomputed by a real engine; this one fails the day the CPU build starts one, so that such a test gets written
(docs/kv-offload.md, "The real engine")."""
import os

import pytest

from tests.vllm_support import require_vllm

require_vllm()

from llmsched.vllm.launch import EngineConfig, engine_args, set_in_process_env  # noqa: E402
from llmsched.vllm.model import write_model  # noqa: E402


def test_vllm_cpu_refuses_cpu_kv_offloading_beside_the_plugin(tmp_path):
    set_in_process_env(str(tmp_path))
    os.environ["LLMSCHED_PROFILES"] = str(tmp_path / "profiles")
    model = write_model(tmp_path / "tiny")
    args = engine_args(EngineConfig(model=str(model), max_model_len=512, max_num_seqs=16,
                                    max_num_batched_tokens=256, kv_cache_mb=2, prefix_caching=True))
    args.update(kv_offloading_size=0.05, kv_offloading_backend="native")
    from vllm import LLM
    from vllm.distributed.kv_transfer.kv_transfer_state import ensure_kv_transfer_shutdown
    try:
        with pytest.raises(Exception, match="CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"):
            LLM(**args)
    finally:  # the failed engine leaves vLLM's process-wide KV connector behind: the next engine here would take it
        ensure_kv_transfer_shutdown()
