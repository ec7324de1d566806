"""What a policy's preemptions cost, by tenant (else tier) and priority class: reported as the run's policy figures.

A preemption by recompute throws away the victim's KV (its ``num_computed`` tokens, computed again when it
returns); one by swap moves the KV to host memory and back (nothing thrown away). Which of the two happened is
known only after the replica applied the plan (a swap with no host space left falls back to recompute), so each
victim is noted when planned and settled at the policy's next decision: its KV was thrown away when it holds fewer
computed tokens than it did (the replica sets a recomputed request's to 0, and nothing recomputes before the
policy decides again; a swapped request, even one swapped back in, keeps them). ``reason`` says why the policy
preempted: ``kv`` (a running request needed a block), ``priority`` (a more urgent request waited) or ``fair`` (a tenant
holding less than its share of the KV cache waited: vtc and wfq's ``reclaim``).
"""
from __future__ import annotations

from ...request import Request

REASONS = ("kv", "priority", "fair")
FIELDS = ("preemptions", *(f"{r}_preemptions" for r in REASONS), "thrown_away_tokens",
          *(f"{r}_thrown_away_tokens" for r in REASONS), "swapped_tokens")


def times_histogram(times: dict[int, int]) -> dict[str, int]:
    """How many requests were preempted n times, by n (as text: a summary's JSON keys), from request id -> n."""
    counts: dict[str, int] = {}
    for n in times.values():
        counts[str(n)] = counts.get(str(n), 0) + 1
    return counts


def group_of(r: Request) -> str:
    """A request's tenant, else its tier."""
    return r.tenant.name if r.tenant is not None else r.tier.name


class PreemptionLedger:
    def __init__(self):
        self.pending: list[tuple[Request, int, str]] = []
        self.by_group: dict[str, dict[str, int]] = {}
        self.by_priority: dict[int, dict[str, int]] = {}

    def planned(self, victims, reason: str) -> None:
        for r in victims:
            self.pending.append((r, r.num_computed, reason))

    def settle(self) -> None:
        """Count the victims of the plans that ran since the last call."""
        for r, computed, reason in self.pending:
            for table, key in ((self.by_group, group_of(r)), (self.by_priority, r.priority)):
                row = table.get(key)
                if row is None:
                    row = table[key] = dict.fromkeys(FIELDS, 0)
                row["preemptions"] += 1
                row[f"{reason}_preemptions"] += 1
                if r.num_computed >= computed:
                    row["swapped_tokens"] += computed
                else:
                    row["thrown_away_tokens"] += computed
                    row[f"{reason}_thrown_away_tokens"] += computed
        self.pending.clear()

    def stats(self) -> dict:
        self.settle()
        return {"by_group": {k: dict(v) for k, v in self.by_group.items()},
                "by_priority": {str(k): dict(v) for k, v in sorted(self.by_priority.items())}}

