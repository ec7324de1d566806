"""What a request's tokens are, compactly enough for a million-request run: named pieces, then its own reply.

A prefix cache needs to know when two requests hold the same tokens, never which tokens they are. So a
``Content`` is a list of pieces: piece k is the first ``ends[k] - ends[k-1]`` tokens of the text named
``ids[k]`` (a Mooncake ``hash_ids`` entry is a 512-token piece; a token id is a one-token piece; a synthetic system
prompt is one piece of its length). Tokens past the last piece are the request's reply: the text named ``reply``,
one id per request, so the generated tokens extend the content and a session's next turn, which carries them in its
prompt, finds them (``then``).

Two contents agree on their first ``n`` tokens exactly when their pieces up to token ``n`` have the same ids and
lengths; ``prefix_hash(n)`` names that prefix by one integer (a chain like vLLM v1's block hashes: the hash after a
piece is computed from the hash before it, its id and its length). A KV block of any size is shared exactly when
the prefix hashes at the block's end are equal (``block_hashes``), whatever the size of the pieces, so one content
serves every block size. A content costs two 8-byte integers a piece and nothing a token (except token-id prompts,
whose pieces are tokens); a request without one (``Request.content is None``) shares nothing.

Ids live in namespaces (the top bits, ``piece_id``) so that a trace's block ids, token ids, and the ids a
generator makes for its own texts never meet by accident.
"""
from __future__ import annotations

from array import array
from enum import IntEnum
from hashlib import blake2b
from itertools import repeat

SPACE_BITS = 56  # an id is (namespace << 56) | number, below 2**61 - 1 so that Python's int hash is the id itself
MAX_NUMBER = (1 << SPACE_BITS) - 1
# the prefix hash of zero tokens: a fixed number (Python's str hash changes from process to process, and with it
# every prefix hash, so a router that hashes prefixes, prefix-hash, routed differently from run to run)
ROOT = int.from_bytes(blake2b(b"llmsched-content/1", digest_size=7).digest(), "little")


class Space(IntEnum):
    """Where an id comes from; two ids from different spaces never name the same text."""

    TOKEN = 0  # a token id of a tokenizer's vocabulary
    BLOCK = 1  # a trace's block-hash id (Mooncake's hash_ids)
    NAMED = 2  # a segment a trace names (our JSONL format's prefix ids)
    REPLY = 3  # a request's output
    TEXT = 4  # a request's own new text (a question, a user turn)
    SHARED = 5  # a text a generator shares among requests (a system prompt)


def piece_id(space: Space, number: int) -> int:
    """The id of text ``number`` of ``space``; ``number`` in [0, 2**56)."""
    if not 0 <= number <= MAX_NUMBER:
        raise ValueError(f"a {space.name.lower()} id must be an integer in [0, 2**56), got {number}")
    return (int(space) << SPACE_BITS) | number


def name_number(name: str) -> int:
    """A stable 56-bit number for a text's name (Python's str hash changes from run to run; this does not)."""
    return int.from_bytes(blake2b(name.encode(), digest_size=7).digest(), "little")


class Content:
    """The pieces of a request's known tokens and the id of its reply (see the module docstring)."""

    __slots__ = ("ids", "ends", "reply", "_keys")

    def __init__(self, ids, ends, reply: int):
        self.ids = ids if isinstance(ids, array) and ids.typecode == "q" else array("q", ids)
        self.ends = ends if isinstance(ends, array) and ends.typecode == "q" else array("q", ends)
        self.reply = reply
        self._keys = None
        if len(self.ids) != len(self.ends) or not self.ids:
            raise ValueError(f"Content: {len(self.ids)} piece id(s) but {len(self.ends)} end(s); give one end per "
                             f"piece, at least one piece")
        last = 0
        for end in self.ends:
            if end <= last:
                raise ValueError(f"Content: piece ends must increase from 1, got {list(self.ends)[:8]}")
            last = end

    @classmethod
    def of_pieces(cls, pieces, reply: int) -> "Content":
        """From (id, length) pairs."""
        ids, ends, end = array("q"), array("q"), 0
        for piece, length in pieces:
            end += length
            ids.append(piece)
            ends.append(end)
        return cls(ids, ends, reply)

    @classmethod
    def of_tokens(cls, tokens, reply: int) -> "Content":
        """From token ids, one piece each."""
        ids = array("q", tokens)
        return cls(ids, array("q", range(1, len(ids) + 1)), reply)

    @property
    def length(self) -> int:
        """Tokens named by the pieces (the prompt, and any known output); later tokens are the reply's."""
        return self.ends[-1]

    def pieces(self) -> list[tuple[int, int]]:
        """(id, length) of each piece."""
        starts = [0, *self.ends[:-1]]
        return [(i, e - s) for i, s, e in zip(self.ids, starts, self.ends)]

    def keys(self) -> array:
        """Per piece, the hash of (prefix before it, its id), and last the reply's: ``H(keys[k], offset)`` is the
        prefix hash of a prefix that ends ``offset`` tokens into piece k."""
        if self._keys is None:
            keys, before, start = array("q"), ROOT, 0
            for piece, end in zip(self.ids, self.ends):
                key = hash((before, piece))
                keys.append(key)
                before, start = hash((key, end - start)), end
            keys.append(hash((before, self.reply)))
            self._keys = keys
        return self._keys

    def prefix_hash(self, n: int) -> int:
        """One integer naming the first ``n`` tokens (n >= 1): equal for two contents exactly when they agree there
        (up to a 64-bit hash collision)."""
        if n < 1:
            raise ValueError(f"prefix_hash needs n >= 1 tokens, got {n}")
        k, start = self._piece_of(n)
        return hash((self.keys()[k], n - start))

    def block_hashes(self, block_size: int, num_tokens: int, first: int = 0) -> list[int]:
        """The prefix hash at the end of each full ``block_size``-token block among the first ``num_tokens``
        tokens, from block ``first`` on: two requests share a KV block exactly when these agree. The blocks ending
        in one piece are hashed together (``map`` over their offsets: a Mooncake piece holds 32 blocks of 16)."""
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        end = (first + 1) * block_size
        last_end = num_tokens // block_size * block_size
        if end > last_end:
            return []
        keys, ends, out = self.keys(), self.ends, []
        k, start = self._piece_of(end)
        last = len(ends)
        while end <= last_end:
            while k < last and end > ends[k]:
                start = ends[k]
                k += 1
            top = ends[k] if k < last and ends[k] < last_end else last_end  # the last block end in piece k
            count = (top - end) // block_size + 1
            out += map(hash, zip(repeat(keys[k]), range(end - start, end - start + count * block_size, block_size)))
            end += count * block_size
        return out

    def block_groups(self, block_size: int, first: int, last: int, keys: list, starts: list) -> None:
        """Blocks ``first`` to ``last - 1`` by the piece their last token is in: appends to ``keys`` and ``starts``
        each piece's key (``keys()``) and its first block there, unless it continues ``keys``' last piece. Block
        ``p`` of piece key ``K`` is the block whose hash is ``H(K, (p + 1) * block_size - piece start)``, so two
        contents share block ``p`` exactly when their pieces' keys there agree: a prefix cache can look up,
        register and evict whole pieces' blocks (a Mooncake piece holds 32 blocks of 16 tokens). A piece of
        tokens ``(s, e]`` holds blocks ``s // block_size`` to ``e // block_size - 1``; the reply every later one."""
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if first >= last:
            return
        piece_keys, ends = self.keys(), self.ends
        k, s = self._piece_of((first + 1) * block_size)
        n = len(ends)
        while k < n:
            e = ends[k]
            b = e // block_size
            a = s // block_size
            if a < first:
                a = first
            if a < b and a < last and (not keys or keys[-1] != piece_keys[k]):
                keys.append(piece_keys[k])
                starts.append(a)
            if b >= last:
                return
            s = e
            k += 1
        a = s // block_size
        if a < first:
            a = first
        if a < last and (not keys or keys[-1] != piece_keys[n]):
            keys.append(piece_keys[n])
            starts.append(a)

    def _piece_of(self, n: int) -> tuple[int, int]:
        """(piece index, its start) of token n - 1; index len(ids) is the reply."""
        ends = self.ends
        lo, hi = 0, len(ends)
        while lo < hi:  # the first piece whose end is >= n
            mid = (lo + hi) // 2
            if ends[mid] < n:
                lo = mid + 1
            else:
                hi = mid
        return lo, (ends[lo - 1] if lo else 0)

    def cut(self, n: int) -> "Content":
        """The content of the first ``n`` tokens (the same reply id)."""
        if n >= self.length:
            return self
        k, _ = self._piece_of(n)
        ends = self.ends[:k + 1]
        ends[-1] = n
        return Content(self.ids[:k + 1], ends, self.reply)

    def then(self, generated: int, pieces, reply: int) -> "Content":
        """The next turn's prompt: this content, its first ``generated`` reply tokens, then ``pieces`` ((id,
        length) pairs: the user's new text), with the next reply id ``reply``."""
        ids, ends = array("q", self.ids), array("q", self.ends)
        end = ends[-1]
        for piece, length in ((self.reply, generated), *pieces):
            if length > 0:
                end += length
                ids.append(piece)
                ends.append(end)
        return Content(ids, ends, reply)

    def __eq__(self, other) -> bool:
        return (isinstance(other, Content) and self.ids == other.ids and self.ends == other.ends
                and self.reply == other.reply)

    __hash__ = None

    def __repr__(self) -> str:
        shown = ", ".join(f"{i:#x}:{n}" for i, n in self.pieces()[:4])
        more = f", ... {len(self.ids) - 4} more" if len(self.ids) > 4 else ""
        return f"Content([{shown}{more}], length={self.length}, reply={self.reply:#x})"
