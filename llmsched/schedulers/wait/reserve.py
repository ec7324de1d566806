"""Memory-feasible cohort admission for WAIT / Nested WAIT: admit only what the KV can carry to its next boundary.

Ao et al.'s guarantee that WAIT never evicts (Thm 1, condition (11a)) rests on peak memory, not on the memory free
at the moment of admission: a cohort admitted into free KV keeps growing by one token per stage while other
cohorts grow too, so a gate that checks only the current step's blocks admits past what fits and the replica
later has to preempt (hundreds of times per run in docs/wait.md before this module). Two admission rules:

* WAIT (lengths known through the oracle), :class:`ProfileCohortPlan`: a cohort enters only if the KV profile of
  all resident requests plus the cohort, each advancing one stage per iteration and leaving at its last token,
  stays within M at every future iteration.
* Nested WAIT (lengths unknown), :class:`ReservingCohortPlan`: every request holding KV carries a *promise*, the
  blocks it may need by the end of its current segment (or of the next one for a prompt waiting at a segment
  boundary); new prompts enter only if their own promise fits the KV left after all promises. Completions cannot
  be credited in advance because lengths are unknown.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter

import numpy as np

from ...request import Request, Status
from .cohorts import CohortPlan

ID = attrgetter("id")
WAITING = Status.WAITING


class ReservingCohortPlan(CohortPlan):
    """A :class:`CohortPlan` whose new entries must fit the KV left after every resident request's promise.

    ``need(r)`` is the number of KV blocks ``r`` may hold by its next decision point; ``resident`` are the
    requests whose promises are already owed (every request holding KV); ``owed_blocks``, when the caller has it,
    is what the running ones among them still need, Σ max(0, need(r) − r.num_blocks)."""

    def __init__(self, view, need: Callable[[Request], int], resident: Iterable[Request], guard: bool = True,
                 owed_blocks: int | None = None):
        super().__init__(view, guard)
        self.need = need
        self.owed = set(map(ID, resident))
        if owed_blocks is None:
            owed_blocks = sum(max(0, need(r) - r.num_blocks) for r in view.running if r.id in self.owed)
        self.headroom = view.free_blocks - owed_blocks
        self.held_back = 0  # groups refused because their promise did not fit

    def add(self, group) -> bool:
        extra = sum(max(0, self.need(r) - r.num_blocks) for r in group if r.id not in self.owed)
        if self.guard and extra > self.headroom:
            self.refused = True
            self.held_back += 1
            return False
        if not super().add(group):
            return False
        self.headroom -= extra
        self.owed.update(map(ID, group))
        return True


class ProfileCohortPlan(CohortPlan):
    """WAIT with known lengths: a new cohort enters only if the KV profile of the resident requests plus the
    cohort, advancing one stage per iteration and leaving at their last token, stays within M at every future
    iteration. This is (11a)'s bound made online: cohorts at different stages share memory as the fluid's
    Σ n_j c_j does (one finishing as the next starts), which a per-request reservation of the final KV would not
    allow (Example 2's M = M* = 12 would then fit only 2 prompts per stage instead of 4).

    With ``type_of`` (Algorithm 1, whose types pause independently) the bound is Σ_j max_t profile_j(t): a paused
    type's KV stays at a value its own profile already reached, so the sum of per-type peaks bounds memory
    whatever the pauses. Without it (gates under which every admitted prompt advances) the joint profile's peak
    is the bound. Each request is counted with a block's rounding (block_size − 1 tokens)."""

    def __init__(self, view, guard: bool = True, type_of: Callable[[Request], int] | None = None,
                 groups: dict[int, list[Request]] | None = None):
        """``groups``: the running requests by type (``type_of``), when the caller has them already (in any
        order of types: every profile and peak is a whole number of tokens, so their sum does not depend on it)."""
        super().__init__(view, guard)
        # blocks held outside the running set (sent prompts waiting, a tier's loads) are not the cohorts' to use;
        # a cohort that admits such a holder gives its blocks back to the bound (its profile counts its prompt)
        self.capacity = (view.total_blocks - self.held_outside) * view.block_size
        self.slack = view.block_size - 1
        self.held_back = 0
        self.type_of = type_of or (lambda r: 0)
        self.length = view.oracle_output_len  # WAIT runs with the oracle: the true output length
        if groups is None:
            groups = {}
            for r in view.running:
                groups.setdefault(self.type_of(r), []).append(r)
        self.profiles, self.peaks = self._profiles(groups)

    def _starts_and_steps(self, requests) -> tuple[list[int], list[int]]:
        """Each request's KV now (a waiting one: its prompt) and the iterations it has left."""
        start, steps = [], []
        add_start, add_steps = start.append, steps.append
        length = self.length
        for r in requests:
            out = length(r)
            if out is None:
                raise ValueError("wait: memory-feasible admission needs the true output lengths; run with --oracle "
                                 "or reserve=false")
            if r.status is WAITING:
                add_start(r.prompt_len)
                add_steps(out)
            else:  # in flight: one more KV token per iteration until its last
                add_start(r.num_computed + 1)
                left = out - r.num_generated
                add_steps(left if left > 1 else 1)
        return start, steps

    def _profiles(self, groups: dict[int, list[Request]]) -> tuple[dict, dict]:
        """``_profile`` and ``_peak`` of every group at once: one set of array operations for all types instead
        of one per type (the decision's main cost with ten types). Every entry is a whole number of tokens well
        below 2**53, so the sums are exact in any order and equal ``_profile``'s, array lengths included."""
        rows, start, steps = [], [], []
        for k, rs in enumerate(groups.values()):
            s, n = self._starts_and_steps(rs)
            start += s
            steps += n
            rows += [k] * len(s)
        profiles, peaks = {}, {}
        if not start:
            for j in groups:
                profiles[j] = (np.zeros(1), np.zeros(1))
                peaks[j] = self._peak(*profiles[j])
            return profiles, peaks
        row = np.asarray(rows)
        steps_a = np.asarray(steps)
        start_a = np.asarray(start, dtype=float)
        m, n = len(groups), int(steps_a.max()) + 1
        base, count = np.zeros((m, n)), np.zeros((m, n))
        np.add.at(base, (row, 0), start_a)
        np.add.at(base, (row, steps_a), -start_a)
        np.add.at(count, (row, 0), 1.0)
        np.add.at(count, (row, steps_a), -1.0)
        base, count = np.cumsum(base, axis=1), np.cumsum(count, axis=1)
        lengths = np.zeros(m, dtype=np.int64)
        np.maximum.at(lengths, row, steps_a + 1)
        # the peak over each row's own length: past it both are 0, below the row's positive value at t = 0
        top = (base + count * (np.arange(n) + self.slack)).max(axis=1)
        for k, j in enumerate(groups):
            if lengths[k]:
                profiles[j] = (base[k, :lengths[k]], count[k, :lengths[k]])
                peaks[j] = float(top[k])
            else:
                profiles[j] = (np.zeros(1), np.zeros(1))
                peaks[j] = self._peak(*profiles[j])
        return profiles, peaks

    def _profile(self, requests) -> tuple[np.ndarray, np.ndarray]:
        """Σ over requests alive at iteration t of their KV at t (base) and how many are alive (count)."""
        start, steps = self._starts_and_steps(requests)
        if not start:
            return np.zeros(1), np.zeros(1)
        steps_a = np.asarray(steps)
        n = int(steps_a.max()) + 1
        base = np.zeros(n)
        count = np.zeros(n)
        base[0] = float(sum(start))
        np.add.at(base, steps_a, -np.asarray(start, dtype=float))
        count[0] = len(start)
        np.add.at(count, steps_a, -1.0)
        return np.cumsum(base), np.cumsum(count)

    def _peak(self, base, count) -> float:
        return float((base + count * (np.arange(len(base)) + self.slack)).max())

    def add(self, group) -> bool:
        new = [r for r in group if r.status is Status.WAITING]
        updates = {}
        for r in new:
            updates.setdefault(self.type_of(r), []).append(r)
        merged = {}
        for j, rs in updates.items():
            gb, gc = self._profile(rs)
            base, count = self.profiles.get(j, (np.zeros(1), np.zeros(1)))
            n = max(len(gb), len(base))
            merged[j] = (_pad(base, n) + _pad(gb, n), _pad(count, n) + _pad(gc, n))
        held = sum(r.num_blocks for r in new) * self.view.block_size
        if merged:
            peaks = {**self.peaks, **{j: self._peak(*p) for j, p in merged.items()}}
            if self.guard and sum(peaks.values()) > self.capacity + held:
                self.refused = True
                self.held_back += 1
                return False
        if not super().add(group):
            return False
        if merged:
            self.profiles.update(merged)
            self.peaks = peaks
            self.capacity += held
        return True


def _pad(a: np.ndarray, n: int) -> np.ndarray:
    """Extend a cumulative profile with zeros (everyone counted has left by then)."""
    return a if len(a) >= n else np.concatenate([a, np.zeros(n - len(a))])


def segment_need(view, segment_end: Callable[[Request], int]) -> Callable[[Request], int]:
    """Nested WAIT: a request may grow to the KV of the last stage of its segment, prompt + ``segment_end(r)``
    tokens (a prompt waiting at a boundary counts in the segment it is about to enter)."""
    return lambda r: view.blocks_for(r.prompt_len + max(segment_end(r), r.num_generated))
