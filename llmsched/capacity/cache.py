"""Probe results on disk, keyed by a hash of everything that determines them.

The key covers the run's config (seed included), the bytes of a trace it replays and of a model's config.json
or a GPU spec file it names, and a fingerprint of the
llmsched source that a simulation runs (everything but ``NOT_SIMULATION``), so an edit to any scheduler, model
or the verdict can never serve a stale result. Records are stored
as the JSON they are computed as (``probe.measure_point`` round-trips through JSON too), so a reused result is
identical to a fresh one.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

SCHEMA = 1
PACKAGE = Path(__file__).resolve().parent.parent
# code that cannot change a probe's record: commands, reports, other back-ends, the search around the probes
NOT_SIMULATION = ("vllm", "reproduce", "theory", "plan", "validate", "report", "tune", "cli", "capacity/outputs.py",
                  "capacity/rate_search.py", "capacity/cache.py")


def default_dir() -> Path:
    return Path(os.environ.get("LLMSCHED_CACHE") or Path.home() / ".cache" / "llmsched") / "probes"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*")):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.suffix in (".py", ".json") and "__pycache__" not in path.parts and \
                not any(rel == x or rel.startswith(x + "/") for x in NOT_SIMULATION):
            h.update(rel.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@lru_cache(maxsize=32)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def config_key(cfg) -> str:
    data = dataclasses.asdict(cfg)
    if cfg.trace:
        from ..workload.traces.readers import resolve_data_file
        path = resolve_data_file(cfg.trace)
        st = path.stat()
        data["trace_sha256"] = _file_digest(str(path), st.st_size, st.st_mtime_ns)
    files = [("model", _model_file(cfg.model)), ("gpu", _gpu_file(cfg.gpu))]
    if cfg.fleet:  # a fleet file's content decides too
        files.append(("fleet", Path(cfg.fleet)))
    for key, file in files:
        if file is not None:    # a config.json or GPU spec file: its content, not only its name, decides
            st = file.stat()
            data[f"{key}_sha256"] = _file_digest(str(file), st.st_size, st.st_mtime_ns)
    text = json.dumps({"schema": SCHEMA, "code": code_fingerprint(), "config": data}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _model_file(name: str) -> Path | None:
    from ..hardware.hf_config import config_file, looks_like_path
    from ..hardware.models import MODELS
    if name.lower() in MODELS or not looks_like_path(name):
        return None
    return config_file(name)


def _gpu_file(name: str) -> Path | None:
    path = Path(name).expanduser()
    return path if name.endswith((".toml", ".json")) and path.is_file() else None


class ProbeCache:
    """``get(cfg)`` -> the stored record or None; ``put(cfg, record)``. One JSON file per key."""

    def __init__(self, directory: str | Path | None = None):
        self.dir = Path(directory) if directory else default_dir()
        self.hits = self.misses = 0

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, cfg) -> dict | None:
        path = self._path(config_key(cfg))
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return record

    def put(self, cfg, record: dict) -> None:
        path = self._path(config_key(cfg))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(record))
            os.replace(tmp, path)
        except OSError as e:
            raise ValueError(f"probe cache {self.dir}: cannot write ({e.strerror}); pass --cache DIR or --no-cache") \
                from None
