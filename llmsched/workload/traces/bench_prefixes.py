"""Which prompts of a ``vllm bench serve`` run began with the same tokens, from the dataset flags it ran with.

A bench result keeps no prompt, so a replay gives each prompt tokens of its own unless it knows the dataset, and a
dataset made to share prefixes (to measure vLLM's prefix cache) then replays with no cache hit at all. Two of
vLLM's own datasets share them (vllm/benchmarks/datasets/datasets.py, vLLM 0.32):

* ``random`` with ``--random-prefix-len P`` (``RandomDataset``): one random prefix of P tokens before every prompt
  (its ``input_lens`` count the prefix);
* ``prefix_repetition`` (``PrefixRepetitionRandomDataset``): ``--prefix-repetition-num-prefixes K`` random prefixes
  of ``--prefix-repetition-prefix-len`` tokens (defaults 10 and 256), each before ``num_prompts // K`` prompts, made
  prefix by prefix and then shuffled by Python's ``random`` seeded with ``--seed`` (default 0) unless
  ``--disable-shuffle``. The shuffle draws nothing from the prompts' tokens, so the replay repeats it and gives
  each request the prefix it had (tested against vLLM's own ``num_cached_tokens``).

The flags come from meta.json's ``client`` beside the log: ``dataset_args`` (the flags as given to ``vllm bench
serve``), or the same settings by name (``dataset``, ``random_prefix_len``, ``prefix_repetition_prefix_len``,
``prefix_repetition_num_prefixes``, ``seed``, ``disable_shuffle``), as llmsched's captures write them.
"""
from __future__ import annotations

import random
import shlex
from dataclasses import dataclass

import numpy as np

from .trace_error import TraceError

DEFAULTS = {"dataset": "random", "random_prefix_len": 0, "prefix_repetition_prefix_len": 256,
            "prefix_repetition_num_prefixes": 10, "seed": 0, "disable_shuffle": False}


@dataclass(frozen=True)
class BenchPrefixes:
    """Per request of the result, in its order: the prefix it began with (``group``, -1 for none) and its length in
    tokens (``length``, 0 for none); ``note`` says where they came from."""

    group: np.ndarray
    length: np.ndarray
    note: str


def dataset_settings(client: dict, where: str) -> dict:
    """The dataset settings of meta.json's ``client`` (``where`` names it), vLLM's defaults for the rest."""
    settings = dict(DEFAULTS)
    args = client.get("dataset_args")
    if args is not None:
        words = shlex.split(args) if isinstance(args, str) else args
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise TraceError(f"{where}.dataset_args: {args!r}; write vllm bench serve's dataset flags as a list of "
                             f"strings, e.g. [\"--dataset-name\", \"random\", \"--random-prefix-len\", \"512\"]")
        settings.update(read_flags(words, f"{where}.dataset_args"))
    for key in DEFAULTS:  # (the settings by name, as llmsched's captures write them)
        if client.get(key) is not None:
            settings[key] = client[key]
    if client.get("dataset_name") is not None:
        settings["dataset"] = client["dataset_name"]
    used = (("random_prefix_len", 0),) if settings["dataset"] == "random" else (
        ("prefix_repetition_prefix_len", 0), ("prefix_repetition_num_prefixes", 1), ("seed", None),
        ("disable_shuffle", bool)) if settings["dataset"] == "prefix_repetition" else ()
    for key, least in used:  # (only the settings of the dataset the run used: the others changed nothing)
        value = settings[key]
        if least is bool:
            if not isinstance(value, bool):
                raise TraceError(f"{where}: {key} is {value!r}; write true or false")
        elif isinstance(value, bool) or not isinstance(value, int) or (least is not None and value < least):
            raise TraceError(f"{where}: {key} is {value!r}; vllm bench serve takes an integer"
                             + (f" >= {least}" if least is not None else ""))
    return settings


def read_flags(words: list[str], where: str, keys=tuple(DEFAULTS)) -> dict:
    """The settings ``keys`` among vllm bench serve's flags ``words`` (``--flag value`` or ``--flag=value``, dashes
    or underscores, as vLLM's parser takes them; integers but ``dataset``, switches ``disable_shuffle``); the other
    flags are passed over (``where`` names the words in errors; empty: the caller names them)."""
    found, i = {}, 0
    while i < len(words):
        flag, _, inline = words[i].partition("=")
        key = flag[2:].replace("-", "_") if flag.startswith("--") else None
        key = "dataset" if key == "dataset_name" else key
        if key not in keys:
            pass
        elif key == "disable_shuffle":
            found[key] = True
        else:
            value = inline if inline else (words[i + 1] if i + 1 < len(words) else None)
            i += 0 if inline else 1
            at = f"{where}: " if where else ""
            if value is None or (not inline and value.startswith("--")):
                raise TraceError(f"{at}{flag} has no value; write the flags vllm bench serve ran with")
            if key != "dataset":
                try:
                    value = int(value)
                except ValueError:
                    raise TraceError(f"{at}{flag} {value!r} is not an integer; write the flags vllm bench serve ran "
                                     f"with") from None
            found[key] = value
        i += 1
    return found


def sharing(settings: dict) -> str | None:
    """The dataset's prefixes in words (``dataset_settings``' result), or None where its prompts share none."""
    if settings["dataset"] == "random" and settings["random_prefix_len"] > 0:
        return f"random, each prompt after one prefix of {settings['random_prefix_len']} tokens"
    if settings["dataset"] == "prefix_repetition" and settings["prefix_repetition_prefix_len"] > 0:
        return (f"prefix_repetition, {settings['prefix_repetition_num_prefixes']} prefixes of "
                f"{settings['prefix_repetition_prefix_len']} tokens " + (
                    "(unshuffled)" if settings["disable_shuffle"] else f"(shuffled with seed {settings['seed']})"))
    return None


def bench_prefixes(client: dict | None, n: int, prompt_lens: np.ndarray, where: str) -> BenchPrefixes | None:
    """The prefixes the ``n`` requests of a bench result (its ``input_lens``: ``prompt_lens``) began with, from
    meta.json's ``client`` (``where`` names it); None where its dataset shares none or none is named."""
    if not client:
        return None
    s = dataset_settings(client, where)
    if sharing(s) is None:
        return None
    if s["dataset"] == "random":
        length = s["random_prefix_len"]
        group = np.zeros(n, np.int64)
        note = f"every prompt begins with the random dataset's one prefix of {length} tokens (--random-prefix-len)"
    else:
        length, k = s["prefix_repetition_prefix_len"], s["prefix_repetition_num_prefixes"]
        asked = client.get("num_prompts")
        made = k * (asked // k) if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else None
        if n != made if made is not None else n % k:
            raise TraceError(f"{where}: prefix_repetition with {k} prefixes made "
                             + (f"{made} prompts ({k} x num_prompts {asked} // {k})" if made is not None else
                                f"a multiple of {k} prompts")
                             + f", but the log holds {n} requests, so they cannot be matched to their prefixes in "
                               f"send order; replay the vllm bench serve result, which lists every request, or give "
                               f"the run's --prefix-repetition-num-prefixes")
        each = n // k
        by_prefix = np.repeat(np.arange(k, dtype=np.int64), each)  # prefix by prefix, as vLLM makes them
        order = list(range(n))
        if not s["disable_shuffle"]:
            random.Random(s["seed"]).shuffle(order)  # vLLM: random.seed(seed) ... random.shuffle(requests)
        group = by_prefix[order]
        note = (f"prompts begin with one of {k} prefixes of {length} tokens, {each} each, as vllm bench serve's "
                f"prefix_repetition dataset gave them " + ("(unshuffled)" if s["disable_shuffle"] else
                                                            f"(its shuffle repeated with seed {s['seed']})"))
    short = np.flatnonzero(prompt_lens < length)
    if len(short):
        raise TraceError(f"{where}: input_lens[{int(short[0])}] is {int(prompt_lens[short[0]])}, shorter than the "
                         f"dataset's prefix of {length} tokens; the dataset settings are not the run's")
    return BenchPrefixes(group, np.full(n, length, np.int64), note)
