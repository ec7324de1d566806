"""Per-token envelope deadlines and slack (Lyu et al. §3.1).

Token j (0-indexed; token 0 is the first output token) of request i is due at
``d_ij = arrival_i + TTFT_i + j·TPOT_i``. A request's deadline is that of its next
token, ``j = num_generated``, and its slack is that deadline minus now. The envelope
does not depend on progress, so a token emitted early is slack banked for later,
which a TBT (gap) target cannot express (Lyu et al. §2.4). Prefills (j = 0) and
decodes land on one scale: a prefill's slack is its remaining TTFT margin.
"""
from __future__ import annotations

from ...request import Request

DEFAULT_TTFT = 0.5   # Lyu et al. Table 2: BurstGPT / QwenTrace (AzureTrace uses 2 s)
DEFAULT_TPOT = 0.05


def request_slo(req: Request, ttft: float = DEFAULT_TTFT, tpot: float = DEFAULT_TPOT) -> tuple[float, float]:
    """(TTFT, TPOT) targets of ``req``: its own where set, else the defaults given.

    A request with a TBT target and no TPOT target paces its tokens by the TBT target:
    the envelope is the only per-token deadline FairBatching knows.
    """
    slo = req.slo
    return (slo.ttft if slo.ttft is not None else ttft,
            slo.tpot if slo.tpot is not None else slo.tbt if slo.tbt is not None else tpot)


def token_deadline(arrival: float, ttft: float, tpot: float, j: int) -> float:
    """d_ij = arrival + TTFT + j·TPOT (Algorithm 1 line 14)."""
    return arrival + ttft + tpot * j


def slack(req: Request, now: float, ttft: float, tpot: float) -> float:
    """Deadline of the next token (index ``num_generated``) minus ``now`` (Algorithm 1 lines 15-16)."""
    return req.arrival + ttft + tpot * req.num_generated - now
