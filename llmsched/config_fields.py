"""The one schema of a run's fields: type and range of every RunConfig field, and which fields go together.

Config files (TOML/YAML), the command line and the Python API all pass through ``check_field`` and
``check_combination``, so a wrong value gets the same error wherever it comes from, naming the field, the value
and where it was written (the option, or the file and line).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .workload.arrivals import Piecewise
from .workload.tiers import parse_tiers

# A run must mean something: a mean gap longer than MIN_RATE's (about 11.6 days) or more than MAX_REQUESTS
# requests is a typo (1e-300, 1e30), not an experiment; such a run would never end or never start.
MIN_RATE = 1e-6
MAX_REQUESTS = 100_000_000
MAX_SECONDS = 1e9  # about 32 years of simulated time


@dataclass(frozen=True)
class Field:
    """What one field accepts: ``kind`` is int, float, str, bool or params (a table of scheduler/model params)."""

    kind: str
    optional: bool = False
    low: float | None = None     # inclusive
    above: float | None = None   # exclusive lower bound
    high: float | None = None    # inclusive
    choices: tuple[str, ...] = ()
    hint: str = ""
    must: str = ""  # the whole expectation, where the generated one would read badly
    parse: object = None  # a str field's parser (raises ValueError on a bad value)

    def expectation(self) -> str:
        if self.must:
            return self.must
        what = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
                "params": "a table of KEY = VALUE"}[self.kind]
        if self.choices:
            what = "one of " + ", ".join(self.choices)
        bounds = []
        if self.above is not None:
            bounds.append(f"> {self.above:g}")
        if self.low is not None:
            bounds.append(f">= {self.low:g}")
        if self.high is not None:
            bounds.append(f"<= {self.high:g}")
        text = what + (" " + " and ".join(bounds) if bounds else "")
        if self.optional:
            text += " (or leave it out)"
        return text + (f"; {self.hint}" if self.hint else "")


FIELDS: dict[str, Field] = {
    "scheduler": Field("str", hint="see `llmsched presets`"),
    "scheduler_params": Field("params"),
    "model": Field("str", hint="a model preset, see `llmsched presets`"),
    "gpu": Field("str", hint="a GPU preset, see `llmsched presets`"),
    "tp": Field("int", optional=True, low=1, high=64),
    "batch_time": Field("str"),
    "batch_time_params": Field("params"),
    "replicas": Field("int", low=1, high=4096),
    "router": Field("str"),
    "dp": Field("int", low=1, high=1024, hint="vLLM's data_parallel_size"),
    "expert_parallel": Field("bool"),
    "workload": Field("str", hint="a length preset, see `llmsched presets`"),
    "lengths": Field("str", optional=True, hint="a length CSV (num_prefill_tokens,num_decode_tokens or "
                                                "question_length,answer_length)"),
    "trace": Field("str", optional=True),
    "rate": Field("float", optional=True, low=MIN_RATE,
                  must=f"a positive number of requests/s, at least {MIN_RATE:g} (a mean gap of at most 11.6 days)"),
    "num_requests": Field("int", optional=True, low=1, high=MAX_REQUESTS),
    "duration": Field("float", optional=True, above=0, high=MAX_SECONDS, hint="seconds"),
    "arrival": Field("str", choices=("poisson", "gamma", "constant")),
    "cv": Field("float", optional=True, above=0, high=1e3),
    "rate_schedule": Field("str", optional=True, hint="'START:RATE,...', e.g. '0:2,300:4'",
                           parse=lambda text: Piecewise(parse_rate_schedule(text))),
    "concurrency": Field("int", optional=True, low=1, high=MAX_REQUESTS),
    "tiers": Field("str", optional=True, hint="e.g. 'paid:tbt=0.1:share=0.05,free:tbt=0.5'",
                   parse=lambda text: parse_tiers(text)),
    "max_total_tokens": Field("int", optional=True, low=2),
    "block_size": Field("int", low=1, high=4096),
    "max_num_seqs": Field("int", low=1),
    "max_num_batched_tokens": Field("int", low=1),
    "max_model_len": Field("int", optional=True, low=2, hint="at most the model's context length"),
    "gpu_memory_utilization": Field("float", above=0, high=1),
    "num_blocks": Field("int", optional=True, low=1, hint="leave it out to size the KV cache from the GPU"),
    "preemption_mode": Field("str", choices=("recompute", "swap")),
    "overflow": Field("str", choices=("error", "evict-newest", "evict-newest-recompute")),
    "swap_space_gb": Field("float", low=0, high=1e6),
    "oracle": Field("bool"),
    "horizon": Field("float", optional=True, above=0, high=MAX_SECONDS, hint="seconds"),
    "warmup": Field("float", low=0, high=MAX_SECONDS, hint="seconds"),
    "cooldown": Field("float", low=0, high=MAX_SECONDS, hint="seconds"),
    "keep_gaps": Field("bool"),
    "fast_forward": Field("bool"),
    "lanes": Field("bool"),
    "check_invariants": Field("bool"),
    "seed": Field("int", low=0, high=2**63 - 1),
}


class Origin:
    """Where values were written, for error messages: the command line, a config file, or Python code."""

    def __init__(self, kind: str = "api", path: str | Path | None = None, text: str | None = None):
        self.kind = kind
        self.path = path
        self.text = text

    @classmethod
    def file(cls, path, text: str | None = None) -> "Origin":
        return cls("file", path, text)

    def name(self, key: str) -> str:
        """How the user wrote the field's name."""
        if self.kind == "cli":
            return CLI_NAMES.get(key, "--" + key.replace("_", "-"))
        if self.kind == "file":
            return f"{key} (in {self.path})"
        return key

    def at(self, key: str, value) -> str:
        """The field and its value as the user wrote them."""
        if self.kind == "cli":
            return f"{self.name(key)} {value}"
        if self.kind == "file":
            return f"{self.path}{self.line_of(key)}: {key} = {shown(value)}"
        return f"{key}={value!r}"

    def line_of(self, key: str) -> str:
        """':N' for the line of a file that sets ``key`` (found by its text), else ''."""
        if not self.text:
            return ""
        pattern = re.compile(r"^\s*['\"]?" + "[-_]".join(map(re.escape, key.split("_"))) + r"['\"]?\s*[=:]")
        for i, line in enumerate(self.text.splitlines(), 1):
            if pattern.match(line):
                return f":{i}"
        return ""


API = Origin()
CLI_NAMES = {"scheduler_params": "--param", "batch_time_params": "--bt-param", "keep_gaps": "--sketch", "fast_forward": "--no-fast-forward",
             "lanes": "--no-lanes",
             "check_invariants": "--check-invariants"}


def shown(value) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def check_field(key: str, value, origin: Origin = API):
    """``value`` as the field's type (an int stays an int; a whole float for an int field is refused)."""
    if key not in FIELDS:
        raise ValueError(f"{origin.name(key)}: unknown field; valid fields: {', '.join(sorted(FIELDS))}")
    spec = FIELDS[key]
    if value is None:
        if spec.optional:
            return None
        raise ValueError(f"{origin.at(key, value)}: must be {spec.expectation()}")
    typed = _typed(spec, value)
    if typed is _WRONG or not _in_range(spec, typed):
        raise ValueError(f"{origin.at(key, value)}: must be {spec.expectation()}")
    if spec.parse and typed:
        try:
            spec.parse(typed)
        except ValueError as e:
            raise ValueError(f"{origin.at(key, value)}: {e}") from None
    return typed


def parse_rate_schedule(text: str) -> list[tuple[float, float]]:
    """'START:RATE,...' (seconds:requests/s) as (start, rate) pairs."""
    try:
        segments = [tuple(float(x) for x in part.split(":")) for part in text.split(",")]
        if any(len(seg) != 2 for seg in segments):
            raise ValueError
    except ValueError:
        raise ValueError(f"rate_schedule {text!r}: write START:RATE pairs, e.g. '0:2,300:4,600:1'") from None
    return segments


_WRONG = object()


def _typed(spec: Field, value):
    if spec.kind == "bool":
        return value if isinstance(value, (bool, np.bool_)) else _WRONG
    if spec.kind == "str":
        return value if isinstance(value, str) and (value.strip() or spec.optional) else _WRONG
    if spec.kind == "params":
        if not isinstance(value, dict):
            return _WRONG
        return dict(value)
    if isinstance(value, (bool, np.bool_)):
        return _WRONG
    if spec.kind == "int":
        if isinstance(value, (int, np.integer)):
            return int(value)
        return _WRONG
    if isinstance(value, (int, float, np.integer, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else _WRONG
    return _WRONG


def _in_range(spec: Field, value) -> bool:
    if spec.choices and value not in spec.choices:
        return False
    if spec.kind not in ("int", "float"):
        return True
    if spec.low is not None and value < spec.low:
        return False
    if spec.above is not None and value <= spec.above:
        return False
    return spec.high is None or value <= spec.high


# (field, other field, why they do not go together and what to do instead)
CONFLICTS = (
    ("trace", "duration", "a trace replays its own arrivals; use --num-requests N to replay the first N requests"),
    ("trace", "concurrency", "a closed loop issues a request whenever one finishes, so it cannot replay a trace's "
                             "arrivals; for its lengths use --lengths FILE.csv with --concurrency"),
    ("trace", "rate_schedule", "a trace has its own arrival times; --rate-schedule shapes generated arrivals "
                               "(with --workload or --lengths)"),
    ("trace", "arrival", "a trace has its own arrival times; --arrival applies to --workload or --lengths"),
    ("trace", "cv", "a trace has its own arrival times; --cv applies to gamma arrivals of --workload/--lengths"),
    ("trace", "workload", "a trace carries its own lengths; drop --workload (or drop --trace)"),
    ("trace", "lengths", "a trace carries its own lengths; drop --lengths (or drop --trace)"),
    ("workload", "lengths", "--lengths FILE.csv replaces the named length preset; give one of them"),
    ("concurrency", "rate", "a closed loop sends a new request when one finishes, so it has no arrival rate; drop "
                            "--rate or --concurrency"),
    ("concurrency", "duration", "a closed loop runs --num-requests requests; drop --duration"),
    ("concurrency", "rate_schedule", "a closed loop has no arrival rate; drop --rate-schedule or --concurrency"),
    ("concurrency", "arrival", "a closed loop has no arrival process; drop --arrival or --concurrency"),
    ("concurrency", "cv", "a closed loop has no arrival process; drop --cv or --concurrency"),
    ("rate_schedule", "rate", "the schedule gives the rate of each period; drop --rate"),
    ("rate_schedule", "cv", "a rate schedule draws Poisson arrivals; drop --cv"),
    ("num_requests", "duration", "give the number of requests or the duration of arrivals, not both"),
)

# what the rest of a run is, for defaults that would not apply to it
ARRIVAL_KEYS = ("rate", "duration", "arrival", "cv", "rate_schedule")


def given(data: dict, key: str) -> bool:
    value = data.get(key)
    return value is not None and value != ""


def conflicts_with(key: str, data: dict) -> str | None:
    """The given field that ``key`` would conflict with in ``data``, if any."""
    for a, b, _ in CONFLICTS:
        if key == a and given(data, b):
            return b
        if key == b and given(data, a):
            return a
    return None


def check_combination(data: dict, origin_of=lambda key: API) -> None:
    """Fields that must not be given together, and ranges that involve two fields."""
    for a, b, why in CONFLICTS:
        if given(data, a) and given(data, b):
            if (a, b) == ("concurrency", "arrival") and data[b] == "poisson":
                continue
            if a == "trace" and b == "arrival" and data[b] == "poisson":
                continue
            raise ValueError(f"{origin_of(b).name(b)} does not apply together with {origin_of(a).name(a)}: {why}")
    arrival = data.get("arrival") or "poisson"
    if given(data, "cv") and arrival != "gamma":
        raise ValueError(f"{origin_of('cv').name('cv')} applies only to gamma arrivals (--arrival gamma), not "
                         f"{arrival!r}")
    if arrival == "gamma" and given(data, "arrival") and not given(data, "cv"):
        raise ValueError(f"{origin_of('arrival').name('arrival')} gamma needs --cv, the coefficient of variation of "
                         f"the gaps (1 = Poisson, > 1 burstier)")
    if given(data, "rate_schedule") and arrival != "poisson":
        raise ValueError(f"{origin_of('arrival').name('arrival')} {arrival}: a rate schedule draws Poisson "
                         f"arrivals; drop --arrival")
    if given(data, "concurrency") and not given(data, "num_requests"):
        raise ValueError(f"{origin_of('concurrency').name('concurrency')} (a closed loop) needs --num-requests, how "
                         f"many requests it sends in all")
    dp, replicas = data.get("dp"), data.get("replicas")
    if isinstance(dp, int) and dp > 1 and isinstance(replicas, int) and replicas > 1:
        raise ValueError(f"{origin_of('dp').name('dp')} {dp} with {origin_of('replicas').name('replicas')} "
                         f"{replicas}: a DP group is one server of {dp} ranks; give --dp or --replicas, not both")
    rate = data.get("rate")
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0:
        n, duration = data.get("num_requests"), data.get("duration")
        if isinstance(n, int) and n > 1 and (n - 1) / rate > MAX_SECONDS:
            raise ValueError(f"{origin_of('rate').name('rate')} {rate:g} with {n} requests: arrivals would span "
                             f"{(n - 1) / rate:.3g} s (more than {MAX_SECONDS:g} s); raise the rate")
        if isinstance(duration, (int, float)) and duration * rate > MAX_REQUESTS:
            raise ValueError(f"{origin_of('duration').name('duration')} {duration:g} at rate {rate:g} means about "
                             f"{duration * rate:.3g} requests (more than {MAX_REQUESTS:,}); shorten the duration")


def check_params(owner: str, params: dict, defaults: dict, where: str) -> dict:
    """Scheduler (or model) parameters: known public names, each value of its default's type."""
    if not isinstance(params, dict):
        raise ValueError(f"{where}: parameters must be a table of KEY = VALUE, got {shown(params)}")
    public = sorted(k for k in defaults if not k.startswith("_"))
    out = {}
    for key, value in params.items():
        if not isinstance(key, str) or key.startswith("_") or key not in defaults:
            raise ValueError(f"{where}: {owner} has no parameter {key!r}; its parameters are: "
                             f"{', '.join(public) or '(none)'}")
        default = defaults[key]
        kind = _param_kind(default)
        if kind == "str" and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)  # --param thresholds=5 parses as a number
        ok = (kind is None or value is None and default is None
              or kind == "bool" and isinstance(value, bool)
              or kind == "int" and isinstance(value, int) and not isinstance(value, bool)
              or kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value)
              or kind == "str" and isinstance(value, str))
        if not ok:
            raise ValueError(f"{where}: {owner} parameter {key} = {shown(value)} must be {_KIND_TEXT[kind]} "
                             f"(default {shown(default)})")
        out[key] = value
    return out


_KIND_TEXT = {"bool": "true or false", "int": "an integer", "float": "a finite number", "str": "a string"}


def _param_kind(default) -> str | None:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, str):
        return "str"
    return None  # None or a structured default: the scheduler checks it
