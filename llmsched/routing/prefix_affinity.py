"""``prefix-affinity``: send a request where the longest prefix of its prompt is cached, unless the load is out of
balance.

Two production routers, followed from their code (read, not copied):

* SGLang's cache-aware router (sgl-project/sglang, ``sgl-router/src/policies/cache_aware.rs``; defaults from
  ``CacheAwareConfig`` in ``policies/mod.rs``): with loads out of balance, ``max - min > balance_abs_threshold``
  (32) and ``max > balance_rel_threshold · min`` (1.1), the least-loaded worker; otherwise the worker with the
  longest prefix match if its match rate (matched / prompt) exceeds ``cache_threshold`` (0.5 there), else the one
  with most cache room. Its load is the requests in flight at each worker; its match is an approximate radix tree of
  what the router sent. Here the match is exact (below) and "most cache room" is the least-loaded replica.
* llm-d's precise prefix-cache scorer (llm-d/llm-d-inference-scheduler, ``pkg/plugins/scorer/
  precise_prefix_cache.go`` and ``utils.go``): each pod's score is its run of leading prompt blocks found in an
  index that vLLM's KV events keep, min-max normalised to [0, 1] (1 for all when all are equal); a profile sums
  weighted scorers (a queue scorer among them, normalised the same way) and picks the highest total.

The match is asked of each replica's KV owner (``PrefixCachingKVManager.cached_tokens``, a probe that keeps
nothing): exactly the blocks an admission there would find now, as llm-d's index holds them once the events have
arrived. ``report_delay`` (s) models events that arrive late: a replica's cached blocks are read again only that
long after the last reading (the PAB router's ``report_delay`` rule), the hits in between come from that copy.

Parameters: ``cache_threshold`` (a match rate at or below it goes to the least-loaded replica; default 0, any match
counts: SGLang's 0.5 guards the guesses of an approximate tree, and a match read from the cache is no guess; measured
in docs/prefix-routing.md, 0.5 found fewer hits for no lower TTFT), ``balance_abs`` and
``balance_rel`` (the load bound; ``balance_abs`` -1 switches it off), ``load_weight`` (0: SGLang's rule; above 0,
llm-d's weighted sum of the prefix score and ``load_weight`` times the queue score, the threshold unused, the bound
still applied), ``report_delay``. The load is each replica's outstanding requests (waiting, running, swapped).

A request without content (every length-only workload), or a run without a prefix cache, matches nowhere: it goes
to the least-outstanding replica, the lowest index among equals, which is exactly the ``least-outstanding``
router's choice.
"""
from __future__ import annotations

from .base import Router, check_param, least_outstanding
from .registry import register_router


@register_router
class PrefixAffinity(Router):
    name = "prefix-affinity"
    summary = ("the replica whose KV cache holds the longest prefix of the prompt, least-outstanding when loads are "
               "out of balance or no match is good enough (SGLang's cache-aware rule, llm-d's precise scorer)")

    def __init__(self, cache_threshold: float = 0.0, balance_abs: int = 32, balance_rel: float = 1.1,
                 load_weight: float = 0.0, report_delay: float = 0.0):
        check_param(self, "cache_threshold", cache_threshold, 0 <= cache_threshold < 1, "in [0, 1) (a match rate)")
        check_param(self, "balance_abs", balance_abs, not balance_abs < -1, ">= 0 requests (-1: no load bound)")
        check_param(self, "balance_rel", balance_rel, balance_rel >= 1, ">= 1 (a ratio of loads)")
        check_param(self, "load_weight", load_weight, load_weight >= 0, ">= 0 (0: no load score)")
        check_param(self, "report_delay", report_delay, report_delay >= 0, ">= 0 seconds")
        self.cache_threshold = cache_threshold
        self.balance_abs = balance_abs
        self.balance_rel = balance_rel
        self.load_weight = load_weight
        self.report_delay = report_delay
        self.reports: list = []  # per replica: its cache's last report (report_delay > 0)
        self.reported: list[float] = []

    def begin(self, replicas):
        self.reports = [None] * len(replicas)
        self.reported = [-float("inf")] * len(replicas)

    def route(self, req, replicas, rng):
        loads = [rep.num_outstanding for rep in replicas]
        least = least_outstanding(loads)
        if req.content is None or self.out_of_balance(loads):
            return least
        hits = self.hits(req, replicas)
        top = max(hits)
        if top == 0:
            return least
        n = len(replicas)
        if self.load_weight > 0:
            low, high = min(hits), max(loads)
            fewest = loads[least]
            score = [(1.0 if top == low else (hits[i] - low) / (top - low))
                     + self.load_weight * (1.0 if high == fewest else (high - loads[i]) / (high - fewest))
                     for i in range(n)]
            return max(range(n), key=lambda i: (score[i], -loads[i], -i))
        best = max(range(n), key=lambda i: (hits[i], -loads[i], -i))
        return best if hits[best] > self.cache_threshold * req.num_tokens else least

    def out_of_balance(self, loads: list[int]) -> bool:
        high, low = max(loads), min(loads)
        return self.balance_abs >= 0 and high - low > self.balance_abs and high > self.balance_rel * low

    def hits(self, req, replicas) -> list[int]:
        """Per replica, the leading prompt tokens its prefix cache holds (as reported), whole blocks short of the
        last token: what an admission there would start from."""
        if len(self.reports) != len(replicas):
            self.begin(replicas)
        out = []
        for i, rep in enumerate(replicas):
            if not rep.caching:
                out.append(0)
                continue
            kv = rep.kv
            if self.report_delay > 0:
                if req.arrival - self.reported[i] >= self.report_delay:
                    self.reports[i] = kv.report()
                    self.reported[i] = req.arrival
                out.append(kv.reported_tokens(self.reports[i], req))
            else:
                out.append(kv.cached_tokens(req))
        return out
