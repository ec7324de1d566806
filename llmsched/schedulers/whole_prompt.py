"""For policies that never chunk: a prompt larger than the step's token budget can never run."""
from __future__ import annotations

from ..engine.view import ReplicaView
from ..request import Request


def too_long(view: ReplicaView, r: Request) -> str | None:
    """Why ``r`` can never be prefilled whole under the token budget, or None."""
    n = r.prompt_len + r.num_generated
    if n > view.max_num_batched_tokens:
        return (f"its {n}-token prompt exceeds max_num_batched_tokens {view.max_num_batched_tokens} and this "
                f"scheduler does not chunk prompts (raise the limit or use a chunking scheduler)")
    return None
