"""``kpa``: Knative's Pod Autoscaler on request concurrency, as its decider computes a scale (knative/serving,
pkg/autoscaler/scaling/autoscaler.go, ``Scale``; knative.dev, "Additional autoscaling configuration for Knative Pod
Autoscaler"). AIBrix scales vLLM with a port of it (vllm-project/aibrix, pkg/controller/podautoscaler, "KPA").

The pool's concurrency (requests in flight on its serving replicas: what their queue-proxies report; the scraper
reads only running, ready pods not being deleted, ``PodAccessor.PodIPsSplitByAge`` with ``podRunning`` and
``podReady`` in pkg/resources/pods.go, so a draining replica's requests count for nothing) is sampled every second;
every ``tick`` seconds (2 s) the decider averages it over the stable window (``stable_window``, 60 s) and over the
panic window (``panic_percent`` of it: 10 %, 6 s) and computes

    stable pods = ceil(stable average / target),  panic pods = ceil(panic average / target),
    target = target concurrency a pod (``target``, 100) x target utilisation (``utilization``, 0.7),

each kept within [floor(ready / max_scale_down_rate), ceil(max_scale_up_rate x ready)] (rates 2 and 1000; ready at
least 1). It panics when panic pods / ready >= ``panic_threshold`` (200 %), and stays in panic until the threshold has
not been crossed for a whole stable window; in panic it never scales down (the most pods asked for in this panic),
else it takes the stable pods. The Deployment is then set to that, within the pool's bounds (min-scale, max-scale).
A decider that starts over a pool of more than one ready pod starts in panic, the pods it found the most asked for
(``newAutoscaler``: with no metric history yet, "keeping at least the current scale until we accumulate enough
data"): the run's start is such a start, with no history.
"""
from __future__ import annotations

import math

from .autoscaler import Samples, ScrapingAutoscaler, ceil, metric_of


class KPA(ScrapingAutoscaler):
    name = "kpa"
    summary = "Knative KPA: concurrency over a 60 s stable and a 6 s panic window, panic at 200 %"
    source = ("knative/serving pkg/autoscaler/scaling/autoscaler.go (Scale); knative.dev 'Additional autoscaling "
              "configuration for Knative Pod Autoscaler'; AIBrix's KPA")
    PARAMS = {"target": 100.0, "utilization": 0.7, "stable_window": 60.0, "panic_percent": 10.0,
              "panic_threshold": 2.0, "max_scale_up_rate": 1000.0, "max_scale_down_rate": 2.0, "tick": 2.0,
              "scrape": 1.0}
    DURATIONS = ("stable_window", "tick", "scrape")
    POSITIVE = ("target", "utilization", "panic_percent", "panic_threshold", "max_scale_up_rate", "max_scale_down_rate")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        p = self.params
        if p["stable_window"] < 6.0:
            raise ValueError(f"--autoscaler-param stable_window={p['stable_window']!r}: Knative's stable window is "
                             f"6 s to 1 h")
        if not p["utilization"] <= 1.0 or not p["panic_percent"] <= 100.0:
            raise ValueError("--autoscaler-param utilization must be in (0, 1] and panic_percent in (0, 100]")
        self.samples = Samples(p["stable_window"])
        self.panic_since: float | None = None
        self.max_panic_pods = 0

    def begin(self, now: float) -> None:
        ready = len(self.serving())
        if ready > 1:
            self.panic_since, self.max_panic_pods = now, ready
        super().begin(now)

    @property
    def period(self) -> float:
        return self.params["tick"]

    def take_sample(self, now: float) -> None:
        self.samples.add(now, sum(metric_of(rep, "concurrency") for rep in self.serving()))

    def decide(self, now: float) -> int | None:
        p = self.params
        stable = self.samples.within(now, p["stable_window"])
        panic = self.samples.within(now, p["stable_window"] * p["panic_percent"] / 100)
        if not stable or not panic:
            return None
        ready = max(1.0, float(len(self.serving())))
        target = p["target"] * p["utilization"]
        most = math.ceil(p["max_scale_up_rate"] * ready)
        least = math.floor(ready / p["max_scale_down_rate"])
        stable_pods = ceil(sum(stable) / len(stable) / target)
        panic_pods = ceil(sum(panic) / len(panic) / target)
        desired_stable = int(min(max(stable_pods, least), most))
        desired_panic = int(min(max(panic_pods, least), most))
        over = panic_pods / ready >= p["panic_threshold"]
        if over:
            self.panic_since = now
        elif self.panic_since is not None and self.panic_since + p["stable_window"] < now:
            self.panic_since, self.max_panic_pods = None, 0
        desired = desired_stable
        if self.panic_since is not None:
            desired = max(desired, desired_panic)
            self.max_panic_pods = max(self.max_panic_pods, desired)
            desired = self.max_panic_pods
        return desired


POLICY = KPA
