"""What a user asks of KV offload: the tiers below the GPU cache, in order, as ``cpu:200GiB`` (several:
``cpu:200GiB,disk:2TB``; a tier's own settings after its size, ``cpu:200GiB:link=pcie-gen4``) or a TOML/YAML file::

    [[tier]]
    medium = "cpu"          # cpu (host DRAM), disk (local NVMe), remote (a store over the network)
    size = "200GiB"         # per replica, summed over its TP ranks (vLLM's --kv-offloading-size)
    link = "pcie"           # a link preset (llmsched/hardware/links.py) or "bw=...,latency=..."
    chunk_tokens = 16       # block granularity (one value for every tier)
    op_latency = "3.5us"    # per chunk moved
    concurrency = 1         # transfers in service at once on each direction of the link (0: no bound)

    [[tier]]
    medium = "disk"
    size = "2TB"

Parsing needs no model or GPU (the run field's check); ``engine/offload_plan.py`` resolves sizes into chunks and
link names into figures for a run's model, GPU and TP.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..hardware.links import PER_CARD, link as resolve_link
from ..hardware.quantities import parse_bytes, parse_seconds

MEDIA = ("cpu", "disk", "remote")  # in the order tiers must come: nearer the GPU first
MODES = ("vllm", "lmcache", "lmcache-layerwise")
TIER_KEYS = ("medium", "size", "link", "chunk_tokens", "op_latency", "concurrency")
SHORT_KEYS = {"link": "link", "chunk": "chunk_tokens", "chunk_tokens": "chunk_tokens", "latency": "op_latency",
              "op_latency": "op_latency", "concurrency": "concurrency"}
EXAMPLE = "cpu:200GiB, cpu:200GiB,disk:2TB, or a .toml file of [[tier]] tables"


@dataclass(frozen=True)
class TierSpec:
    """One tier as written: its medium, size in bytes, and the settings given (None: the mode's default)."""

    medium: str
    size: float
    link: str | None = None
    chunk_tokens: int | None = None
    op_latency: float | None = None
    concurrency: int | None = None


def parse_kv_offload(text: str) -> tuple[TierSpec, ...]:
    """The tiers of ``text`` (the short form or a file); a one-line ValueError naming the part and the fix."""
    spec = str(text).strip()
    if spec.endswith((".toml", ".yaml", ".yml")) or (Path(spec).suffix and Path(spec).is_file()):
        tiers = read_tier_file(Path(spec))
    else:
        tiers = tuple(parse_short_tier(part.strip(), spec) for part in spec.split(",") if part.strip())
    if not tiers:
        raise ValueError(f"kv_offload {spec!r}: no tier given; write e.g. {EXAMPLE}")
    check_order(tiers, spec)
    return tiers


def parse_short_tier(part: str, spec: str) -> TierSpec:
    """``MEDIUM:SIZE[:KEY=VALUE...]``."""
    fields = part.split(":")
    if len(fields) < 2:
        raise ValueError(f"kv_offload {spec!r}: tier {part!r} needs MEDIUM:SIZE, e.g. cpu:200GiB")
    extra = {}
    for item in fields[2:]:
        key, sep, value = item.partition("=")
        name = SHORT_KEYS.get(key.strip().lower())
        if not sep or name is None:
            raise ValueError(f"kv_offload {spec!r}: {item!r} in tier {part!r} is not one of "
                             f"{', '.join(sorted(set(SHORT_KEYS)))}=VALUE")
        extra[name] = value.strip()
    return make_tier({"medium": fields[0].strip(), "size": fields[1].strip(), **extra}, f"kv_offload {spec!r}")


def read_tier_file(path: Path) -> tuple[TierSpec, ...]:
    """Tiers from a TOML or YAML file holding a list of ``tier`` tables."""
    if not path.is_file():
        raise ValueError(f"kv_offload {path}: no such file; give a .toml/.yaml file of [[tier]] tables or e.g. "
                         f"cpu:200GiB")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            import tomllib
            data = tomllib.loads(text)
        else:
            import yaml
            data = yaml.safe_load(text) or {}
    except Exception as e:  # noqa: BLE001 - TOML and YAML parsers raise their own error types
        raise ValueError(f"kv_offload {path}: not valid {path.suffix[1:].upper()} ({str(e).splitlines()[0]})") \
            from None
    if not isinstance(data, dict) or set(data) != {"tier"} or not isinstance(data["tier"], list):
        raise ValueError(f"kv_offload {path}: must hold only a list of tier tables ([[tier]] in TOML, tier: - ... "
                         f"in YAML), each with medium and size")
    out = []
    for i, table in enumerate(data["tier"], 1):
        if not isinstance(table, dict):
            raise ValueError(f"kv_offload {path}: tier {i} must be a table of {', '.join(TIER_KEYS)}")
        out.append(make_tier(table, f"kv_offload {path}: tier {i}"))
    return tuple(out)


def make_tier(fields: dict, where: str) -> TierSpec:
    unknown = sorted(set(fields) - set(TIER_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; keys: {', '.join(TIER_KEYS)}")
    for key in ("medium", "size"):
        if key not in fields:
            raise ValueError(f"{where}: needs {key} (e.g. medium = \"cpu\", size = \"200GiB\")")
    medium = str(fields["medium"]).strip().lower()
    if medium not in MEDIA:
        raise ValueError(f"{where}: medium {fields['medium']!r} is not one of {', '.join(MEDIA)}")
    size = parse_bytes(fields["size"], f"{where}: {medium} size")
    chunk = fields.get("chunk_tokens")
    if chunk is not None:
        chunk = whole(chunk, f"{where}: chunk_tokens", low=1)
    concurrency = fields.get("concurrency")
    if concurrency is not None:
        concurrency = whole(concurrency, f"{where}: concurrency", low=0)
    op = fields.get("op_latency")
    if op is not None:
        op = parse_seconds(op, f"{where}: op_latency")
    link = fields.get("link")
    if link is not None and not str(link).strip():
        raise ValueError(f"{where}: link is empty; name a link preset or give bw=...,latency=...")
    if link is not None and str(link).strip().lower() not in PER_CARD:  # the GPU's own links resolve with it
        try:
            resolve_link(str(link))
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    return TierSpec(medium, size, None if link is None else str(link).strip(), chunk, op, concurrency)


def whole(value, what: str, low: int) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} {value!r} must be a whole number >= {low}") from None
    if isinstance(value, bool) or n != float(value) or n < low:
        raise ValueError(f"{what} {value!r} must be a whole number >= {low}")
    return n


def check_order(tiers: tuple[TierSpec, ...], spec: str) -> None:
    """A cpu tier first (both connectors move KV to and from the GPU through host memory), then media farther from
    the GPU, each at most once."""
    media = [t.medium for t in tiers]
    if media[0] != "cpu":
        raise ValueError(f"kv_offload {spec!r}: the first tier must be cpu (host memory is the gateway to the GPU "
                         f"for vLLM's and LMCache's lower tiers), got {media[0]}")
    ranks = [MEDIA.index(m) for m in media]
    if ranks != sorted(ranks) or len(set(ranks)) != len(ranks):
        raise ValueError(f"kv_offload {spec!r}: tiers out of order ({', '.join(media)}); list them nearest the GPU "
                         f"first, each once: {', '.join(MEDIA)}")
    chunks = {t.chunk_tokens for t in tiers if t.chunk_tokens is not None}
    if len(chunks) > 1:
        raise ValueError(f"kv_offload {spec!r}: tiers give chunk_tokens {sorted(chunks)}; both connectors key every "
                         f"tier by the same chunks: give one value")
