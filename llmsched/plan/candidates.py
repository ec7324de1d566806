"""Deployment candidates: GPU × tensor parallelism × scheduler (× its key parameters) × router, colocated or (with
P:D ratios) disaggregated over a prefill and a decode (GPU, TP), and whether the model fits the GPU at that tensor
parallelism (weights + activation reserve + at least one token of KV).

A disaggregated candidate ``a:b`` scales as one unit: its "replicas" r are r·a prefill and r·b decode replicas
(``--disaggregate`` (r·a)P(r·b)D), so the replica search over r keeps the ratio and more replicas never take any
away from either pool; its GPUs and price count both pools."""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from ..capacity.probe import at_rate
from ..experiment import RunConfig
from ..hardware.batch_defaults import on_gpu
from ..hardware.gpus import GiB, gpu as gpu_preset
from ..hardware.kv_sizing import RESERVE_UTILIZATION, kv_cache
from ..hardware.vllm_memory import default_utilization
from ..hardware.models import model as model_preset
from ..config_fields import check_params, parse_params
from ..engine.offload_spec import parse_kv_offload
from ..routing.registry import router_classes
from ..schedulers.registry import scheduler_info


# a colocated candidate's run leaves disaggregation's fields at their defaults (the plan's runs carry them for
# its disaggregated candidates)
COLOCATED = {"disaggregate": None, "prefill_gpu": None, "prefill_tp": None, "decode_gpu": None, "decode_tp": None,
             "prefill_pool": {}, "decode_pool": {}, "kv_link": RunConfig.kv_link,
             "kv_connector": RunConfig.kv_connector, "pd_first_token": RunConfig.pd_first_token,
             "pd_decider": RunConfig.pd_decider, "pd_decider_params": {}}


@dataclass(frozen=True)
class Candidate:
    gpu: str
    tp: int
    scheduler: str
    params: tuple = ()          # (key, value) pairs varied by --vary, on top of --param
    router: str = "round-robin"
    kv_offload: str | None = None  # KV tiers below the GPU (--kv-offloads), None: the base run's
    # disaggregated: (prefill GPU, prefill TP, decode GPU, decode TP, prefill replicas, decode replicas) a unit
    pd: tuple | None = None

    @property
    def label(self) -> str:
        extra = "[" + ",".join(f"{k}={v}" for k, v in self.params) + "]" if self.params else ""
        tiers = f" kv-offload {self.kv_offload}" if self.kv_offload else ""
        if self.pd is not None:
            gp, tpp, gd, tpd, a, b = self.pd
            return f"{a}P:{b}D {gp} tp{tpp} / {gd} tp{tpd} {self.scheduler}{extra} {self.router}{tiers}"
        return f"{self.gpu} tp{self.tp} {self.scheduler}{extra} {self.router}{tiers}"

    @property
    def price_gpus(self) -> list[str]:
        return [self.pd[0], self.pd[2]] if self.pd is not None else [self.gpu]

    def gpus(self, replicas: int) -> int:
        if self.pd is not None:
            _, tpp, _, tpd, a, b = self.pd
            return replicas * (a * tpp + b * tpd)
        return replicas * self.tp

    def usd_per_hour(self, price_of, replicas: int, host_cost=None) -> float:
        """The GPUs' price, both pools' for a disaggregated one, with each replica's host memory for a CPU KV tier
        (``host_cost``: a replica's, per hour) where one is priced: a disaggregated one's prefill replicas only,
        which keep the tiers (``fleet_setup.pool_config``)."""
        host = host_cost(self) if host_cost else 0.0
        if self.pd is not None:
            gp, tpp, gd, tpd, a, b = self.pd
            return replicas * (a * (tpp * price_of(gp) + host) + b * tpd * price_of(gd))
        return (price_of(self.gpu) * self.tp + host) * replicas

    def config(self, base: RunConfig, rate: float, replicas: int) -> RunConfig:
        """``base`` (the scheduler's run options) deployed as this candidate with ``replicas`` replicas (units of a
        disaggregated one)."""
        tiers = {} if self.kv_offload is None else {"kv_offload": None if self.kv_offload == NO_OFFLOAD else
                                                    self.kv_offload}
        common = dict(scheduler=self.scheduler, router=self.router,
                      scheduler_params={**base.scheduler_params, **dict(self.params)}, **tiers)
        if self.pd is not None:
            gp, tpp, gd, tpd, a, b = self.pd
            return at_rate(dataclasses.replace(base, replicas=1, disaggregate=f"{replicas * a}P{replicas * b}D",
                                               prefill_gpu=gp, prefill_tp=tpp, decode_gpu=gd, decode_tp=tpd,
                                               **common), rate)
        return at_rate(dataclasses.replace(base, gpu=self.gpu, tp=self.tp, replicas=replicas,
                                           **{**COLOCATED, **common}), rate)

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


def parse_ratios(text: str) -> list[tuple[int, int]]:
    """``--pd-ratios``: P:D pairs, e.g. ``1:1,2:1,1:2``."""
    out = []
    for part in split_names(text, "--pd-ratios"):
        try:
            a, b = (int(x) for x in part.split(":"))
        except ValueError:
            raise ValueError(f"--pd-ratios {text!r}: write P:D pairs of replicas, e.g. 1:1,2:1,1:2") from None
        if a < 1 or b < 1:
            raise ValueError(f"--pd-ratios {text!r}: {part} has a pool of 0 replicas; each side needs >= 1")
        out.append((a, b))
    return list(dict.fromkeys(out))


def build_candidates(gpus: list[str], tps: list[int], schedulers: list[str], routers: list[str],
                     variations: dict[str, list[tuple]] | None = None,
                     offloads: list[str | None] = (None,),
                     ratios: list[tuple[int, int]] = ()) -> list[Candidate]:
    """Every colocated candidate, and with ``ratios`` every disaggregated one: each (GPU, TP) for the prefill
    pool with each for the decode pool (the same or another card: Splitwise's point), at each P:D ratio, for the
    schedulers that can run a decode pool (``Scheduler.serves_transferred_kv``); each with each of ``offloads``."""
    for name in gpus:
        gpu_preset(name)                      # unknown GPU: error listing the valid ones
    for name in schedulers:
        scheduler_info(name)
    for name in routers:
        if name not in router_classes():
            raise ValueError(f"unknown router {name!r}; valid routers: {', '.join(router_classes())}")
    variations = variations or {}
    devices = dict.fromkeys(gpu_preset(g).name for g in gpus)  # two names of one GPU (a100, A100): one candidate
    out = [Candidate(g, tp, s, params, r, o)
           for g in devices for tp in tps for s in schedulers for params in variations.get(s, [()]) for r in routers
           for o in offloads]
    if ratios:
        from ..schedulers.registry import create_scheduler
        able = [s for s in schedulers if getattr(create_scheduler(s), "serves_transferred_kv", False)]
        if not able:
            raise ValueError(f"--pd-ratios: none of --schedulers ({', '.join(schedulers)}) can run a decode pool; "
                             f"add one that can (e.g. sarathi, vllm-chunked, vllm)")
        sides = [(g, tp) for g in devices for tp in tps]
        out += [Candidate(gd, tpd, s, params, r, o, (gp, tpp, gd, tpd, a, b))
                for (gp, tpp) in sides for (gd, tpd) in sides for a, b in ratios for s in able
                for params in variations.get(s, [()]) for r in routers for o in offloads]
    return out


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
    limits = {**base.__dict__, **on_gpu(base.__dict__, device)}   # the limits base leaves to the GPU: this one's
    seqs, tokens = limits["max_num_seqs"], limits["max_num_batched_tokens"]
    graphs = len(cudagraph_capture_sizes(seqs, tokens)) if vllm_engine else 0
    try:
        cache = kv_cache(spec, device, block_size=base.block_size, max_num_seqs=seqs,
                         max_num_batched_tokens=tokens, vllm_engine=vllm_engine,
                         gpu_memory_utilization=base.gpu_memory_utilization, capture_sizes=graphs)
        error = ""
    except ValueError as e:
        cache, error = None, str(e)
    budget = cache.budget if cache is not None else None
    utilization = base.gpu_memory_utilization or (default_utilization(None) if vllm_engine else RESERVE_UTILIZATION)
    requested = (device.visible_bytes if vllm_engine else device.mem_bytes) * utilization
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
