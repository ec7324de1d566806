"""Deployment candidates: GPU × tensor parallelism × scheduler (× its key parameters) × router, and whether the
model fits the GPU at that tensor parallelism (weights + activation reserve + at least one token of KV)."""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from ..capacity.probe import at_rate
from ..experiment import RunConfig
from ..hardware.gpus import GiB, gpu as gpu_preset
from ..hardware.kv_sizing import RESERVE_UTILIZATION, kv_cache
from ..hardware.vllm_memory import default_utilization
from ..hardware.models import model as model_preset
from ..config_fields import check_params, parse_params
from ..engine.offload_spec import parse_kv_offload
from ..routing.registry import router_classes
from ..schedulers.registry import scheduler_info


@dataclass(frozen=True)
class Candidate:
    gpu: str
    tp: int
    scheduler: str
    params: tuple = ()          # (key, value) pairs varied by --vary, on top of --param
    router: str = "round-robin"
    kv_offload: str | None = None  # KV tiers below the GPU (--kv-offloads), None: the base run's

    @property
    def label(self) -> str:
        extra = "[" + ",".join(f"{k}={v}" for k, v in self.params) + "]" if self.params else ""
        tiers = f" kv-offload {self.kv_offload}" if self.kv_offload else ""
        return f"{self.gpu} tp{self.tp} {self.scheduler}{extra} {self.router}{tiers}"

    def config(self, base: RunConfig, rate: float, replicas: int) -> RunConfig:
        """``base`` (the scheduler's run options) deployed as this candidate with ``replicas`` replicas."""
        tiers = {} if self.kv_offload is None else {"kv_offload": None if self.kv_offload == NO_OFFLOAD else
                                                    self.kv_offload}
        return at_rate(dataclasses.replace(base, gpu=self.gpu, tp=self.tp, scheduler=self.scheduler,
                                           router=self.router, replicas=replicas,
                                           scheduler_params={**base.scheduler_params, **dict(self.params)},
                                           **tiers), rate)

    def host_gib(self, base: RunConfig) -> float:
        """GiB of host memory a replica's CPU KV tier takes (priced per GiB-hour)."""
        text = base.kv_offload if self.kv_offload is None else (None if self.kv_offload == NO_OFFLOAD
                                                                  else self.kv_offload)
        if not text:
            return 0.0
        return sum(t.size for t in parse_kv_offload(str(text)) if t.medium == "cpu") / GiB


NO_OFFLOAD = "none"


def parse_offloads(text: str | None) -> list[str | None]:
    """``--kv-offloads none,cpu:256GiB,cpu:256GiB+disk:2TB``: the KV tiers to try (``none``: without; ``+`` joins a
    candidate's several tiers); each checked now."""
    if not text:
        return [None]
    out = []
    for item in split_names(text, "--kv-offloads"):
        spec = item.replace("+", ",")
        if spec != NO_OFFLOAD:
            try:
                parse_kv_offload(spec)
            except ValueError as e:
                raise ValueError(f"--kv-offloads {text!r}: {e}") from None
        out.append(spec)
    return out


def split_names(text: str, option: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise ValueError(f"{option} {text!r}: name at least one")
    return list(dict.fromkeys(names))


def parse_tps(text: str) -> list[int]:
    try:
        tps = [int(x) for x in split_names(text, "--tp")]
    except ValueError:
        raise ValueError(f"--tp {text!r}: give tensor-parallel degrees like 1,2,4") from None
    if any(t < 1 for t in tps):
        raise ValueError(f"--tp {text!r}: degrees must be >= 1")
    return tps


def parse_variations(items: list[str], schedulers: list[str]) -> dict[str, list[tuple]]:
    """``--vary SCHEDULER.KEY=V1,V2`` -> per scheduler, the (key, value) combinations to try."""
    per: dict[str, dict[str, list]] = {}
    for item in items:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise ValueError(f"--vary {item!r}: write SCHEDULER.KEY=V1,V2 (e.g. sarathi.token_budget=256,512)")
        name_key, values = item.split("=", 1)
        name, key = name_key.split(".", 1)
        if name not in schedulers:
            raise ValueError(f"--vary {item!r}: {name!r} is not among --schedulers ({', '.join(schedulers)})")
        known = scheduler_info(name)["params"]
        if key not in known:
            raise ValueError(f"--vary {item!r}: scheduler {name!r} has no parameter {key!r}; its parameters: "
                             f"{', '.join(sorted(known)) or '(none)'}")
        parsed = [check_params(f"scheduler {name!r}", parse_params([f"{key}={v}"], "--vary"), known,
                               f"--vary {item!r}")[key] for v in values.split(",") if v.strip()]
        if not parsed:
            raise ValueError(f"--vary {item!r}: give one or more values")
        per.setdefault(name, {})[key] = parsed
    return {name: [tuple(zip(keys, combo)) for combo in itertools.product(*(per[name][k] for k in keys))]
            for name in per for keys in [sorted(per[name])]}


def build_candidates(gpus: list[str], tps: list[int], schedulers: list[str], routers: list[str],
                     variations: dict[str, list[tuple]] | None = None,
                     offloads: list[str | None] = (None,)) -> list[Candidate]:
    for name in gpus:
        gpu_preset(name)                      # unknown GPU: error listing the valid ones
    for name in schedulers:
        scheduler_info(name)
    for name in routers:
        if name not in router_classes():
            raise ValueError(f"unknown router {name!r}; valid routers: {', '.join(router_classes())}")
    variations = variations or {}
    devices = dict.fromkeys(gpu_preset(g).name for g in gpus)  # two names of one GPU (a100, A100): one candidate
    return [Candidate(g, tp, s, params, r, o)
            for g in devices for tp in tps for s in schedulers for params in variations.get(s, [()]) for r in routers
            for o in offloads]


def memory_fit(model: str, gpu: str, tp: int, base: RunConfig | None = None) -> dict:
    """Per GPU: weights, what else the engine keeps (``reserve_gib``), budget (GiB) and the KV tokens left, sized as
    ``base``'s runs size them (hardware/kv_sizing.py; default: a default run's); ``fits`` False with the reason."""
    from ..batchtime.registry import resolve_kind
    from ..batchtime.vllm_v1 import cudagraph_capture_sizes
    base = base or RunConfig()
    device, preset = gpu_preset(gpu), model_preset(model)      # unknown names: errors listing the valid ones
    try:
        spec = preset.with_tp(tp)
    except ValueError as e:  # not memory: the TP cannot split the model's heads
        return {"fits": False, "reason": str(e), "tp": True}
    vllm_engine = resolve_kind(base.batch_time)[0] == "vllm-v1"
    graphs = len(cudagraph_capture_sizes(base.max_num_seqs, base.max_num_batched_tokens)) if vllm_engine else 0
    try:
        cache = kv_cache(spec, device, block_size=base.block_size, max_num_seqs=base.max_num_seqs,
                         max_num_batched_tokens=base.max_num_batched_tokens, vllm_engine=vllm_engine,
                         gpu_memory_utilization=base.gpu_memory_utilization, capture_sizes=graphs)
        error = ""
    except ValueError as e:
        cache, error = None, str(e)
    budget = cache.budget if cache is not None else None
    utilization = base.gpu_memory_utilization or (default_utilization(None) if vllm_engine else RESERVE_UTILIZATION)
    requested = device.mem_bytes * utilization
    free = cache.blocks * base.block_size * spec.kv_bytes_per_token_per_gpu if cache else 0
    reserve = budget.non_torch + budget.activation_peak + budget.cuda_graphs if budget else \
        max(0.0, requested - spec.weight_bytes_per_gpu - free)
    figures = {"weights_gib_per_gpu": spec.weight_bytes_per_gpu / GiB, "reserve_gib": reserve / GiB,
               "budget_gib": requested / GiB}
    if cache is None:
        reason = error if "does not fit" in error else \
            f"{spec.name} does not fit on {device.name}: " + error.split(": ", 1)[-1]
        return {"fits": False, "reason": reason, "kv_tokens": 0, **figures}
    return {"fits": True, "reason": "", "kv_tokens": cache.blocks * base.block_size, **figures}
