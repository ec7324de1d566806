"""Saved step-time profiles: a fitted ``LinearBatchTime`` JSON with the model it was measured on.

By default a profile lives at ``$LLMSCHED_PROFILES/<model>-<fingerprint>/<hardware>/vllm-<version>.json``
(``LLMSCHED_PROFILES`` defaults to ``~/.llmsched/profiles``): keyed by the model (its directory name and a hash
of its shape), the hardware (GPU name, or CPU model and thread count) and the vLLM version, so profiles of
different models or machines never collide. A name (``--name tiny``) stores it as ``<name>.json`` instead. Every
profile records its model's fingerprint, and a profile measured on another model is refused. The simulator loads
one with ``--batch-time linear --bt-param file=PATH``.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from ..batchtime.linear import LinearBatchTime

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SHAPE_KEYS = ("architectures", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "head_dim", "vocab_size", "torch_dtype", "dtype")


def profiles_dir() -> Path:
    return Path(os.environ.get("LLMSCHED_PROFILES") or Path.home() / ".llmsched" / "profiles")


def model_fingerprint(hf_config) -> str:
    """A short hash of the model's shape (its Hugging Face config's architecture fields)."""
    d = hf_config.to_dict() if hasattr(hf_config, "to_dict") else dict(hf_config)
    shape = {k: str(d.get(k)) for k in SHAPE_KEYS if d.get(k) is not None}
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:10]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()[:60] or "unknown"


def hardware_key() -> str:
    """The GPU's name, or on a CPU its model name and torch's thread count (both change step times)."""
    import torch
    if torch.cuda.is_available():
        return _slug(torch.cuda.get_device_name(0))
    name = "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1]
                    break
    except OSError:
        pass
    return f"{_slug(name)}-x{torch.get_num_threads()}"


def vllm_version() -> str:
    import vllm
    return str(getattr(vllm, "__version__", "unknown"))


def default_profile_path(model: str, hf_config) -> Path:
    """Where ``llmsched profile`` stores, and the plug-in looks for, the profile of ``model`` here."""
    base = _slug(Path(str(model)).name) + "-" + model_fingerprint(hf_config)
    return profiles_dir() / base / hardware_key() / f"vllm-{_slug(vllm_version())}.json"


def profile_path(name: str) -> Path:
    """The file of profile ``name``; a path to a .json file is taken as it is."""
    if name.endswith(".json") or os.sep in name:
        return Path(name)
    if not NAME.match(name):
        raise ValueError(f"profile name {name!r}: use letters, digits, '.', '_' and '-' (or give a .json path)")
    return profiles_dir() / f"{name}.json"


def load_profile(name: str) -> LinearBatchTime:
    path = profile_path(name)
    if not path.exists():
        raise ValueError(f"profile {name!r} not found at {path}; make it with `llmsched profile --backend vllm "
                         f"--model DIR`")
    return LinearBatchTime.load(path)


def load_profile_for(name: str, fingerprint: str) -> tuple[LinearBatchTime, Path]:
    """Profile ``name``, refused unless it was measured on the model with ``fingerprint``."""
    model = load_profile(name)
    path = profile_path(name)
    meta = json.loads(path.read_text()).get("meta", {})
    theirs = meta.get("fingerprint")
    if theirs != fingerprint:
        raise ValueError(f"profile {path} was measured on model {meta.get('model', '?')} (fingerprint "
                         f"{theirs or 'none recorded'}), not on the served model (fingerprint {fingerprint}); "
                         f"profile this model with `llmsched profile --backend vllm --model DIR`")
    return model, path
