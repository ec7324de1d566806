"""User tiers from a one-line spec, and their random assignment to requests.

The spec is what a command line can carry: ``paid:tbt=0.1:share=0.05,free:tbt=0.5`` is SLAI's setting (Bari et al.,
Bari et al. §5): 5% paying users with a 0.1 s TBT target, the rest free with 0.5 s. ``priority=P`` (an integer, lower
is more urgent, as in vLLM) makes a tier a priority class: ``high:priority=0:share=0.1,low:priority=1``.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from llmsched.request import SLO, Tier
from llmsched.workload.chunks import CHUNK, check_chunk

SLO_KEYS = ("ttft", "tbt", "tpot")
KEYS = SLO_KEYS + ("share", "priority")
SHARE_TOLERANCE = 1e-6


def parse_tiers(spec: str) -> tuple[Tier, ...]:
    """``name[:key=value]...`` separated by commas; keys ttft, tbt, tpot (seconds), share and priority (an integer).

    Tiers without a share split what the others leave equally; the shares must sum to 1.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"tier spec must be a non-empty string like 'paid:tbt=0.1:share=0.05,free:tbt=0.5', "
                         f"got {spec!r}")
    parsed = []
    for part in spec.split(","):
        name, *fields = [f.strip() for f in part.split(":")]
        if not name:
            raise ValueError(f"tier spec {spec!r}: every tier needs a name before its ':key=value' fields")
        if name in (p[0] for p in parsed):
            raise ValueError(f"tier spec {spec!r}: tier {name!r} appears twice")
        values = {}
        for field in fields:
            key, eq, text = field.partition("=")
            key = key.strip()
            if key not in KEYS or not eq:
                raise ValueError(f"tier {name!r}: {field!r} is not key=value with key one of {', '.join(KEYS)}")
            if key in values:
                raise ValueError(f"tier {name!r}: {key} is given twice")
            if key == "priority":
                values[key] = parse_priority(f"tier {name!r}", text)
                continue
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"tier {name!r}: {key}={text.strip()!r} is not a number"
                                 f"{' of seconds' if key != 'share' else ''}") from None
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"tier {name!r}: {key} must be a positive finite number, got {text.strip()!r}")
            values[key] = value
        parsed.append((name, values))

    given = sum(v["share"] for _, v in parsed if "share" in v)
    unshared = [name for name, v in parsed if "share" not in v]
    if unshared:
        rest = 1.0 - given
        if rest <= SHARE_TOLERANCE:
            raise ValueError(f"tier spec {spec!r}: the given shares already sum to {given:g}, leaving nothing for "
                             f"{', '.join(unshared)}; lower the shares or give every tier one")
        for _, v in parsed:
            v.setdefault("share", rest / len(unshared))
    total = sum(v["share"] for _, v in parsed)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ValueError(f"tier spec {spec!r}: shares sum to {total:g}, they must sum to 1")
    return tuple(Tier(name, SLO(**{k: v[k] for k in SLO_KEYS if k in v}), min(v["share"], 1.0), v.get("priority"))
                 for name, v in parsed)


def parse_priority(owner: str, text: str) -> int:
    """An integer priority class from a spec's ``priority=P``."""
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{owner}: priority={text.strip()!r} is not an integer (a priority class: lower is more "
                         f"urgent, as in vLLM)") from None


def check_tiers(tiers) -> tuple[Tier, ...]:
    """A spec string or a sequence of Tier, as a tuple whose shares sum to 1."""
    if isinstance(tiers, str):
        return parse_tiers(tiers)
    if isinstance(tiers, Tier):
        tiers = (tiers,)
    tiers = tuple(tiers)
    if not tiers or not all(isinstance(t, Tier) for t in tiers):
        raise ValueError(f"tiers must be a spec string or a non-empty sequence of Tier, got {tiers!r}")
    names = [t.name for t in tiers]
    if len(set(names)) != len(names):
        raise ValueError(f"tier names must be distinct, got {names}")
    total = sum(t.share for t in tiers)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ValueError(f"tier shares must sum to 1, got {total:g} for {', '.join(names)}")
    return tiers


def assign_tiers(n: int, tiers: Sequence[Tier], rng: np.random.Generator) -> list[Tier]:
    """Each of ``n`` requests gets a tier independently with probability ``share``.

    One uniform draw per request, compared with the cumulative shares in the order given: with
    (paid 5%, free) a request is paid when its draw is below 0.05, as SLAI's generator marks classes.
    """
    tiers = check_tiers(tiers)
    return pick(tiers, rng.random(check_count(n)))


def tier_chunks(n: int, tiers: Sequence[Tier], rng: np.random.Generator, size: int = CHUNK) -> Iterator[list[Tier]]:
    """``assign_tiers(n, tiers, rng)`` in pieces of ``size``, each drawn when it is asked for."""
    tiers = check_tiers(tiers)
    n, size = check_count(n), check_chunk(size)
    return (pick(tiers, rng.random(min(size, n - a))) for a in range(0, n, size))


def check_count(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"number of requests n must be an integer >= 0, got {n!r}")
    return int(n)


def pick(tiers: tuple[Tier, ...], draws: np.ndarray) -> list[Tier]:
    """The tier each uniform draw falls in, by the cumulative shares."""
    bounds = np.cumsum([t.share for t in tiers])
    return [tiers[i] for i in np.minimum(np.searchsorted(bounds, draws, side="right"), len(tiers) - 1)]
