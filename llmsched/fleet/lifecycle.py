"""A replica's life in a fleet, and what each part of it costs.

    provisioning -> loading -> warm -> serving -> draining -> gone

* provisioning: a node and its GPUs are obtained and the pod is scheduled. Billing starts here: a cloud bills an
  instance from its launch, whether or not it serves yet.
* loading: the image is pulled and the weights are read onto the GPUs.
* warm: the engine starts (CUDA graph capture, compilation) and runs its warm-up requests.
* serving: the router sends it requests; its steps are the fleet's work.
* draining: it takes no new request and finishes what it holds (its steps still run).
* gone: released; billing stops.

The three start-up phases last what a duration source says (``PhaseTimes``: the fleet file's figures, 0 by
default, so a replica added with no figures serves at once). A replica present when a run starts is serving from
t = 0 and billed from then: today's always-on replicas. A replica scaled down before it serves goes straight to
gone (it never joins the router).
"""
from __future__ import annotations

from dataclasses import dataclass

PROVISIONING, LOADING, WARM, SERVING, DRAINING, GONE = STATES = (
    "provisioning", "loading", "warm", "serving", "draining", "gone")
START_PHASES = (PROVISIONING, LOADING, WARM)  # before serving, in order; each lasts what its duration source says
ORDER = {state: i for i, state in enumerate(STATES)}


def is_seconds(value) -> bool:
    """Whether ``value`` can be a phase's duration: a finite number of seconds >= 0 (a bool is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf")


def check_phase_seconds(durations, phases, label: str = "") -> None:
    """Each of ``phases`` of ``durations`` (its attribute of that name) ``is_seconds``, else a ValueError naming
    the phase (after ``label``) and its value."""
    for phase in phases:
        value = getattr(durations, phase)
        if not is_seconds(value):
            raise ValueError(f"{label}{phase} must be a finite number of seconds >= 0, got {value!r}")


@dataclass(frozen=True)
class PhaseTimes:
    """Seconds each start-up phase lasts: a duration source. Another source (a cold-start model from weight bytes
    and storage bandwidth, say) needs only ``seconds(phase)``."""

    provisioning: float = 0.0
    loading: float = 0.0
    warm: float = 0.0

    def __post_init__(self):
        check_phase_seconds(self, START_PHASES)

    def seconds(self, phase: str) -> float:
        return float(getattr(self, phase))

    @property
    def cold_start(self) -> float:
        """Seconds from provisioning to serving."""
        return sum(self.seconds(p) for p in START_PHASES)


class Life:
    """One replica's states over time: the time it entered each, in order. Its accounting reads from them."""

    __slots__ = ("index", "pool", "entered")

    def __init__(self, index: int, pool: str, state: str, now: float):
        self.index = index
        self.pool = pool
        self.entered: list[tuple[str, float]] = [(state, now)]

    @property
    def state(self) -> str:
        return self.entered[-1][0]

    def enter(self, state: str, now: float) -> None:
        last, since = self.entered[-1]
        if ORDER[state] <= ORDER[last] or now < since:
            raise ValueError(f"replica {self.index}: {last} at t={since:g} cannot become {state} at t={now:g}")
        self.entered.append((state, now))

    def seconds_in(self, states, end: float) -> float:
        """Seconds spent in any of ``states`` up to ``end`` (the run's end for a replica not yet gone)."""
        total = 0.0
        for (state, since), (_, until) in zip(self.entered, self.entered[1:] + [(None, end)]):
            if state in states:
                total += max(0.0, min(until, end) - since)
        return total

    def billed(self, end: float) -> float:
        """Seconds billed: from the first state (provisioning, or serving for a replica present at the start)
        until gone, or until ``end``."""
        return self.seconds_in(STATES[:-1], end)


def timeline(lives: list[Life], end: float) -> list[dict]:
    """The replicas in each state over time: one row at t = 0 and one at every time a replica changed state (up
    to ``end``), each row the counts from that time on."""
    # by time, then replica, then the order it entered them: a replica given up in the instant it entered a phase
    # (warm, then gone, at one t) ends in its later state
    changes = sorted((since, i, n, state) for i, life in enumerate(lives)
                     for n, (state, since) in enumerate(life.entered) if since <= end)
    current: dict[int, str] = {}
    rows: list[dict] = []
    for k, (t, i, _, state) in enumerate(changes):
        current[i] = state
        if k + 1 < len(changes) and changes[k + 1][0] == t:
            continue  # the row after every change at this instant
        counts = dict.fromkeys(STATES[:-1], 0)
        for s in current.values():
            if s != GONE:
                counts[s] += 1
        rows.append({"t": t, **counts})
    if not rows or rows[0]["t"] > 0:
        rows.insert(0, {"t": 0.0, **dict.fromkeys(STATES[:-1], 0)})
    return rows
