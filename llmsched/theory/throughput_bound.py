"""A true upper bound on the requests/s any schedule can serve (``llmsched theory throughput-bound``,
llmsched/cli/theory_throughput_bound.py, prints it).

The bound holds in the simulator's own model (llmsched/engine/replica.py and the batch-time model of the run),
for every scheduler, router and arrival pattern, so the planner may prune with it. It is a *lower bound on the
GPU time* each request needs, with every step at its most efficient batch within the engine's limits:

**Work that no schedule avoids.** A request of P prompt and D output tokens runs its prompt as one or more
prefill chunks (c_k new tokens over m_k cached ones, Σ c_k = P) and then D − 1 decodes at contexts P+1 … P+D−1
(the first output token is sampled at the end of the prefill). Preemption, recompute and eviction only add
work. Whatever the chunking, its steps carry ≥ P + D − 1 tokens, ≥ D rows (one per chunk and decode), decode
context Σ(P+i) = (D−1)·P + D(D−1)/2, KV context Σ(m_k + c_k) + Σ(P+i) ≥ P + that, and causal-attention pairs
Σ c_k·(m_k + (c_k+1)/2) = P(P+1)/2 exactly (the cross terms Σ_{l<k} c_l·c_k and the squares add up to P²/2).

**Steps that no schedule avoids.** The replica rejects a plan of more than ``max_num_batched_tokens`` (M)
tokens or ``max_num_seqs`` (N) running requests, and every item's KV is in its ``num_blocks·block_size`` (C)
slots during the step (each item holds ⌈context/block_size⌉ blocks). So a run needs at least
S = max(Σtokens / M, Σrows / N, ΣKV context / C) steps: the last term is the decodes amortised over the
largest batch that fits in memory at the workload's mean context.

**Step time.** The roofline step time (llmsched/batchtime/roofline.py) is ‖(τ·c_lin, w_lin + τ·a_lin)‖_p +
‖(rows·c_head, w_head)‖_p + fixed + τ·(element-wise + all-reduce) + rows·per-seq + Σ decode ctx·kv +
Σ_chunks max(attention FLOPs, KV read) (staircase: ⌈τ⌉ tile-rounded, ≥ τ). Summed over steps, Minkowski's
inequality (Σ‖x_s‖_p ≥ ‖Σx_s‖_p, p ≥ 1) and monotonicity of the norm give the totals' norm with the fixed
weight reads counted S times; every other term is linear in the work above, and Σ_k max(f_k, r_k) ≥
max(Σf_k, Σr_k) per request. A linear model (llmsched/batchtime/linear.py) has non-negative coefficients on
such totals, so it is the same argument with no norm. The replica runs one step at a time, so a replica's
busy time is at least this sum; r replicas serve at most r / (bound seconds per request) requests/s.

Where the GPU prices all-reduces by NCCL's tuning model (the least over protocols of latency + size / bandwidth,
llmsched/hardware/nccl_model.py), each all-reduce is bounded below by the least latency plus the size at the
least cost per byte, linear in the totals; the bound then holds below the step time instead of equal to it.

The ``engine`` model (llmsched/batchtime/serving_engine.py) is the roofline with engine terms: per-hop all-reduce
latency and a separate decode-attention bandwidth (both linear in the totals above, so exact), and the host's
kernel launches overlapped with the GPU's work as a smoothed maximum ``(gpu^q + host^q)^(1/q)``, q ≥ 1, which
is ≥ ``gpu``, plus serial host work per step and per row. Dropping the launch term leaves a lower bound on
every step (exact whenever the launches hide under the GPU's work and q = ∞), so the same sum bounds it.

The ``vllm-v1`` model (llmsched/batchtime/vllm_v1.py) runs its GPU model on the CUDA-graph padded batch and
overlaps (or adds) the host's work: both only lengthen a step, so the GPU model's decomposition of the unpadded
work bounds it from below.

Other batch-time models have no such decomposition: :func:`busy_time_form` raises ValueError for them. The
roofline decomposition is rebuilt from the model's public parameters and checked against its ``step_time`` on
probe batches (:func:`busy_time_form`: equal for the roofline, never above for the engine model), so a change
to the formula turns the bound off with an error instead of leaving it unsound.

**Shortfalls.** Requests the engine can never hold (longer than max_model_len or the KV cache) cost nothing
and are never served. ``served_fraction`` q < 1 bounds a run that need serve only a fraction q of the offered
work in prompt + output tokens (the stability verdict tolerates a backlog growing at under 5% of the arriving
work): each work total is replaced by its least value over requests covering q of the tokens (a fractional
knapsack, a lower bound on any whole set of requests), and the bound is monotone in every total.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..batchtime.base import Batch, BatchTimeModel
from ..batchtime.linear import LinearBatchTime
from ..batchtime.roofline import RooflineBatchTime, layer_traffic, rates
from ..batchtime.serving_engine import EngineBatchTime
from ..run_config import RunConfig
from ..batchtime.vllm_v1 import VLLMV1BatchTime

@dataclass(frozen=True)
class EngineLimits:
    """The replica's hard per-step limits the bound relies on."""

    max_num_batched_tokens: int
    max_num_seqs: int
    kv_tokens: int          # num_blocks · block_size
    max_model_len: int
    block_size: int


@dataclass(frozen=True)
class Work:
    """Totals of the work a set of requests needs at the least (see the module docstring)."""

    tokens: float
    rows: float
    decode_context: float
    kv_context: float
    attention_pairs: float      # Σ P(P+1)/2
    prompt_tokens: float
    decodes: float
    prefills: float             # requests (one chunk each at the least)

    def steps(self, limits: EngineLimits) -> tuple[float, str]:
        """Fewest steps and the limit that sets it."""
        options = {"max_num_batched_tokens": self.tokens / limits.max_num_batched_tokens,
                   "max_num_seqs": self.rows / limits.max_num_seqs,
                   "KV memory": self.kv_context / limits.kv_tokens}
        binding = max(options, key=options.get)
        return options[binding], binding


def request_work(prompts, outputs) -> dict[str, np.ndarray]:
    """Per-request least work, as float arrays named like :class:`Work`'s fields."""
    p = np.asarray(prompts, dtype=np.float64)
    d = np.asarray(outputs, dtype=np.float64)
    decodes = d - 1
    decode_context = decodes * p + decodes * d / 2
    return {"tokens": p + decodes, "rows": d, "decode_context": decode_context, "kv_context": decode_context + p,
            "attention_pairs": p * (p + 1) / 2, "prompt_tokens": p, "decodes": decodes,
            "prefills": np.ones_like(p)}


def stage_work(stage: str, prompts, outputs) -> dict[str, np.ndarray]:
    """Per-request least work of a disaggregated deployment's pool (the whole request for ``whole``).

    * ``prefill``: the prompt computed and one token sampled (vLLM's disaggregation proxy sends the prefill
      instance ``max_tokens=1``): :func:`request_work` of (P, 1).
    * ``decode``: the prompt's KV arrives, so one chunk computes its last token over P − 1 cached ones (c = 1,
      m = P − 1: P attention pairs, KV context P) and D − 1 decodes follow at contexts P+1 … P+D−1. Its
      ``prompt_tokens`` (computed prompt tokens) is 1; the roofline's per-chunk KV read of that chunk (P tokens) is
      left out, which only lowers the work, so the bound stays an upper bound."""
    if stage == "whole":
        return request_work(prompts, outputs)
    if stage == "prefill":
        return request_work(prompts, np.ones_like(np.asarray(prompts)))
    if stage != "decode":
        raise ValueError(f"stage must be whole, prefill or decode, got {stage!r}")
    out = request_work(prompts, outputs)
    p = np.asarray(prompts, dtype=np.float64)
    d = np.asarray(outputs, dtype=np.float64)
    out.update(tokens=d, attention_pairs=p, prompt_tokens=np.ones_like(p))
    return out


def least_total(values: np.ndarray, weights: np.ndarray, need: float) -> float:
    """Least Σ values over requests whose weights cover ``need`` (fractional knapsack: a lower bound on the
    least over whole requests; the plain sum when ``need`` is all of the weight)."""
    if need >= weights.sum():
        return float(values.sum())
    order = np.argsort(values / weights, kind="stable")
    v, w = values[order], weights[order]
    covered = np.cumsum(w)
    k = int(np.searchsorted(covered, need))
    before = covered[k - 1] if k else 0.0
    return float(v[:k].sum() + v[k] * (need - before) / w[k])


def least_work(per_request: dict[str, np.ndarray], weights: np.ndarray, need: float) -> Work:
    """Totals of each quantity over the cheapest requests that cover ``need`` of the weight (all: exact)."""
    return Work(**{name: least_total(values, weights, need) for name, values in per_request.items()})


# --- step-time decompositions --------------------------------------------------------------------------------

@dataclass(frozen=True)
class RooflineTerms:
    """The roofline's step time as coefficients of the work totals (module docstring)."""

    lin_c: float
    lin_w: float
    lin_a: float
    head_c: float
    head_w: float
    per_step: float
    per_token: float
    per_row: float
    kv_read: float
    kv_decode: float    # decode attention's KV read per context token (its own bandwidth in the engine model)
    attn_c: float
    sharpness: float
    t_col: int
    staircase: bool

    def norm(self, a: float, b: float) -> float:
        p = self.sharpness
        if p == math.inf:
            return max(a, b)
        return (a ** p + b ** p) ** (1.0 / p)

    def step_time(self, batch: Batch) -> float:
        """The roofline's step time rebuilt from these terms (checked against the model's own)."""
        tokens = batch.num_tokens
        if tokens == 0:
            return 0.0
        rows = batch.num_decodes + batch.num_prefills
        compute_tokens = -(-tokens // self.t_col) * self.t_col if self.staircase else tokens
        t = self.norm(compute_tokens * self.lin_c, self.lin_w + tokens * self.lin_a)
        t += self.norm(rows * self.head_c, self.head_w)
        t += self.per_step + tokens * self.per_token + rows * self.per_row + sum(batch.decode_ctx) * self.kv_decode
        for c, m in zip(batch.prefill_new, batch.prefill_ctx):
            t += max((c * m + c * (c + 1) * 0.5) * self.attn_c, (m + c) * self.kv_read)
        return t

    def busy_time(self, work: Work, per_request: dict[str, np.ndarray], weights: np.ndarray, need: float,
                  steps: float) -> dict:
        attention = np.maximum(per_request["attention_pairs"] * self.attn_c,
                               per_request["prompt_tokens"] * self.kv_read)
        attention_total = least_total(attention, weights, need)
        return {"linear_layers": self.norm(work.tokens * self.lin_c, steps * self.lin_w + work.tokens * self.lin_a),
                "lm_head": self.norm(work.rows * self.head_c, steps * self.head_w),
                "fixed_per_step": steps * self.per_step,
                "per_token": work.tokens * self.per_token + work.rows * self.per_row,
                "decode_attention": work.decode_context * self.kv_decode,
                "prefill_attention": attention_total}


def roofline_terms(bt: RooflineBatchTime) -> RooflineTerms:
    """Coefficients of ``bt``'s formula from its public parameters (the roofline module docstring); for the
    engine model, without the host's launch term (a lower bound, the module docstring)."""
    m, g = bt.model, bt.gpu
    tp, b = m.tp, m.dtype_bytes
    flops, bw, head_flops = rates(m, g, bt.compute_eff, bt.mem_eff)
    gemm_io, elementwise = layer_traffic(m)
    L = m.layers
    if bt.allreduce is not None:      # NCCL's model: its least latency and least cost per byte, a lower bound
        ar_const = 2 * L * bt.allreduce.least_latency()
        ar_tok = 2 * L * m.hidden * b * bt.allreduce.least_per_byte()
    elif tp > 1:
        link = g.collective_bw(bt.comm_eff)
        ar_const = 2 * L * (bt.allreduce_latency + 2 * (tp - 1) * bt.allreduce_hop_latency)
        ar_tok = 2 * L * 2 * (tp - 1) / tp * m.hidden * b / link
    else:
        ar_const = ar_tok = 0.0
    decode_kv = (m.kv_bytes_per_token_per_gpu if bt.decode_gqa else
                 2 * L * max(1, m.heads // tp) * m.head_dim * m.kv_dtype_bytes)   # an fp8 KV cache: one byte
    return RooflineTerms(
        lin_c=L * m.layer_linear_params * 2 / tp / flops,
        lin_w=L * m.layer_linear_params * m.weight_dtype_bytes / tp / bw,
        lin_a=L * gemm_io * b / bw, head_c=m.lm_head_flops_per_token / tp / head_flops,
        head_w=m.hidden * m.vocab * b / tp / bw,
        per_step=bt.step_overhead + L * bt.layer_overhead + ar_const + bt.host_step,
        per_token=L * elementwise * b / bw + ar_tok, per_row=bt.per_seq_overhead + bt.host_per_seq,
        kv_read=m.kv_bytes_per_token_per_gpu / bw, kv_decode=decode_kv / (g.mem_bw * bt.decode_attn_eff),
        attn_c=4.0 * L * m.q_dim / tp / (g.flops * bt.attn_compute_eff),
        sharpness=bt.sharpness, t_col=bt.t_col, staircase=bt.staircase)


@dataclass(frozen=True)
class LinearTerms:
    """A linear model's coefficients (all >= 0), each on a work total or dropped (term >= 0)."""

    coefficients: dict

    def busy_time(self, work: Work, per_request: dict[str, np.ndarray], weights: np.ndarray, need: float,
                  steps: float) -> dict:
        c = self.coefficients
        return {"fixed_per_step": steps * c["const"],
                "per_token": work.tokens * (c["per_token"] + c["staircase_tokens"])
                + work.prompt_tokens * c["prefill_tokens"] + work.decodes * c["per_decode"]
                + work.prefills * c["per_prefill"],
                "context": work.kv_context * c["per_context"] + work.decode_context * c["decode_context"],
                "prefill_attention": work.attention_pairs * c["prefill_attention"]}


PROBE_BATCHES = (Batch([1], [0], []), Batch([], [], [1]), Batch([300], [0], []), Batch([], [], [700] * 37),
                 Batch([129, 7], [512, 0], [2048, 33, 4000]), Batch([4096], [1000], [100] * 255),
                 Batch([8000], [0], [9000] * 3))


def busy_time_form(bt: BatchTimeModel):
    """The decomposition of ``bt`` the bound sums (ValueError where none is known to hold)."""
    if type(bt) is VLLMV1BatchTime:
        return vllm_v1_form(bt)
    if type(bt) is LinearBatchTime:          # exact types: a subclass may add terms the bound does not know
        return LinearTerms(dict(bt.coefficients))
    if type(bt) in (RooflineBatchTime, EngineBatchTime) and bt.architecture is not None:
        raise ValueError(f"no sound throughput bound for {bt.model.name}: the bound's decomposition covers dense "
                         f"decoders, not routed experts, latent attention or sliding windows")
    if type(bt) in (RooflineBatchTime, EngineBatchTime):
        terms = roofline_terms(bt)
        lower_only = type(bt) is EngineBatchTime or bt.allreduce is not None
        for batch in PROBE_BATCHES:
            want, got = bt.step_time(batch), terms.step_time(batch)
            close = math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-15)
            if not (close or (lower_only and got < want)):
                raise ValueError(f"the {bt.name} batch time's formula no longer matches the throughput bound's "
                                 f"decomposition ({got:.6g} s vs {want:.6g} s on {batch}); update "
                                 f"llmsched/theory/throughput_bound.py before pruning with it")
        return terms
    raise ValueError(f"no sound throughput bound for batch-time model {bt.name!r}: it is known for roofline, "
                     f"roofline-staircase, calibrated, engine and linear")


def vllm_v1_form(bt: VLLMV1BatchTime):
    """vLLM v1's engine around a GPU model: a step is the GPU model's step of the CUDA-graph padded batch (padding
    only adds dummy decodes, and the GPU models are monotone in tokens, rows and context), overlapped with or
    followed by the host's work (``max(gpu, cpu)`` or ``gpu + cpu``, both >= gpu): the GPU model's form of the
    unpadded work bounds it from below. Checked on the probe batches: never above ``bt``'s step time."""
    inner = busy_time_form(bt.gpu_model)
    if not isinstance(inner, RooflineTerms):
        raise ValueError(f"no sound throughput bound for vllm-v1 around {bt.gpu_model.name!r}: known around "
                         f"roofline, roofline-staircase, calibrated and engine")
    for batch in PROBE_BATCHES:
        want, got = bt.step_time(batch), inner.step_time(batch)
        if got > want * (1 + 1e-9) + 1e-15:
            raise ValueError(f"the vllm-v1 batch time fell below its GPU model's decomposition ({want:.6g} s vs "
                             f"{got:.6g} s on {batch}); update llmsched/theory/throughput_bound.py before pruning "
                             f"with it")
    return inner


@dataclass(frozen=True)
class ThroughputBound:
    requests_per_s: float           # offered requests/s all replicas together can keep up with, at most
    per_replica_rps: float
    output_tokens_per_s: float      # at the workload's mix
    seconds_per_request: float      # least replica-seconds per offered request
    steps_per_request: float
    binding: str                    # the engine limit that sets the step count
    replicas: int
    offered: int
    unservable: int                 # requests the engine can never hold (cost nothing, served never)
    served_fraction: float          # of the offered work (prompt + output tokens) a run must serve
    components: dict                # seconds per offered request, by term
    limits: dict

    def as_dict(self) -> dict:
        return asdict(self)


def throughput_bound(bt: BatchTimeModel, prompts, outputs, limits: EngineLimits, replicas: int = 1,
                     served_fraction: float = 1.0, stage: str = "whole") -> ThroughputBound:
    """Upper bound on the offered requests/s (of these lengths) that ``replicas`` replicas keep up with, when
    keeping up means serving ``served_fraction`` of the offered work, counted in prompt + output tokens (the
    stability verdict's unit, llmsched/capacity/stability.py). 0 when the unservable requests alone exceed
    the shortfall allowed. ``stage``: the part of each request the replicas serve, ``whole``, or a
    disaggregated deployment's ``prefill`` or ``decode`` pool (:func:`stage_work`); the work that must be served
    is still the whole requests' tokens, so a fleet keeps up only where each pool does."""
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    if not 0 < served_fraction <= 1:
        raise ValueError(f"served_fraction must be in (0, 1], got {served_fraction}")
    prompts, outputs = np.asarray(prompts, dtype=np.int64), np.asarray(outputs, dtype=np.int64)
    if len(prompts) == 0 or len(prompts) != len(outputs):
        raise ValueError("throughput bound needs one or more (prompt, output) length pairs")
    if prompts.min() < 1 or outputs.min() < 1:
        raise ValueError("throughput bound: prompt and output lengths must be >= 1 token")
    form = busy_time_form(bt)
    held = outputs if stage != "prefill" else np.ones_like(outputs)  # a prefill instance is asked one token
    kv_need = -(-(prompts + held - 1) // limits.block_size) * limits.block_size
    servable = (prompts + held <= limits.max_model_len) & (kv_need <= limits.kv_tokens)
    offered = len(prompts)
    weights = (prompts + outputs).astype(np.float64)
    need = served_fraction * float(weights.sum())
    common = dict(replicas=replicas, offered=offered, unservable=int((~servable).sum()),
                  served_fraction=served_fraction, limits=asdict(limits))
    if float(weights[servable].sum()) < need * (1 - 1e-12):
        return ThroughputBound(0.0, 0.0, 0.0, math.inf, math.inf, "unservable requests", components={}, **common)
    per_request = stage_work(stage, prompts[servable], outputs[servable])
    weights = weights[servable]
    work = least_work(per_request, weights, need)
    steps, binding = work.steps(limits)
    components = form.busy_time(work, per_request, weights, need, steps)
    seconds = sum(components.values()) / offered
    per_replica = 1.0 / seconds
    mean_output = float(outputs[servable].sum()) / offered
    return ThroughputBound(
        requests_per_s=replicas * per_replica, per_replica_rps=per_replica,
        output_tokens_per_s=replicas * per_replica * mean_output, seconds_per_request=seconds,
        steps_per_request=steps / offered, binding=binding,
        components={k: v / offered for k, v in components.items()}, **common)


def engine_of(cfg) -> tuple[BatchTimeModel, EngineLimits]:
    """The batch-time model and limits of ``cfg``'s replicas (a RunConfig), built exactly as the run builds them.

    With windowed KV cache groups (engine/kv_windows.py) a request of context n holds at least
    ``full · ceil(n / block_size)`` blocks (its full-attention groups' alone; the windowed groups' add to that),
    so the cache holds at most ``num_blocks · block_size / full`` tokens of context at once (every token where no
    group is full attention): still an upper bound on the KV slots, so the memory term stays sound."""
    from ..experiment import build_replicas
    rep = build_replicas(replace(cfg, replicas=1))[0]
    c = rep.config
    kv_tokens = c.num_blocks * c.block_size
    if c.kv_groups is not None:
        full = c.kv_groups.full
        kv_tokens = kv_tokens // full if full else c.max_model_len * c.max_num_seqs
    return rep.batch_time, EngineLimits(c.max_num_batched_tokens, c.max_num_seqs, kv_tokens, c.max_model_len,
                                        c.block_size)


def engine_limits(cfg) -> EngineLimits:
    return engine_of(cfg)[1]


def config_lengths(cfg) -> tuple[np.ndarray, np.ndarray]:
    """The prompt and output lengths ``cfg``'s run would offer (the same seed, the same requests)."""
    from ..experiment import build_source
    source = build_source(cfg)
    if hasattr(source, "prompts"):          # closed loop: lengths drawn up front
        return np.asarray(source.prompts), np.asarray(source.outputs)
    return source.lengths


def bound_for_config(cfg, served_fraction: float = 1.0) -> ThroughputBound:
    """The bound for a RunConfig: its batch-time model, engine limits, replicas and its own requests.

    The replicas are the most that ever serve: a DP group's ranks, an autoscaled pool's ``max_replicas``. A fleet
    file's pools and a disaggregated deployment (other GPUs, or prefill and decode stages) are not one pool of
    alike replicas, and a prefix cache that serves shared prompts skips prefill work the bound counts:
    ValueError for each, as for a batch-time model without a bound (``plan`` bounds a disaggregated candidate pool
    by pool: plan/prune.py)."""
    from ..experiment import carries_content
    if cfg.fleet or cfg.disaggregate:
        raise ValueError(f"no sound throughput bound for a {'fleet' if cfg.fleet else 'disaggregated'} run: it "
                         f"bounds one pool of alike replicas")
    if cfg.prefix_caching and carries_content(cfg):
        raise ValueError("no sound throughput bound with a prefix cache over shared prompts: it counts every "
                         "prompt token as computed")
    bt, limits = engine_of(cfg)
    prompts, outputs = config_lengths(cfg)
    return throughput_bound(bt, prompts, outputs, limits, serving_replicas(cfg), served_fraction)


def serving_replicas(cfg) -> int:
    """The most replicas of ``cfg`` that serve at once: its replicas, a DP group's ranks (each an engine of its
    own), an autoscaler's ceiling."""
    return max(cfg.replicas, cfg.dp, cfg.max_replicas if cfg.autoscaler else 1)


# requests drawn from a length preset when none are counted: enough that the mean work per request, and so the
# bound, moves by well under 1% from one seed to another
PRESET_REQUESTS = 20000


def compute(*, served_fraction: float = 1.0, **run) -> tuple[RunConfig, ThroughputBound]:
    """The bound (``bound_for_config``) for the run ``run`` describes (``config``), and that RunConfig."""
    cfg = config(**run)
    return cfg, bound_for_config(cfg, served_fraction)


def config(**run) -> RunConfig:
    """The RunConfig whose replicas and requests the bound is for, from RunConfig's fields (model, gpu, tp,
    batch_time, replicas, the engine limits, seed, ...; one left out or None keeps the run's default): a
    ``trace``'s lengths (all, or the first ``num_requests``), else ``num_requests`` (default PRESET_REQUESTS)
    drawn from the ``workload`` preset."""
    data = {name: value for name, value in run.items() if value is not None}
    if data.get("trace"):
        data.pop("workload", None)
    else:
        data.pop("trace", None)
        data.setdefault("workload", RunConfig.workload)
        data.setdefault("num_requests", PRESET_REQUESTS)
    return RunConfig.from_dict(data, origin="theory throughput-bound")


def describe(bound: ThroughputBound) -> list[str]:
    lim = bound.limits
    parts = ", ".join(f"{k} {v * 1e3:.3f}" for k, v in bound.components.items() if v)
    return [f"sound throughput bound: {bound.requests_per_s:.4g} req/s with r = {bound.replicas} "
            f"({bound.per_replica_rps:.4g} per replica, {bound.output_tokens_per_s:.4g} output tokens/s)",
            f"  least GPU time per request {bound.seconds_per_request * 1e3:.2f} ms ({parts} ms); "
            f"{bound.steps_per_request:.3g} steps/request set by {bound.binding} "
            f"(M={lim['max_num_batched_tokens']}, N={lim['max_num_seqs']}, KV {lim['kv_tokens']} tokens)",
            "  no scheduler, router or arrival pattern serves more in the simulator's model"
            + (f"; {bound.unservable} of {bound.offered} requests can never fit (never served)"
               if bound.unservable else "")]
