"""The Prefill Admission Budget routers of Lyu et al. (PAB-LB, §3.4): ``pab`` and its selections and report delay."""
from __future__ import annotations

from ..engine.replica import Replica
from .base import Router, check_param
from .registry import register_router


@register_router
class PABRouter(Router):
    """Lyu et al. §3.4 PAB-LB: each replica reports its Prefill Admission Budget; the router sends a
    request to a replica whose budget covers its prompt and decrements its view of that budget.

    ``selection``: ``max_pab`` (most headroom), ``first_fit`` or ``best_fit`` (least
    headroom that fits). With no replica fitting, the one with most budget takes it (a gap in the paper; our resolution: no
    rejection). ``report_delay`` (s): a replica's report is refreshed only that long after the last
    one, the dispatches in between only decrement it (0: fresh at every arrival; vLLM's DP coordinator
    publishes every 0.1 s). Replicas whose scheduler has no ``pab(view, now)`` (non-FairBatching) are
    measured with Lyu et al.'s default SLOs.

    Against the paper (§3.4, §4, §5.3, §5.5; re-read line by line):
    * Which node: "a suitable node with sufficient budget", rule not given; ``max_pab`` is our choice.
    * No node fits: not said. §5.3 has FB-PAB engines "reject new requests, directing the global
      scheduler to route them to other nodes", so the paper's full system may reject; here the router
      never rejects, and PAB-LB with ``fairbatching-pab`` engines is the rejecting variant (the engine
      refuses exactly when the router's best replica does not fit: with ``report_delay`` 0 both see the
      same PAB). ``reproduce fairbatching-ablation --cluster-systems`` measures both.
    * Refresh: the paper's engines report "for each batch" and the view "will soon be updated in the
      next batch", i.e. as of the end of the last step; ``report_delay`` 0 reads it at the arrival
      instant (fresher than the paper), ``pab-delayed`` 0.1 s (staler, vLLM's publication period).
    * SLOs: the paper's PAB uses the "global SLO targets", one TTFT/TPOT pair for the cluster; here each
      replica's scheduler uses its own ``ttft_slo``/``tpot_slo`` (the same on every replica in every
      experiment), not per-request targets.
    """

    name = "pab"
    summary = "Lyu et al. PAB-LB: the replica with the most prefill admission budget that covers the prompt"
    selection = "max_pab"

    def __init__(self, report_delay: float = 0.0):
        check_param(self, "report_delay", report_delay, report_delay >= 0, ">= 0 seconds")
        self.report_delay = report_delay
        self.budget: list[float] = []
        self.reported: list[float] = []
        self._fallback: dict = {}

    def begin(self, replicas):
        self.budget = []  # every replica reports afresh at the next arrival
        self.reported = []

    def pab(self, replica: Replica, now: float) -> float:
        pab = getattr(replica.scheduler, "pab", None)
        if pab is not None:
            return pab(replica.view, now)
        from ..schedulers.fairbatching.envelope import DEFAULT_TPOT, DEFAULT_TTFT
        from ..schedulers.fairbatching.pab import compute_pab, node_requests
        from ..schedulers.fairbatching.predictor import StepPredictor
        p = self._fallback.get(replica.index)
        if p is None:
            p = self._fallback[replica.index] = StepPredictor.fit_to(replica.batch_time)
        return compute_pab(node_requests(replica.view), now, DEFAULT_TTFT, DEFAULT_TPOT, p.a, p.b, p.c)

    def route(self, req, replicas, rng):
        now = req.arrival
        if len(self.budget) != len(replicas):
            self.budget = [0.0] * len(replicas)
            self.reported = [-float("inf")] * len(replicas)
        for k, rep in enumerate(replicas):
            if now - self.reported[k] >= self.report_delay:
                self.budget[k] = self.pab(rep, now)
                self.reported[k] = now
        k = self.pick(req.prompt_len)
        self.budget[k] -= req.prompt_len
        return k

    def pick(self, prompt: int) -> int:
        budget = self.budget
        fit = [k for k, b in enumerate(budget) if b >= prompt]
        if fit and self.selection == "first_fit":
            return fit[0]
        if fit and self.selection == "best_fit":
            return min(fit, key=lambda k: (budget[k], k))
        return max(fit or range(len(budget)), key=lambda k: (budget[k], -k))


@register_router
class PABFirstFit(PABRouter):
    name = "pab-first-fit"
    summary = "Lyu et al. PAB-LB, first replica (by index) whose prefill admission budget covers the prompt"
    selection = "first_fit"


@register_router
class PABBestFit(PABRouter):
    name = "pab-best-fit"
    summary = "Lyu et al. PAB-LB, the replica with the least prefill admission budget that still covers the prompt"
    selection = "best_fit"


@register_router
class PABDelayed(PABRouter):
    name = "pab-delayed"
    summary = "Lyu et al. PAB-LB (max budget) with reports refreshed every 0.1 s, as vLLM's DP coordinator publishes"

    def __init__(self, report_delay: float = 0.1):
        super().__init__(report_delay)
