"""The one-line spec that --tiers and --tenants share: ``name[:key=value]...`` separated by commas.

Both read it alike (a name, then ``key=value`` fields, each key once); what a value means is each kind's own.
"""
from __future__ import annotations

from collections.abc import Iterator


def named_parts(spec: str, what: str) -> Iterator[tuple[str, list[str]]]:
    """Each comma-separated part of ``spec`` as its name and its ``key=value`` fields, a part at a time (so an
    error in one is found before the next is read); ``what`` (tier, tenant) names the parts in errors."""
    names: set[str] = set()
    for part in spec.split(","):
        name, *fields = [f.strip() for f in part.split(":")]
        if not name:
            raise ValueError(f"{what} spec {spec!r}: every {what} needs a name before its ':key=value' fields")
        if name in names:
            raise ValueError(f"{what} spec {spec!r}: {what} {name!r} appears twice; give each {what} once")
        names.add(name)
        yield name, fields


def key_value(owner: str, field: str, keys: tuple[str, ...], values: dict) -> tuple[str, str]:
    """``field``'s key (one of ``keys``, not yet in ``values``) and its value's text, both stripped; ``owner``
    (e.g. "tier 'paid'") begins the errors."""
    key, eq, text = field.partition("=")
    key = key.strip()
    if key not in keys or not eq:
        raise ValueError(f"{owner}: {field!r} is not key=value with key one of {', '.join(keys)}")
    if key in values:
        raise ValueError(f"{owner}: {key} is given twice")
    return key, text.strip()
