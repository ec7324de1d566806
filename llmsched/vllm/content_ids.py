"""The prompt token ids a real-engine run sends for a request with content, so that vLLM's prefix cache shares
exactly what the simulator's does.

Token j of a piece named ``p`` (``llmsched.content``) is draw j of a generator seeded by ``(SEED, p)``: a piece
is the same tokens in every request and every run, and two requests whose contents agree on their first n tokens
(same piece ids and lengths there) send the same first n ids. vLLM hashes full KV blocks, each chained to the
one before (``vllm/v1/core/kv_cache_utils.py``, ``hash_block_tokens``), so they share the blocks the simulator's
``Content.block_hashes`` says they share. Where contents part, their ids part (two pieces' streams agree on a
token with probability 1/(vocab - 3), on a block's worth of differing tokens practically never). A token-id piece
(``Space.TOKEN``, a trace that names its tokens) sends its own id when it lies in the vocabulary.

numpy's bounded integers are drawn value by value, so the first k draws of a piece are the same whatever its
length (``workload/chunks.py``): a piece cut short is a prefix of the whole. Ids lie in [3, vocab), avoiding the
special ids 0-2, as ``launch.prompt_ids`` does for requests without content.

A session's later turn carries its earlier turns' replies (``Space.REPLY`` pieces, ``Content.then``). In a real
run those are the tokens the engine generated, given in ``replies`` (reply id -> token ids): sending them, not a
draw, is what makes the turn's prompt start with the blocks vLLM cached while it generated them, as a client
replaying a conversation would. A reply piece longer than what was generated (the length scale rounds the two
ends apart by a token) continues with its draw.
"""
from __future__ import annotations

import numpy as np

from llmsched.content import SPACE_BITS, Content, Space

SEED = 20240917  # any fixed number: a piece's tokens must not change from run to run
FIRST_ID = 3


def content_ids(content: Content, n: int, vocab: int, replies: dict | None = None) -> list[int]:
    """The first ``n`` prompt token ids of ``content`` (``n`` at most its length) for a vocabulary of ``vocab``;
    a reply piece named in ``replies`` sends the tokens generated for it."""
    if not 0 < n <= content.length:
        raise ValueError(f"content_ids: {n} tokens asked of a content of {content.length}; a request's content "
                         f"covers its prompt")
    out, start = [], 0
    for piece, end in zip(content.ids, content.ends):
        length = min(end, n) - start
        generated = replies.get(piece) if replies else None
        if generated is None:
            out += piece_tokens(piece, length, vocab)
        else:
            out += generated[:length]
            if length > len(generated):
                out += piece_tokens(piece, length, vocab)[len(generated):]
        start = end
        if start >= n:
            break
    return out


def piece_tokens(piece: int, length: int, vocab: int) -> list[int]:
    """The first ``length`` token ids of the piece named ``piece``."""
    if piece >> SPACE_BITS == Space.TOKEN:
        number = piece & ((1 << SPACE_BITS) - 1)
        return [number if FIRST_ID <= number < vocab else FIRST_ID + number % (vocab - FIRST_ID)] * length
    rng = np.random.default_rng((SEED, piece))
    return rng.integers(FIRST_ID, vocab, size=length).tolist()
