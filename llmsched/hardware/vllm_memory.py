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

Which model runner sizes the cache matters (vllm/config/vllm.py ``use_v2_model_runner``): Model Runner V2 became
the default for dense models in v0.25.1 (vllm-project/vllm#44443) and for every model in v0.29.0, and until v0.29.0
its ``profile_cudagraph_memory`` returned 0 (vllm#49224, fixed by vllm#53306): from v0.25.1 to v0.28 a dense
model's graphs come out of the utilisation's headroom, not the KV cache. The H200 runs of v0.26 show it: KV =
requested − weights − non-torch − peak to 0.01 GiB for both Llama-3.1-8B runs, graphs (0.41, 0.98 GiB) not
subtracted. (vLLM's few MoE architectures that took V2 early, DeepSeek-V2 and Qwen2-MoE, are not told apart.)

Terms this module estimates where a run's own figures are not given (``measured=``):

* weights: ``params × dtype bytes / tp`` (the model's shard per GPU);
* non-torch memory (CUDA context, cuBLAS workspace, NCCL): 0.23 GiB, the mean measured on one H200 (0.22, 0.24,
  0.22 GiB, tests/data/gpu_runs/*/meta.json); tensor parallelism's NCCL buffers are not measured here;
* activation peak: the profiling step runs ``max_num_batched_tokens`` tokens through the model and then the
  sampler's warm-up on ``min(max_num_seqs, max_num_batched_tokens)`` rows (``profile_run``). The forward's largest
  live set is a layer's input, output and residual (3 hidden-size rows) with the MLP's gate/up output and its
  activation; a MoE forward's MLP is its experts' for the tokens routed, ``tokens × experts_per_token × 3 ×
  expert_ffn``. The sampler's warm-up differs by runner:

  - V2 (``vllm/v1/worker/gpu/model_runner.py`` ``_dummy_sampler_run``): its Triton sampler works in place on the
    logits, so the warm-up holds the forward's hidden states and one ``rows × vocab`` array of logits in the
    model's dtype, and the peak is the larger of that and the forward's. Against vLLM 0.26's own figures: 0.84
    GiB for Llama-3.1-8B at 8,192 tokens and 1,024 rows (measured 0.88, the `vllm serve` capture) and 0.21 GiB at
    2,048 and 128 (measured 0.24 on one H100 run). Its twin, the same setting on the same card, profiled 1.01
    GiB and started 17 s slower, as a cold torch.compile cache does (the profiling step's first forward
    compiles, and Inductor's tuning allocates); the H200 runs of that setting are alike (Llama-3.1-8B 1.01,
    Qwen3-32B 1.49 against 0.36 estimated). No setting predicts a cold start: this is the warm estimate, and a
    cold start leaves 0.8-1.1 GiB less KV. No MoE run on V2 (v0.29.0 on) was measured: the fused-MoE kernels'
    workspaces are not in the forward's estimate;
  - V1 (``gpu_model_runner.py``): top-k/top-p over fp32 logits, twice (FlashInfer's path and the native one)
    with the forward's hidden states still held. :data:`SAMPLER_LOGIT_COPIES` fp32 ``rows × vocab`` arrays added
    to the forward's: 0.56 GiB against 0.60 measured for Qwen3-30B-A3B on vLLM 0.26 (a MoE model, V1's then);
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
V2_RUNNER_DENSE_FROM = (0, 25, 1)   # Model Runner V2 the default for dense models (vllm#44443)
V2_RUNNER_ALL_FROM = (0, 29, 0)     # ... for every model, and its graph memory profiled (vllm#53306)


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
    release = parse_release(text)
    return release[:2] if release else None


def parse_release(text: str | None) -> tuple[int, int, int] | None:
    """``"0.25.1"`` -> (0, 25, 1); a missing patch is 0; None for None or text with no version in it."""
    match = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(text)) if text else None
    return tuple(int(g or 0) for g in match.groups()) if match else None


def uses_runner_v2(spec: ModelSpec, vllm_version: str | None) -> bool:
    """Whether vLLM at ``vllm_version`` (None: the latest) runs ``spec`` on Model Runner V2 (module docstring)."""
    release = parse_release(vllm_version)
    if release is None or release >= V2_RUNNER_ALL_FROM:
        return True
    return release >= V2_RUNNER_DENSE_FROM and not spec.is_moe


def subtracts_graphs(spec: ModelSpec, vllm_version: str | None) -> bool:
    """Whether vLLM's KV budget leaves out the CUDA graphs' memory (module docstring)."""
    release = parse_release(vllm_version)
    if release is None or release >= V2_RUNNER_ALL_FROM:
        return True
    return release[:2] >= CUDAGRAPH_PROFILED_FROM and not uses_runner_v2(spec, vllm_version)


def default_utilization(vllm_version: str | None) -> float:
    """vLLM's default ``gpu_memory_utilization``: 0.92 from v0.21 on (with graph memory profiled), else 0.9."""
    version = parse_version(vllm_version)
    return 0.92 if version is None or version >= CUDAGRAPH_PROFILED_FROM else 0.9


def activation_peak(spec: ModelSpec, max_num_batched_tokens: int, max_num_seqs: int, runner_v2: bool = True) -> int:
    """Estimated bytes of vLLM's profiling-step peak on one GPU under Model Runner V2 or V1 (module docstring)."""
    tokens, rows = max_num_batched_tokens, min(max_num_seqs, max_num_batched_tokens)
    experts_per_token = getattr(spec, "experts_per_token", 0) or 0
    expert_ffn = getattr(spec, "expert_ffn", 0) or 0
    if experts_per_token and expert_ffn:
        mlp = tokens * experts_per_token * 3 * expert_ffn // spec.tp
    else:
        mlp = tokens * 3 * spec.ffn // spec.tp
    forward = (3 * tokens * spec.hidden + mlp) * spec.dtype_bytes
    if runner_v2:
        warm_up = (tokens * spec.hidden + rows * (spec.vocab // spec.tp)) * spec.dtype_bytes
        return max(forward, warm_up)
    sampler = int(SAMPLER_LOGIT_COPIES * rows * (spec.vocab // spec.tp) * 4)
    return forward + sampler


def vllm_kv_budget(model: ModelSpec | str, gpu: GPUSpec | str, *, max_num_batched_tokens: int, max_num_seqs: int,
                   gpu_memory_utilization: float | None = None, vllm_version: str | None = None,
                   capture_sizes: int = 0, block_size: int = 16, measured: dict | None = None) -> KVBudget:
    """vLLM's KV budget per GPU. ``capture_sizes``: how many CUDA graphs it captures (0: none, eager).
    ``measured``: figures a run reported, in GiB (``weights``, ``non_torch``, ``peak_activation``,
    ``cuda_graphs``), used instead of the estimates; ``peak_activation`` there is vLLM's torch peak alone, and
    the graphs are subtracted where the run's vLLM and runner subtract them (module docstring)."""
    spec, device = model_preset(model), gpu_preset(gpu)
    measured = dict(measured or {})
    runner_v2 = uses_runner_v2(spec, vllm_version)
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
    peak = term("peak_activation", activation_peak(spec, max_num_batched_tokens, max_num_seqs, runner_v2),
                f"profiling step of {max_num_batched_tokens} tokens and Model Runner {'V2' if runner_v2 else 'V1'}'s "
                f"sampler warm-up of {min(max_num_seqs, max_num_batched_tokens)} rows")
    graphs_estimate = capture_sizes * spec.layers * GRAPH_BYTES_PER_LAYER
    graphs = term("cuda_graphs", graphs_estimate, f"{capture_sizes} graphs x {spec.layers} layers x 0.31 MiB")
    subtracted = subtracts_graphs(spec, vllm_version)
    graphs_subtracted = graphs if subtracted else 0
    if not subtracted:
        sources["cuda_graphs"] += f" (not subtracted: vLLM {vllm_version} sizes this model's cache before capturing)"
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
