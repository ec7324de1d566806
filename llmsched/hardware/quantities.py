"""Sizes, rates and durations written with their units ("200GiB", "25GB/s", "400Gb/s", "5us"), read into bytes,
bytes/s and seconds: how a user writes a KV tier or a link on the command line or in a file.

Decimal prefixes are powers of 1000 (GB, as link and drive datasheets state them), binary ones powers of 1024
(GiB, as vLLM's ``--kv-offloading-size`` and ``--swap-space`` count); a rate in bits (``Gb/s``, ``Gbps``) is divided
by 8. A bare number is bytes, bytes/s or seconds. Anything else, or a value that is not a finite number above zero,
is a ValueError naming what was written and how to write it.
"""
from __future__ import annotations

import math
import re

SIZE_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10, "mib": 2**20,
              "gib": 2**30, "tib": 2**40}
TIME_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
NUMBER = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-zµ/]*)\s*$")


def split(text, what: str, example: str) -> tuple[float, str]:
    """(number, unit as written) of ``text``; a bare int or float passes as a number without unit."""
    if isinstance(text, bool):
        raise ValueError(f"{what} {text!r}: write a number with its unit, e.g. {example}")
    if isinstance(text, (int, float)):
        return float(text), ""
    m = NUMBER.match(str(text))
    if not m:
        raise ValueError(f"{what} {text!r}: write a number with its unit, e.g. {example}")
    return float(m.group(1)), m.group(2)


def positive(value: float, text, what: str, example: str) -> float:
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{what} {text!r} must be above zero, e.g. {example}")
    return value


def parse_bytes(text, what: str = "size") -> float:
    """Bytes of ``text`` ("200GiB", "1.5TB", "4096")."""
    example = "200GiB or 1.5TB"
    number, unit = split(text, what, example)
    factor = SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(f"{what} {text!r}: unknown unit {unit!r}; use one of B, KB, MB, GB, TB, KiB, MiB, GiB, "
                         f"TiB, e.g. {example}")
    return positive(number * factor, text, what, example)


def parse_rate(text, what: str = "bandwidth") -> float:
    """Bytes/s of ``text`` ("25GB/s", "400Gb/s", "400Gbps", "25e9")."""
    example = "25GB/s or 400Gb/s"
    number, unit = split(text, what, example)
    u = unit[:-2] + "/s" if unit.endswith("ps") else unit
    if u and not u.endswith("/s"):
        raise ValueError(f"{what} {text!r}: a rate is per second, e.g. {example}")
    base = u[:-2]
    bits = base.endswith("b")
    if base and base[-1] not in "Bb":
        factor = None
    else:
        factor = SIZE_UNITS.get(base[:-1].lower() + "b") if base else 1
    if factor is None:
        raise ValueError(f"{what} {text!r}: unknown unit {unit!r}; use GB/s (bytes) or Gb/s (bits), e.g. {example}")
    return positive(number * factor / (8 if bits else 1), text, what, example)


def parse_seconds(text, what: str = "latency") -> float:
    """Seconds of ``text`` ("5us", "1.2ms", "0.5s", "2e-6")."""
    example = "5us or 1.2ms"
    number, unit = split(text, what, example)
    factor = TIME_UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(f"{what} {text!r}: unknown unit {unit!r}; use s, ms, us or ns, e.g. {example}")
    return positive(number * factor, text, what, example)


def shown_bytes(n: float) -> str:
    """``n`` bytes as a short text (binary units)."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= factor:
            return f"{n / factor:.4g}{unit}"
    return f"{n:.0f}B"
