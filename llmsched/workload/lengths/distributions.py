"""Joint (prompt, output) length distributions, in tokens.

Every ``sample`` returns two int64 arrays of equal length with all entries >= 1: a request always has a prompt
token and produces at least one output token.
"""
from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from llmsched.workload.chunks import CHUNK, check_chunk, drawn_columns, pieces

DRAWS = ("resample", "shuffle", "sequential", "cycle")
CAP_MODES = ("output", "proportional")


def positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer number of tokens >= 1, got {value!r}")
    return int(value)


def positive_float(name: str, value, allow_zero: bool = False) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not ((value >= 0 if allow_zero else value > 0) and math.isfinite(value)):
        raise ValueError(f"{name} must be finite and {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return value


def check_count(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"number of samples n must be an integer >= 0, got {n!r}")
    return int(n)


def as_tokens(x) -> np.ndarray:
    """Round to whole tokens, at least one."""
    return np.maximum(np.rint(x), 1).astype(np.int64)


def tail_grid(body_steps: int, tail_start: float, tail_step: float) -> np.ndarray:
    """Probabilities 0..1: ``body_steps`` even steps up to ``tail_start``, then steps of ``tail_step``."""
    grid = np.concatenate((np.linspace(0, tail_start, body_steps + 1), np.arange(tail_start, 1, tail_step), [1.0]))
    return np.unique(np.round(grid, 9))


class LengthDist(ABC):
    """Draws (prompt_lens, output_lens) pairs; every draw comes from the generator passed in."""

    @abstractmethod
    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` prompt lengths and ``n`` output lengths, int64, all >= 1."""

    @abstractmethod
    def describe(self) -> dict:
        """Parameters as a JSON-friendly dict, for run records."""

    def chunks(self, n: int, rng: np.random.Generator, size: int = CHUNK) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``sample(n, rng)`` in pieces of ``size``, the same values; the distributions here draw each piece as it
        is asked for (this default, for others, samples all ``n`` now). ``rng`` is left for this use alone."""
        prompts, outputs = self.sample(n, rng)
        return zip(pieces(prompts, size), pieces(outputs, size))


class Fixed(LengthDist):
    """Every request has the same lengths: the offline grids of InferMax (Kim et al.)."""

    def __init__(self, prompt: int, output: int):
        self.prompt = positive_int("Fixed prompt", prompt)
        self.output = positive_int("Fixed output", output)

    def sample(self, n, rng):
        n = check_count(n)
        return np.full(n, self.prompt, np.int64), np.full(n, self.output, np.int64)

    def chunks(self, n, rng, size=CHUNK):
        n, size = check_count(n), check_chunk(size)
        return (self.sample(min(size, n - a), rng) for a in range(0, n, size))

    def describe(self) -> dict:
        return {"kind": "fixed", "prompt": self.prompt, "output": self.output}


class Uniform(LengthDist):
    """Independent uniform integers on inclusive ranges."""

    def __init__(self, prompt_min: int, prompt_max: int, output_min: int, output_max: int):
        self.prompt_min = positive_int("Uniform prompt_min", prompt_min)
        self.prompt_max = positive_int("Uniform prompt_max", prompt_max)
        self.output_min = positive_int("Uniform output_min", output_min)
        self.output_max = positive_int("Uniform output_max", output_max)
        if self.prompt_max < self.prompt_min:
            raise ValueError(f"Uniform prompt_max ({prompt_max}) must be >= prompt_min ({prompt_min})")
        if self.output_max < self.output_min:
            raise ValueError(f"Uniform output_max ({output_max}) must be >= output_min ({output_min})")

    def sample(self, n, rng):
        n = check_count(n)
        return self._prompts(rng, n), self._outputs(rng, n)

    def _prompts(self, rng, n):
        return rng.integers(self.prompt_min, self.prompt_max + 1, n, dtype=np.int64)

    def _outputs(self, rng, n):
        return rng.integers(self.output_min, self.output_max + 1, n, dtype=np.int64)

    def chunks(self, n, rng, size=CHUNK):
        return drawn_columns(check_count(n), rng, size, self._prompts, self._outputs)

    def describe(self) -> dict:
        return {"kind": "uniform", "prompt_min": self.prompt_min, "prompt_max": self.prompt_max,
                "output_min": self.output_min, "output_max": self.output_max}


class Lognormal(LengthDist):
    """Independent lognormal lengths given by median and log-space sigma, rounded to tokens (>= 1)."""

    def __init__(self, prompt_median: float, prompt_sigma: float, output_median: float, output_sigma: float):
        self.prompt_median = positive_float("Lognormal prompt_median", prompt_median)
        self.prompt_sigma = positive_float("Lognormal prompt_sigma", prompt_sigma, allow_zero=True)
        self.output_median = positive_float("Lognormal output_median", output_median)
        self.output_sigma = positive_float("Lognormal output_sigma", output_sigma, allow_zero=True)

    def sample(self, n, rng):
        n = check_count(n)
        return self._prompts(rng, n), self._outputs(rng, n)

    def _prompts(self, rng, n):
        return as_tokens(rng.lognormal(math.log(self.prompt_median), self.prompt_sigma, n))

    def _outputs(self, rng, n):
        return as_tokens(rng.lognormal(math.log(self.output_median), self.output_sigma, n))

    def chunks(self, n, rng, size=CHUNK):
        return drawn_columns(check_count(n), rng, size, self._prompts, self._outputs)

    def describe(self) -> dict:
        return {"kind": "lognormal", "prompt_median": self.prompt_median, "prompt_sigma": self.prompt_sigma,
                "output_median": self.output_median, "output_sigma": self.output_sigma}


class Zipf(LengthDist):
    """Independent truncated Zipf lengths: P(k) ∝ k^-a on 1..max.

    The truncation keeps every exponent a > 0 proper and bounds the length, which a serving system needs;
    a larger ``a`` puts more mass on short requests.
    """

    def __init__(self, prompt_a: float, prompt_max: int, output_a: float, output_max: int):
        self.prompt_a = positive_float("Zipf prompt_a", prompt_a)
        self.prompt_max = positive_int("Zipf prompt_max", prompt_max)
        self.output_a = positive_float("Zipf output_a", output_a)
        self.output_max = positive_int("Zipf output_max", output_max)
        self._prompt_cdf = self._cdf(self.prompt_a, self.prompt_max)
        self._output_cdf = self._cdf(self.output_a, self.output_max)

    @staticmethod
    def _cdf(a: float, top: int) -> np.ndarray:
        weights = np.arange(1, top + 1, dtype=float) ** -a
        cdf = np.cumsum(weights)
        return cdf / cdf[-1]

    @staticmethod
    def _draw(cdf: np.ndarray, n: int, rng) -> np.ndarray:
        return (np.searchsorted(cdf, rng.random(n), side="right") + 1).clip(max=len(cdf)).astype(np.int64)

    def sample(self, n, rng):
        n = check_count(n)
        return self._prompts(rng, n), self._outputs(rng, n)

    def _prompts(self, rng, n):
        return self._draw(self._prompt_cdf, n, rng)

    def _outputs(self, rng, n):
        return self._draw(self._output_cdf, n, rng)

    def chunks(self, n, rng, size=CHUNK):
        return drawn_columns(check_count(n), rng, size, self._prompts, self._outputs)

    def describe(self) -> dict:
        return {"kind": "zipf", "prompt_a": self.prompt_a, "prompt_max": self.prompt_max,
                "output_a": self.output_a, "output_max": self.output_max}


class Geometric(LengthDist):
    """Fixed prompt, geometric output on {1, 2, ...} with the given mean.

    The deferred-prefill model (Mohanty et al. §4) assumes exactly this: 285-token prompts, outputs of
    mean 201.
    """

    def __init__(self, prompt: int, output_mean: float):
        self.prompt = positive_int("Geometric prompt", prompt)
        self.output_mean = positive_float("Geometric output_mean", output_mean)
        if self.output_mean < 1:
            raise ValueError(f"Geometric output_mean must be >= 1 (outputs are >= 1 token), got {output_mean!r}")

    def sample(self, n, rng):
        n = check_count(n)
        return np.full(n, self.prompt, np.int64), rng.geometric(1.0 / self.output_mean, n).astype(np.int64)

    def chunks(self, n, rng, size=CHUNK):
        n, size = check_count(n), check_chunk(size)
        return (self.sample(min(size, n - a), rng) for a in range(0, n, size))

    def describe(self) -> dict:
        return {"kind": "geometric", "prompt": self.prompt, "output_mean": self.output_mean}


class Empirical(LengthDist):
    """Draws whole (prompt, output) rows from data, keeping their joint structure.

    ``draw``: "resample" picks rows i.i.d. with replacement; "shuffle" walks one seeded permutation of the rows
    (a fresh permutation after each full pass), as SLAI's generator does (Bari et al. §5); "sequential"
    takes the first n rows in order, for trace replay, and refuses n beyond the data; "cycle" takes them in order and
    starts again after the last, for a trace replayed back to back (``workload/traces/trace_time.py``).
    """

    def __init__(self, prompts, outputs, draw: str = "resample", name: str | None = None):
        p = np.asarray(prompts)
        o = np.asarray(outputs)
        if p.ndim != 1 or p.shape != o.shape or len(p) == 0:
            raise ValueError(f"Empirical needs two non-empty 1-D arrays of equal length, got shapes {p.shape} "
                             f"and {o.shape}")
        for label, a in (("prompts", p), ("outputs", o)):
            if not np.issubdtype(a.dtype, np.integer) and not np.all(np.mod(a, 1) == 0):
                raise ValueError(f"Empirical {label} must be whole token counts")
            if a.min() < 1:
                raise ValueError(f"Empirical {label} must all be >= 1; entry {int(np.argmin(a))} is {a.min()}")
        if draw not in DRAWS:
            raise ValueError(f"Empirical draw must be one of {', '.join(DRAWS)}; got {draw!r}")
        self.prompts = p.astype(np.int64)
        self.outputs = o.astype(np.int64)
        self.draw = draw
        self.name = name

    @classmethod
    def from_trace(cls, trace, draw: str = "resample") -> "Empirical":
        return cls(trace.prompt_lens, trace.output_lens, draw=draw, name=Path(trace.source).name)

    def __len__(self) -> int:
        return len(self.prompts)

    def _rows(self, n: int, rng) -> np.ndarray:
        rows = len(self.prompts)
        if self.draw == "resample":
            return rng.integers(0, rows, n)
        if self.draw == "sequential":
            return np.arange(self._check_sequential(n))
        if self.draw == "cycle":
            return np.arange(n) % rows
        passes = -(-n // rows)
        return np.concatenate([rng.permutation(rows) for _ in range(passes)])[:n] if n else np.zeros(0, np.int64)

    def _check_sequential(self, n: int) -> int:
        rows = len(self.prompts)
        if n > rows:
            raise ValueError(f"Empirical(draw='sequential') has {rows} rows but {n} were asked for; ask for "
                             f"at most {rows} or use draw='resample'")
        return n

    def sample(self, n, rng):
        idx = self._rows(check_count(n), rng)
        return self.prompts[idx], self.outputs[idx]

    def chunks(self, n, rng, size=CHUNK):
        n, size = check_count(n), check_chunk(size)
        if self.draw == "resample":
            idx = (rows for rows, in drawn_columns(n, rng, size, self._resampled))
        elif self.draw == "shuffle":
            idx = self._shuffled(n, rng, size)
        elif self.draw == "cycle":
            idx = (np.arange(a, min(a + size, n)) % len(self.prompts) for a in range(0, n, size))
        else:
            self._check_sequential(n)  # now, not when the run gets there
            idx = (np.arange(a, min(a + size, n)) for a in range(0, n, size))
        return ((self.prompts[rows], self.outputs[rows]) for rows in idx)

    def _resampled(self, rng, n):
        return rng.integers(0, len(self.prompts), n)

    def _shuffled(self, n, rng, size):
        """The rows of ``_rows``'s shuffle, a permutation drawn each time the one before is used up."""
        perm, at = np.zeros(0, np.int64), 0
        for a in range(0, n, size):
            need, parts = min(size, n - a), []
            while need:
                if at == len(perm):
                    perm, at = rng.permutation(len(self.prompts)), 0
                parts.append(perm[at:at + need])
                at += len(parts[-1])
                need -= len(parts[-1])
            yield np.concatenate(parts)

    def describe(self) -> dict:
        return {"kind": "empirical", "rows": len(self.prompts), "draw": self.draw, "source": self.name}


class QuantileTable(LengthDist):
    """A compact stand-in for a length file: prompt quantiles plus, per prompt bin, conditional output quantiles.

    The prompt is read off its quantile function at u ~ U(0,1); the bin of equal probability mass that u falls
    in picks the row of conditional output quantiles, read at an independent v. This keeps both marginals and
    the prompt/output dependence (e.g. arXiv's long prompts with short summaries) without shipping the rows.
    Values between grid points are linearly interpolated, then rounded.
    """

    def __init__(self, prompt_probs, prompt_values, output_probs, output_values, meta: dict | None = None):
        self.prompt_probs = np.asarray(prompt_probs, dtype=float)
        self.prompt_values = np.asarray(prompt_values, dtype=float)
        self.output_probs = np.asarray(output_probs, dtype=float)
        self.output_values = np.asarray(output_values, dtype=float)
        self.meta = dict(meta or {})
        self._check()

    def _check(self):
        name = self.meta.get("name", "QuantileTable")
        for label, probs in (("prompt_probs", self.prompt_probs), ("output_probs", self.output_probs)):
            if probs.ndim != 1 or len(probs) < 2 or probs[0] != 0 or probs[-1] != 1 or np.any(np.diff(probs) <= 0):
                raise ValueError(f"{name}: {label} must rise strictly from 0 to 1")
        if self.prompt_values.shape != self.prompt_probs.shape:
            raise ValueError(f"{name}: prompt_values must have one entry per prompt probability")
        if self.output_values.ndim != 2 or self.output_values.shape[1] != len(self.output_probs):
            raise ValueError(f"{name}: output_values must be one row of quantiles per bin, each with one entry per "
                             f"output probability")
        for label, v in (("prompt_values", self.prompt_values), ("output_values", self.output_values)):
            if not np.all(np.isfinite(v)) or v.min() < 1 or np.any(np.diff(v, axis=-1) < 0):
                raise ValueError(f"{name}: {label} must be finite, >= 1 and non-decreasing")

    @property
    def num_bins(self) -> int:
        return len(self.output_values)

    @classmethod
    def fit(cls, prompts, outputs, bins: int = 32, prompt_probs=None, output_probs=None, seed: int = 0,
            meta: dict | None = None) -> "QuantileTable":
        """Build the table from raw rows. Ties in prompt length are split between bins at random (seeded).

        The default grids are denser in the upper tail, where long requests decide memory pressure.
        """
        p = np.asarray(prompts, dtype=np.int64)
        o = np.asarray(outputs, dtype=np.int64)
        if len(p) < bins or len(p) != len(o):
            raise ValueError(f"QuantileTable.fit needs equal-length rows, at least one per bin ({bins}); got "
                             f"{len(p)} prompts and {len(o)} outputs")
        prompt_probs = tail_grid(190, 0.95, 0.001) if prompt_probs is None else np.asarray(prompt_probs, float)
        output_probs = tail_grid(40, 0.9, 0.005) if output_probs is None else np.asarray(output_probs, float)
        tiebreak = np.random.default_rng(seed).permutation(len(p))
        order = tiebreak[np.argsort(p[tiebreak], kind="stable")]
        edges = np.rint(np.linspace(0, len(p), bins + 1)).astype(int)
        output_values = [np.quantile(o[order[a:b]], output_probs, method="inverted_cdf")
                         for a, b in zip(edges, edges[1:])]
        return cls(prompt_probs, np.quantile(p, prompt_probs, method="inverted_cdf"), output_probs,
                   np.array(output_values), meta)

    @classmethod
    def from_dict(cls, d: dict) -> "QuantileTable":
        try:
            return cls(d["prompt"]["probs"], d["prompt"]["values"], d["output"]["probs"], d["output"]["values"],
                       {k: v for k, v in d.items() if k not in ("prompt", "output")})
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a length quantile table: missing {e}; expected keys prompt.probs, "
                             f"prompt.values, output.probs, output.values") from None

    @classmethod
    def load(cls, path) -> "QuantileTable":
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def to_dict(self) -> dict:
        def compact(a):
            return [int(x) if float(x).is_integer() else round(float(x), 6) for x in np.ravel(a)]
        return {**self.meta,
                "prompt": {"probs": [round(float(x), 6) for x in self.prompt_probs],
                           "values": compact(self.prompt_values)},
                "output": {"bins": self.num_bins, "probs": [round(float(x), 6) for x in self.output_probs],
                           "values": [compact(row) for row in self.output_values]}}

    def sample(self, n, rng):
        n = check_count(n)
        u = rng.random(n)
        v = rng.random(n)
        prompts = np.empty(n, dtype=np.int64)
        outputs = np.empty(n, dtype=np.int64)
        # element by element arithmetic, read in chunks: the same values, without a dozen n-long temporaries
        # (80 MB at a million requests)
        for a in range(0, n, CHUNK):
            prompts[a:a + CHUNK], outputs[a:a + CHUNK] = self._read(u[a:a + CHUNK], v[a:a + CHUNK])
        return prompts, outputs

    def chunks(self, n, rng, size=CHUNK):
        uniform = np.random.Generator.random
        return (self._read(u, v) for u, v in drawn_columns(check_count(n), rng, size, uniform, uniform))

    def _read(self, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Prompt and output lengths at quantile levels ``u`` (prompt, and its bin) and ``v`` (output)."""
        prompts = np.interp(u, self.prompt_probs, self.prompt_values)
        b = np.minimum((u * self.num_bins).astype(np.int64), self.num_bins - 1)
        j = np.clip(np.searchsorted(self.output_probs, v, side="right") - 1, 0, len(self.output_probs) - 2)
        w = (v - self.output_probs[j]) / (self.output_probs[j + 1] - self.output_probs[j])
        outputs = self.output_values[b, j] * (1 - w) + self.output_values[b, j + 1] * w
        return as_tokens(prompts), as_tokens(outputs)

    def describe(self) -> dict:
        d = {"kind": "quantile-table", "bins": self.num_bins}
        for key in ("name", "source"):
            if key in self.meta:
                d[key] = self.meta[key]
        return d


class Capped(LengthDist):
    """Limits prompt + output to ``max_total`` tokens (the model's maximum sequence length).

    ``how="output"`` (default) first clips the prompt to ``max_total - 1``, then clips the output so the total
    fits: the prompt a user sent is kept whole where possible and only generation is cut short, as a
    ``max_tokens`` limit would. ``how="proportional"`` removes the excess from prompt and output in proportion
    to their lengths, which is what SLAI's generator does (Bari et al. §5: "We then cap the total length at 8192
    tokens"); on the ShareGPT file no row exceeds 8192, so the two agree there.

    ``drawn`` and ``clipped`` count the rows the latest ``chunks`` pass gave (the one a run consumes: a source starts
    its pass when the run starts) and how many of them it cut, so a run can say how many requests the cap changed.
    """

    def __init__(self, dist: LengthDist, max_total: int, how: str = "output"):
        if not isinstance(dist, LengthDist):
            raise ValueError(f"Capped wraps a LengthDist, got {type(dist).__name__}")
        self.dist = dist
        self.max_total = positive_int("Capped max_total", max_total)
        if self.max_total < 2:
            raise ValueError(f"Capped max_total must be >= 2 (one prompt and one output token), got {max_total}")
        if how not in CAP_MODES:
            raise ValueError(f"Capped how must be one of {', '.join(CAP_MODES)}; got {how!r}")
        self.how = how
        self.drawn = self.clipped = 0

    def cuts(self, prompts: np.ndarray, outputs: np.ndarray) -> int:
        """How many of these (uncapped) rows ``cap`` changes."""
        prompts = np.asarray(prompts, dtype=np.int64)
        return int(np.count_nonzero((prompts > self.max_total - 1) | (prompts + np.asarray(outputs) > self.max_total)))

    def cap(self, prompts: np.ndarray, outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        prompts = np.asarray(prompts, dtype=np.int64)
        outputs = np.asarray(outputs, dtype=np.int64)
        if self.how == "proportional":
            total = prompts + outputs
            over = total > self.max_total
            kept = np.rint(prompts * (self.max_total / np.maximum(total, 1))).astype(np.int64)
            prompts = np.where(over, np.clip(kept, 1, self.max_total - 1), prompts)
        prompts = np.minimum(prompts, self.max_total - 1)
        return prompts, np.minimum(outputs, self.max_total - prompts)

    def sample(self, n, rng):
        return self.cap(*self.dist.sample(n, rng))

    def chunks(self, n, rng, size=CHUNK):
        self.drawn = self.clipped = 0
        return self._counted(self.dist.chunks(n, rng, size))

    def _counted(self, chunks):
        for prompts, outputs in chunks:
            self.drawn += len(prompts)
            self.clipped += self.cuts(prompts, outputs)
            yield self.cap(prompts, outputs)

    def describe(self) -> dict:
        return {"kind": "capped", "max_total": self.max_total, "how": self.how, "dist": self.dist.describe()}
