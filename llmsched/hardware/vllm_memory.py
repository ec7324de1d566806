"""The KV cache vLLM v1 gives a model on a GPU, sized its way, so that preemption starts where vLLM's does.

vLLM (vllm/v1/worker/gpu_worker.py ``determine_available_memory``, vllm/utils/mem_utils.py ``memory_profiling``;
v0.32.0) asks for ``total memory × gpu_memory_utilization``, the total as CUDA reports it (``cudaMemGetInfo``:
``GPUSpec.visible_bytes``, 79.19 GiB on an "80 GB" H100, 139.80 on a "141 GB" H200; the datasheet's figure where
none is measured) and leaves the KV cache what the rest does not take:

    KV = total × utilisation − weights − non-torch memory − activation peak of a profiling step − CUDA graphs

where the CUDA-graph term is subtracted from v0.21.0 on (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, "default
since v0.21.0"; before, graphs were captured after sizing, out of the utilisation's headroom), and the default
utilisation rose from 0.9 to 0.92 with it (0.92 is v0.32's ``CacheConfig`` default; the H200 runs of v0.26 report
0.92). Then ``KV // (block_size × KV bytes per token per GPU)`` blocks.

Terms this module estimates where a run's own figures are not given (``measured=``):

* weights: ``params × dtype bytes / tp`` (the model's shard per GPU);
* non-torch memory (CUDA context, cuBLAS workspace, NCCL): 0.23 GiB, the mean measured on one H200 (0.22, 0.24,
  0.22 GiB, tests/data/gpu_runs/*/meta.json); tensor parallelism's NCCL buffers are not measured here;
* activation peak: the profiling step runs ``max_num_batched_tokens`` tokens through the model and then the
  sampler's warm-up on ``max_num_seqs`` rows (gpu_model_runner.py ``profile_run``, ``_dummy_sampler_run``). The
  forward's largest live set is a layer's input, output and residual (3 hidden-size rows) with the MLP's gate/up
  output and its activation; the sampler's warm-up (top-k/top-p over fp32 logits) holds
  :data:`SAMPLER_LOGIT_COPIES` fp32 ``rows × vocab`` arrays (the logits, sorted values, int64 indices (two
  copies' worth), softmax, cumulative sum, the scattered result). On the H200 runs this gives 0.61 / 0.82 /
  0.56 GiB against 0.60 / 0.82 / 0.60 GiB measured (vLLM's peak less its graph estimate for Llama-3.1-8B and
  Qwen3-32B; for Qwen3-30B-A3B the reported peak itself, which its KV figure shows holds no graph memory there);
  a MoE forward's MLP is its experts' for the tokens routed, ``tokens × experts_per_token × 3 × expert_ffn``
  (MoE specs carry ``experts_per_token`` and ``expert_ffn``);
* CUDA graphs: :data:`GRAPH_BYTES_PER_LAYER` per captured size and layer, the mean over the three H200 runs
  (0.41, 0.67, 0.40 GiB for 35 sizes of 32, 64, 48 layers: 0.37, 0.31, 0.24 MiB, so ±20% per model).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .gpus import GiB, GPUSpec, gpu as gpu_preset
from .models import ModelSpec, model as model_preset

NON_TORCH_BYTES = int(0.23 * GiB)
SAMPLER_LOGIT_COPIES = 6.5
GRAPH_BYTES_PER_LAYER = int(0.307 * (1 << 20))
CUDAGRAPH_PROFILED_FROM = (0, 21)   # vLLM version from which graph memory is subtracted, and utilisation is 0.92


@dataclass(frozen=True)
class KVBudget:
    """Per GPU, bytes: what vLLM would request, what it leaves the KV cache, and each term's origin."""

    requested: int
    weights: int
    non_torch: int
    activation_peak: int
    cuda_graphs: int
    kv_bytes: int
    kv_bytes_per_token: int
    block_size: int
    sources: dict = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return max(0, self.kv_bytes) // self.kv_bytes_per_token

    @property
    def blocks(self) -> int:
        return self.tokens // self.block_size

    def as_dict(self) -> dict:
        gib = {k: round(getattr(self, k) / GiB, 3) for k in ("requested", "weights", "non_torch", "activation_peak",
                                                              "cuda_graphs", "kv_bytes")}
        return {"gib": gib, "kv_tokens": self.tokens, "kv_blocks": self.blocks, "sources": dict(self.sources)}


def parse_version(text: str | None) -> tuple[int, int] | None:
    """``"0.19.0"`` -> (0, 19); None for None or text with no version in it."""
    match = re.match(r"\s*v?(\d+)\.(\d+)", str(text)) if text else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def default_utilization(vllm_version: str | None) -> float:
    """vLLM's default ``gpu_memory_utilization``: 0.92 from v0.21 on (with graph memory profiled), else 0.9."""
    version = parse_version(vllm_version)
    return 0.92 if version is None or version >= CUDAGRAPH_PROFILED_FROM else 0.9


def activation_peak(spec: ModelSpec, max_num_batched_tokens: int, max_num_seqs: int) -> int:
    """Estimated bytes of vLLM's profiling-step peak on one GPU (module docstring)."""
    tokens, rows = max_num_batched_tokens, min(max_num_seqs, max_num_batched_tokens)
    experts_per_token = getattr(spec, "experts_per_token", 0) or 0
    expert_ffn = getattr(spec, "expert_ffn", 0) or 0
    if experts_per_token and expert_ffn:
        mlp = tokens * experts_per_token * 3 * expert_ffn // spec.tp
    else:
        mlp = tokens * 3 * spec.ffn // spec.tp
    forward = (3 * tokens * spec.hidden + mlp) * spec.dtype_bytes
    sampler = int(SAMPLER_LOGIT_COPIES * rows * (spec.vocab // spec.tp) * 4)
    return forward + sampler


def vllm_kv_budget(model: ModelSpec | str, gpu: GPUSpec | str, *, max_num_batched_tokens: int, max_num_seqs: int,
                   gpu_memory_utilization: float | None = None, vllm_version: str | None = None,
                   capture_sizes: int = 0, block_size: int = 16, measured: dict | None = None) -> KVBudget:
    """vLLM's KV budget per GPU. ``capture_sizes``: how many CUDA graphs it captures (0: none, eager).
    ``measured``: figures a run reported, in GiB (``weights``, ``non_torch``, ``peak_activation``,
    ``cuda_graphs``), used instead of the estimates; ``peak_activation`` there is vLLM's own figure, which from
    v0.21 on holds the graph estimate (two of the three H200 runs: KV = requested − weights − non-torch − peak
    to 0.01 GiB; the MoE run is 0.3 GiB over that, 0.1 GiB under with graphs subtracted too), so graphs are not
    subtracted twice."""
    spec, device = model_preset(model), gpu_preset(gpu)
    measured = dict(measured or {})
    version = parse_version(vllm_version)
    profiles_graphs = version is None or version >= CUDAGRAPH_PROFILED_FROM
    utilization = default_utilization(vllm_version) if gpu_memory_utilization is None else gpu_memory_utilization
    if not 0 < utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {utilization}")
    requested = int(-(-device.visible_bytes * utilization // 1))
    sources = {"requested": f"{device.name} memory {device.visible_bytes / GiB:.{2 if device.cuda_bytes else 1}f} "
                            f"GiB{' (as CUDA reports it)' if device.cuda_bytes else ''} x {utilization:g}"}

    def term(name: str, estimate: int, how: str) -> int:
        if name in measured:
            sources[name] = "measured (meta.json)"
            return int(measured[name] * GiB)
        sources[name] = how
        return estimate

    weights = term("weights", int(spec.weight_bytes_per_gpu), f"params x {spec.dtype_bytes} B / tp {spec.tp}")
    non_torch = term("non_torch", NON_TORCH_BYTES, "0.23 GiB, measured on one H200")
    peak = term("peak_activation", activation_peak(spec, max_num_batched_tokens, max_num_seqs),
                f"profiling step of {max_num_batched_tokens} tokens and a sampler warm-up of "
                f"{min(max_num_seqs, max_num_batched_tokens)} rows")
    graphs_estimate = capture_sizes * spec.layers * GRAPH_BYTES_PER_LAYER
    graphs = term("cuda_graphs", graphs_estimate, f"{capture_sizes} graphs x {spec.layers} layers x 0.31 MiB")
    if not profiles_graphs:
        graphs_subtracted = 0
        sources["cuda_graphs"] += f" (not subtracted: vLLM {vllm_version} sizes the KV cache before capturing)"
    elif "peak_activation" in measured:
        graphs_subtracted = 0
        sources["cuda_graphs"] += " (inside the measured peak)"
    else:
        graphs_subtracted = graphs
    kv = requested - weights - non_torch - peak - graphs_subtracted
    return KVBudget(requested, weights, non_torch, peak, graphs, kv, spec.kv_bytes_per_token_per_gpu, block_size,
                    sources)


def no_room(spec: ModelSpec, device: GPUSpec, budget: KVBudget, utilization: float) -> str:
    """The error for a model that leaves vLLM no KV cache on ``device``, with what to change."""
    used = budget.weights + budget.non_torch + budget.activation_peak
    return (f"{spec.name} leaves no KV cache on {device.name}: {budget.weights / GiB:.1f} GiB of weights per GPU "
            f"(tp={spec.tp}) + {(budget.non_torch + budget.activation_peak) / GiB:.1f} GiB of activations and "
            f"runtime = {used / GiB:.1f} GiB against {utilization:g} x {device.visible_bytes / GiB:.0f} GiB; raise "
            f"the tensor parallelism, or use a GPU with more memory{utilization_hint(used / device.visible_bytes)}")


def utilization_hint(share: float) -> str:
    """Where the model fits in the GPU's whole memory, the utilisation that leaves room for a KV cache."""
    if share >= 0.98:
        return ""
    return f", or raise --gpu-memory-utilization (gpu_memory_utilization) above {share:.2f}"
