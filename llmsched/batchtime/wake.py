"""The slowdown of the first step after an engine sat idle: a cold start measured, not assumed.

A step that starts after the engine sat idle runs slower than the same step in a busy stretch: caches and branch
predictors have been evicted by whatever ran meanwhile, clocks have dropped, a sleeping thread must be woken.
Measured on this project's CPU vLLM (tiny Llama, one thread, a 232-token prefill): 5.6 ms back to back, 6.8 ms
after 20 ms idle, 7.8 ms after 50 ms, 8.8-8.9 ms after 200-700 ms; the two decodes after it were 0.3-0.7 ms slower
too. The slowdown is a factor, not a fixed time: over 206 prefill steps after idle in six fidelity runs the
measured cycle was 1.50-1.63x the profile's busy-stretch time for prompts of 0-100 to 450-1100 tokens alike, while
the excess grew from 2.0 to 5.0 ms. A serving run at low load is mostly such wake-ups (every arrival to an idle
engine), so without this term a fitted profile under-predicts TTFT there (measured: −38% at 1 req/s).

``llmsched profile`` measures it with pauses before one-request probes and fits
``slowdown·(1 − exp(−idle/tau))`` to their first step's cycle over the back-to-back one, minus 1; the simulator's
replica multiplies a step that starts ``idle`` seconds after its previous step ended by one plus that (never
inside a busy stretch, whose steps follow each other at once). Only the first step carries it; the smaller
slowdown of the next few steps is left out (about 1 ms of a 90 ms request in the measurement above).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

TAUS = tuple(0.001 * 1.25 ** k for k in range(40))  # 1 ms .. ~6 s: the grid tau is fitted on


@dataclass(frozen=True)
class WakeCost:
    slowdown: float  # the step's extra time after a long idle period, as a fraction of its busy-stretch time
    tau: float       # seconds of idle at which 63% of ``slowdown`` is reached

    def __post_init__(self):
        for name, value in (("slowdown", self.slowdown), ("tau", self.tau)):
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"wake {name} must be a finite number >= 0, got {value!r}")
        if self.tau == 0 and self.slowdown:
            raise ValueError("wake tau must be > 0 (seconds) when its slowdown is")

    def time(self, idle: float, busy: float) -> float:
        """Seconds added to a step of ``busy`` seconds starting ``idle`` seconds after the previous step ended."""
        if idle <= 0 or not self.slowdown:
            return 0.0
        return busy * self.slowdown * -math.expm1(-idle / self.tau)

    def to_dict(self) -> dict:
        return {"slowdown": self.slowdown, "tau": self.tau}

    @classmethod
    def from_dict(cls, data) -> "WakeCost":
        if not isinstance(data, dict) or set(data) != {"slowdown", "tau"}:
            raise ValueError(f"a wake entry is {{'slowdown': fraction, 'tau': seconds}}, got {data!r}")
        return cls(float(data["slowdown"]), float(data["tau"]))

    @classmethod
    def fit(cls, idle: list[float], excess: list[float]) -> "WakeCost":
        """Least squares of ``excess`` (a step's measured time over its busy-stretch time, minus 1) against
        ``idle`` (seconds): for each tau on a grid the best slowdown >= 0 in closed form, the tau of least error."""
        if len(idle) != len(excess) or not idle:
            raise ValueError("wake fit needs as many excess ratios as idle times, at least one")
        best = (math.inf, 0.0, TAUS[0])
        for tau in TAUS:
            shape = [-math.expm1(-g / tau) for g in idle]
            norm = sum(s * s for s in shape)
            slowdown = max(0.0, sum(s * e for s, e in zip(shape, excess)) / norm) if norm else 0.0
            err = sum((slowdown * s - e) ** 2 for s, e in zip(shape, excess))
            if err < best[0]:
                best = (err, slowdown, tau)
        return cls(best[1], best[2])
