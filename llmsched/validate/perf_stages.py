"""An inference-perf stage of shared prompts replayed as it ran: after the stages before it, with inference-perf's
``shared_prefix`` data generator, so that vLLM's prefix cache finds what its prompts share.

A stage report gives only its lengths' quantiles, which share nothing, and a stage of shared system prompts (and,
with ``enable_multi_turn_chat``, of conversations whose every round carries the rounds before) is mostly prefix
cache hits where the server had its prefix cache on. Where the run says what its data generator was (meta.json's
``client.data``, or the ``config.yaml`` inference-perf writes beside its reports: ``data.type`` shared_prefix and
its ``shared_prefix`` settings), a stage is replayed with that generator (workload/generators/shared_prefix.py)
instead: stages 0 to N in order, each sent as inference-perf sends it (``--arrival inference-perf``), a pause
between two stages as long as the slowest request of the stage before (inference-perf waits for a stage's
requests to finish, then ``load.interval``, then a second's lead: ``loadgen/load_generator.py``), and stage N's
percentiles computed over the requests sent in its time. The multi-turn rounds and the cache carry over from
stage to stage, as they did.
"""
from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

import numpy as np

from ..workload.arrivals.rate_schedule import DEFAULT_INTERVAL, parse_rate_schedule
from ..workload.arrivals.stage_counts import StageCounts
from ..workload.generators.shared_prefix import ALIASES, DEFAULTS
from ..workload.traces.lifecycle_report import LifecycleReport

SHARED_PREFIX_TYPES = ("shared_prefix", "sharedprefix")  # inference-perf's data.type (older configs: sharedPrefix)


def stage_data(folder: Path, client: dict) -> tuple[dict | None, str]:
    """The run's ``shared_prefix`` generator settings: meta.json ``client.data`` (``type`` shared_prefix and the
    settings beside it), else the folder's inference-perf ``config.yaml`` (``data.type`` and
    ``data.shared_prefix``); None when neither describes a shared_prefix generator, or (with a note saying so)
    when its settings are some llmsched's generator does not take (inference-perf's length distributions)."""
    data = client.get("data")
    if isinstance(data, dict) and str(data.get("type", "")).lower().replace("-", "_") in SHARED_PREFIX_TYPES:
        settings, where = {k: v for k, v in data.items() if k != "type"}, f"{folder / 'meta.json'} client.data"
    else:
        data = perf_config(folder).get("data")
        if not isinstance(data, dict) or str(data.get("type", "")).lower() not in SHARED_PREFIX_TYPES:
            return None, ""
        settings, where = data.get("shared_prefix"), f"{folder / 'config.yaml'} data.shared_prefix"
        if not isinstance(settings, dict):
            raise ValueError(f"{folder / 'config.yaml'}: data.type is {data.get('type')!r} but data.shared_prefix "
                             f"is not its settings")
    other = sorted(set(settings) - set(DEFAULTS) - set(ALIASES))
    if other:
        return None, (f"{where} has {', '.join(other)}, which llmsched's shared_prefix generator does not take: the "
                      f"stage is replayed from its report's lengths, sharing nothing")
    return dict(settings), ""


def config_load_type(folder: Path) -> str | None:
    """The ``load.type`` of the folder's inference-perf ``config.yaml``, if it has one."""
    load = perf_config(folder).get("load")
    kind = load.get("type") if isinstance(load, dict) else None
    return str(kind).lower() if kind is not None else None


def request_timeout(folder: Path, client: dict) -> float | None:
    """The run's inference-perf ``load.request_timeout`` in seconds: meta.json's ``client.request_timeout``, else
    the folder's ``config.yaml``'s; None where neither sets one."""
    value, where = client.get("request_timeout"), f"{folder / 'meta.json'}: client.request_timeout"
    if value is None:
        load = perf_config(folder).get("load")
        value, where = (load.get("request_timeout") if isinstance(load, dict) else None,
                        f"{folder / 'config.yaml'}: load.request_timeout")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{where} is {value!r}, not a positive number of seconds")
    return float(value)


def perf_config(folder: Path) -> dict:
    """The ``config.yaml`` inference-perf writes beside its reports (empty when the folder has none)."""
    config = folder / "config.yaml"
    if not config.is_file():
        return {}
    import yaml
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ValueError(f"{config}: not an inference-perf config ({e}); remove it or fix it") from None
    if not isinstance(data, dict):
        raise ValueError(f"{config}: not an inference-perf config (a mapping of data, load, api, ...)")
    return data


def chained_fields(report: LifecycleReport) -> tuple[dict, tuple[float, float]]:
    """The run fields that replay ``report``'s stage after the stages before it with its shared_prefix generator,
    and the window of send times that are its requests."""
    stages = [*report.before, (report.rate, report.count, report.drain)]
    pause = max((drain for _, _, drain in stages[:-1]), default=0.0) + DEFAULT_INTERVAL
    config = {"load": {"type": report.load_type, "interval": pause,
                       "stages": [{"rate": rate, "duration": (count + 0.5) / rate} for rate, count, _ in stages]}}
    text = json.dumps(config)
    path = Path(tempfile.gettempdir()) / f"llmsched-stages-{hashlib.sha1(text.encode()).hexdigest()[:16]}.json"
    if not path.is_file():
        path.write_text(text)
    shape = parse_rate_schedule(str(path)).shape
    starts = [start for start, _, _ in StageCounts(shape, report.load_type).stages]
    window = (starts[-1], np.inf)  # (a round of the stage before, however late, is sent before its pause ends)
    fields = dict(workload="shared-prefix", workload_params=dict(report.data), rate=None, rate_schedule=str(path),
                  arrival="inference-perf", num_requests=sum(count for _, count, _ in stages))
    return fields, window


def in_window(result, window: tuple[float, float]) -> np.ndarray:
    """Per simulated request, whether it was sent in ``window``."""
    sends = result.requests.column("arrival")
    return (sends >= window[0]) & (sends < window[1])
