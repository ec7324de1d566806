"""A ``vllm serve`` command line as a run's engine arguments, for a run saved without meta.json: a ``vllm bench
serve`` result or a GuideLLM report on its own, whose engine ran with more than ``vllm serve MODEL``.

The flags are vLLM's own (``vllm serve --help=all``, checked against vLLM 0.32's parser): each one that changes
what the engine does is either read into meta.json's ``engine_kwargs`` (the same names and checks) or refused,
naming the flag, because the replay would otherwise run a different engine and say nothing. Server, logging and
loading options, which change no step, are passed over. ``--max-model-len`` and ``--kv-cache-memory-bytes`` take
vLLM's human-readable sizes (``32k`` = 32,000, ``32K`` = 32,768, ``8G`` = 8 GiB).
"""
from __future__ import annotations

import re
import shlex

from ..bounds import MAX_BLOCKS, MAX_REQUESTS, MAX_TOKENS

WHERE = "--serve-command"

# vLLM's flag -> (engine_kwargs key, value type, lowest value)
VALUED = {
    "--model": ("model", str, None),
    "--tensor-parallel-size": ("tensor_parallel_size", int, 1), "-tp": ("tensor_parallel_size", int, 1),
    "--data-parallel-size": ("data_parallel_size", int, 1), "-dp": ("data_parallel_size", int, 1),
    "--max-num-seqs": ("max_num_seqs", int, 1),
    "--max-num-batched-tokens": ("max_num_batched_tokens", int, 1),
    "--max-model-len": ("max_model_len", "size", 2),
    "--gpu-memory-utilization": ("gpu_memory_utilization", float, None),
    "--device-memory-utilization": ("gpu_memory_utilization", float, None),
    "--block-size": ("block_size", int, 1),
    "--kv-cache-dtype": ("kv_cache_dtype", str, None),
    "--dtype": ("dtype", str, None),
    "--stream-interval": ("stream_interval", int, 1),
    "--num-gpu-blocks-override": ("num_gpu_blocks", int, 1),
    "--kv-cache-memory-bytes": ("kv_cache_memory_bytes", "size", 1),
}
HIGHEST = {"kv_cache_memory_bytes": 1 << 50, "tensor_parallel_size": 64, "data_parallel_size": 1024,
           "max_num_seqs": MAX_REQUESTS, "num_gpu_blocks": MAX_BLOCKS, "block_size": 4096, "stream_interval": MAX_TOKENS}
SWITCHES = {  # flag -> (engine_kwargs key, value)
    "--enable-expert-parallel": ("enable_expert_parallel", True), "-ep": ("enable_expert_parallel", True),
    "--no-enable-expert-parallel": ("enable_expert_parallel", False),
    "--enable-prefix-caching": ("enable_prefix_caching", True),
    "--no-enable-prefix-caching": ("enable_prefix_caching", False),
    "--async-scheduling": ("async_scheduling", True), "--no-async-scheduling": ("async_scheduling", False),
    "--skip-tokenizer-init": ("skip_tokenizer_init", True), "--no-skip-tokenizer-init": ("skip_tokenizer_init", False),
    "--enforce-eager": ("enforce_eager", True), "--no-enforce-eager": ("enforce_eager", False),
    "--enable-chunked-prefill": ("enable_chunked_prefill", True),
    "--no-enable-chunked-prefill": ("enable_chunked_prefill", False),
}
# flags whose only value llmsched models is vLLM's default: flag -> that value
DEFAULT_ONLY = {"--pipeline-parallel-size": "1", "-pp": "1", "--scheduling-policy": "fcfs"}
SWITCHES_AT_DEFAULT = {"--no-disable-custom-all-reduce"}
# options that change no step: server, logging, loading, tokenizer and chat settings
PASSED_VALUED = {
    "--host", "--port", "--uds", "--api-key", "--load-format", "--download-dir", "--seed", "--uvicorn-log-level",
    "--tokenizer", "--tokenizer-mode", "--revision", "--tokenizer-revision", "--code-revision", "--chat-template",
    "--chat-template-content-format", "--response-role", "--root-path", "--max-log-len", "--tool-call-parser",
    "--reasoning-parser", "--hf-token", "--generation-config", "--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs",
    "--log-config-file", "--config-format", "--max-logprobs", "--data-parallel-size-local", "-dpl",
    "--override-generation-config", "--logprobs-mode",
}
PASSED_LISTS = {"--served-model-name", "--allowed-origins", "--allowed-methods", "--allowed-headers",
                "--ignore-patterns", "--middleware"}
PASSED_SWITCHES = {
    "--trust-remote-code", "--no-trust-remote-code", "--disable-log-requests", "--enable-log-requests",
    "--no-enable-log-requests", "--disable-log-stats", "--no-disable-log-stats", "--disable-uvicorn-access-log",
    "--enable-auto-tool-choice", "--disable-fastapi-docs", "--enable-prompt-tokens-details", "--allow-credentials",
    "--enable-server-load-tracking", "--enable-force-include-usage", "--enable-request-id-headers",
}
# meta.json's engine_kwargs, by the same rules: those a replay reads, those that change no step, and those modelled
# only at vLLM's default; validate-serving refuses any other (``unread_engine_kwargs``)
READ_KEYS = ({key for key, _, _ in VALUED.values()} | {key for key, _ in SWITCHES.values()}
             | {"num_gpu_blocks", "num_gpu_blocks_override", "async_scheduling"})
PASSED_KEYS = {flag[2:].replace("-", "_") for flag in PASSED_VALUED | PASSED_LISTS | PASSED_SWITCHES
               if flag.startswith("--")}
DEFAULT_KEYS = {"pipeline_parallel_size": 1, "scheduling_policy": "fcfs", "quantization": None,
                "speculative_config": None, "long_prefill_token_threshold": 0, "disable_custom_all_reduce": False,
                "kv_transfer_config": None}


def unread_engine_kwargs(kwargs: dict) -> list[str]:
    """The keys of meta.json's ``engine_kwargs`` a replay would leave out: neither read, nor harmless, nor at the
    only value modelled."""
    return sorted(k for k, v in kwargs.items()
                  if k not in READ_KEYS and k not in PASSED_KEYS and not (k in DEFAULT_KEYS and v == DEFAULT_KEYS[k]))


SIZE = re.compile(r"(\d+(?:\.\d+)?)([kmgKMG]?)")
SIZE_UNITS = {"": 1, "k": 10 ** 3, "m": 10 ** 6, "g": 10 ** 9, "K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}


def serve_meta(command: str) -> dict:
    """meta.json's ``model`` and ``engine_kwargs`` as ``command`` (``vllm serve MODEL --flag ...``, or only its
    flags) gives them; ``model`` absent where the command names none."""
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise ValueError(f"{WHERE}: {e}; quote it as a shell would") from None
    words = _arguments(words)
    kwargs: dict = {}
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("-"):
            if "model" in kwargs:
                raise ValueError(f"{WHERE}: {word!r} is a second model (the first is {kwargs['model']!r}); give "
                                 f"one `vllm serve MODEL`")
            kwargs["model"] = word
            i += 1
            continue
        flag, value = _flag(word)
        i += 1
        if flag in VALUED or flag in DEFAULT_ONLY or flag in PASSED_VALUED:
            if value is None:
                if i == len(words) or words[i].startswith("--"):
                    raise ValueError(f"{WHERE}: {flag} needs a value")
                value, i = words[i], i + 1
        elif value is not None:
            raise ValueError(f"{WHERE}: {flag} takes no value (given {value!r})")
        if flag in VALUED:
            key, kind, low = VALUED[flag]
            kwargs[key] = _value(flag, value, kind, low, HIGHEST.get(key, MAX_TOKENS))
        elif flag in SWITCHES:
            key, on = SWITCHES[flag]
            kwargs[key] = on
        elif flag in DEFAULT_ONLY:
            if value.lower() != DEFAULT_ONLY[flag]:
                raise ValueError(f"{WHERE}: {flag} {value} is not modelled (only {DEFAULT_ONLY[flag]}, vLLM's "
                                 f"default); llmsched cannot replay this run")
        elif flag in PASSED_LISTS:
            while i < len(words) and not words[i].startswith("-"):
                i += 1
        elif flag not in PASSED_VALUED | PASSED_SWITCHES | SWITCHES_AT_DEFAULT:
            raise ValueError(f"{WHERE}: {flag} is not modelled (it may change what the engine does, and the replay "
                             f"would ignore it); if it changes no step (a server or logging option), leave it out")
    if "max_model_len" in kwargs and kwargs["max_model_len"] is None:
        del kwargs["max_model_len"]
    meta = {"engine_kwargs": kwargs}
    if "async_scheduling" in kwargs:  # where meta.json has it: what the engine chose
        meta["engine_defaults_seen"] = {"async_scheduling": kwargs.pop("async_scheduling")}
    if "model" in kwargs:
        meta["model"] = kwargs["model"]
    return meta


def _arguments(words: list[str]) -> list[str]:
    """The words after ``vllm serve`` (or ``python -m vllm.entrypoints.openai.api_server``), skipping environment
    assignments before it; all of them where the command is flags alone."""
    for i, word in enumerate(words):
        if word == "serve" and i > 0 and words[i - 1].rsplit("/", 1)[-1] == "vllm":
            return words[i + 1:]
        if word.startswith("vllm.entrypoints") and i > 0 and words[i - 1] == "-m":
            return words[i + 1:]
    start = 0
    while start < len(words) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[start]):
        start += 1
    return words[start:]


def _flag(word: str) -> tuple[str, str | None]:
    """``--max_num_seqs=8`` -> (``--max-num-seqs``, ``"8"``): vLLM's parser takes underscores for dashes."""
    name, eq, value = word.partition("=")
    if name.startswith("--"):
        name = "--" + name[2:].replace("_", "-")
    return name, (value if eq else None)


def _value(flag: str, text: str, kind, low, high):
    if kind is str:
        return text
    if kind == "size":
        if flag == "--max-model-len" and text.lower() in ("auto", "-1"):  # vLLM fits it to memory: the model's here
            return None
        match = SIZE.fullmatch(text)
        if not match:
            raise ValueError(f"{WHERE}: {flag} {text!r} is not a size; write a number (e.g. 32768, 32k or 8G)")
        number = float(match.group(1)) * SIZE_UNITS[match.group(2)]
        if number != int(number):
            raise ValueError(f"{WHERE}: {flag} {text!r} is not a whole number")
        value = int(number)
    elif kind is int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{WHERE}: {flag} {text!r} is not an integer") from None
    else:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{WHERE}: {flag} {text!r} is not a number") from None
        if not 0 < value <= 1:
            raise ValueError(f"{WHERE}: {flag} {text} is not a fraction in (0, 1]")
        return value
    if not low <= value <= high:
        raise ValueError(f"{WHERE}: {flag} {value} is out of range; give {low} to {high:,}")
    return value
