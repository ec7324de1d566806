"""Kim et al. §6: the admission estimate of the proposed policy, from completed requests only.

Completed requests are binned by ⌊log2 I⌋ of their original prompt length I; each bin keeps a count and
the sum of I + O. A waiting request's peak KV is estimated as the mean total length of its bin (never below
its current length S), so admission leaves room for the decodes it will probably need.
"""
from __future__ import annotations

import math

BUCKETS = 100


class LengthHistogram:
    __slots__ = ("count", "total")

    def __init__(self):
        self.count = [0] * BUCKETS
        self.total = [0] * BUCKETS

    @staticmethod
    def bucket(prompt_len: int) -> int:
        return min(BUCKETS - 1, prompt_len.bit_length() - 1)

    def record(self, prompt_len: int, output_len: int) -> None:
        """A completed request: its original prompt and the output it produced (known once it finished)."""
        k = self.bucket(prompt_len)
        self.count[k] += 1
        self.total[k] += prompt_len + output_len

    def estimate(self, prompt_len: int, current_len: int, threshold: int = 0) -> int:
        """Estimated peak KV tokens: max(S, ⌈mean I+O of the bin⌉), or S with an empty bin or S < threshold."""
        k = self.bucket(prompt_len)
        n = self.count[k]
        if n == 0 or current_len < threshold:
            return current_len
        return max(current_len, math.ceil(self.total[k] / n))
