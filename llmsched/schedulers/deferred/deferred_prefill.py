"""Deferred prefill (Mohanty et al.): refill the batch only after K departures."""
from __future__ import annotations

from dataclasses import dataclass

from ...engine.plan import BatchPlan
from ...engine.view import ReplicaView
from ...request import Status
from ..base import Scheduler
from ..decode_pass import add_decodes
from ..registry import register
from ..tunable import IntRange
from ..vllm import swap_in
from ..watermark import WatermarkAdmission
from ..whole_prompt import admit_whole_prompts

MODES = ("to-full", "stateless")
FINISHED = Status.FINISHED


@register
@dataclass
class DeferredPrefill(WatermarkAdmission, Scheduler):
    """Deferred prefill: decode until K requests have left since the last refill, then refill the batch to C.

    vLLM's non-chunked continuous batching (whole prompts FCFS in prefill-only steps, the same token budget,
    1% KV watermark, recompute preemption and swap-in rules as ``vllm``) with a prefill gate (Mohanty et al. §3; spec
    §3.2). A prefill phase starts once ``K`` requests have left (finished, or been preempted) since the last
    one ended, when nothing runs, or — if the last phase ended because the queue ran dry — once K seats are
    free; it admits over as many steps as the budget needs until nothing more fits (``mode="to-full"``), and
    the step that admits nothing decodes. ``mode="stateless"`` is a one-line patch of the paper's vLLM change: admit in any
    step where at least K of the C seats are free (it under-fills when a refill needs several steps).

    K = 1 is stock vLLM continuous batching and K = C static batching: under the same limits their steps
    equal ``vllm``'s and ``fastertransformer``'s, step for step (tests/test_deferred_scheduler.py).

    ``batch_size`` is C. Left unset it is ``max_num_seqs``, as in the paper (C is vLLM's max_num_seqs), and KV
    pressure preempts as in ``vllm``. An explicit C must fit both ``max_num_seqs`` and the KV cache with every
    request at ``max_model_len`` tokens (vLLM's "maximum concurrency"; the paper's C = 331 and 410 match that
    rule at max_model_len 1024), so the batch never preempts, as the paper's model assumes.

    ``K="auto"`` picks K* = argmax of Theorem 1's exact ρ(K), with (c_p, s_p, c_d, t_d) fitted to the run's
    batch-time model (``view.batch_time``) and α̂ = 1/mean output tokens. The scheduler never
    reads true output lengths: give ``mean_output`` (and optionally ``mean_prompt``) from the workload's
    description, or leave it unset to learn it, running K = 1 until C requests have left: α̂ = departures per
    decode slot run (the geometric hazard of Lemma 1; the mean length of the first requests to finish would
    be biased short), and the mean prompt over admitted requests. The choice is reported in ``describe()``.

    With a prefix cache: plans as without one (whole prompts against the watermark); the replica starts each
    admission after its cached blocks.
    """

    name = "deferred-prefill"
    family = "deferred prefill"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks, at the front
    source = ("Mohanty et al., Deferred prefill for throughput maximization in LLM inference, EuroMLSys'25 "
              "(Mohanty et al.): departure-threshold policy §2.2, Theorem 1 / Prop. 1 for K*; the admission gate as the paper's vLLM patch")
    K: int | str = "auto"
    batch_size: int | None = None
    mode: str = "to-full"
    mean_output: float | None = None
    mean_prompt: float | None = None
    watermark: float = 0.01
    # K ("auto" in the paper) searched as an integer; K <= 64 <= C keeps every trial valid. Whole prompts: the
    # engine's token cap is its prefill budget
    tunable = {"K": IntRange(1, 64, log=True), "max_num_seqs": IntRange(64, 1024, log=True),
               "max_num_batched_tokens": IntRange(2048, 32768, log=True)}

    def __post_init__(self):
        self._C: int | None = None        # batch size, fixed at the first decision (needs the replica's limits)
        self._K = 1                       # threshold in force (1 until K="auto" has chosen)
        self._choice: dict | None = None  # what K="auto" chose and why
        self._in_phase = False            # a prefill phase is under way
        self._freed = 0                   # departures + preemptions since the last phase ended
        self._ran_dry = False             # the last phase ended because the queue was empty
        self._seen = [0, 0, 0, 0]         # departures in decode steps, decodes run, prefills run, Σ their prompts
        if self.K != "auto" and (isinstance(self.K, bool) or not isinstance(self.K, int) or self.K < 1):
            raise ValueError(f"deferred-prefill: K must be an integer >= 1 (1 = vLLM, C = static batching) or "
                             f"'auto', got {self.K!r}")
        if self.batch_size is not None and (isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int)
                                            or self.batch_size < 1):
            raise ValueError(f"deferred-prefill: batch_size (C) must be an integer >= 1, got {self.batch_size!r}")
        if isinstance(self.K, int) and self.batch_size is not None and self.K > self.batch_size:
            raise ValueError(f"deferred-prefill: K={self.K} exceeds the batch size C={self.batch_size}; "
                             f"K must be in 1..C (K = C is static batching)")
        if self.mode not in MODES:
            raise ValueError(f"deferred-prefill: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        for name in ("mean_output", "mean_prompt"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 1):
                raise ValueError(f"deferred-prefill: {name} must be a number of tokens >= 1, got {v!r}")
        if not 0 <= self.watermark < 1:
            raise ValueError(f"deferred-prefill: watermark must be in [0, 1), got {self.watermark}")

    def describe(self) -> dict:
        return {**super().describe(), "C": self._C, "K_used": self._K if self._C else None, "auto": self._choice}

    # --- decisions --------------------------------------------------------------------------------------
    def schedule(self, view: ReplicaView) -> BatchPlan:
        if self._C is None:
            self._setup(view)
        if self.K == "auto" and self._choice is None and view.waiting:
            self._choose(view)
        plan = BatchPlan()
        C, K = self._C, self._K
        if not view.swapped and view.waiting:
            running = len(view.running)
            if self.mode == "stateless":
                gate = running == 0 or C - running >= K
            else:
                if not self._in_phase and (self._freed >= K or running == 0 or (self._ran_dry and C - running >= K)):
                    self._in_phase = True
                gate = self._in_phase
            if gate and admit_whole_prompts(view, plan, C - running, self.watermark):
                return plan
        if self._in_phase:  # nothing more fits: the phase ends and this step decodes (T_k)
            self._in_phase = False
            self._freed = 0
            self._ran_dry = not view.waiting
        free = add_decodes(view, plan, limit=view.max_num_batched_tokens)  # decodes beyond the budget wait
        if not plan.preempt:
            swap_in(view, plan, free - int(self.watermark * view.total_blocks))
            waiting = view.waiting
            if view.swapped and not plan.has_work and not view.num_running and waiting and waiting[0].num_blocks:
                # as vllm's: on a decode instance, prompts a prefill instance sent wait (at the front) holding the
                # blocks a swapped request needs, and nothing running will free any: they run first
                admit_whole_prompts(view, plan, C, self.watermark)
        return plan

    def on_step_end(self, view: ReplicaView, plan: BatchPlan, duration: float) -> None:
        left = len(plan.preempt)
        for r, _ in plan.prefills:
            if r.status is FINISHED:
                left += 1
        leave_in_decode = 0
        for r in plan.decodes:
            if r.status is FINISHED:
                leave_in_decode += 1
        self._freed += left + leave_in_decode
        seen = self._seen
        seen[0] += leave_in_decode
        seen[1] += len(plan.decodes)
        for r, _ in plan.prefills:
            seen[2] += 1
            seen[3] += r.prompt_len

    # --- setup --------------------------------------------------------------------------------------------
    def _setup(self, view: ReplicaView) -> None:
        self._C = self._batch_size(view)
        self._K = self.K if isinstance(self.K, int) else 1

    def check_limits(self, view: ReplicaView) -> None:
        self._batch_size(view)

    def _batch_size(self, view: ReplicaView) -> int:
        """The batch size C on ``view``'s replica, after refusing what can never run there (C above max_num_seqs
        or above what the KV cache holds, K above C, K='auto' without a batch-time model)."""
        holds = view.total_blocks // view.blocks_for(view.max_model_len)
        if self.batch_size is None:
            C = view.max_num_seqs
        else:
            C = self.batch_size
            if C > view.max_num_seqs:
                raise ValueError(f"deferred-prefill: batch_size C={C} exceeds max_num_seqs {view.max_num_seqs}; "
                                 f"raise --max-num-seqs or lower batch_size")
            if C > holds:
                raise ValueError(f"deferred-prefill: batch_size C={C} is more than the KV cache can hold: "
                                 f"{view.total_blocks} blocks fit {holds} requests of max_model_len "
                                 f"{view.max_model_len} tokens; lower batch_size or --max-model-len (the paper's "
                                 f"C = 331/410 assume 1024), or raise --gpu-memory-utilization/--num-blocks")
        if isinstance(self.K, int) and self.K > C:
            raise ValueError(f"deferred-prefill: K={self.K} exceeds the batch size C={C}; K must be in 1..C "
                             f"(K = C is static batching)")
        if self.K == "auto" and view.batch_time is None:  # refuse at start-up, not after C departures
            raise ValueError("deferred-prefill: K='auto' needs a batch-time model in the replica's view and this "
                             "engine gives none; pass an integer K (e.g. --param K=26) or run with a batch-time "
                             "model (simulator: --batch-time; vLLM: a profile from `llmsched profile`)")
        return C

    def _choose(self, view: ReplicaView) -> None:
        """K* from the analysis, once the workload's mean lengths are known (given, or learned)."""
        departures, exposure, prefills, prompt_sum = self._seen
        mean_output = self.mean_output
        if mean_output is None:  # Lemma 1: each resident leaves at each decode w.p. α; α̂ = departures / decodes
            if departures < self._C:
                return
            mean_output = exposure / departures
        mean_prompt = self.mean_prompt
        if mean_prompt is None:
            mean_prompt = (prompt_sum / prefills if prefills else
                           sum(r.prompt_len for r in view.waiting) / len(view.waiting))
        from .k_star import predict  # the analysis is only needed for K="auto"
        if mean_output <= 1:
            self._K, self._choice = 1, {"K": 1, "reason": f"mean output {mean_output:g} <= 1 token"}
            return
        pred = predict(view.batch_time, self._C, mean_prompt, mean_output, view.max_num_batched_tokens)
        self._K = pred.K
        self._choice = {**pred.summary(), "mean_output": mean_output, "learned": self.mean_output is None}

