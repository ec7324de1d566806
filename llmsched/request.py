"""A request: what a client asked for (spec) plus where the engine is with it (state).

The token model is vLLM v1's: a request knows ``num_tokens`` tokens (prompt plus
generated) and has computed the KV of ``num_computed`` of them. A step that
computes the last unknown-KV token samples one new output token. A decode is the
case ``num_tokens - num_computed == 1``; a prefill chunk is anything before the
first output token; recompute after preemption re-prefills prompt + generated.

``output_len`` is the true output length: the mechanism and metrics read it,
schedulers must not (they ask ``view.oracle_output_len(req)``, which answers only
when the run grants the oracle option).

``content`` is what the prompt's tokens are (``llmsched.content.Content``), for a
prefix cache; None (every workload without prompt identities) shares nothing.

``sent`` is when the client sent the request; ``arrival`` is when the engine has it (the
front end's path later, workload/client_sends.py; re-stamped at the end of the step in flight
under async admission, as vLLM's ``queued_ts`` is). Without a front end the two are equal.
"""
from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from enum import IntEnum
from math import isfinite

from .bounds import MAX_WEIGHT, MIN_WEIGHT


@dataclass(frozen=True, slots=True)
class SLO:
    """Latency targets in seconds; ``None`` means no target."""

    ttft: float | None = None
    tbt: float | None = None
    tpot: float | None = None

    def __post_init__(self):
        for name in ("ttft", "tbt", "tpot"):
            v = getattr(self, name)
            if v is not None and not (v > 0 and isfinite(v)):
                raise ValueError(f"SLO {name} target must be a positive number of seconds, got {v!r}")


def check_priority(owner: str, priority) -> None:
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise ValueError(f"{owner}: priority must be an integer (lower is more urgent, as in vLLM), got "
                         f"{priority!r}")


@dataclass(frozen=True, slots=True)
class Tier:
    """A class of users with its SLO, drawn with probability ``share`` among a run's tiers; ``priority``: its
    priority class (lower is more urgent, as in vLLM), None when the tier has none."""

    name: str
    slo: SLO = SLO()
    share: float = 1.0
    priority: int | None = None

    def __post_init__(self):
        if not self.name:
            raise ValueError("tier name must be non-empty")
        if not (0 < self.share <= 1):
            raise ValueError(f"tier {self.name!r}: share must be in (0, 1], got {self.share}")
        check_priority(f"tier {self.name!r}", self.priority)


DEFAULT_TIER = Tier("default")


@dataclass(frozen=True, slots=True)
class Tenant:
    """A client of a shared endpoint: its ``weight`` in fair sharing (a tenant of weight 2 is owed twice the
    service of one of weight 1) and, optionally, its priority class (lower is more urgent, as in vLLM)."""

    name: str
    weight: float = 1.0
    priority: int | None = None

    def __post_init__(self):
        if not self.name:
            raise ValueError("tenant name must be non-empty")
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not MIN_WEIGHT <= w <= MAX_WEIGHT:
            raise ValueError(f"tenant {self.name!r}: weight must be a positive number from {MIN_WEIGHT:g} to "
                             f"{MAX_WEIGHT:g} (a share relative to the other tenants'), got {w!r}")
        check_priority(f"tenant {self.name!r}", self.priority)


def priority_of(tier: Tier, tenant: Tenant | None) -> int:
    """A request's priority class: its tenant's, else its tier's, else 0 (vLLM's default)."""
    if tenant is not None and tenant.priority is not None:
        return tenant.priority
    return tier.priority if tier.priority is not None else 0


class Status(IntEnum):
    WAITING = 0  # never ran, or preempted by recompute
    RUNNING = 1
    SWAPPED = 2  # preempted by swap: KV held in host memory
    FINISHED = 3
    REJECTED = 4
    UNFINISHED = 5  # still in flight when a run stopped at its horizon
    ABORTED = 6  # its client gave up (a client timeout) before it finished; the engine freed it when told


class Request:
    """One request. Spec fields are set at creation; state fields belong to the replica."""

    __slots__ = (
        # spec
        "id", "arrival", "sent", "prompt_len", "output_len", "tier", "slo", "tenant", "priority", "content",
        # state (mutated only by the replica)
        "status", "num_computed", "num_generated", "num_blocks", "replica",
        "first_scheduled", "first_token", "last_token", "finish", "preemptions",
        "reject_reason", "token_times", "mark", "lag", "order", "num_cached", "tier_cached",
    )

    def __init__(self, id: int, arrival: float, prompt_len: int, output_len: int,
                 tier: Tier = DEFAULT_TIER, tenant: Tenant | None = None, content=None):
        if prompt_len < 1:
            raise ValueError(f"request {id}: prompt_len must be >= 1, got {prompt_len}")
        if output_len < 1:
            raise ValueError(f"request {id}: output_len must be >= 1, got {output_len}")
        if not (arrival >= 0 and isfinite(arrival)):
            raise ValueError(f"request {id}: arrival must be a finite time >= 0, got {arrival}")
        if content is not None and content.length < prompt_len:
            raise ValueError(f"request {id}: its content names {content.length} tokens, fewer than its prompt's "
                             f"{prompt_len}; a content covers the whole prompt")
        self.id = id
        self.arrival = float(arrival)
        self.sent = self.arrival  # the client's send time; the engine has the request at ``arrival``
        self.prompt_len = int(prompt_len)
        self.output_len = int(output_len)
        self.tier = tier
        self.slo = tier.slo
        self.tenant = tenant  # None: the run has no tenants
        self.priority = priority_of(tier, tenant)  # lower is more urgent
        self.content = content
        self.status = Status.WAITING
        self.num_computed = 0
        self.num_generated = 0
        self.num_blocks = 0
        self.replica = -1
        self.first_scheduled = math.nan
        self.first_token = math.nan
        self.last_token = math.nan
        self.finish = math.nan
        self.preemptions = 0
        self.reject_reason = ""
        self.token_times = array("d")  # emission time of each output token
        self.mark = -1  # last step that listed this request (duplicate detection)
        # the replica's decode group (engine/decode_group.py): the group clock as of which num_computed,
        # num_generated, num_blocks, token_times and last_token are exact, -1 when not a member (always exact)
        self.lag = -1
        self.order = -1  # position in the replica's running order (admission or swap-in sequence)
        self.num_cached = 0  # prompt tokens a prefix cache held at its first admission (vLLM's num_cached_tokens)
        self.tier_cached = None  # of them, those each KV tier below the GPU supplied (runs with tiers)

    @property
    def num_tokens(self) -> int:
        """Tokens known so far: prompt plus generated output."""
        return self.prompt_len + self.num_generated

    @property
    def remaining_prefill(self) -> int:
        """Tokens whose KV must be computed before the next output token can be sampled."""
        return self.prompt_len + self.num_generated - self.num_computed

    @property
    def is_decode(self) -> bool:
        """True when the next step for this request is a single-token decode."""
        return self.num_generated > 0 and self.num_computed == self.prompt_len + self.num_generated - 1

    @property
    def max_kv_tokens(self) -> int:
        """KV tokens held at the request's last step (the last output token's KV is never computed)."""
        return self.prompt_len + self.output_len - 1

    def __repr__(self) -> str:
        return (f"Request(id={self.id}, arrival={self.arrival:.3f}, prompt={self.prompt_len}, "
                f"output={self.output_len}, tier={self.tier.name}, "
                f"{f'tenant={self.tenant.name}, ' if self.tenant is not None else ''}status={self.status.name}, "
                f"computed={self.num_computed}, generated={self.num_generated})")
