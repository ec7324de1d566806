"""GPU prices in USD per GPU-hour: the documented table in prices.json, overridable by a user's file.

A price file is JSON, either ``{"a100": 1.79, ...}`` or the shape of prices.json (``{"gpus": {"a100":
{"usd_per_hour": 1.79}}, "source": "..."}``). Its entries replace or add to the built-in ones; its names must be
GPU presets (llmsched/hardware/gpus.py).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from .gpus import GPUS, gpu as gpu_preset

PRICES_PATH = Path(__file__).with_name("prices.json")


@dataclass(frozen=True)
class PriceTable:
    usd_per_hour: dict          # GPU preset name -> USD per GPU-hour
    sources: dict               # GPU preset name -> where its price comes from
    host_gib_hour: float = 0.0  # USD per GiB-hour of host memory (a CPU KV tier's)
    host_source: str = ""

    def price(self, name: str) -> float:
        """USD per GPU-hour of ``name``; ValueError naming the priced GPUs and --prices when there is none."""
        key = gpu_preset(name).name
        if key not in self.usd_per_hour:
            raise ValueError(f"no price for GPU {key!r}; priced GPUs: {', '.join(sorted(self.usd_per_hour))} "
                             f"(give one with --prices FILE, e.g. {{\"{key}\": 2.5}})")
        return self.usd_per_hour[key]


def _entries(data, origin: str) -> dict:
    table = data.get("gpus", data) if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise ValueError(f"price file {origin}: expected a JSON object of GPU name -> USD per GPU-hour")
    out = {}
    for name, value in table.items():
        if name in ("unit", "source", "date", "not_listed", "host_memory") and "gpus" not in data:
            continue
        price = value.get("usd_per_hour") if isinstance(value, dict) else value
        if isinstance(price, bool) or not isinstance(price, (int, float)) or not (price > 0 and math.isfinite(price)):
            raise ValueError(f"price file {origin}: {name!r} needs a positive USD per GPU-hour, got {price!r}")
        if str(name).strip().lower() not in GPUS and _canonical(name) is None:
            raise ValueError(f"price file {origin}: unknown GPU {name!r}; valid GPUs: {', '.join(sorted(GPUS))}")
        out[_canonical(name) or name] = float(price)
    return out


def _canonical(name: str) -> str | None:
    try:
        return gpu_preset(name).name
    except ValueError:
        return None


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The built-in table, with the entries of the JSON file at ``path`` (if any) on top."""
    builtin = json.loads(PRICES_PATH.read_text())
    prices = _entries(builtin, str(PRICES_PATH))
    sources = dict.fromkeys(prices, f"{builtin['source']} ({builtin['date']})")
    host = builtin["host_memory"]
    host_price, host_source = host["usd_per_gib_hour"], f"{host['source']} ({host['date']})"
    if path is not None:
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except OSError as e:
            raise ValueError(f"--prices {path}: cannot read ({e.strerror})") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"--prices {path}: not valid JSON ({e})") from None
        given = _entries(data, str(path))
        prices.update(given)
        note = data.get("source") if isinstance(data, dict) and isinstance(data.get("source"), str) else None
        sources.update(dict.fromkeys(given, f"{path}" + (f": {note}" if note else "")))
        if isinstance(data, dict) and "host_memory" in data:
            host_price, host_source = host_memory_price(data["host_memory"], str(path)), str(path)
    return PriceTable(prices, sources, host_price, host_source)


def host_memory_price(entry, origin: str) -> float:
    """USD per GiB-hour of host memory from a price file's ``host_memory`` entry."""
    price = entry.get("usd_per_gib_hour") if isinstance(entry, dict) else entry
    if isinstance(price, bool) or not isinstance(price, (int, float)) or not (price >= 0 and math.isfinite(price)):
        raise ValueError(f"price file {origin}: host_memory needs usd_per_gib_hour >= 0, got {price!r}")
    return float(price)
