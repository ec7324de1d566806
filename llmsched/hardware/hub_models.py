"""Models people serve today, by their Hugging Face id: ``model("openai/gpt-oss-20b")``.

Each id in ``hub_models.json`` carries the config.json fields the simulator reads (for a multimodal checkpoint,
its text decoder's), the architecture in words, the URL of the config it was checked against and the date; the
fields are read by the same code as a config.json on disk (:mod:`.hf_config`), so an id and its config.json give
the same spec. An id that is not shipped is refused with what to do instead: pass the model's config.json.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from . import hf_config

HUB_PATH = Path(__file__).with_name("hub_models.json")


@lru_cache(maxsize=1)
def hub_table() -> dict[str, dict]:
    """The shipped ids (as the Hub spells them) and their entries."""
    return json.loads(HUB_PATH.read_text())["models"]


@lru_cache(maxsize=1)
def _by_key() -> dict[str, str]:
    return {hub_id.lower(): hub_id for hub_id in hub_table()}


def shipped(name: str) -> str | None:
    """The shipped id ``name`` names (case-insensitive), or None."""
    return _by_key().get(str(name).strip().lower())


def hub_fields(hub_id: str) -> dict:
    """ModelSpec keyword arguments of a shipped id (``params`` left to the caller: the shape's count)."""
    entry = hub_table()[hub_id]
    fields = hf_config.fields_from(entry["config"], f"hub model {hub_id} ({HUB_PATH.name})", hub_id)
    note = f"; not modelled: {entry['not_modelled']}" if entry.get("not_modelled") else ""
    fields["source"] = (f"{entry['source']} (checked {entry['checked']}): {entry['architecture']}; parameter "
                        f"count from the shape{note}")
    return fields


def looks_like_hub_id(name: str) -> bool:
    """``org/name`` with no path meaning: what a Hugging Face id looks like."""
    parts = str(name).strip().split("/")
    return len(parts) == 2 and all(parts) and not str(name).endswith(".json")


def not_shipped(name: str) -> str:
    """The one-line error for a Hugging Face id llmsched does not ship."""
    return (f"model {name!r} is a Hugging Face id llmsched does not ship; pass its config.json instead (download "
            f"https://huggingface.co/{name.strip()}/blob/main/config.json and give --model path/to/config.json, or "
            f"a folder holding it); `llmsched presets` lists the shipped ids")
