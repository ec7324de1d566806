"""Content: two requests share a KV block exactly when their tokens agree up to the block's end, for any block
size, and a session's next turn finds the previous turn's prompt and reply tokens."""
import random

import pytest

from llmsched.content import Content, Space, name_number, piece_id
from llmsched.request import Request


def tokens(content: Content, n: int) -> list:
    """The first ``n`` tokens spelled out: (text id, offset in that text)."""
    out = []
    for piece, length in content.pieces():
        out += [(piece, j) for j in range(length)]
    reply = 0
    while len(out) < n:
        out.append((content.reply, reply))
        reply += 1
    return out[:n]


def random_content(rng: random.Random, shared: list) -> Content:
    pieces = [p for p in shared[:rng.randrange(len(shared) + 1)]]
    if rng.random() < 0.5 and pieces:  # the same text, cut shorter
        piece, length = pieces[-1]
        pieces[-1] = (piece, rng.randrange(1, length + 1))
    for _ in range(rng.randrange(0 if pieces else 1, 3)):
        pieces.append((piece_id(Space.TEXT, rng.randrange(4)), rng.randrange(1, 40)))
    return Content.of_pieces(pieces, piece_id(Space.REPLY, rng.randrange(3)))


@pytest.mark.parametrize("seed", range(30))
def test_blocks_are_shared_exactly_when_the_tokens_agree(seed):
    rng = random.Random(seed)
    shared = [(piece_id(Space.SHARED, k), rng.randrange(1, 50)) for k in range(4)]
    contents = [random_content(rng, shared) for _ in range(6)]
    for block in (1, 3, 16, 32):
        for a in contents:
            for b in contents:
                n = min(a.length, b.length) + 20  # some reply tokens too
                ha, hb = a.block_hashes(block, n), b.block_hashes(block, n)
                ta, tb = tokens(a, n), tokens(b, n)
                assert len(ha) == n // block
                for k in range(n // block):
                    assert (ha[k] == hb[k]) == (ta[:(k + 1) * block] == tb[:(k + 1) * block]), (block, k, a, b)
                assert a.block_hashes(block, n, first=2) == ha[2:]


def test_prefix_hash_is_the_block_hash_at_the_block_end():
    c = Content.of_pieces([(piece_id(Space.BLOCK, 7), 512), (piece_id(Space.BLOCK, 9), 100)], piece_id(Space.REPLY, 1))
    assert c.block_hashes(16, 700) == [c.prefix_hash(16 * (k + 1)) for k in range(700 // 16)]
    assert c.length == 612


def test_the_next_turn_carries_the_previous_prompt_and_reply():
    system = (piece_id(Space.SHARED, 0), 100)
    first = Content.of_pieces([system, (piece_id(Space.TEXT, 0), 30)], piece_id(Space.REPLY, 0))
    second = first.then(50, [(piece_id(Space.TEXT, 1), 20)], piece_id(Space.REPLY, 1))
    assert second.length == 200
    # every block of the first turn's prompt and generated tokens (130 + 50 - 1 with KV) is in the second's prompt
    assert second.block_hashes(16, 179) == first.block_hashes(16, 179)
    assert second.block_hashes(16, 192)[-1] != first.block_hashes(16, 192)[-1]  # 180..191: new text vs reply


def test_token_contents_agree_where_the_token_lists_do():
    a = Content.of_tokens([5, 6, 7, 8, 9, 10], piece_id(Space.REPLY, 0))
    b = Content.of_tokens([5, 6, 7, 8, 1, 10], piece_id(Space.REPLY, 1))
    assert a.block_hashes(2, 6)[:2] == b.block_hashes(2, 6)[:2]
    assert a.block_hashes(2, 6)[2] != b.block_hashes(2, 6)[2]


def test_cut_keeps_the_prefix():
    c = Content.of_pieces([(1, 10), (2, 10), (3, 10)], 99)
    short = c.cut(15)
    assert short.pieces() == [(1, 10), (2, 5)] and short.block_hashes(5, 15) == c.block_hashes(5, 15)
    assert c.cut(30) is c


def test_ids_and_names():
    assert piece_id(Space.TOKEN, 5) == 5
    assert piece_id(Space.BLOCK, 5) != piece_id(Space.NAMED, 5)
    assert name_number("system-a") == name_number("system-a") != name_number("system-b")
    with pytest.raises(ValueError, match=r"\[0, 2\*\*56\)"):
        piece_id(Space.BLOCK, -1)
    with pytest.raises(ValueError, match="ends must increase"):
        Content([1, 2], [5, 5], 0)


def test_a_request_carries_its_content_and_none_by_default():
    c = Content.of_pieces([(1, 10)], 2)
    assert Request(0, 0.0, 10, 5).content is None
    assert Request(0, 0.0, 10, 5, content=c).content is c
    with pytest.raises(ValueError, match="content names 10 tokens, fewer than its prompt's 11"):
        Request(0, 0.0, 11, 5, content=c)
