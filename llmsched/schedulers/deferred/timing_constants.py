"""The four timing constants of Mohanty et al. §1.5 and where they come from.

A prefill phase admitting n prompts takes c_p + s_p·n seconds (s_p = t_p·d_0/N, the only identifiable part
of t_p and N row 6) and a decode iteration with X prompts resident takes c_d + t_d·X. The constants
are fitted, as the paper fits them to its measurements (Figs 2–3), either

* to a batch-time model (:func:`timing_from_batch_time`): prefill phases of n prompts of d_0 tokens, split
  into steps by the token budget as the engine would run them, and decode iterations of X prompts at a typical
  context; or
* to measured step records (:func:`timing_from_steps`, the simulator's steps.csv or the same columns from a
  real engine): prefill-only steps and decode-only steps. The fit is per step, not per phase (a per-phase fit would group
  a phase's steps): when the budget splits a refill, every step pays the fixed cost, and grouping would bias
  c_p; with one step per refill, as in the paper's eq. (1), the two agree.

Both go through the foundation's non-negative least squares (:meth:`LinearBatchTime.fit`, absolute loss) and
return its fit reports (R² and errors), so a user can judge it.
"""
from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ...batchtime.base import Batch, BatchTimeModel
from ...batchtime.linear import FitReport, LinearBatchTime


@dataclass(frozen=True)
class Timing:
    """Seconds: prefill phase c_p + s_p·n, decode iteration c_d + t_d·X."""

    c_p: float
    s_p: float
    c_d: float
    t_d: float

    def __post_init__(self):
        for name, value in asdict(self).items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"timing constant {name} must be a finite number of seconds >= 0, got {value!r}")
        if self.c_d + self.t_d <= 0:
            raise ValueError("timing constants c_d and t_d are both 0: a decode iteration must take time")

    @classmethod
    def from_A(cls, c_p: float, c_d: float, A: float, alpha: float, t_d: float = 0.0) -> "Timing":
        """The form back-solved from Table 1: only A = t_d/α + s_p matters to ρ; give t_d to split it."""
        return cls(c_p=c_p, s_p=A - t_d / alpha, c_d=c_d, t_d=t_d)

    def batch_time(self) -> LinearBatchTime:
        """The linear batch-time model these constants describe, for simulating the paper's model."""
        return LinearBatchTime.from_deferred_prefill(c_p=self.c_p, c_d=self.c_d, t_d=self.t_d, s_p=self.s_p)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TimingFit:
    timing: Timing
    prompt_len: float        # d_0 the prefill slope refers to (mean prompt tokens per admitted prompt)
    prefill: FitReport       # over prefill phases (batch-time model) or prefill steps (measured)
    decode: FitReport        # over decode iterations
    source: str


def typical_context(prompt_len: float, alpha: float) -> int:
    """KV tokens a resident prompt attends over on average: its prompt plus about 1/α generated tokens."""
    return max(1, round(prompt_len + 1.0 / alpha))


def timing_from_batch_time(model: BatchTimeModel, C: int, prompt_len: int, alpha: float,
                           max_num_batched_tokens: int | None = None, points: int = 48) -> TimingFit:
    """Fit (c_p, s_p, c_d, t_d) to ``model`` over refills of 1..C prompts of ``prompt_len`` tokens (each phase
    split into steps of at most ``max_num_batched_tokens`` tokens) and decode iterations of 1..C prompts at
    :func:`typical_context`."""
    if C < 1 or prompt_len < 1:
        raise ValueError(f"C and prompt_len must be >= 1, got C={C}, prompt_len={prompt_len}")
    budget = max_num_batched_tokens or C * prompt_len
    per_step = max(1, budget // prompt_len)
    sizes = np.unique(np.linspace(1, C, min(points, C)).round().astype(int))
    phases = []
    for n in sizes:
        steps = [min(per_step, n - i) for i in range(0, n, per_step)]
        phases.append(sum(model.step_time(Batch([prompt_len] * k, [0] * k, [])) for k in steps))
    ctx = typical_context(prompt_len, alpha)
    iters = [model.step_time(Batch([], [], [ctx] * int(x))) for x in sizes]
    return _fit(sizes, sizes * prompt_len, np.array(phases), sizes, np.array(iters), float(prompt_len),
                f"{getattr(model, 'name', '?')} batch-time model, prompts of {prompt_len} tokens, decode context {ctx}")


def timing_from_steps(path_or_columns, prompt_len: float | None = None) -> TimingFit:
    """Fit (c_p, s_p, c_d, t_d) to measured steps (a steps.csv path, or a mapping with its columns
    ``duration``, ``num_prefills``, ``prefill_tokens``, ``num_decodes``). Needs a non-mixing scheduler's steps
    (vllm, deferred-prefill, fastertransformer): steps with both prefills and decodes are ignored. The prefill
    slope is fitted per token and reported per prompt at ``prompt_len`` (default: the mean admitted prompt)."""
    label = str(path_or_columns) if isinstance(path_or_columns, (str, Path)) else "the given step records"
    cols = _read(path_or_columns, label)
    dur, npf, ptok, ndec = cols["duration"], cols["num_prefills"], cols["prefill_tokens"], cols["num_decodes"]
    prefill = (npf > 0) & (ndec == 0)
    decode = (npf == 0) & (ndec > 0)
    if prefill.sum() < 2 or decode.sum() < 2:
        raise ValueError(f"{label}: need at least 2 prefill-only and 2 decode-only steps to fit Mohanty et al.'s timing "
                         f"(found {int(prefill.sum())} and {int(decode.sum())}); record a run of a scheduler that "
                         f"never mixes prefill and decode (vllm, deferred-prefill)")
    d0 = float(ptok[prefill].sum() / npf[prefill].sum()) if prompt_len is None else float(prompt_len)
    return _fit(npf[prefill], ptok[prefill], dur[prefill], ndec[decode], dur[decode], d0,
                f"measured steps ({label})")


def _fit(n, tokens, phase_time, batch, iter_time, d0: float, source: str) -> TimingFit:
    zeros = np.zeros(len(n))
    pre, pre_report = LinearBatchTime.fit(
        {"duration": phase_time, "num_prefills": np.asarray(n, float), "prefill_tokens": np.asarray(tokens, float),
         "num_decodes": zeros}, ("has_prefill", "prefill_tokens"), loss="absolute")
    dec, dec_report = LinearBatchTime.fit(
        {"duration": np.asarray(iter_time, float), "num_decodes": np.asarray(batch, float),
         "num_prefills": np.zeros(len(batch))}, ("has_decode", "per_decode"), loss="absolute")
    cp, cd = pre.coefficients, dec.coefficients
    timing = Timing(c_p=cp["has_prefill"], s_p=cp["prefill_tokens"] * d0, c_d=dec.coefficients["has_decode"],
                    t_d=cd["per_decode"])
    return TimingFit(timing, d0, pre_report, dec_report, source)


def _read(data, label: str) -> dict[str, np.ndarray]:
    need = ("duration", "num_prefills", "prefill_tokens", "num_decodes")
    if isinstance(data, (str, Path)):
        path = Path(data)
        if not path.exists():
            raise FileNotFoundError(f"steps file {path} not found")
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        data = {k: [row.get(k) for row in rows] for k in need} if rows else {}
    missing = [k for k in need if k not in data]
    if missing:
        raise ValueError(f"{label}: column(s) {', '.join(missing)} missing; a steps.csv from `llmsched simulate "
                         f"--out` has them")
    try:
        return {k: np.asarray(data[k], dtype=float) for k in need}
    except (TypeError, ValueError):
        raise ValueError(f"{label}: non-numeric values in the step columns") from None
