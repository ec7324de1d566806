"""The minimum-latency offline schedule of a few requests (Kim et al. §3) from the command's terms, as
``llmsched theory optimal-schedule`` (llmsched/cli/theory_optimal_schedule.py) reports it."""
from __future__ import annotations

from ..batchtime.linear import INFERMAX_COEFFICIENTS, LinearBatchTime
from .infermax.optimal import OptimalReport, optimal_schedule
from .infermax.schedule import Instance


def instance(*, requests: str | None = None, prompt: int | None = None, output: int = 4, count: int = 4,
             kv_slots: int | None = None, batch_tokens: int = 4096, prefill_tokens: int | None = None) -> Instance:
    """The requests as "I:O,..." pairs or ``count`` copies of (``prompt``, ``output``), all at t = 0; ``kv_slots``
    M defaults to max(2·max I, max I+O-1), as §5.1."""
    if (requests is None) == (prompt is None):
        raise ValueError("give the requests either as --requests I:O,... or as --input I (with --output, --count)")
    if requests:
        try:
            pairs = [tuple(int(x) for x in item.split(":")) for item in requests.split(",") if item.strip()]
            if not pairs or any(len(pr) != 2 for pr in pairs):
                raise ValueError
        except ValueError:
            raise ValueError(f"--requests {requests!r}: write I:O pairs separated by commas, e.g. '2:4,3:2'") \
                from None
    else:
        if count < 1:
            raise ValueError(f"--count must be >= 1, got {count}")
        pairs = [(prompt, output)] * count
    inputs, outputs = tuple(i for i, _ in pairs), tuple(o for _, o in pairs)
    M = kv_slots or max(2 * max(inputs), max(i + o - 1 for i, o in pairs))
    return Instance(inputs, outputs, M, batch_tokens, prefill_tokens)


def solve(*, requests: str | None = None, prompt: int | None = None, output: int = 4, count: int = 4,
          kv_slots: int | None = None, batch_tokens: int = 4096, prefill_tokens: int | None = None,
          cost: str = "llama-2-7b/a100", time_limit: float = 30.0, workers: int = 1, horizon: int | None = None,
          chunking: bool = True, brute_force: bool = False) -> OptimalReport:
    """The optimal schedule of :func:`instance`'s requests under InferMax's ``cost`` coefficients (CP-SAT within a
    deterministic ``time_limit``), beside the heuristics, and by exhaustive search where ``brute_force``."""
    problem = instance(requests=requests, prompt=prompt, output=output, count=count, kv_slots=kv_slots,
                       batch_tokens=batch_tokens, prefill_tokens=prefill_tokens)
    if not chunking and max(problem.inputs) > problem.P:
        raise ValueError(f"--no-chunking: a prompt of {max(problem.inputs)} tokens is longer than the {problem.P} "
                         f"prompt tokens a batch takes (--batch-tokens/--prefill-tokens), so no whole-pass schedule "
                         f"exists; drop --no-chunking or raise --batch-tokens")
    model = LinearBatchTime.from_infermax(**INFERMAX_COEFFICIENTS[cost])
    return optimal_schedule(problem, model, time_limit=time_limit, workers=workers, horizon=horizon,
                            chunking=chunking, brute_force=brute_force)
