"""Linear batch time: ``a + b·new_tokens + c·Σcontext + d·#prefills`` plus optional terms.

The five papers' step-time forms are all special cases (the ``from_*`` constructors spell them out):

* RAD/SLAI, Bari et al.: c0 + c1·τ (or c1·t_col·⌈τ/t_col⌉) + c2·Σ c_j(m_j+c_j) + c3·Σ decode ctx
  + c4·#decodes (§1.6)
* InferMax, Kim et al.: L·[b_o + a_o·τ + 1[P]·(b_p + s_p·#P + a_p·Σ(c²+2mc) + m_p·Σm)
  + 1[D]·(b_d + a_d·Σ ctx + s_d·#D)] (§2.1)
* FairBatching, Lyu et al.: a + b·Σ new tokens + c·Σ context (KV after the step) (§2.1)
* WAIT, Ao et al.: d0 + d1·Σ KV tokens (§1.3)
* deferred prefill, Mohanty et al.: prefill steps c_p + s_p·#prompts (+ t_p/N·Σ prompt tokens);
  decode steps c_d + t_d·#decodes (§1.5)

Terms, per step (``c``/``m`` a prefill chunk's new/cached tokens, ``ctx`` a decode's KV tokens):

* ``const`` 1; ``per_token`` τ = Σ c + #decodes; ``per_context`` Σ (m + c) + Σ ctx (:attr:`Batch.context_sum`);
  ``per_prefill`` #prefill chunks;
* extra: ``per_decode`` #decodes; ``prefill_tokens`` Σ c; ``decode_context`` Σ ctx; ``prefill_attention``
  Σ c·(m + c); ``prefill_cached_attention`` Σ c·m; ``prefill_context`` Σ m; ``has_prefill`` / ``has_decode``
  1 when the step has a prefill chunk / a decode; ``staircase_tokens`` t_col·⌈τ/t_col⌉.

Fitting (:meth:`LinearBatchTime.fit`) reads the simulator's ``steps.csv`` columns: ``duration``,
``prefill_tokens``, ``num_prefills``, ``num_decodes``, ``context_sum``; ``decode_context``,
``prefill_attention``, ``prefill_cached_attention`` and ``prefill_context`` need columns of those names.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from .base import Batch, BatchTimeModel
from .wake import WakeCost

BASE_TERMS = ("const", "per_token", "per_context", "per_prefill")
EXTRA_TERMS = ("per_decode", "prefill_tokens", "decode_context", "prefill_attention", "prefill_cached_attention",
               "prefill_context", "has_prefill", "has_decode", "staircase_tokens")
TERMS = BASE_TERMS + EXTRA_TERMS
# Extra terms that steps.csv's standard columns cannot give: the fit needs a column of the same name.
NEEDS_COLUMN = ("decode_context", "prefill_attention", "prefill_cached_attention", "prefill_context")
STEP_COLUMNS = ("duration", "prefill_tokens", "num_prefills", "num_decodes", "context_sum")

# Kim et al. §2.2 [C]: InferMax's per-layer coefficients (seconds), hard-coded in the authors' code
# (vidur/execution_time_predictor/sklearn_execution_time_predictor.py), fitted to Vidur's A100 profiles.
# Use with LinearBatchTime.from_infermax(**INFERMAX_COEFFICIENTS[name]).
INFERMAX_COEFFICIENTS = {
    "llama-2-7b/a100": dict(layers=32, a_o=0.00191e-3, b_o=0.06486e-3, a_d=8.513e-9, b_d=0.01921e-3,
                            a_p=1.6773e-10, b_p=0.0926e-3, s_p=0.001534e-3, s_d=0.00074e-3, m_p=9.224e-9),
    "llama-3-70b-tp4/a100": dict(layers=80, a_o=0.002e-3, b_o=0.159e-3, a_d=1.222e-9, b_d=0.081e-3,
                                 a_p=4.309e-11, b_p=0.2112e-3, s_p=9.03e-7, s_d=3.92e-7, m_p=3.805e-10),
}


@dataclass(frozen=True)
class FitReport:
    """How well a fitted linear model reproduces the durations it was fitted to (seconds)."""

    n: int
    terms: tuple[str, ...]
    loss: str
    r2: float
    mae: float
    mape: float           # mean absolute % error
    max_abs_error: float
    max_ape: float        # max absolute % error

    def as_dict(self) -> dict:
        return {**asdict(self), "terms": list(self.terms)}

    def __str__(self) -> str:
        return (f"{self.n} steps, R²={self.r2:.4f}, mean abs error {self.mae * 1e3:.3f} ms, "
                f"MAPE {self.mape:.2f}%, max error {self.max_abs_error * 1e3:.3f} ms ({self.max_ape:.1f}%)")


class LinearBatchTime(BatchTimeModel):
    """``const + per_token·τ + per_context·Σcontext + per_prefill·#prefills + Σ extra[k]·term_k`` seconds."""

    name = "linear"
    decode_sum_only = True  # step_time reads decodes through len() and sum() only

    def __init__(self, const: float = 0.0, per_token: float = 0.0, per_context: float = 0.0,
                 per_prefill: float = 0.0, extra: Mapping[str, float] | None = None, *, t_col: int = 128,
                 source: str = ""):
        extra = dict(extra or {})
        unknown = sorted(set(extra) - set(EXTRA_TERMS))
        if unknown:
            raise ValueError(f"unknown linear term(s) {', '.join(unknown)}; extra terms: {', '.join(EXTRA_TERMS)}")
        coefficients = {"const": const, "per_token": per_token, "per_context": per_context,
                        "per_prefill": per_prefill, **extra}
        for term, value in coefficients.items():
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"linear coefficient {term} must be a finite number >= 0, got {value!r}")
        if t_col <= 0:
            raise ValueError(f"t_col must be positive, got {t_col}")
        self.coefficients = {term: float(coefficients.get(term, 0.0)) for term in TERMS}
        self.t_col, self.source = int(t_col), source
        c = self.coefficients
        self._a, self._b, self._c, self._d = c["const"], c["per_token"], c["per_context"], c["per_prefill"]
        self._has_extra = any(c[t] for t in EXTRA_TERMS)
        self._prefill_extra = any(c[t] for t in ("prefill_attention", "prefill_cached_attention"))

    # --- prediction ---------------------------------------------------------------------------------------
    def step_time(self, batch: Batch) -> float:
        prefill_new, prefill_ctx, decode_ctx = batch.prefill_new, batch.prefill_ctx, batch.decode_ctx
        n_decodes, n_prefills = len(decode_ctx), len(prefill_new)
        new = sum(prefill_new)
        tokens = new + n_decodes
        if tokens == 0:
            return 0.0
        decode_sum = sum(decode_ctx)
        cached = sum(prefill_ctx)
        t = self._a + self._b * tokens + self._c * (decode_sum + cached + new) + self._d * n_prefills
        if not self._has_extra:
            return t
        c = self.coefficients
        t += (c["per_decode"] * n_decodes + c["prefill_tokens"] * new + c["decode_context"] * decode_sum
              + c["prefill_context"] * cached)
        if n_prefills:
            t += c["has_prefill"]
        if n_decodes:
            t += c["has_decode"]
        if c["staircase_tokens"]:
            t += c["staircase_tokens"] * (-(-tokens // self.t_col) * self.t_col)
        if self._prefill_extra:
            attention = cached_attention = 0
            for chunk, m in zip(prefill_new, prefill_ctx):
                attention += chunk * (m + chunk)
                cached_attention += chunk * m
            t += c["prefill_attention"] * attention + c["prefill_cached_attention"] * cached_attention
        return t

    def describe(self) -> dict:
        about = {"name": self.name, "coefficients": {k: v for k, v in self.coefficients.items() if v},
                 "t_col": self.t_col, "source": self.source}
        if self.wake is not None:
            about["wake"] = self.wake.to_dict()
        return about

    # --- the papers' forms ----------------------------------------------------------------------------------
    @classmethod
    def from_rad(cls, c0: float, c1: float, c2: float = 0.0, c3: float = 0.0, c4: float = 0.0,
                 staircase_t_col: int | None = None) -> "LinearBatchTime":
        """Bari et al. §1.6: c0 + c1·τ + c2·Σ c_j(i_j+c_j−1) + c3·Σ decode ctx + c4·#decodes (seconds); with
        ``staircase_t_col`` τ becomes t_col·⌈τ/t_col⌉."""
        token_term = {"staircase_tokens": c1} if staircase_t_col else {}
        return cls(const=c0, per_token=0.0 if staircase_t_col else c1,
                   extra={**token_term, "prefill_attention": c2, "decode_context": c3, "per_decode": c4},
                   t_col=staircase_t_col or 128, source="Bari et al. §1.6 (RAD/SLAI simulator form)")

    @classmethod
    def from_infermax(cls, layers: int, a_o: float, b_o: float, a_d: float, b_d: float, a_p: float, b_p: float,
                      s_p: float = 0.0, s_d: float = 0.0, m_p: float = 0.0) -> "LinearBatchTime":
        """Kim et al. §2.1, per-layer coefficients (seconds) times ``layers``:
        L·[b_o + a_o·Σc + 1[P](b_p + s_p·#P + a_p·Σ(c²+2mc) + m_p·Σm) + 1[D](b_d + a_d·Σctx + s_d·#D)].
        c² + 2mc = c(m+c) + c·m, so a_p goes on both prefill-attention terms."""
        L = layers
        return cls(const=L * b_o, per_token=L * a_o, per_prefill=L * s_p,
                   extra={"has_prefill": L * b_p, "prefill_attention": L * a_p, "prefill_cached_attention": L * a_p,
                          "prefill_context": L * m_p, "has_decode": L * b_d, "decode_context": L * a_d,
                          "per_decode": L * s_d},
                   source="Kim et al. §2.1 (InferMax per-layer cost model)")

    @classmethod
    def from_fairbatching(cls, a: float, b: float, c: float) -> "LinearBatchTime":
        """Lyu et al. §2.1: a + b·Σ new tokens + c·Σ context (KV after the step)."""
        return cls(const=a, per_token=b, per_context=c, source="Lyu et al. §2.1 (FairBatching step-time predictor)")

    @classmethod
    def from_wait(cls, d0: float, d1: float) -> "LinearBatchTime":
        """Ao et al. §1.3 eq. (1): d0 + d1·Σ KV tokens of the batch's prompts."""
        return cls(const=d0, per_context=d1, source="Ao et al. §1.3 (WAIT iteration time)")

    @classmethod
    def from_deferred_prefill(cls, c_p: float, c_d: float, t_d: float, s_p: float = 0.0,
                              t_p_per_token: float = 0.0) -> "LinearBatchTime":
        """Mohanty et al. §1.5: a prefill step costs c_p + s_p·#prompts (+ t_p/N·Σ prompt tokens as
        ``t_p_per_token``), a decode step c_d + t_d·#decodes (the engine never mixes them)."""
        return cls(per_prefill=s_p, extra={"has_prefill": c_p, "prefill_tokens": t_p_per_token, "has_decode": c_d,
                                           "per_decode": t_d},
                   source="Mohanty et al. §1.5 (deferred-prefill timing model)")

    # --- persistence --------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        data = {"kind": "linear", "coefficients": dict(self.coefficients), "t_col": self.t_col, "source": self.source}
        if self.wake is not None:
            data["wake"] = self.wake.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> "LinearBatchTime":
        coefficients = dict(data.get("coefficients", {}))
        unknown = sorted(set(coefficients) - set(TERMS))
        if unknown:
            raise ValueError(f"unknown linear term(s) {', '.join(unknown)}; terms: {', '.join(TERMS)}")
        base = {term: coefficients.pop(term, 0.0) for term in BASE_TERMS}
        model = cls(**base, extra=coefficients, t_col=data.get("t_col", 128), source=data.get("source", ""))
        if data.get("wake") is not None:
            model.wake = WakeCost.from_dict(data["wake"])
        return model

    def save(self, path: str | Path, report: FitReport | None = None) -> None:
        data = self.to_dict()
        if report is not None:
            data["fit"] = report.as_dict()
        Path(path).write_text(json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "LinearBatchTime":
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"linear batch-time file {path} not found")
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not a linear batch-time JSON file ({e})") from None

    # --- fitting ------------------------------------------------------------------------------------------
    @classmethod
    def fit(cls, data: str | Path | Mapping[str, Iterable[float]], terms: Iterable[str] = BASE_TERMS, *,
            loss: str = "relative", t_col: int = 128) -> tuple["LinearBatchTime", FitReport]:
        """Fit the coefficients of ``terms`` to measured steps; returns the model and a :class:`FitReport`.

        ``data``: a steps.csv path, or a mapping of column name → values with the same columns.
        Method: non-negative least squares (Lawson–Hanson active set), on columns scaled to unit norm.
        ``loss="relative"`` (default) divides every row by its measured duration, so the fit minimises the
        squared *relative* errors and short decode steps count as much as long prefill steps;
        ``loss="absolute"`` is ordinary least squares in seconds.
        """
        terms = tuple(terms)
        unknown = [t for t in terms if t not in TERMS]
        if unknown or not terms:
            raise ValueError(f"unknown linear term(s) {', '.join(unknown) or '(none given)'}; terms: {', '.join(TERMS)}")
        if loss not in ("relative", "absolute"):
            raise ValueError(f"loss must be 'relative' or 'absolute', got {loss!r}")
        label = str(data) if isinstance(data, (str, Path)) else "the given arrays"
        columns = _read_steps_csv(data) if isinstance(data, (str, Path)) else \
            {k: np.asarray(list(v) if not hasattr(v, "__len__") else v, dtype=float) for k, v in data.items()}
        X, y = _design(columns, terms, t_col, label)
        weights = 1.0 / y if loss == "relative" else np.ones_like(y)
        A = X * weights[:, None]
        norms = np.linalg.norm(A, axis=0)
        norms[norms == 0] = 1.0
        coef = nnls(A / norms, y * weights) / norms
        fitted = dict(zip(terms, (float(v) for v in coef)))
        base = {t: fitted.pop(t, 0.0) for t in BASE_TERMS}
        model = cls(**base, extra=fitted, t_col=t_col, source=f"least-squares fit ({loss}) to {label}")
        return model, _report(X @ coef, y, terms, loss)

    @classmethod
    def approximate(cls, model: BatchTimeModel, terms: Iterable[str] = BASE_TERMS, *, max_tokens: int = 2048,
                    max_context: int = 8192, max_decodes: int = 256, loss: str = "relative",
                    t_col: int = 128) -> tuple["LinearBatchTime", FitReport]:
        """Fit a linear model to another batch-time model over a grid of batch compositions: decode-only
        steps (1..max_decodes requests, contexts up to max_context), prefill-only steps (chunks up to
        max_tokens over 0..max_context cached tokens) and mixed steps (a chunk plus decodes)."""
        batches = list(composition_grid(max_tokens, max_context, max_decodes))
        columns = batch_columns(batches)
        columns["duration"] = np.array([model.step_time(b) for b in batches])
        fitted, report = cls.fit(columns, terms, loss=loss, t_col=t_col)
        about = model.describe()
        fitted.source = (f"linear approximation of {model.name} ({about.get('model', '?')} on {about.get('gpu', '?')}) "
                         f"over {len(batches)} batch compositions")
        return fitted, report


def composition_grid(max_tokens: int = 2048, max_context: int = 8192, max_decodes: int = 256):
    """Batches spanning what a serving engine runs: decode-only, prefill-only and mixed."""
    if min(max_tokens, max_context, max_decodes) < 1:
        raise ValueError("max_tokens, max_context and max_decodes must be >= 1")
    def powers(top: int, start: int = 1) -> list[int]:
        return [v for v in (start << k for k in range(24)) if v <= top]

    contexts = sorted({*powers(max_context, 128), max_context})
    decodes = sorted({*powers(max_decodes), max_decodes})
    chunks = sorted({*powers(max_tokens, 16), max_tokens})
    for n in decodes:
        for ctx in contexts:
            yield Batch([], [], [ctx] * n)
    for c in chunks:
        for m in [0, *contexts]:
            if m + c <= max(max_context, c):
                yield Batch([c], [m], [])
    for c in chunks[::2]:
        for n in decodes[::2]:
            yield Batch([c], [contexts[len(contexts) // 2]], [contexts[len(contexts) // 3]] * n)


def batch_columns(batches: list[Batch]) -> dict[str, np.ndarray]:
    """The steps.csv columns, and the extra-term columns, of a list of batches."""
    cols = {name: [] for name in ("prefill_tokens", "num_prefills", "num_decodes", "context_sum", *NEEDS_COLUMN)}
    for b in batches:
        cols["prefill_tokens"].append(sum(b.prefill_new))
        cols["num_prefills"].append(len(b.prefill_new))
        cols["num_decodes"].append(len(b.decode_ctx))
        cols["context_sum"].append(b.context_sum)
        cols["decode_context"].append(sum(b.decode_ctx))
        cols["prefill_attention"].append(sum(c * (m + c) for c, m in zip(b.prefill_new, b.prefill_ctx)))
        cols["prefill_cached_attention"].append(sum(c * m for c, m in zip(b.prefill_new, b.prefill_ctx)))
        cols["prefill_context"].append(sum(b.prefill_ctx))
    return {k: np.asarray(v, dtype=float) for k, v in cols.items()}


def _read_steps_csv(path: str | Path) -> dict[str, np.ndarray]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"steps file {path} not found")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        names = reader.fieldnames or []
        values: dict[str, list[float]] = {n: [] for n in names}
        for row in reader:
            for n in names:
                try:
                    values[n].append(float(row[n]))
                except (TypeError, ValueError):
                    values[n].append(math.nan)   # non-numeric columns are fine unless a term needs them
    return {n: np.asarray(v) for n, v in values.items()}


def _design(columns: Mapping[str, np.ndarray], terms: tuple[str, ...], t_col: int, label: str):
    def need(name: str, why: str) -> np.ndarray:
        if name not in columns:
            raise ValueError(f"{label}: column {name!r} is missing (needed by {why}); columns present: "
                             f"{', '.join(sorted(columns)) or 'none'}")
        col = np.asarray(columns[name], dtype=float)
        if not np.all(np.isfinite(col)):
            bad = int(np.flatnonzero(~np.isfinite(col))[0])
            raise ValueError(f"{label}: column {name!r} has a missing or non-numeric value at row {bad + 1}")
        return col

    y = need("duration", "every fit")
    if len(y) == 0:
        raise ValueError(f"{label}: no steps to fit")
    if np.any(y <= 0):
        raise ValueError(f"{label}: duration must be > 0 s (row {int(np.flatnonzero(y <= 0)[0]) + 1})")
    cols = []
    for term in terms:
        why = f"term {term!r}"
        if term == "const":
            col = np.ones_like(y)
        elif term in ("per_token", "staircase_tokens"):
            col = need("prefill_tokens", why) + need("num_decodes", why)
            if term == "staircase_tokens":
                col = np.ceil(col / t_col) * t_col
        elif term == "per_context":
            col = need("context_sum", why)
        elif term == "per_prefill":
            col = need("num_prefills", why)
        elif term == "per_decode":
            col = need("num_decodes", why)
        elif term == "prefill_tokens":
            col = need("prefill_tokens", why)
        elif term == "has_prefill":
            col = (need("num_prefills", why) > 0).astype(float)
        elif term == "has_decode":
            col = (need("num_decodes", why) > 0).astype(float)
        else:                                    # NEEDS_COLUMN: a column of the term's own name
            col = need(term, why + f" (Σ per step; add a {term!r} column to the steps file)")
        if len(col) != len(y):
            raise ValueError(f"{label}: column lengths differ ({len(col)} vs {len(y)} durations)")
        cols.append(col)
    return np.column_stack(cols), y


def _report(predicted: np.ndarray, y: np.ndarray, terms: tuple[str, ...], loss: str) -> FitReport:
    err = predicted - y
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(err @ err) / total if total > 0 else 1.0
    ape = np.abs(err) / y * 100.0
    return FitReport(n=len(y), terms=terms, loss=loss, r2=r2, mae=float(np.mean(np.abs(err))),
                     mape=float(np.mean(ape)), max_abs_error=float(np.max(np.abs(err))), max_ape=float(np.max(ape)))


def nnls(A: np.ndarray, b: np.ndarray, max_iter: int | None = None) -> np.ndarray:
    """Non-negative least squares, argmin ||Ax − b|| subject to x ≥ 0 (Lawson & Hanson 1974, ch. 23)."""
    m, n = A.shape
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 10 * np.finfo(float).eps * max(m, n) * max(1.0, float(np.abs(A).sum(axis=0).max(initial=0)))
    w = A.T @ (b - A @ x)
    for _ in range(max_iter or 3 * n + 10):
        if passive.all() or w[~passive].max(initial=-np.inf) <= tol:
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            s = np.zeros(n)
            s[passive] = np.linalg.lstsq(A[:, passive], b, rcond=None)[0]
            if s[passive].min(initial=np.inf) > tol:
                break
            blocking = passive & (s <= tol)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratios = x[blocking] / (x[blocking] - s[blocking])
            alpha = float(np.min(np.nan_to_num(ratios, nan=0.0)))
            x = x + alpha * (s - x)
            passive &= x > tol
            if not passive.any():
                s = np.zeros(n)
                break
        x = s
        w = A.T @ (b - A @ x)
    return x
