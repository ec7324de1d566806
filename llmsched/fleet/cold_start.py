"""How long a new replica takes from the request for it to its first routed request: a cold-start model, one duration
source of a replica's start-up states (``lifecycle.py``: provisioning, loading, warm), phase by phase.

    provisioning  = a pod placed on a node of the pool                    (state provisioning)
    image pull    + weight load (weight bytes over the storage's rate)    (state loading)
    engine start  + warm-up requests                                      (state warm)

Each phase has a default with its source and can be given (``--cold-start-param PHASE=SECONDS``, or ``storage=``
to read the weights from another store); ``--cold-start SECONDS`` scales the whole path to SECONDS, keeping the
phases' proportions. The default is a pod on a GPU node already in the cluster, with the image already on it,
downloading the weights anew (no model cache: each pod of llm-d's optimized baseline re-downloads them from Hugging
Face, llm-d/llm-d#2216), as the autoscalers' own scale-ups pay:

* **provisioning** 5 s: Kubernetes' pod startup SLO, "99th percentile of the startup latency of schedulable
  stateless pods, excluding time to pull images and run init containers" <= 5 s (kubernetes/community,
  sig-scalability/slos/pod_startup_latency.md). A new node (cluster autoscaler, Karpenter) adds minutes: give it.
* **image pull** 0 s: the image is on the node already (``imagePullPolicy: IfNotPresent`` on a node that ran it).
  An uncached pull of vllm/vllm-openai (about 12.6 GB, vllm-project/vllm#27154) adds its size over the registry's
  rate: give it.
* **weight load**: the model's weight bytes over the storage's rate, and at most the loader's own rate per GPU
  (each tensor-parallel rank reads its shard; the store serves them all). Stores (``STORAGE``): ``remote`` (the
  default: a download from the hub or an object store), ``nvme`` (a local model cache), ``page-cache`` (the node
  read them before).
* **engine start**: vLLM's engine initialisation (memory profiling, KV cache, torch.compile, CUDA graph capture),
  measured on this project's H100 and H200 captures (``AsyncLLM.from_engine_args`` with ``load_format=dummy``, so
  no weight read: tests/data/gpu_runs/*/meta.json ``startup_seconds``); a model or card without a capture takes
  the capture of the nearest weight bytes, on the same card where there is one. vLLM's own logs report the same
  order (vllm-project/vllm#20264: torch.compile 7.5 s from its cache, CUDA graph capture 17 s, "init engine
  (profile, create kv cache, warmup model) took 34.11 seconds").
* **warm-up requests**: the same captures' warm-up prompts, one at a time (4 prompts of 16 to 2,048 tokens on the
  dense model, 14 on the MoE model), measured end to end.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..hardware.gpus import gpu as gpu_preset
from ..hardware.links import link
from .lifecycle import LOADING, PROVISIONING, WARM, check_phase_seconds, is_seconds

PHASES = ("provisioning", "image_pull", "weight_load", "engine_start", "warmup")
STATE_OF = {"provisioning": PROVISIONING, "image_pull": LOADING, "weight_load": LOADING, "engine_start": WARM,
            "warmup": WARM}
GB = 1e9
PROVISIONING_S = 5.0
POD_SLO = ("Kubernetes pod startup SLO, p99 <= 5 s excluding image pulls (kubernetes/community "
           "sig-scalability/slos/pod_startup_latency.md); a pod on a node of the pool")
IMAGE_CACHED = "the image already on the node (imagePullPolicy IfNotPresent); vllm/vllm-openai is ~12.6 GB uncached"
# vLLM's weight loader (safetensors shards read and copied to the GPU), from the page cache: "Model loading took
# 3.4213 GiB and 0.902026 seconds" (vllm-project/vllm#20264): the rate one rank loads at, whatever the store
LOADER_BW = 3.4213 * 2**30 / 0.902026
LOADER = "vLLM's loader at 3.4213 GiB in 0.902 s from the page cache (vllm-project/vllm#20264)"


@dataclass(frozen=True)
class Storage:
    name: str
    bandwidth: float  # bytes/s the store delivers to one node
    source: str


def _nvme() -> Storage:
    nvme = link("nvme")
    return Storage("nvme", nvme.bandwidth, f"a local NVMe model cache: {nvme.source}")


STORAGE = {
    # KServe cut a Llama-3-70B service's start "from 15-20 mins to ~1 minute by caching the model locally"
    # (kserve/kserve#3869): 141 GB of weights in the 16.5 minutes between the midpoint and the cached start
    "remote": Storage("remote", 141e9 / (16.5 * 60), "a download from the hub or an object store: 141 GB of "
                      "Llama-3-70B in the 16.5 min a local cache saved (kserve/kserve#3869)"),
    "nvme": None,  # built on first use from hardware/links.py's preset (its source is there)
    "page-cache": Storage("page-cache", LOADER_BW, "the node's page cache (the weights read before): " + LOADER),
}
DEFAULT_STORAGE = "remote"


def storage(name: str) -> Storage:
    if name not in STORAGE:
        raise ValueError(f"unknown storage {name!r} for the weights; valid: {', '.join(STORAGE)}")
    return STORAGE[name] or _nvme()


@dataclass(frozen=True)
class Capture:
    model: str
    gpu: str
    weight_bytes: float
    engine_start: float   # startup_seconds: AsyncLLM.from_engine_args with load_format=dummy
    warmup: float | None  # the warm-up prompts' total seconds, one at a time (None: the capture ran none)
    path: str


# tests/data/gpu_runs/*/meta.json (vLLM 0.26.0, bfloat16, TP 1, max_num_seqs 128, max_num_batched_tokens 2048)
CAPTURES = (
    Capture("llama-3.1-8b", "h100", 16.06e9, 25.3, 0.0527 + 0.0193 + 0.0366 + 0.055, "h100-llama-3.1-8b"),
    Capture("llama-3.1-8b", "h100", 16.06e9, 42.5, 0.0648 + 0.02 + 0.0383 + 0.0558, "h100-llama-3.1-8b-mooncake"),
    Capture("llama-3.1-8b", "h200", 16.06e9, 38.9, None, "h200-llama-3.1-8b"),
    Capture("qwen3-30b-a3b", "h100", 61.06e9, 58.8, 1.0902, "h100-qwen3-30b-a3b-warm"),
    Capture("qwen3-30b-a3b", "h200", 61.06e9, 62.1, None, "h200-qwen3-30b-a3b"),
    Capture("qwen3-32b", "h200", 65.52e9, 90.3, None, "h200-qwen3-32b"),
)


def nearest_captures(model: str, gpu: str, weight_bytes: float, measured: str) -> list[Capture]:
    """The captures of ``model`` on ``gpu``; else of the nearest weight bytes, on ``gpu`` where it has any; only
    those that measured ``measured`` (an attribute that is not None)."""
    have = [c for c in CAPTURES if getattr(c, measured) is not None]
    same = [c for c in have if c.model == model and c.gpu == gpu]
    if same:
        return same
    pool = [c for c in have if c.gpu == gpu] or have
    best = min(abs(c.weight_bytes - weight_bytes) for c in pool)
    return [c for c in pool if abs(c.weight_bytes - weight_bytes) == best]


def mean_of(captures: list[Capture], measured: str) -> tuple[float, str]:
    values = [getattr(c, measured) for c in captures]
    where = ", ".join(f"{c.path} {getattr(c, measured):.3g} s" for c in captures)
    return sum(values) / len(values), f"tests/data/gpu_runs: {where}" + (" (mean)" if len(values) > 1 else "")


@dataclass(frozen=True)
class ColdStart:
    """Seconds of each phase of a replica's start (module docstring), with where each figure comes from; a
    duration source of the replica's start-up states (``seconds(state)``, as ``PhaseTimes``)."""

    provisioning: float
    image_pull: float
    weight_load: float
    engine_start: float
    warmup: float
    sources: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        check_phase_seconds(self, PHASES, "cold start ")

    def seconds(self, state: str) -> float:
        return float(sum(getattr(self, p) for p in PHASES if STATE_OF[p] == state))

    @property
    def cold_start(self) -> float:
        return float(sum(getattr(self, p) for p in PHASES))

    def scaled_to(self, total: float, why: str) -> "ColdStart":
        """The same phases in the same proportions, ``total`` seconds in all."""
        now = self.cold_start
        factor = total / now if now > 0 else 0.0
        values = {p: getattr(self, p) * factor for p in PHASES}
        if now <= 0:
            values["provisioning"] = total
        sources = {p: f"{why}, scaled from {getattr(self, p):.4g} s ({self.sources.get(p, '')})" for p in PHASES}
        return replace(self, **values, sources=sources)

    def describe(self) -> dict:
        return {"total_s": self.cold_start,
                "phases": {p: {"seconds": getattr(self, p), "state": STATE_OF[p], "source": self.sources.get(p, "")}
                           for p in PHASES}}


PARAMS = {"provisioning": PROVISIONING_S, "image_pull": 0.0, "weight_load": 0.0, "engine_start": 0.0, "warmup": 0.0,
          "storage": DEFAULT_STORAGE}  # the defaults' types: a phase given replaces its model (0 means none given)


def cold_start_model(spec, gpu: str, params: dict | None = None, total: float | None = None) -> ColdStart:
    """The cold start of a replica of model ``spec`` (at its tensor parallelism) on ``gpu``: each phase's default
    (module docstring) or its figure in ``params`` (seconds; ``storage`` names the weights' store), scaled to
    ``total`` seconds when given (``--cold-start``)."""
    params = dict(params or {})
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        raise ValueError(f"--cold-start-param {unknown[0]}: no such phase; give {', '.join(PARAMS)}")
    card = gpu_preset(gpu).name
    store = storage(str(params.get("storage", DEFAULT_STORAGE)))
    tp = getattr(spec, "tp", 1) or 1
    load = max(spec.weight_bytes / store.bandwidth, spec.weight_bytes / tp / LOADER_BW)
    engine, engine_src = mean_of(nearest_captures(spec.name, card, spec.weight_bytes, "engine_start"),
                                 "engine_start")
    warm, warm_src = mean_of(nearest_captures(spec.name, card, spec.weight_bytes, "warmup"), "warmup")
    values = {"provisioning": PROVISIONING_S, "image_pull": 0.0, "weight_load": load, "engine_start": engine,
              "warmup": warm}
    sources = {"provisioning": POD_SLO, "image_pull": IMAGE_CACHED,
               "weight_load": f"{spec.weight_bytes / GB:.4g} GB over {store.name} at {store.bandwidth / GB:.3g} "
                              f"GB/s ({store.source}), at most {LOADER_BW / GB:.3g} GB/s a rank ({LOADER})",
               "engine_start": engine_src, "warmup": warm_src}
    for phase in PHASES:
        if phase in params:
            value = params[phase]
            if not is_seconds(value):
                raise ValueError(f"--cold-start-param {phase}={value!r}: must be a finite number of seconds >= 0")
            values[phase] = float(value)
            sources[phase] = "given (--cold-start-param)"
    model = ColdStart(**values, sources=sources)
    if total is not None:
        model = model.scaled_to(float(total), f"--cold-start {total:g} s")
    return model
