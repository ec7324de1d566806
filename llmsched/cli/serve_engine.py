"""``--serve-command`` and ``--vllm-version``: the engine arguments of a run saved without meta.json (a ``vllm bench
serve`` result, a GuideLLM report, a trace of one's own), given as the ``vllm serve`` line it ran with, read into
meta.json's form (validate/serve_command.py). ``validate-serving`` replays such runs with them; ``simulate``,
``compare`` and ``sweep`` take them for a ``--trace`` as they take a meta.json beside it."""
from __future__ import annotations

import re

from ..validate.serve_command import serve_meta

SERVE_COMMAND_HELP = ("the `vllm serve MODEL --flag ...` line (or its flags alone) of {what} saved without meta.json: "
                      "tensor/data/expert parallelism, batch limits, memory, KV dtype, prefix caching, chunked "
                      "prefill, eager mode, async scheduling as vLLM's flags say; a flag that changes the engine and "
                      "is not modelled is refused")
VLLM_VERSION_HELP = "the vLLM version of {what} saved without meta.json (default: the latest llmsched models)"


def serve_engine(args) -> dict | None:
    """The engine arguments --serve-command and --vllm-version give, as meta.json holds them; None where neither is
    given."""
    command, version = getattr(args, "serve_command", None), getattr(args, "vllm_version", None)
    if command is None and version is None:
        return None
    meta = serve_meta(command) if command is not None else {"engine_kwargs": {}}
    if version is not None:
        if not re.fullmatch(r"\d+(\.\d+){1,2}\S*", version):
            raise ValueError(f"--vllm-version {version!r}: not a version; give vLLM's, e.g. 0.11.0")
        meta["vllm_version"] = version
    return meta
