"""A request's content at a length scale (``llmsched run --scale-lengths``: a CPU serves prompts a tenth or a
twenty-fifth as long), keeping what the requests share.

Each piece keeps its id and becomes shorter: piece k now ends at ``round(end_k * scale)``, the rounding the scaled
prompt length gets. So a Mooncake hash block of 512 tokens stays one piece (a block), of about ``512 * scale``
tokens; two requests that shared their first k pieces share their first k scaled pieces, whose ends depend only on
the old ends, and nothing more. The number of pieces is kept rather than their length because the prefix cache
sees only whole KV blocks: at 0.04 a 512-token block kept whole would leave a 10,000-token prompt with no block to
share (400 tokens), where 20 shorter pieces keep its shared prefix in proportion. A piece that rounds to no tokens
(a one-token piece of a token-id prompt, most of them at small scales) is dropped: which ones depends only on
their positions, so shared prefixes drop the same pieces.
"""
from __future__ import annotations

from array import array

from llmsched.content import Content


def scaled_content(content: Content, scale: float, prompt_len: int) -> Content:
    """``content`` with each piece's end times ``scale`` (see the module docstring), covering ``prompt_len`` (the
    scaled prompt, ``max(1, round(old * scale))``): the first piece keeps one token when every end rounds to 0."""
    if not scale > 0:
        raise ValueError(f"length scale must be > 0, got {scale}")
    ids, ends, last = array("q"), array("q"), 0
    for piece, end in zip(content.ids, content.ends):
        end = round(end * scale)
        if end > last:
            ids.append(piece)
            ends.append(end)
            last = end
    if not ids:
        ids.append(content.ids[0])
        ends.append(1)
    if ends[-1] < prompt_len:  # a content covers its prompt (Request checks): only the one-token floor gets here
        ends[-1] = prompt_len
    return Content(ids, ends, content.reply)
