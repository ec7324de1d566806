"""``hpa``: Kubernetes' Horizontal Pod Autoscaler on a per-pod metric of vLLM (autoscaling/v2, a Pods metric with an
AverageValue target, through a metrics adapter).

Every ``sync`` seconds (kube-controller-manager's ``--horizontal-pod-autoscaler-sync-period``, default 15 s) it
reads the metric as last scraped (every ``scrape`` seconds, default 15 s: metrics-server's ``--metric-resolution``;
a replica that joined since has no sample yet) and computes, as ``calcPlainMetricReplicas`` does
(kubernetes/kubernetes, pkg/controller/podautoscaler/replica_calculator.go; kubernetes.io, "Horizontal Pod
Autoscaling", "Algorithm details"), in milli-units as the controller does (a value is its quantity's
``MilliValue``, ceil(value x 1000); the mean is the integer division of their sum, ``GetMetricUsageRatio``):

    usage = mean(metric over ready pods with a sample) / target
    desired = current                        if |1 - usage| <= tolerance (0.1)
            = ceil(usage * ready pods)       if no pod is unready or missing

``groupPods`` sorts the pods it does not count as ready: a Pending pod (a replica still ``provisioning``: not yet
placed and started) is *unready*; a Running pod without a sample (a replica ``loading`` its weights or ``warm``
starting its engine, whose /metrics vLLM serves only once its engine is up; a serving replica not yet scraped) is
*missing* (an image pull, part of ``loading`` and 0 s by default, would still be Pending: counted missing here); a
pod being deleted (``draining``) is ignored. A missing pod then counts as the target on a scale-down
and as 0 on a scale-up, an unready pod as 0 on a scale-up (on a scale-down it is left out); the ratio is taken
again over all counted and the replicas stay as they are if it is within the tolerance, if the direction changed,
or if ``ceil(new usage * pods counted)`` moves against the new ratio; else that is the recommendation.

Then ``stabilizeRecommendationWithBehaviors`` (horizontal.go): the recommendation is kept between the lowest of the
recommendations over the last ``up_window`` seconds (scaleUp.stabilizationWindowSeconds, default 0) and the
highest over the last ``down_window`` (scaleDown, default 300), the replicas found at the start counting as one
(``recordInitialRecommendation``); and ``calculateScaleUpLimitWithScalingRules`` applies the default scale-up
policies (``up_percent`` 100 % and ``up_pods`` 4, each per 15-s period, the larger): at most
max(ceil(start x (1 + up_percent / 100)), start + up_pods), ``start`` the replicas at the start of the period (the
current ones less those added and plus those removed in the last 15 s). The default scale-down policy (100 % per
15 s) limits nothing. ``current`` is the Deployment's replica count (starting and serving pods).

Metrics (``metric``): ``queue`` (vllm:num_requests_waiting, default target 5 a pod), ``running``
(vllm:num_requests_running, default 0.7 of the replica's seats), ``kv`` (vllm:gpu_cache_usage_perc, default 0.8).
The default targets are llm-d's saturation thresholds (a replica with 5 waiting or KV at 80 % is saturated:
llm-d-workload-variant-autoscaler, docs/saturation-scaling-config.md) and Knative's 70 % utilisation target of a
pod's concurrency. A replica's seats are ``max_num_seqs``, or the requests of the run's mean context its KV cache
holds where that is fewer (``replica_sizing.seats``): with vLLM's 1,024 sequences on an H200 the cache binds long
before the sequence cap, and 0.7 x 1,024 running requests would never be reached.
"""
from __future__ import annotations

import math

from .autoscaler import ScrapingAutoscaler, metric_of
from .lifecycle import LOADING, PROVISIONING, WARM
from .replica_sizing import seats

METRICS = ("queue", "running", "kv")
RUNNING_SHARE = 0.7  # Knative's container-concurrency-target-percentage default, of a replica's seats
POLICY_PERIOD = 15.0  # periodSeconds of the default scaling policies (HPAScalingPolicy)


class HPA(ScrapingAutoscaler):
    name = "hpa"
    summary = "Kubernetes HPA: desired = ceil(replicas x metric / target), tolerance, stabilisation windows"
    source = ("kubernetes/kubernetes pkg/controller/podautoscaler/replica_calculator.go (calcPlainMetricReplicas), "
              "horizontal.go (stabilizeRecommendationWithBehaviors); kubernetes.io 'Horizontal Pod Autoscaling'")
    PARAMS = {"metric": "queue", "target": 0.0, "tolerance": 0.1, "sync": 15.0, "scrape": 15.0, "up_window": 0.0,
              "down_window": 300.0, "up_percent": 100.0, "up_pods": 4}
    DURATIONS = ("sync", "scrape")
    CHOICES = {"metric": METRICS}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        p = self.params
        for key in ("up_window", "down_window", "tolerance", "target", "up_percent"):
            if p[key] < 0:
                raise ValueError(f"--autoscaler-param {key}={p[key]!r}: the {key} of autoscaler 'hpa' must be >= 0")
        if p["up_pods"] < 0:
            raise ValueError(f"--autoscaler-param up_pods={p['up_pods']!r}: must be >= 0")
        self.sample: dict[int, float] = {}  # replica index -> its value at the last scrape
        self.recommendations: list[tuple[float, int]] = []
        self.events: list[tuple[float, int]] = []  # (time, replicas added: < 0 removed) of each scaling

    def begin(self, now: float) -> None:
        # recordInitialRecommendation (horizontal.go): the first reconcile records the replicas it finds as a
        # recommendation, so for down_window seconds the pool does not fall below the size it started with
        self.recommendations = [(now, self.size)]
        super().begin(now)

    @property
    def period(self) -> float:
        return self.params["sync"]

    def take_sample(self, now: float) -> None:
        metric = self.params["metric"]
        self.sample = {rep.index: metric_of(rep, metric) for rep in self.serving()}

    def target(self) -> float:
        p = self.params
        if p["target"] > 0:
            return p["target"]
        if p["metric"] == "queue":
            return 5.0
        if p["metric"] == "kv":
            return 0.8
        return RUNNING_SHARE * seats(self.state.replicas[0], self.context.isl, self.context.osl)

    def decide(self, now: float) -> int | None:
        current = self.size
        desired = self.replicas_for(current)
        if desired is None:
            return None
        return self.normalized(desired, current, now)

    def replicas_for(self, current: int) -> int | None:
        """``calcPlainMetricReplicas`` (module docstring); None when no ready pod has a sample."""
        target, tol = milli(self.target()), self.params["tolerance"]
        ready = self.serving()
        values = [milli(self.sample[rep.index]) for rep in ready if rep.index in self.sample]
        lives = self.state.lives
        missing = (sum(1 for rep in ready if rep.index not in self.sample)
                   + sum(1 for life in lives if life.state in (LOADING, WARM)))
        unready = sum(1 for life in lives if life.state == PROVISIONING)
        if not values:
            return None
        usage = sum(values) // len(values) / target
        up_with_unready = unready > 0 and usage > 1.0
        if not up_with_unready and not missing:
            if abs(1.0 - usage) <= tol:
                return current
            return math.ceil(usage * len(values))
        filled = list(values)
        if missing:
            if usage < 1.0:
                filled += [target] * missing
            else:
                filled += [0] * missing
        if up_with_unready:
            filled += [0] * unready
        new = sum(filled) // len(filled) / target
        if abs(1.0 - new) <= tol or (usage < 1.0 < new) or (usage > 1.0 > new):
            return current
        n = math.ceil(new * len(filled))
        if (new < 1.0 and n > current) or (new > 1.0 and n < current):
            return current  # counting more pods turned the direction
        return n

    def normalized(self, desired: int, current: int, now: float) -> int:
        """Stabilisation windows, then the default scaling policies' limits (module docstring)."""
        p = self.params
        self.recommendations.append((now, desired))
        keep = now - max(p["up_window"], p["down_window"])
        self.recommendations = [(t, r) for t, r in self.recommendations if t >= keep]
        up = min([r for t, r in self.recommendations if t > now - p["up_window"]] + [desired])
        down = max([r for t, r in self.recommendations if t > now - p["down_window"]] + [desired])
        out = current
        if out < up:
            out = up
        if out > down:
            out = down
        if out > current:
            self.events = [(t, n) for t, n in self.events if t > now - POLICY_PERIOD]
            start = current - sum(n for _, n in self.events)
            limit = max(math.ceil(start * (1 + p["up_percent"] / 100)), start + p["up_pods"], current)
            out = min(out, limit)
        return out

    def act(self, desired: int | None, now: float) -> None:
        before = self.size
        super().act(desired, now)
        if self.size != before:
            self.events.append((now, self.size - before))  # storeScaleEvent


def milli(value: float) -> int:
    """A metric's value as the controller holds it: its quantity's MilliValue, rounded up (the float's last bits
    forgiven)."""
    return math.ceil(value * 1000 - 1e-6)


POLICY = HPA
