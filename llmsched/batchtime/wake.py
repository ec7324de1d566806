"""The extra time of the first step after an engine was idle: a cold start measured, not assumed.

A step that starts after the engine sat idle runs slower than the same step in a busy stretch: caches and branch
predictors have been evicted by whatever ran meanwhile, clocks have dropped, a sleeping thread must be woken.
Measured on this project's CPU vLLM (tiny Llama, one thread, a 232-token prefill): 5.6 ms back to back, 6.8 ms
after 20 ms idle, 7.8 ms after 50 ms, 8.8-8.9 ms after 200-700 ms; the two decodes after it were 0.3-0.7 ms slower
too. A serving run at low load is mostly such wake-ups (every arrival to an idle engine), so without this term a
fitted profile under-predicts TTFT there (measured: −38% at 1 req/s). ``llmsched profile`` measures it with
pauses before single-request probes and fits ``cost·(1 − exp(−idle/tau))``; the simulator's replica adds it to a
step that starts ``idle`` seconds after its previous step ended (never inside a busy stretch, whose steps follow
each other at once). Only the first step carries it; the smaller slowdown of the next few steps is left out
(about 1 ms of a 90 ms request in the measurement above).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

TAUS = tuple(0.001 * 1.25 ** k for k in range(40))  # 1 ms .. ~6 s: the grid tau is fitted on


@dataclass(frozen=True)
class WakeCost:
    cost: float  # seconds added after a long idle period
    tau: float   # seconds of idle at which 63% of ``cost`` is reached

    def __post_init__(self):
        for name, value in (("cost", self.cost), ("tau", self.tau)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"wake {name} must be a finite number >= 0 (seconds), got {value!r}")
        if self.tau == 0 and self.cost:
            raise ValueError("wake tau must be > 0 when its cost is")

    def time(self, idle: float) -> float:
        """Seconds added to a step starting ``idle`` seconds after the previous step ended."""
        if idle <= 0 or not self.cost:
            return 0.0
        return self.cost * -math.expm1(-idle / self.tau)

    def to_dict(self) -> dict:
        return {"cost": self.cost, "tau": self.tau}

    @classmethod
    def from_dict(cls, data) -> "WakeCost":
        if not isinstance(data, dict) or set(data) != {"cost", "tau"}:
            raise ValueError(f"a wake entry is {{'cost': seconds, 'tau': seconds}}, got {data!r}")
        return cls(float(data["cost"]), float(data["tau"]))

    @classmethod
    def fit(cls, idle: list[float], excess: list[float]) -> "WakeCost":
        """Least squares of ``excess`` (measured minus busy-stretch time of the same step, seconds) against
        ``idle`` (seconds): for each tau on a grid the best cost >= 0 in closed form, the tau of least error."""
        if len(idle) != len(excess) or not idle:
            raise ValueError("wake fit needs as many excess times as idle times, at least one")
        best = (math.inf, 0.0, TAUS[0])
        for tau in TAUS:
            shape = [-math.expm1(-g / tau) for g in idle]
            norm = sum(s * s for s in shape)
            cost = max(0.0, sum(s * e for s, e in zip(shape, excess)) / norm) if norm else 0.0
            err = sum((cost * s - e) ** 2 for s, e in zip(shape, excess))
            if err < best[0]:
                best = (err, cost, tau)
        return cls(best[1], best[2])
