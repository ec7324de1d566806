"""A ``vllm bench serve`` command line as meta.json's ``client``, for a benchmark result saved without meta.json:
which dataset made its prompts, so that a replay gives them the prefixes they shared
(workload/traces/bench_prefixes.py), and what it sent before the run (workload/traces/bench_warmups.py).

A user keeps the result and the line that made it; the result itself (``--save-result``) records the rate,
burstiness and concurrency but not the dataset. The flags read are the dataset's (``--dataset-name``,
``--random-prefix-len``, the ``--prefix-repetition-*`` ones, ``--seed``, ``--disable-shuffle``),
``--num-prompts``, ``--num-warmups`` and ``--ready-check-timeout-sec``; every other flag
changes nothing the replay takes from the line and is passed over. The defaults are vLLM 0.32's (``random``, 1,000
prompts, seed 0, no warm-up), except for the older ``benchmark_serving.py`` script, whose dataset defaulted to
``sharegpt``.
"""
from __future__ import annotations

import re
import shlex

from .bench_prefixes import read_flags
from .bench_warmups import bench_warmups
from .trace_error import TraceError

WHERE = "--bench-command"
DEFAULT_NUM_PROMPTS = 1000  # vllm/benchmarks/datasets/datasets.py


def bench_client(command: str, where: str = WHERE) -> dict:
    """meta.json's ``client`` as ``command`` (``vllm bench serve --flag ...``, the older ``python
    benchmark_serving.py --flag ...``, or the flags alone) gives it; errors begin with ``where`` (none: the caller
    names the option)."""
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise TraceError(said(where, f"{e}; quote it as a shell would")) from None
    words, script = bench_arguments(words, where)
    counts = read_flags(words, where, ("num_prompts",))
    num_prompts = counts.get("num_prompts", DEFAULT_NUM_PROMPTS)
    if num_prompts < 1:
        raise TraceError(said(where, f"--num-prompts {num_prompts}; vllm bench serve sends at least one prompt"))
    settings = read_flags(words, where)  # (checked here, where the error can name the option)
    if script and "dataset" not in settings:
        words = [*words, "--dataset-name", "sharegpt"]
    client = {"tool": "vllm bench serve", "dataset_args": words, "num_prompts": num_prompts, "given_by": WHERE}
    if script:  # (it always sent its first prompt before the run: workload/traces/bench_warmups.py)
        client["script"] = "benchmark_serving.py"
    bench_warmups(client, where)
    return client


def parse_bench_command(text: str) -> dict:
    """``bench_client`` as a run field's parser (the field's error names the option)."""
    return bench_client(text, "")


def said(where: str, text: str) -> str:
    return f"{where}: {text}" if where else text


def bench_arguments(words: list[str], where: str = WHERE) -> tuple[list[str], bool]:
    """The words after ``vllm bench serve`` (or ``benchmark_serving.py``, then True: the older script), skipping
    environment assignments before it; all of them where the command is flags alone. Any other command is refused
    by name."""
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == "benchmark_serving.py":
            return words[i + 1:], True
        if word == "bench" and i > 0 and (words[i - 1].rsplit("/", 1)[-1] == "vllm" or words[i - 1].startswith(
                "vllm.entrypoints")):
            if i + 1 < len(words) and words[i + 1] == "serve":
                return words[i + 2:], False
            raise TraceError(said(where, f"`vllm bench {words[i + 1] if i + 1 < len(words) else ''}` is not the "
                                         f"serving benchmark; give the `vllm bench serve ...` line"))
        if word == "serve" and i > 0 and words[i - 1].rsplit("/", 1)[-1] == "vllm":
            raise TraceError(said(where, "`vllm serve` is the server's line; give it to --serve-command, and the "
                                         "benchmark's `vllm bench serve ...` line here"))
    start = 0
    while start < len(words) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[start]):
        start += 1
    return words[start:], False
