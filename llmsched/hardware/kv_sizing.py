"""The KV cache of a run, sized one way in every command (simulate, compare, sweep, capacity, plan, tune,
validate-serving), in this order:

1. **what vLLM reported for the run**, where the run gives it (or the bytes it was told to give the cache,
   ``engine_kwargs.kv_cache_memory_bytes``, vLLM's ``--kv-cache-memory-bytes``: the cache is that many bytes per
   GPU whatever the rest of memory holds, in blocks of ``block_size`` tokens of every layer's KV): a real run's ``meta.json`` (the ground-truth schema
   of ../shared/data/ground_truth and tests/data/gpu_runs) beside its request log, ``kv_cache.num_gpu_blocks``,
   ``engine_defaults_seen.num_gpu_blocks`` or ``engine_kwargs.num_gpu_blocks``, else ``memory_gib.kv_cache_tokens``.
   A simulation of that log with other limits (``max_num_seqs``, ``max_num_batched_tokens``, CUDA graphs,
   ``gpu_memory_utilization``) than the run's moves the figure by what vLLM's formula says those limits move
   (its activation peak, its graphs, its share of memory);
2. else **vLLM's own sizing** (:mod:`.vllm_memory`) for the run's vLLM version (the latest where none is known),
   for a run of vLLM's engine: the ``vllm-v1`` batch-time kind and its profiles, every command's default;
3. else the weights-and-reserve estimate of :mod:`.memory`, for the engine-agnostic kinds (roofline, linear,
   engine, ...) that the papers' reproductions pin, so that they size their caches as before.

Why one function: the same run was sized three ways before it. ``validate-serving`` read ``num_gpu_blocks`` only
under ``engine_defaults_seen`` or ``engine_kwargs`` (a meta.json giving it under ``kv_cache`` fell through to the
formula), ``simulate --trace`` never looked at the run's meta.json, and with its roofline default it sized by (3).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .device_names import presets_named
from .gpus import GPUS, GPUSpec, gpu as gpu_preset
from .hf_config import kv_cache_dtype_bytes
from .kv_groups import KVGroups
from .memory import kv_capacity_blocks
from .models import ModelSpec, model as model_preset
from .vllm_memory import KVBudget, default_utilization, no_room, vllm_kv_budget

# where a run's meta.json may give the block count vLLM allocated: the first found wins
REPORTED_BLOCKS = (("kv_cache", "num_gpu_blocks"), ("engine_defaults_seen", "num_gpu_blocks"),
                   ("engine_kwargs", "num_gpu_blocks"), ("engine_kwargs", "num_gpu_blocks_override"))
RESERVE_UTILIZATION = 0.9   # the reserve estimate's default gpu_memory_utilization (vLLM's before v0.21)


@dataclass(frozen=True)
class Limits:
    """The engine settings vLLM's KV budget depends on."""

    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    capture_sizes: int


@dataclass(frozen=True)
class RunMemory:
    """What a real run says of its memory: the KV cache vLLM allocated (``blocks`` of ``block_size`` tokens, or
    only ``tokens``; both None where it reports none, and ``where`` it says so), its vLLM version and the
    settings it ran with."""

    blocks: int | None
    tokens: int | None
    block_size: int
    where: str
    vllm_version: str | None
    limits: Limits | None
    kv_bytes: int | None = None  # engine_kwargs.kv_cache_memory_bytes: the cache's size vLLM was given, per GPU

    @property
    def reported_tokens(self) -> int | None:
        return self.blocks * self.block_size if self.blocks else self.tokens


@dataclass(frozen=True)
class KVCache:
    """A run's KV cache per replica (per DP rank): ``blocks``, how they were sized (``source``), and vLLM's
    budget where its formula sized or adjusted them."""

    blocks: int
    source: str
    budget: KVBudget | None = None

    def describe(self) -> dict:
        out = {"blocks": self.blocks, "source": self.source}
        if self.budget is not None:
            out["vllm_budget"] = self.budget.as_dict()
        return out


def kv_cache(spec: ModelSpec, device: GPUSpec, *, block_size: int, max_num_seqs: int, max_num_batched_tokens: int,
             vllm_engine: bool, gpu_memory_utilization: float | None = None, capture_sizes: int = 0,
             run: RunMemory | None = None, groups: KVGroups | None = None) -> KVCache:
    """The KV cache of ``spec`` (at its parallelism) on ``device`` (see the module docstring). ``run``: the real
    run being replayed, where there is one (a vLLM run: sized as vLLM does whatever the batch-time kind);
    ``vllm_engine``: the run is vLLM's engine (``capture_sizes`` CUDA graphs); ``gpu_memory_utilization`` None: the run's, else vLLM's default for its version (the reserve estimate:
    0.9). ``groups``: the model's windowed KV cache groups where the run counts them (hardware/kv_groups.py): the
    same memory in vLLM's blocks of one page per layer of a group. A model that leaves no room is an error saying
    what to change."""
    cache = kv_cache_of(spec, device, block_size=block_size, max_num_seqs=max_num_seqs,
                        max_num_batched_tokens=max_num_batched_tokens, vllm_engine=vllm_engine,
                        gpu_memory_utilization=gpu_memory_utilization, capture_sizes=capture_sizes, run=run)
    if groups is None or (run is not None and run.blocks):
        return cache  # vLLM's reported num_gpu_blocks are its own (grouped) blocks already
    if run is not None and run.kv_bytes and not run.reported_tokens:
        kv_bytes = run.kv_bytes
    elif cache.budget is not None and not (run is not None and run.reported_tokens):
        kv_bytes = max(0, cache.budget.kv_bytes)  # vLLM's formula: its memory for the KV cache
    else:  # the reserve estimate's, or the tokens vLLM reported: every layer's bytes of those tokens
        kv_bytes = cache.blocks * block_size * spec.kv_bytes_per_token_per_gpu
    blocks = kv_bytes // groups.block_bytes(spec, block_size)
    return KVCache(blocks, f"{cache.source}; {groups.describe()}: {blocks} blocks of {groups.group_layers} "
                           f"layers' pages for the {cache.blocks} of every layer's", cache.budget)


def kv_cache_of(spec: ModelSpec, device: GPUSpec, *, block_size: int, max_num_seqs: int, max_num_batched_tokens: int,
                vllm_engine: bool, gpu_memory_utilization: float | None, capture_sizes: int,
                run: RunMemory | None) -> KVCache:
    """:func:`kv_cache` in blocks that hold every layer's KV of ``block_size`` tokens."""
    version = run.vllm_version if run is not None else None
    if gpu_memory_utilization is None and run is not None and run.limits is not None:
        gpu_memory_utilization = run.limits.gpu_memory_utilization
    ours = Limits(max_num_seqs, max_num_batched_tokens, gpu_memory_utilization or default_utilization(version),
                  capture_sizes)
    if run is not None and run.reported_tokens:
        return reported_cache(spec, device, run, ours, block_size)
    if run is not None and run.kv_bytes:
        blocks = run.kv_bytes // (block_size * spec.kv_bytes_per_token_per_gpu)
        if blocks < 1:
            raise ValueError(f"kv_cache_memory_bytes {run.kv_bytes:,} holds less than one block of {block_size} "
                             f"tokens of {spec.name} ({spec.kv_bytes_per_token_per_gpu:,} bytes a token a GPU); "
                             f"give more bytes")
        return KVCache(blocks, f"kv_cache_memory_bytes {run.kv_bytes:,} (vLLM gives the cache exactly that)")
    if not vllm_engine and run is None:
        utilization = gpu_memory_utilization or RESERVE_UTILIZATION
        blocks = kv_capacity_blocks(spec, device, gpu_memory_utilization=utilization, block_size=block_size)
        return KVCache(blocks, f"weights and activation reserve at utilisation {utilization:g} (hardware/memory.py)")
    budget = budget_of(spec, device, ours, version, block_size)
    if budget.blocks < 1:
        raise ValueError(no_room(spec, device, budget, ours.gpu_memory_utilization))
    return KVCache(budget.blocks, f"vLLM {version or '(latest)'}'s sizing at utilisation "
                                  f"{ours.gpu_memory_utilization:g} (hardware/vllm_memory.py)", budget)


def budget_of(spec: ModelSpec, device: GPUSpec, limits: Limits, version: str | None, block_size: int) -> KVBudget:
    return vllm_kv_budget(spec, device, max_num_batched_tokens=limits.max_num_batched_tokens,
                          max_num_seqs=limits.max_num_seqs, gpu_memory_utilization=limits.gpu_memory_utilization,
                          vllm_version=version, capture_sizes=limits.capture_sizes, block_size=block_size)


def reported_cache(spec: ModelSpec, device: GPUSpec, run: RunMemory, ours: Limits, block_size: int) -> KVCache:
    """vLLM's reported cache, moved by what its formula says limits other than the run's move."""
    tokens, source = run.reported_tokens, f"reported by vLLM (meta.json {run.where})"
    if run.limits is not None and run.limits != ours:
        theirs = budget_of(spec, device, run.limits, run.vllm_version, block_size)
        mine = budget_of(spec, device, ours, run.vllm_version, block_size)
        shift = (mine.kv_bytes - theirs.kv_bytes) // spec.kv_bytes_per_token_per_gpu
        tokens += shift
        changed = [f"{name} {getattr(run.limits, name):g} -> {getattr(ours, name):g}"
                   for name in ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "capture_sizes")
                   if getattr(run.limits, name) != getattr(ours, name)]
        source += f", {shift:+d} tokens for {', '.join(changed)} (vLLM's formula)"
        if tokens < 1:
            raise ValueError(no_room(spec, device, mine, ours.gpu_memory_utilization))
        return KVCache(tokens // block_size, source, mine)
    return KVCache(tokens // block_size, source)


def run_memory(meta: dict, path: Path | str, default_capture_sizes=None) -> RunMemory:
    """What a real run's parsed ``meta.json`` (at ``path``) says of its memory. ``default_capture_sizes(max_num_seqs,
    max_num_batched_tokens)``: how many CUDA graphs vLLM captures where meta.json does not list them (None: leave
    the settings unknown). A figure that is there but wrong is an error naming the file and the field."""
    seen = meta.get("engine_defaults_seen") or {}
    kwargs = meta.get("engine_kwargs") or {}
    section = meta.get("kv_cache") if isinstance(meta.get("kv_cache"), dict) else {}
    block_size = section.get("block_size") or kwargs.get("block_size") or seen.get("block_size") or 16
    positive(block_size, path, "block_size")
    blocks = tokens = None
    where = ""
    for part, key in REPORTED_BLOCKS:
        values = meta.get(part)
        if isinstance(values, dict) and values.get(key) is not None:
            blocks, where = positive(values[key], path, f"{part}.{key}"), f"{part}.{key}"
            break
    else:
        value = (meta.get("memory_gib") or {}).get("kv_cache_tokens")
        if value is not None:
            tokens, where = positive(value, path, "memory_gib.kv_cache_tokens"), "memory_gib.kv_cache_tokens"
    version = meta.get("vllm_version")
    version = str(version) if version is not None else None
    kv_bytes = kwargs.get("kv_cache_memory_bytes")
    if kv_bytes is not None:
        kv_bytes = positive(kv_bytes, path, "engine_kwargs.kv_cache_memory_bytes")
    return RunMemory(blocks, tokens, block_size, where, version, run_limits(kwargs, seen, version,
                                                                            default_capture_sizes), kv_bytes)


def run_limits(kwargs: dict, seen: dict, version: str | None, default_capture_sizes) -> Limits | None:
    seqs = kwargs.get("max_num_seqs", seen.get("max_num_seqs"))
    tokens = kwargs.get("max_num_batched_tokens", seen.get("max_num_batched_tokens"))
    utilization = kwargs.get("gpu_memory_utilization", seen.get("gpu_memory_utilization"))
    sizes = seen.get("cudagraph_capture_sizes")
    if not (isinstance(seqs, int) and isinstance(tokens, int)):
        return None
    if isinstance(sizes, list):
        graphs = len(sizes)
    elif default_capture_sizes is not None:
        graphs = len(default_capture_sizes(seqs, tokens))
    else:
        return None
    return Limits(seqs, tokens, float(utilization) if isinstance(utilization, (int, float)) else
                  default_utilization(version), graphs)


def positive(value, path, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{path}: {field} is {json.dumps(value)}; write the figure vLLM reported (an integer >= 1) "
                         f"or leave it out")
    return value


def run_meta_beside(log: Path | str) -> tuple[dict, Path] | None:
    """The parsed ``meta.json`` in the folder of a request log, where it is a real run's (it has
    ``engine_kwargs``), and its path; None where there is none."""
    path = Path(log).parent / "meta.json"
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None   # not a run's meta.json: the log is replayed without it
    if not isinstance(meta, dict) or not isinstance(meta.get("engine_kwargs"), dict):
        return None
    return meta, path


def gpu_named_in(text: str | None) -> list[str]:
    """The GPU presets a device's description names (``"NVIDIA H200 (141 GB ...)"`` -> ``["h200"]``;
    hardware/device_names.py)."""
    return presets_named(text, GPUS)


def describes(meta: dict, path: Path, spec: ModelSpec, device: GPUSpec) -> str:
    """Why the run's meta.json does not describe a simulation of ``spec`` on ``device`` ('' where it does): the
    same model (its weights and KV cache), tensor and data parallelism, KV cache dtype and GPU."""
    kwargs = meta.get("engine_kwargs") or {}
    named = gpu_named_in(meta.get("gpu"))
    if meta.get("gpu") and (len(named) != 1 or gpu_preset(named[0]).name != device.name):
        return f"its gpu {meta.get('gpu')!r} is not {device.name}"
    tp, dp = kwargs.get("tensor_parallel_size") or 1, kwargs.get("data_parallel_size") or 1
    if (tp, dp) != (spec.tp, spec.dp):
        return f"it ran at tensor_parallel_size {tp}, data_parallel_size {dp}"
    theirs = run_model(meta, path)
    if theirs is None:
        return f"its model {kwargs.get('model') or meta.get('model')!r} is neither a config.json beside it nor a preset"
    try:
        kv_bytes = kv_cache_dtype_bytes(kwargs.get("kv_cache_dtype") or "auto") or theirs.kv_dtype_bytes
    except ValueError:
        return f"its kv_cache_dtype {kwargs.get('kv_cache_dtype')!r} is not vLLM's"
    same_weights = abs(theirs.weight_bytes - spec.weight_bytes) <= 0.005 * spec.weight_bytes  # a card's rounding
    if not same_weights or theirs.kv_bytes_per_token // theirs.kv_dtype_bytes * kv_bytes != spec.kv_bytes_per_token:
        return f"its model {theirs.base_name} is not {spec.base_name} (weights or KV bytes differ)"
    return ""


def run_model(meta: dict, path: Path) -> ModelSpec | None:
    config = Path(path).parent / "config.json"
    for name in ([str(config)] if config.is_file() else []) + \
            [(meta.get("engine_kwargs") or {}).get("model") or meta.get("model")]:
        try:
            return model_preset(name) if name else None
        except ValueError:
            continue
    return None


def memory_beside(log: Path | str, spec: ModelSpec, device: GPUSpec, default_capture_sizes) -> RunMemory | None:
    """The memory facts of the real run whose request log is ``log``, where its meta.json describes a simulation of
    ``spec`` on ``device`` (:func:`describes`); None otherwise."""
    found = run_meta_beside(log)
    if found is None or describes(*found, spec, device):
        return None
    return run_memory(*found, default_capture_sizes)
