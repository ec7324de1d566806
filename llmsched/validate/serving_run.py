"""A real serving run as a folder: its per-request log, the engine arguments it ran with (``meta.json``) and the
model's ``config.json``, read and checked, as ``llmsched validate-serving`` needs them.

``meta.json`` is the ground-truth schema (../shared/data/ground_truth and tests/data/gpu_runs): ``model``,
``vllm_version`` and ``engine_kwargs`` with vLLM's argument names (``tensor_parallel_size``,
``data_parallel_size``, ``enable_expert_parallel``, ``max_num_seqs``, ``max_num_batched_tokens``,
``max_model_len``, ``dtype``, ``kv_cache_dtype``, ``gpu_memory_utilization``, ``block_size``). Optional, as
llmsched's own captures write them: ``gpu`` (the device's name), ``engine_defaults_seen`` (what vLLM chose:
``num_gpu_blocks``, ``block_size``, ``gpu_memory_utilization``, ``cudagraph_capture_sizes``,
``async_scheduling``, ``enable_prefix_caching``) and ``memory_gib`` (the memory vLLM reported). Prefix caching
is as ``engine_defaults_seen.enable_prefix_caching`` says, else ``engine_kwargs.enable_prefix_caching``, else vLLM
v1's default: on. ``hash_block`` (optional): the tokens each of the log's ``hash_ids`` stands for, 512.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from ..bounds import MAX_BLOCKS, MAX_REQUESTS, MAX_TOKENS
from ..hardware.batch_defaults import SERVE, vllm_batch_defaults
from ..hardware.device_names import near_miss
from ..hardware.front_end import FRONT_ENDS
from ..batchtime.vllm_v1 import cudagraph_capture_sizes
from ..hardware.hf_config import KV_CACHE_DTYPE_BYTES, kv_cache_dtype_bytes
from ..hardware.gpus import GPUS
from ..hardware.kv_sizing import RunMemory, gpu_named_in, run_memory
from ..hardware.models import ModelSpec, model as model_preset
from ..workload.traces.bench_command import bench_client
from ..workload.traces.hash_blocks import HASH_BLOCK
from ..workload.traces.guidellm_report import benchmarks_of, read_guidellm
from ..workload.traces.lifecycle_report import is_lifecycle, read_lifecycle
from ..workload.traces.run_log import LOG_NAMES, run_log
from ..workload.traces.server_log import ServerLog, not_bench, read_json, read_server_log
from .pd_run import Disaggregation, split_instances
from .perf_stages import config_load_type, request_timeout, stage_data
from .serve_command import unread_engine_kwargs

# the run's integer engine arguments, each within the bounds of every number a user gives (bounds.py); a length
# in tokens (max_num_batched_tokens, max_model_len) within MAX_TOKENS
ENGINE_INT_BOUNDS = {"max_num_seqs": MAX_REQUESTS, "num_gpu_blocks": MAX_BLOCKS, "block_size": 4096,
                     "tensor_parallel_size": 64, "data_parallel_size": 1024}

# the per-request logs a folder is read by, in this order (where it also holds inference-perf's stage reports, those
# are its runs, and --log names the per-request one)
DTYPES = ("auto", "bfloat16", "bf16", "float16", "fp16", "half")


@dataclass
class EngineArgs:
    """The engine arguments of one run, with vLLM's names where they are vLLM's."""

    model: str
    vllm_version: str | None
    tensor_parallel_size: int
    data_parallel_size: int
    enable_expert_parallel: bool
    max_num_seqs: int | None            # None: vLLM serve's default for the card (``batch_limits``)
    max_num_batched_tokens: int | None
    max_model_len: int | None
    gpu_memory_utilization: float | None
    block_size: int
    gpu: str | None = None
    memory: RunMemory | None = None     # what vLLM reported of its KV cache, its version and settings
    capture_sizes: list[int] | None = None
    async_scheduling: bool = True
    kv_cache_dtype: str = "auto"
    enable_prefix_caching: bool = True
    front_end: str | None = None  # meta.json's front_end (a preset of hardware/front_end.py), where it names one
    skip_tokenizer_init: bool = False  # prompts went in as token ids and nothing was detokenised
    stream_interval: int = 1
    enable_chunked_prefill: bool = True  # off: prompts run whole (vllm-chunked's chunked_prefill=false)
    enforce_eager: bool = False  # no CUDA graphs: no padding, none in memory (the eager host floor not modelled)
    assumed: bool = False  # no meta.json: vLLM serve's defaults taken for the log's model (``serve_defaults``)
    given_by: str | None = None  # where the arguments came from when not a meta.json: "--serve-command"
    disaggregation: Disaggregation | None = None  # a 1P1D run: these are the prefill instance's (validate/pd_run.py)


@dataclass
class RunFolder:
    """A real run's engine side, without its log: the folder, meta.json's engine arguments, the model's
    config.json (what ``simulate --trace`` takes from the run a trace was captured from)."""

    folder: Path
    args: EngineArgs
    config: Path | None

    @property
    def front_end(self) -> str:
        """The front end the run's client went through: meta.json's ``front_end``, else vLLM's engine client in
        process (token ids, no detokenisation) when the engine ran with ``skip_tokenizer_init``, else ``vllm
        serve``."""
        if self.args.front_end:
            return self.args.front_end
        return "vllm-async-llm" if self.args.skip_tokenizer_init else "vllm-serve"

    def model_spec(self, given: str | None = None) -> tuple[ModelSpec, str]:
        """The model at the run's tensor, data and expert parallelism, and the name a RunConfig takes: ``given``, else the
        ``config.json`` (where llmsched reads config files), else the preset named like meta.json's model."""
        tried = []
        for name in ([given] if given else []) + ([str(self.config)] if self.config else []) + [self.args.model]:
            try:
                spec = model_preset(name)
            except ValueError:
                tried.append(name)
                continue
            args = self.args
            ep = args.enable_expert_parallel and spec.is_moe
            kv_bytes = kv_cache_dtype_bytes(args.kv_cache_dtype)
            if kv_bytes is not None:
                spec = replace(spec, kv_dtype_bytes=kv_bytes)
            return spec.with_parallel(tp=args.tensor_parallel_size, dp=args.data_parallel_size,
                                      expert_parallel=ep), name
        where = self.config or (self.folder / "meta.json" if not (self.args.assumed or self.args.given_by) else
                                f"{self.folder.resolve()} (the log's model_id, or --serve-command's model)")
        raise ValueError(f"{where}: model {self.args.model!r} is neither a config.json llmsched reads nor a preset "
                         f"(tried {', '.join(map(repr, tried))}); put its config.json in the run's folder, or give "
                         f"--model PRESET or a shipped Hugging Face id")


@dataclass
class ServingRun(RunFolder):
    """A real run: its engine side and its per-request log (or a report of its latencies)."""

    name: str
    log: ServerLog

    @property
    def boundary(self) -> str:
        """Where the log's latencies were measured: "engine" or "client"."""
        return self.log.boundary


def load_run(folder, log_name: str | None = None, boundary: str | None = None,
             benchmark: int | None = None, serve: dict | None = None, bench: str | None = None) -> ServingRun:
    """The run in ``folder``: ``log_name`` (default requests.jsonl, else the one ``*.json`` bench result there),
    ``meta.json`` and ``config.json`` (optional when the model is a preset). ``boundary``: where to compare, "engine"
    or "client" (default: where the log measured; a requests.jsonl with the client's stamps can be read at either).
    ``benchmark``: which benchmark of a GuideLLM report of several. ``serve``: the engine arguments of a run saved
    without meta.json, parsed as meta.json (``serve_command.serve_meta``); ``bench``: its `vllm bench serve` line
    (``--bench-command``: the dataset that gave its prompts their prefixes)."""
    if boundary not in (None, "engine", "client"):
        raise ValueError(f"--latency-boundary {boundary!r}: not a latency boundary; give client or engine")
    as_file = Path(folder).is_file()
    folder, log_name = run_path(folder, log_name)
    log_path = folder / log_name if log_name else run_log(folder)
    if benchmark is not None:
        not_bench(log_path, bench, "a GuideLLM report")
        log = read_guidellm(log_path, read_json(log_path), measured=True, benchmark=benchmark)
    else:
        log = read_server_log(log_path, measured=True, clock=boundary or "engine",
                              client=bench_client(bench) if bench is not None else None,
                              version=(serve or {}).get("vllm_version"))
        log.bench_command = bench
    if boundary == "engine" and log.boundary == "client":
        raise ValueError(f"{log_path}: a {log.format} log measures at the client, not in the engine; compare it "
                         f"client-side (--latency-boundary client, the default for it)")
    engine = read_run_folder(folder, log.model, serve)
    if engine.args.assumed:
        log.notes.append(f"no meta.json: the engine taken as `vllm serve {engine.args.model}` with vLLM's defaults "
                         f"for the card (its batch limits, TP 1, the latest vLLM); write meta.json to replay other "
                         f"engine arguments (or give --serve-command)")
    pd = engine.args.disaggregation
    if pd is not None:
        log.notes.append(f"a 1P1D run ({pd.connector}): replayed as --disaggregate 1P1D, each pool sized from its "
                         f"instance's arguments, each prompt's KV over {pd.kv_link}; the proxy's two local HTTP hops "
                         f"and the decode instance's own rendering of the prompt are not among the front end's "
                         f"terms")
    if engine.args.enforce_eager:
        log.notes.append("enforce_eager: replayed without CUDA graphs (no padding, none in memory); an eager "
                         "engine's host launch work a step is not in vllm-v1, so its steps may come out short")
    name = Path(log_name).stem if as_file else (folder.name or folder.resolve().name)
    name = name if benchmark is None else f"{name}/benchmark-{benchmark}"
    return ServingRun(engine.folder, engine.args, engine.config, name, log)


def run_path(path, log_name: str | None) -> tuple[Path, str | None]:
    """A run given as its folder, or as its log file (``vllm bench serve``'s result, a GuideLLM report): the folder
    and the log's name in it."""
    path = Path(path)
    if path.is_file():
        if log_name:
            raise ValueError(f"{path}: a file, and --log {log_name} names another; give the run's folder with "
                             f"--log, or the log file alone")
        return path.parent, path.name
    if not path.is_dir():
        raise ValueError(f"{path}: no such folder or file; give a run's folder (requests.jsonl or a vllm bench "
                         f"serve result .json, meta.json, config.json) or its log file")
    return path, log_name


def read_run_folder(folder: Path, log_model: str | None = None, serve: dict | None = None) -> RunFolder:
    """The run in ``folder`` without its log: meta.json (checked) and config.json (optional). Without meta.json, a
    log that names its model (``log_model``: a vllm bench serve result's ``model_id``, a GuideLLM report's backend
    model) is taken as that model served by ``vllm serve`` with vLLM's defaults (:func:`serve_defaults`), or with
    ``serve``'s arguments (``--serve-command`` parsed as meta.json); any other log needs one of them."""
    folder = Path(folder)
    meta_path = folder / "meta.json"
    if serve is not None and meta_path.is_file():
        raise ValueError(f"{meta_path}: the run's engine arguments are there, and --serve-command or --vllm-version "
                         f"gives others; those are for a run saved without meta.json (drop one or the other)")
    if not meta_path.is_file() and not log_model and not (serve or {}).get("model"):
        raise ValueError(f"{meta_path}: not found; a run needs its engine arguments (model, tensor_parallel_size, "
                         f"max_num_seqs, max_num_batched_tokens, ...) as in ../shared/data/ground_truth, or a vllm "
                         f"bench serve result that names its model_id or a GuideLLM report whose config.backend "
                         f"names its model (vLLM serve's defaults are then assumed)")
    config = folder / "config.json"
    if config.is_file():
        try:
            shape = json.loads(config.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{config}: not valid JSON ({e}); write the model's Hugging Face config.json there, or "
                             f"remove it to take the model from meta.json (a preset or a shipped Hugging Face id)") \
                from None
        if not isinstance(shape, dict):
            raise ValueError(f"{config}: not a Hugging Face config.json (a JSON object of the model's shape)")
    if meta_path.is_file():
        args = read_meta(meta_path)
    elif serve is not None:
        meta = {**serve, "model": serve.get("model") or log_model}
        args = replace(meta_args(meta, "--serve-command", card_defaults=True), given_by="--serve-command")
    else:
        args = serve_defaults(log_model)
    return RunFolder(folder, args, config if config.is_file() else None)


def serve_defaults(model: str) -> EngineArgs:
    """``vllm serve MODEL`` with nothing else given: TP 1, the latest vLLM, and the batch limits it picks for the
    card, which :func:`batch_limits` fills in once the GPU is known."""
    return EngineArgs(model=model, vllm_version=None, tensor_parallel_size=1, data_parallel_size=1,
                      enable_expert_parallel=False, max_num_seqs=None, max_num_batched_tokens=None,
                      max_model_len=None, gpu_memory_utilization=None, block_size=16, assumed=True)


def batch_limits(args: EngineArgs, device, context: int | None = None) -> tuple[int, int]:
    """The run's ``max_num_seqs`` and ``max_num_batched_tokens``, each vLLM serve's default for ``device`` where
    the run gives none (hardware/batch_defaults.py). Without chunked prefill vLLM raises its default token budget to
    the context length (``args.max_model_len``, else ``context``: the model's)."""
    defaults = vllm_batch_defaults(device, SERVE)
    tokens = args.max_num_batched_tokens or defaults.max_num_batched_tokens
    if not args.max_num_batched_tokens and not args.enable_chunked_prefill:
        tokens = max(tokens, args.max_model_len or context or 0)
    return args.max_num_seqs or defaults.max_num_seqs, tokens


def load_runs(folder, log_name: str | None = None, boundary: str | None = None,
              serve: dict | None = None, bench: str | None = None) -> list[ServingRun]:
    """Every run in ``folder`` (or the one log file named): one per request log (``load_run``), one per benchmark of
    a GuideLLM report, one per stage of inference-perf's lifecycle reports (``stage_N_lifecycle_metrics.json``,
    aggregate percentiles only). ``serve`` and ``bench``: the engine and benchmark of a run without meta.json
    (``load_run``)."""
    given = Path(folder)
    folder, log_name = run_path(given, log_name)

    def one(benchmark: int | None = None) -> ServingRun:
        source, name = (given, None) if given.is_file() else (folder, log_name)
        return load_run(source, name, boundary, benchmark=benchmark, serve=serve, bench=bench)

    if folder.is_dir() and not log_name and not (folder / LOG_NAMES[0]).is_file():
        stages = sorted(folder.glob("stage_*_lifecycle_metrics.json"), key=_stage_number)
        if stages:
            not_bench(stages[0], bench, "an inference-perf lifecycle report")
            runs = [load_stage(folder, path, boundary, serve) for path in stages]
            for i, run in enumerate(runs):  # (what a stage's replay after the ones before needs of them)
                earlier = [r.log for r in runs[:i]]
                if not any(r.concurrency for r in earlier):
                    run.log.before = [(r.rate, r.count, r.drain) for r in earlier]
            return runs
    path = folder / log_name if log_name else (run_log(folder) if folder.is_dir() else None)
    if path is not None and path.suffix == ".json" and path.is_file():
        data = read_json(path)
        if is_lifecycle(data):
            not_bench(path, bench, "an inference-perf lifecycle report")
            return [load_stage(folder, path, boundary, serve)]
        if isinstance(data, dict) and "benchmarks" in data and len(benchmarks_of(path, data)) > 1:
            return [one(benchmark=i) for i in range(len(data["benchmarks"]))]
    return [one()]


def _stage_number(path: Path) -> int:
    match = re.match(r"stage_(\d+)_", path.name)
    return int(match.group(1)) if match else 0


def load_stage(folder: Path, path: Path, boundary: str | None, serve: dict | None = None) -> ServingRun:
    """One stage of an inference-perf run: its lifecycle report (workload/traces/lifecycle_report.py) and the folder's
    meta.json; compared at the client, where inference-perf measures."""
    if boundary == "engine":
        raise ValueError(f"{path}: an inference-perf lifecycle report measures at the client, not in the engine; "
                         f"compare it client-side (--latency-boundary client, the default for it)")
    report = read_lifecycle(path, read_json(path))
    engine = read_run_folder(folder, serve=serve)
    client = (json.loads((folder / "meta.json").read_text()).get("client") or {}) if serve is None else {}
    load = client.get("load_type") or config_load_type(folder) or ("concurrent" if report.concurrency else "constant")
    if load not in ("constant", "poisson", "concurrent"):
        raise ValueError(f"{folder / 'meta.json'}: client.load_type {load!r} is not inference-perf's constant, "
                         f"poisson or concurrent")
    if (load == "concurrent") != bool(report.concurrency):
        raise ValueError(f"{folder / 'meta.json'}: client.load_type {load!r}, but {path.name} "
                         + ("has no load_summary.concurrency (a concurrent stage reports its concurrency_level); "
                            "write the stage's own load type" if load == "concurrent" else
                            f"is a concurrent stage (load_summary.concurrency {report.concurrency}); write "
                            f"\"concurrent\" or leave load_type out"))
    report.load_type = load
    timeout = request_timeout(folder, client)
    if timeout is not None:
        report.timeout = float(timeout)
    if report.failures:
        whose = ("its load.request_timeout" if timeout is not None else
                 "aiohttp's default, which inference-perf keeps without load.request_timeout")
        report.notes.append(f"{report.failures} of {report.count} requests failed (failures.count): the replay sends "
                            f"all {report.count} and aborts those still unanswered {report.timeout:g} s after their "
                            f"send ({whose}); the rest are compared, as the report's successes are")
    report.data, note = stage_data(folder, client)
    if note:
        report.notes.append(note)
    for metric in client.get("not_comparable") or ():  # a figure the client is known to have computed wrongly
        if metric not in report.latency:
            raise ValueError(f"{folder / 'meta.json'}: client.not_comparable names {metric!r}; the comparable "
                             f"latencies are {', '.join(report.latency)}")
        report.latency[metric] = dict.fromkeys(report.latency[metric])
        report.notes.append(f"{metric} not compared: {client.get('not_comparable_why', 'meta.json says so')}")
    return ServingRun(engine.folder, engine.args, engine.config, f"{folder.name}/{path.name.split('_lifecycle')[0]}",
                      report)


def read_meta(path: Path) -> EngineArgs:
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    return meta_args(meta, path)


def meta_args(meta, path, card_defaults: bool = False) -> EngineArgs:
    """The engine arguments of a parsed meta.json; ``path`` names it in errors (a file, or ``--serve-command``).
    ``card_defaults``: batch limits left out are vLLM serve's for the card (``batch_limits``), as a ``vllm serve``
    command without them runs; a meta.json must write them."""
    if not isinstance(meta, dict) or not isinstance(meta.get("engine_kwargs"), dict):
        raise ValueError(f"{path}: needs an \"engine_kwargs\" object with vLLM's engine arguments")
    if "disaggregation" in meta:  # a 1P1D run: each instance's arguments by the rules below
        prefill, decode, connector, kv_link = split_instances(meta, path)
        decode_args = meta_args(decode, f"{path}: disaggregation.decode", card_defaults)
        return replace(meta_args(prefill, path, card_defaults),
                       disaggregation=Disaggregation(decode_args, connector, kv_link,
                                                     tuple(meta["disaggregation"]["decode"])))
    for section in ("engine_defaults_seen", "memory_gib", "kv_cache"):
        if meta.get(section) is not None and not isinstance(meta[section], dict):
            raise ValueError(f"{path}: {section} is {json.dumps(meta[section])}; write an object of what the engine "
                             f"reported (or leave it out)")
    if meta.get("gpu") is not None and not isinstance(meta["gpu"], str):
        raise ValueError(f"{path}: gpu is {json.dumps(meta['gpu'])}; write the device's name as text (e.g. \"NVIDIA "
                         f"H100 80GB HBM3\"), or leave it out and give --gpu")
    kw, seen = meta["engine_kwargs"], meta.get("engine_defaults_seen") or {}
    unread = unread_engine_kwargs(kw)
    if unread:
        raise ValueError(f"{path}: engine_kwargs {', '.join(unread)}: not modelled (the replay would run another "
                         f"engine and not say so); leave out what changes no step, or replay a run without it")

    def need_bool(section: dict, where: str, key: str, default: bool) -> bool:
        value = section.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ValueError(f"{path}: {where}.{key} is {json.dumps(value)}; write true or false (or leave it out: "
                             f"{json.dumps(default)})")
        return value

    def need_int(key: str, low: int = 1, default=None, optional: bool = False):
        value = kw.get(key, seen.get(key, default))
        if value is None and optional:
            return None
        high = ENGINE_INT_BOUNDS.get(key, MAX_TOKENS)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            hint = "vLLM's default for that version" if value is None else f"an integer from {low} to {high:,}"
            raise ValueError(f"{path}: engine_kwargs.{key} is {json.dumps(value)}; write {hint} there")
        return value

    model = kw.get("model") or meta.get("model")
    if not isinstance(model, str) or not model:
        raise ValueError(f"{path}: no model; write engine_kwargs.model (the Hugging Face id)")
    dtype = kw.get("dtype", "auto")
    if dtype is not None and str(dtype).lower() not in DTYPES:
        raise ValueError(f"{path}: engine_kwargs.dtype {dtype!r} is not modelled (16-bit weights only: "
                         f"{', '.join(DTYPES)}; fp8 weights come from the model's config.json)")
    kv_dtype = kw.get("kv_cache_dtype") or "auto"
    if str(kv_dtype).lower() not in KV_CACHE_DTYPE_BYTES:
        raise ValueError(f"{path}: engine_kwargs.kv_cache_dtype {kv_dtype!r} is not one of vLLM's: "
                         f"{', '.join(KV_CACHE_DTYPE_BYTES)}")
    utilization = kw.get("gpu_memory_utilization", seen.get("gpu_memory_utilization"))
    if utilization is not None and (isinstance(utilization, bool) or not isinstance(utilization, (int, float))
                                    or not 0 < utilization <= 1):
        raise ValueError(f"{path}: engine_kwargs.gpu_memory_utilization is {utilization!r}; write a fraction in "
                         f"(0, 1]")
    expert = kw.get("enable_expert_parallel", False)
    if not isinstance(expert, bool):
        raise ValueError(f"{path}: engine_kwargs.enable_expert_parallel is {expert!r}; write true or false")
    sizes = seen.get("cudagraph_capture_sizes")
    if sizes is not None and (not isinstance(sizes, list) or
                              not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes)):
        raise ValueError(f"{path}: engine_defaults_seen.cudagraph_capture_sizes must be a list of positive "
                         f"integers")
    def seen_else_given(key: str, why: str) -> bool:
        """What vLLM chose (engine_defaults_seen), else what was given (engine_kwargs), else on (``why``)."""
        value, where = seen.get(key), "engine_defaults_seen"
        if value is None:
            value, where = kw.get(key), "engine_kwargs"
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{path}: {where}.{key} is {value!r}; write true or false (or leave it out: {why})")
        return True if value is None else value

    caching = seen_else_given("enable_prefix_caching", "vLLM v1 caches prefixes by default")
    chunked = seen_else_given("enable_chunked_prefill", "vLLM v1 chunks prefills by default")
    block = meta.get("hash_block", HASH_BLOCK)
    if block != HASH_BLOCK:
        raise ValueError(f"{path}: hash_block is {block!r}; llmsched reads hash_ids as Mooncake's, one id per "
                         f"{HASH_BLOCK} prompt tokens: capture the run with {HASH_BLOCK}-token blocks")
    version = meta.get("vllm_version")
    front = meta.get("front_end")
    if front is not None and front not in FRONT_ENDS:
        raise ValueError(f"{path}: front_end {front!r} is not a front end llmsched models; write one of "
                         f"{', '.join(FRONT_ENDS)} (or leave it out)")
    interval = kw.get("stream_interval", 1)
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise ValueError(f"{path}: engine_kwargs.stream_interval is {interval!r}; write an integer >= 1 (vLLM's "
                         f"default is 1)")
    return EngineArgs(
        model=model, vllm_version=str(version) if version is not None else None,
        tensor_parallel_size=need_int("tensor_parallel_size", default=1),
        data_parallel_size=need_int("data_parallel_size", default=1), enable_expert_parallel=expert,
        max_num_seqs=need_int("max_num_seqs", optional=card_defaults),
        max_num_batched_tokens=need_int("max_num_batched_tokens", optional=card_defaults),
        max_model_len=need_int("max_model_len", low=2, optional=True),
        gpu_memory_utilization=float(utilization) if utilization is not None else None,
        block_size=need_int("block_size", default=16), gpu=meta.get("gpu"),
        memory=run_memory(meta, path, cudagraph_capture_sizes), capture_sizes=sizes,
        async_scheduling=need_bool(seen, "engine_defaults_seen", "async_scheduling",
                                   need_bool(kw, "engine_kwargs", "async_scheduling", True)),
        kv_cache_dtype=str(kv_dtype).lower(), enable_prefix_caching=caching,
        front_end=front, skip_tokenizer_init=need_bool(kw, "engine_kwargs", "skip_tokenizer_init", False),
        stream_interval=interval, enable_chunked_prefill=chunked,
        enforce_eager=need_bool(kw, "engine_kwargs", "enforce_eager", False))


def gpu_of(run: RunFolder, given: str | None) -> str:
    """The GPU preset: ``given``, else the one meta.json's ``gpu`` names (a preset's name as a word in it)."""
    if given:
        return given
    text = run.args.gpu or ""
    named = gpu_named_in(text)
    if len(named) == 1:
        return named[0]
    miss = near_miss(text, GPUS)
    what = (f"its gpu {text!r} names {'no' if not named else 'more than one'} GPU preset"
            + (f" ({miss})" if miss else "") if text else "it names no GPU")
    where = (f"{run.folder}: no meta.json names the GPU" if run.args.assumed or run.args.given_by else
             f"{run.folder / 'meta.json'}: {what}")
    raise ValueError(f"{where}; give --gpu PRESET (see `llmsched presets`) or --gpu FILE.toml of its datasheet "
                     f"figures")
