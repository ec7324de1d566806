"""vLLM's KV watermark at admission, and the prompts it can never admit.

A policy that admits a prompt only while its blocks fit the free cache less a watermark (``int(watermark ×
blocks)``, vLLM v0's ``watermark_blocks``) can never admit one that needs more than the whole cache less the
watermark, not even on an idle replica: it would wait forever. vLLM v0's block manager answers ``AllocStatus.NEVER``
for it and the scheduler ignores the request ("Input prompt ... exceeds the capacity of block_manager"); here the
replica rejects it with the reason below (``Scheduler.unservable``: at arrival and after a recompute preemption).
A policy with such a rule inherits ``WatermarkAdmission`` ahead of ``Scheduler``.
"""
from __future__ import annotations

from ..engine.view import ReplicaView
from ..request import Request


def beyond_watermark(req: Request, view: ReplicaView, watermark: float) -> str | None:
    """Why ``req``'s next prefill can never be admitted under ``watermark``, or None."""
    total = view.total_blocks
    room = total - int(watermark * total)
    n = req.num_tokens
    need = view.blocks_for(n)
    if need <= room:
        return None
    return (f"its {n}-token prefill needs {need} KV blocks, more than the {room} of {total} this scheduler admits "
            f"into above its watermark ({watermark:g}): it can never be admitted (vLLM v0 ignores such a prompt); "
            f"give more KV blocks or a lower watermark (--param watermark=...)")


class WatermarkAdmission:
    """Mixin for a policy that admits above its ``watermark`` field: rejects what it could never admit."""

    def unservable(self, req: Request, view: ReplicaView) -> str | None:
        return super().unservable(req, view) or beyond_watermark(req, view, self.watermark)
