"""The one interface every batch-time model implements: a batch's composition in, seconds out."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .wake import WakeCost


@dataclass(slots=True)
class Batch:
    """What one engine step computes.

    ``prefill_new[i]`` new tokens of prefill chunk i, attending over ``prefill_ctx[i]``
    tokens already in the KV cache plus themselves. ``decode_ctx[j]`` is the number of
    tokens decode j attends over, its own new token included (KV tokens after the step).
    """

    prefill_new: list[int] = field(default_factory=list)
    prefill_ctx: list[int] = field(default_factory=list)
    decode_ctx: list[int] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(self.prefill_new) + len(self.decode_ctx)

    @property
    def num_decodes(self) -> int:
        return len(self.decode_ctx)

    @property
    def num_prefills(self) -> int:
        return len(self.prefill_new)

    @property
    def context_sum(self) -> int:
        """Σ context over all items: KV tokens each item attends over (its new tokens included)."""
        return sum(self.decode_ctx) + sum(c + n for c, n in zip(self.prefill_ctx, self.prefill_new))


class BatchTimeModel(ABC):
    """Predicts the duration of one engine step. Must be monotone in tokens and in context."""

    name: str = "?"
    # True when a step's time depends on its decodes only through their count and context sum (with or without
    # prefills), so the simulator may fast-forward runs of decode-only steps through decode_sum_time and step a
    # decode group through sum_step_time without listing its contexts (docs/simulator.md)
    decode_sum_only: bool = False
    # slowdown of a step that starts after the engine sat idle (batchtime/wake.py); None: no such cost
    wake: "WakeCost | None" = None
    # the engine plans a step while the one before runs (vLLM's async scheduling): a request arriving during a
    # step is queued at its end and first scheduled in the step after the next (sim/simulator.py)
    async_admission: bool = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step_time" in cls.__dict__:
            if "decode_sum_only" not in cls.__dict__:
                cls.decode_sum_only = False  # a new step_time must declare the property itself
            for name in ("decode_sum_time", "sum_step_time"):  # a shortcut of the old step_time no longer holds
                if name not in cls.__dict__:
                    setattr(cls, name, getattr(BatchTimeModel, name))

    @abstractmethod
    def step_time(self, batch: Batch) -> float:
        """Seconds the step takes."""

    def decode_sum_time(self, num_decodes: int, context_sum: int) -> float:
        """A decode-only step of ``num_decodes`` decodes whose contexts sum to ``context_sum``: exactly the float
        ``step_time`` gives for any such batch, for models with ``decode_sum_only``."""
        assert self.decode_sum_only, f"batch-time model {self.name!r} does not reduce decodes to their sum"
        return self.step_time(Batch([], [], [context_sum] + [0] * (num_decodes - 1)))

    def sum_step_time(self, prefill_new: list[int], prefill_ctx: list[int], num_decodes: int,
                      context_sum: int) -> float:
        """A step of these prefill chunks and ``num_decodes`` decodes whose contexts sum to ``context_sum``: exactly
        the float ``step_time`` gives for any such batch, for models with ``decode_sum_only``."""
        assert self.decode_sum_only, f"batch-time model {self.name!r} does not reduce decodes to their sum"
        decode_ctx = [context_sum] + [0] * (num_decodes - 1) if num_decodes else []
        return self.step_time(Batch(prefill_new, prefill_ctx, decode_ctx))

    def describe(self) -> dict:
        """Parameters and provenance, for run metadata and ``llmsched presets``."""
        return {"name": self.name}

    # Convenience forms used by theory code; all go through step_time.
    def prefill_time(self, tokens: int, context: int = 0) -> float:
        return self.step_time(Batch([tokens], [context], []))

    def decode_time(self, num_decodes: int, context: int) -> float:
        """A decode-only step of ``num_decodes`` requests, each attending over ``context`` tokens."""
        return self.step_time(Batch([], [], [context] * num_decodes))
