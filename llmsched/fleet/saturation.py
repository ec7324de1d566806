"""``saturation``: llm-d's workload variant autoscaler, its saturation analyzer (llm-d/llm-d-workload-variant-
autoscaler at b08b1c7: internal/saturation/analyzer.go; docs/saturation-analyzer.md, docs/saturation-scaling-
config.md), for one variant (this pool).

Every ``interval`` seconds (the controller's ``GLOBAL_OPT_INTERVAL``, 60 s) it takes each ready replica's peak KV-cache
use and queue length over the last ``window`` seconds (``max_over_time[1m]`` of vLLM's gpu_cache_usage_perc and
num_requests_waiting, scraped every ``scrape`` seconds). A replica is saturated when its KV use >= ``kv_threshold``
(0.8) or its queue >= ``queue_threshold`` (5); over the others it averages the spare capacity (threshold - value) and

* scales up by one (ready + 1) when the average spare KV < ``kv_spare`` (0.1) or the average spare queue <
  ``queue_spare`` (3) (no unsaturated replica: both are 0, so it scales up);
* scales down by one (ready - 1) when that is safe (``isScaleDownSafe``): at least two unsaturated replicas, and
  their summed load over one fewer (threshold - sum / (N - 1)) still leaves both spares at or above their triggers;
* else stays at the ready replicas.

While any replica of the pool is still starting it does not scale (the analyzer's cascade-scaling guard: "variants
with pending replicas are skipped", and a variant in transition blocks scaling).
"""
from __future__ import annotations

from .autoscaler import Samples, ScrapingAutoscaler, metric_of


class Saturation(ScrapingAutoscaler):
    name = "saturation"
    summary = "llm-d's saturation analyzer: +1 when KV or queue headroom runs low, -1 when one fewer stays safe"
    source = ("llm-d/llm-d-workload-variant-autoscaler internal/saturation/analyzer.go (shouldScaleUp, "
              "isScaleDownSafe, CalculateSaturationTargets); docs/saturation-analyzer.md")
    PARAMS = {"kv_threshold": 0.8, "queue_threshold": 5.0, "kv_spare": 0.1, "queue_spare": 3.0, "interval": 60.0,
              "window": 60.0, "scrape": 15.0}
    DURATIONS = ("interval", "window", "scrape")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        p = self.params
        if not (0 < p["kv_threshold"] <= 1 and p["queue_threshold"] > 0 and p["kv_spare"] >= 0
                and p["queue_spare"] >= 0):
            raise ValueError("--autoscaler-param kv_threshold must be in (0, 1], queue_threshold > 0, kv_spare and "
                             "queue_spare >= 0")
        self.samples = Samples(p["window"])

    @property
    def period(self) -> float:
        return self.params["interval"]

    def take_sample(self, now: float) -> None:
        self.samples.add(now, {rep.index: (metric_of(rep, "kv"), metric_of(rep, "queue")) for rep in self.serving()})

    def peaks(self, now: float) -> list[tuple[float, float]]:
        """Each ready replica's peak (KV use, queue) over the window (those with a sample)."""
        ready = {rep.index for rep in self.serving()}
        peak: dict[int, list[float]] = {}
        for sample in self.samples.within(now, self.params["window"]):
            for index, (kv, queue) in sample.items():
                if index in ready:
                    old = peak.setdefault(index, [0.0, 0.0])
                    old[0], old[1] = max(old[0], kv), max(old[1], queue)
        return [tuple(v) for v in peak.values()]

    def decide(self, now: float) -> int | None:
        if self.starting():
            return None
        p = self.params
        peaks = self.peaks(now)
        if not peaks:
            return None
        ready = len(self.serving())
        free = [(kv, q) for kv, q in peaks if kv < p["kv_threshold"] and q < p["queue_threshold"]]
        n = len(free)
        spare_kv = sum(p["kv_threshold"] - kv for kv, _ in free) / n if n else 0.0
        spare_queue = sum(p["queue_threshold"] - q for _, q in free) / n if n else 0.0
        if spare_kv < p["kv_spare"] or spare_queue < p["queue_spare"]:
            return ready + 1
        if n >= 2:  # isScaleDownSafe: the free replicas' total load spread over one fewer, summed as llm-d sums it
            kv_after = p["kv_threshold"] - sum(kv for kv, _ in free) / (n - 1)
            queue_after = p["queue_threshold"] - sum(q for _, q in free) / (n - 1)
            if kv_after >= p["kv_spare"] and queue_after >= p["queue_spare"]:
                return ready - 1
        return ready


POLICY = Saturation
