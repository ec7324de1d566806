"""Where one ``llmsched simulate`` command's CPU goes: start-up, simulation, summary, writing the files.

Runs the command in this process with ``time.process_time`` around ``experiment.run``, ``summarize`` and
``write_run`` (no profiler, whose overhead would swell the simulation); what is left of the process's CPU time is
start-up (interpreter, imports, parsing) and printing. Run it in a scratch directory, with ``PYTHONPATH`` naming
the checkout to measure:

    PYTHONPATH=/path/to/llmsched python benchmarks/split_simulate.py --scheduler vllm-chunked \\
        --trace ../shared/data/traces/AzureLLMInferenceTrace_conv.csv --out DIR --no-progress
"""
from __future__ import annotations

import os
import resource
import sys
import time

TIMES: dict[str, float] = {}


def timed(module, name: str, label: str) -> None:
    inner = getattr(module, name)

    def wrapper(*args, **kwargs):
        t0 = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            TIMES[label] = TIMES.get(label, 0.0) + time.process_time() - t0
    setattr(module, name, wrapper)


def main() -> int:
    import llmsched.cli as cli
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as cli.main does, before the imports below
    import llmsched.experiment as experiment
    import llmsched.metrics.summary as summary
    import llmsched.metrics.writers as writers
    timed(experiment, "run", "simulation")
    timed(summary, "summarize", "summary")
    timed(writers, "write_run", "writing")
    if hasattr(cli, "run"):  # a checkout whose cli imported run by name
        cli.run = experiment.run
    code = cli.main(["simulate", *sys.argv[1:]])
    use = resource.getrusage(resource.RUSAGE_SELF)
    total = use.ru_utime + use.ru_stime
    parts = "  ".join(f"{k} {v:.2f}" for k, v in TIMES.items())
    print(f"CPU s: total {total:.2f}  start-up and the rest {total - sum(TIMES.values()):.2f}  {parts}",
          file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
