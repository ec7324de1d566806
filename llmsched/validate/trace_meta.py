"""The real run a trace was captured from, as the settings of a simulation of that trace.

A real run's folder (tests/data/gpu_runs, ../shared/data/ground_truth, the ``validate-serving`` schema of
serving_run.py) holds its per-request log beside the engine arguments it ran with (``meta.json``) and the model's
``config.json``. ``llmsched simulate --trace FOLDER/requests.jsonl`` (and ``compare``, ``sweep``) take from them
what ``validate-serving FOLDER`` replays with (serving.engine_fields), wherever the user gave no value of their own
(on the command line or in --config): the model, the GPU meta.json names, tensor and data parallelism, vLLM's limits
(``max_num_seqs``, ``max_num_batched_tokens``, ``max_model_len``, ``block_size``), its memory share, KV cache dtype,
prefix caching and front end, the CUDA graphs vLLM captured and its async scheduling (for the vllm-v1 kind), vLLM's
policy (``simulate`` only: ``compare`` and ``sweep`` run their own schedulers, vllm-chunked among them with the
run's token budget), and the latency boundary the log measured at (a requests.jsonl in the engine). The KV cache
follows from them: with the run's model, GPU, parallelism and KV dtype, the one KV sizing (hardware/kv_sizing.py)
takes the block count vLLM reported in meta.json, moved by vLLM's formula for limits given otherwise.

A run saved without meta.json (a ``vllm bench serve`` result or a GuideLLM report alone, as most users hold them) is
given its engine as validate-serving takes it: ``--serve-command "vllm serve MODEL ..."`` and ``--vllm-version``,
read into meta.json's form (validate/serve_command.py; the model is the log's where the line names none), vLLM
serve's limits for the card ``--gpu`` names where the line gives none. Without a meta.json beside the trace and
without those flags, or with one that is not a real run's (no ``engine_kwargs``, as llmsched's own output folders),
nothing is taken; a client log that names its model then says so on stderr. A real run's meta.json that cannot be
read is an error naming it and its field.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..hardware.kv_sizing import gpu_named_in
from ..run_config import DEFAULTS, check_field
from ..run_field import Origin
from ..workload.traces.bench_command import bench_client
from ..workload.traces.bench_prefixes import dataset_settings, sharing
from ..workload.traces.readers import DataFileNotFound, resolve_data_file
from ..workload.traces.server_log import client_where, log_client
from .serving import SCHEDULER, decode_pool_fields, engine_fields
from .serving_run import read_run_folder

# the run fields taken from the run, in the order the note names them
TAKEN = ("model", "gpu", "tp", "dp", "expert_parallel", "router", "max_num_seqs", "max_num_batched_tokens",
         "max_model_len", "block_size", "gpu_memory_utilization", "kv_cache_dtype", "prefix_caching", "front_end",
         "stream_interval")
DP_GROUP = ("dp", "expert_parallel", "router")  # one server of DP ranks: not with replicas or an autoscaler
OWN_POOLS = ("fleet", "disaggregate")  # runs whose pools carry their own model, GPU and limits
CAPTURE_LIMITS = ("max_num_seqs", "max_num_batched_tokens")  # what vLLM's CUDA graph sizes follow


@dataclass
class TraceMeta:
    """What a simulation of a trace takes from the run it was captured from: ``taken`` (run field -> value, each
    checked as if written in meta.json), ``kept`` (fields the user gave -> the run's value, which they override),
    ``notes`` (what could not be taken, and why)."""

    path: Path
    given_by: str | None = None  # "--serve-command": the run's arguments came from the command line, not meta.json
    taken: dict = field(default_factory=dict)
    kept: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def origin(self) -> Origin:
        return Origin.file(self.source)

    @property
    def source(self) -> str:
        return str(self.path) if self.given_by is None else "--serve-command / --vllm-version"

    def note(self) -> str:
        """One line: what came from meta.json, what the user's own values replaced, what was left out."""
        taken = ", ".join(f"{k} {shown(v)}" for k, v in self.taken.items()) or "nothing"
        line = f"settings from {self.source} (the run the trace was captured from): {taken}"
        if self.kept:
            kept = ", ".join(f"{k} (run: {shown(v)})" for k, v in self.kept.items())
            line += f"; given here instead of the run's: {kept}"
        return line + "".join(f"; {n}" for n in self.notes)

    def record(self) -> dict:
        """The record a run's summary.json keeps (``run.trace_meta``)."""
        return {"file": self.source, "taken": dict(self.taken), "kept": dict(self.kept), "notes": list(self.notes)}


def client_log_model(trace: str) -> str | None:
    """The model a client's JSON log names (a vllm bench serve result's ``model_id``, a GuideLLM report's backend
    model); None for any other trace (a JSON-lines trace is not read here: it may be long)."""
    from ..workload.traces.server_log import read_server_log
    try:
        path = resolve_data_file(trace)
        return read_server_log(path).model if path.suffix == ".json" else None
    except (ValueError, OSError):
        return None  # not a server log: its reader says what is wrong when the run reads it


def shown(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list) and len(value) > 4:
        return f"[{value[0]}, ..., {value[-1]}] ({len(value)})"
    return str(value).lower() if isinstance(value, bool) else str(value)


def run_meta_of(trace: str) -> Path | None:
    """The meta.json beside ``trace`` where it is a real run's (it has ``engine_kwargs``); None where there is none,
    the trace cannot be found (its reader says so), or the file is another kind of meta.json (llmsched's own
    output folder's)."""
    try:
        path = resolve_data_file(trace).parent / "meta.json"
    except (DataFileNotFound, OSError):
        return None
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e}); it sits beside the trace {trace}, so it is read as the "
                         f"engine arguments of the run the trace was captured from: fix it or move it") from None
    return path if isinstance(meta, dict) and "engine_kwargs" in meta else None


def trace_meta(given: dict, with_scheduler: bool, serve: dict | None = None) -> TraceMeta | None:
    """The settings ``given`` (the user's run fields, a ``trace`` among them) takes from the run the trace was
    captured from; None where the trace has no real run's meta.json beside it and no ``serve`` is given.
    ``with_scheduler``: take vLLM's policy too (a command of one scheduler that the user did not name). ``serve``:
    the engine arguments of a run saved without meta.json (``--serve-command``, ``--vllm-version``), read as its
    meta.json would be; with a meta.json beside the trace it is an error (one or the other)."""
    path = run_meta_of(given["trace"])
    if path is None and serve is None:
        return None
    folder = resolve_data_file(given["trace"]).parent
    if path is None:
        path = folder / "meta.json"
        if path.is_file():  # llmsched's own output folder's meta.json: not the run's engine arguments
            raise ValueError(f"{path}: the meta.json beside the trace is a simulation's, not the run's engine "
                             f"arguments; --serve-command and --vllm-version stand for a run saved without one: "
                             f"move the trace to a folder of its own")
    found = TraceMeta(path, given_by="--serve-command" if serve is not None else None)
    pools = [k for k in OWN_POOLS if given.get(k)]
    if pools:
        found.notes.append(f"nothing taken: the pools of {', '.join(pools)} carry their own settings")
        return found
    run = read_run_folder(folder, client_log_model(given["trace"]) if serve is not None else None, serve)
    named = len(gpu_named_in(run.args.gpu)) == 1
    if not named and not (given.get("gpu") or given.get("gpu_spec")):
        said = f"its gpu {run.args.gpu!r} names no one GPU preset" if run.args.gpu else "it names no GPU"
        found.notes.append(f"gpu not taken ({said}): give --gpu")
    try:
        run.model_spec()
        model = None
    except ValueError:
        if not given.get("model"):
            raise
        model = given["model"]  # the run's own model is not one llmsched reads: the one given stands for it
    # the run's own values (its GPU where meta.json names one, else the one given: vLLM serve's limits are the card's)
    fields = engine_fields(run, None if named else given.get("gpu") or DEFAULTS["gpu"],
                           given.get("batch_time", DEFAULTS["batch_time"]),
                           given.get("batch_time_params"), model)
    grouped = [k for k in ("replicas", "autoscaler") if given.get(k) not in (None, 1)]
    for key in TAKEN:
        value, mine = fields[key], "gpu_spec" if key == "gpu" and "gpu_spec" in given else key
        if key == "gpu" and not named:
            continue
        if mine in given:
            if given[mine] != value:
                found.kept[mine] = value
        elif key in DP_GROUP and grouped and value != DEFAULTS[key]:
            found.notes.append(f"{key} {shown(value)} not taken: {' and '.join(grouped)} given")
        elif value != DEFAULTS[key]:
            found.taken[key] = check_field(key, value, found.origin)
    params = dict(fields["batch_time_params"])
    if any(k in given for k in CAPTURE_LIMITS) and "capture_sizes" not in (given.get("batch_time_params") or {}):
        params.pop("capture_sizes", None)  # vLLM's sizes for the run's limits, not for the ones given here
    if params != (given.get("batch_time_params") or {}):
        found.taken["batch_time_params"] = params
    if resolve_data_file(given["trace"]).suffix == ".jsonl" and "latency_boundary" not in given:
        found.taken["latency_boundary"] = "engine"  # where a requests.jsonl measured (server_log.py)
    if run.args.disaggregation is not None:  # a 1P1D run: its layout, the decode instance's pool and the link
        pd = run.args.disaggregation
        decode_gpu = None if len(gpu_named_in(pd.decode.gpu)) == 1 else given.get("gpu") or DEFAULTS["gpu"]
        decode_pool = decode_pool_fields(run, decode_gpu, given.get("batch_time", DEFAULTS["batch_time"]),
                                         given.get("batch_time_params"), model)
        for key in [k for k in decode_pool if k in given or (k == "gpu" and "gpu_spec" in given)]:
            del decode_pool[key]  # given here: the value given serves both pools
        if not (with_scheduler and "scheduler" not in given):  # its token budget is vllm-chunked's parameter
            del decode_pool["scheduler_params"]
            found.notes.append("the decode instance's token budget not taken: a pool's scheduler parameters are "
                               "its scheduler's, and the schedulers here are the command's")
        pd_taken = {"disaggregate": "1P1D", "kv_link": pd.kv_link, "kv_connector": "nixl", "decode_pool": decode_pool}
        for key, value in pd_taken.items():
            if key in given:
                found.kept[key] = value
            else:
                found.taken[key] = check_field(key, value, found.origin)
    if with_scheduler and "scheduler" not in given:
        found.taken["scheduler"] = SCHEDULER
    budget = given.get("max_num_batched_tokens", fields["max_num_batched_tokens"])
    found.taken["scheduler_params"] = with_table(given.get("scheduler_params") or {}, SCHEDULER,
                                                 {"token_budget": budget})
    shared = shared_dataset(given["trace"], given.get("bench_command"))
    if shared:
        found.notes.append(shared)
    return found


def shared_dataset(trace: str, command: str | None = None) -> str | None:
    """A note naming the prefix-sharing bench dataset that ``command`` (``--bench-command``) or the
    meta.json beside ``trace`` names in its ``client`` (the replay gives the prompts its prefixes:
    workload/traces/bench_prefixes.py); None where it names none."""
    log = resolve_data_file(trace)
    client = log_client(log, bench_client(str(command)) if command else None)
    said = sharing(dataset_settings(client, client_where(log, client))) if client else None
    return f"prompts from {'--bench-command' if command else 'client.dataset'}: {said}" if said else None


def with_table(params: dict, scheduler: str, values: dict) -> dict:
    """``params`` (a config file's scheduler_params) with ``values`` under ``scheduler``'s table, where the user's
    own table for it does not set them."""
    own = params.get(scheduler)
    rest = {k: v for k, v in params.items() if k != scheduler}  # after the table: a plain KEY=VALUE still wins
    return {scheduler: {**values, **(own if isinstance(own, dict) else {})}, **rest}
