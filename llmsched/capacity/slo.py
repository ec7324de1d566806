"""SLOs as metric/limit pairs: ``ttft_p50<=2s,tbt_p99<=200ms,attainment>=0.9``.

Metric names are the project's (``ttft``, ``tbt``, ``tpot``, ``e2e``); ``vllm bench serve``'s names are accepted
for the same quantities (``itl`` = every inter-token gap = ``tbt``, ``e2el`` = ``e2e``), as are its stat
spellings (``median``, ``mean``, ``p99``, in either order: ``p99_ttft``). A latency limit takes ``s`` or ``ms``
(a bare number is seconds, the project's unit). ``attainment`` is the fraction of measured requests that met
every target of their tier (``--tiers``); ``attainment[paid]`` or ``paid.attainment`` is one tier's. A tier
prefix on a latency (``paid.tbt_p99<=100ms``) measures that tier's requests only.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

LATENCIES = ("ttft", "tbt", "tpot", "e2e")
ALIASES = {"itl": "tbt", "e2el": "e2e"}
STATS = ("mean", "p50", "p75", "p90", "p95", "p99", "max")
STAT_ALIASES = {"median": "p50"}
RATIOS = ("attainment",)
UNITS = {"s": 1.0, "ms": 1e-3, "": 1.0}

_SLO = re.compile(r"^\s*(?:(?P<tier>[A-Za-z0-9_-]+)\.)?(?P<name>[A-Za-z0-9_]+)(?:\[(?P<tier2>[A-Za-z0-9_-]+)\])?"
                  r"\s*(?P<op><=|>=|<|>)\s*(?P<num>[0-9.eE+-]+)\s*(?P<unit>ms|s)?\s*$")


@dataclass(frozen=True)
class SLO:
    """One target: ``metric`` (``ttft_p50``, ``attainment``) of ``tier`` (None = all requests) ``op`` ``limit``."""

    metric: str
    op: str
    limit: float
    tier: str | None = None

    @property
    def key(self) -> str:
        """The name of the measured value this SLO reads (as in a probe's metrics)."""
        return self.metric if self.tier is None else f"{self.tier}.{self.metric}"

    @property
    def text(self) -> str:
        if self.metric in RATIOS:
            return f"{self.key}{self.op}{self.limit:g}"
        return f"{self.key}{self.op}{self.limit:g}s"

    def met_by(self, value: float) -> bool:
        if math.isnan(value):
            return False
        return {"<=": value <= self.limit, "<": value < self.limit,
                ">=": value >= self.limit, ">": value > self.limit}[self.op]


def valid_metrics() -> list[str]:
    return [f"{m}_{s}" for m in LATENCIES for s in STATS] + list(RATIOS)


def canonical_metric(name: str) -> str:
    """``p99_itl`` / ``itl_p99`` / ``tbt_p99`` -> ``tbt_p99``; ValueError listing the valid names otherwise."""
    low = name.lower()
    if low in RATIOS:
        return low
    parts = low.split("_")
    if len(parts) == 2:
        for m, s in (parts, parts[::-1]):
            m, s = ALIASES.get(m, m), STAT_ALIASES.get(s, s)
            if m in LATENCIES and s in STATS:
                return f"{m}_{s}"
    raise ValueError(f"unknown SLO metric {name!r}; valid: {', '.join(valid_metrics())} (also vLLM's itl, e2el, "
                     f"median, and p99_ttft order)")


def parse_slo(text: str) -> SLO:
    m = _SLO.match(text)
    if not m:
        raise ValueError(f"SLO {text!r}: write METRIC<=LIMIT (e.g. 'ttft_p50<=2s', 'tbt_p99<=200ms', "
                         f"'attainment>=0.9', 'paid.tbt_p99<=0.1s')")
    if m["tier"] and m["tier2"]:
        raise ValueError(f"SLO {text!r}: give the tier once (paid.attainment or attainment[paid])")
    metric = canonical_metric(m["name"])
    tier = m["tier"] or m["tier2"]
    try:
        num = float(m["num"])
    except ValueError:
        raise ValueError(f"SLO {text!r}: {m['num']!r} is not a number") from None
    op, unit = m["op"], m["unit"] or ""
    if metric in RATIOS:
        if op not in (">=", ">"):
            raise ValueError(f"SLO {text!r}: attainment is a lower bound; write {metric}>={num:g}")
        if unit or not 0 < num <= 1:
            raise ValueError(f"SLO {text!r}: attainment is a fraction in (0, 1] without a unit, e.g. 0.9")
        return SLO(metric, op, num, tier)
    if op not in ("<=", "<"):
        raise ValueError(f"SLO {text!r}: a latency is an upper bound; write {metric}<={num:g}{unit}")
    limit = num * UNITS[unit]
    if not (limit > 0 and math.isfinite(limit)):
        raise ValueError(f"SLO {text!r}: the limit must be a positive time, e.g. 2s or 200ms")
    return SLO(metric, op, limit, tier)


def parse_slos(text: str) -> list[SLO]:
    """Comma-separated SLOs; an empty string means none (capacity is then the stability limit)."""
    if not isinstance(text, str):
        raise ValueError(f"SLOs must be a string like 'ttft_p50<=2s,tbt_p99<=0.2s', got {text!r}")
    slos = [parse_slo(part) for part in text.split(",") if part.strip()]
    keys = [s.key for s in slos]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError(f"SLOs {text!r}: {', '.join(dup)} given twice")
    return slos


def check_tier_slos(slos: list[SLO], tiers, named=lambda slo: f"SLO {slo.text}") -> None:
    """SLOs that read the run's tiers (``tiers``: its Tier objects): ``attainment`` is the share of requests that
    meet their tier's targets, so it needs a tier with a target (else every request meets it); a tier's SLO
    (``paid.tbt_p99``) needs a tier of that name (else it is never measured). ``named(slo)``: how the user wrote it."""
    names = [t.name for t in tiers or ()]
    targets = any(t.slo.ttft or t.slo.tbt or t.slo.tpot for t in tiers or ())
    for slo in slos:
        if slo.tier is not None and slo.tier not in names:
            raise ValueError(f"{named(slo)}: no tier {slo.tier!r} in the run's tiers "
                             f"({', '.join(names) if names else 'none given: add --tiers'})")
        if slo.metric in RATIOS and not targets:
            why = "none of the run's tiers has a target" if names else "no --tiers are given"
            raise ValueError(f"{named(slo)}: attainment is the share of requests that meet their tier's targets, "
                             f"and {why}, so every request would meet it; give --tiers with targets (e.g. "
                             f"'paid:tbt=0.1:share=0.05,free:tbt=0.5') or drop it")


def slos_with_attainment(text: str | list[str] | None, attainment: float | None) -> list[SLO]:
    """The SLOs of ``text`` (one comma-separated list, or several: ``--slo`` given more than once adds to it, never
    replaces it) and, where ``attainment`` is given (``--attainment``), the fraction of requests that must meet
    their tier's targets."""
    if not isinstance(text, str):
        text = ",".join(t for t in text or () if t)
    if attainment is not None:
        if not 0 < attainment <= 1:
            raise ValueError(f"--attainment {attainment:g}: give a fraction in (0, 1], e.g. 0.9")
        text = ",".join(t for t in (text, f"attainment>={attainment:g}") if t)
    return parse_slos(text)


def check_run_slos(slos: list[SLO], cfg, attainment: float | None = None) -> None:
    """The SLOs that read tiers against the tiers of the run ``cfg`` (``--attainment`` without --tiers would
    always be met), each named as the user gave it: ``--attainment`` or ``--slo``."""
    def named(slo):
        if slo.metric in RATIOS and slo.tier is None and attainment is not None:
            return f"--attainment {attainment:g}"
        return f"--slo {slo.text}"
    check_tier_slos(slos, cfg.tiers.value if cfg.tiers else (), named)
