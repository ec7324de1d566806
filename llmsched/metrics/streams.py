"""Where a streamed run (``simulate --stream``) writes its logs while it runs."""
from __future__ import annotations

from pathlib import Path

from .request_stream import RequestStream
from .step_stream import StepStream


def open_streams(out_dir=None, cached: bool = False, tiers: tuple = ()) -> tuple[RequestStream, StepStream]:
    """A request and a step stream writing ``out_dir``/requests.csv and steps.csv (``None``: totals only);
    ``cached``: the run has a prefix cache (requests.csv gets cached_tokens); ``tiers``: the media of its KV tiers
    below the GPU (cached_tokens split by them)."""
    if out_dir is None:
        return RequestStream(cached=cached, tiers=tiers), StepStream()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return RequestStream(out / "requests.csv", cached, tiers), StepStream(out / "steps.csv")
