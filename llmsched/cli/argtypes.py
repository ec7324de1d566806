"""argparse types for numeric options with a range, so a bad value is a one-line usage error naming the option.

``--memory -100`` reads "argument --memory: must be a number > 0, got '-100'" instead of a nonsense result.
"""
from __future__ import annotations

import argparse
import math


def number(kind=float, low: float | None = None, above: float | None = None, high: float | None = None,
           below: float | None = None):
    """An argparse ``type``: ``kind`` (int or float), finite, within the given bounds."""
    bounds = [f">= {low:g}" if low is not None else "", f"> {above:g}" if above is not None else "",
              f"<= {high:g}" if high is not None else "", f"< {below:g}" if below is not None else ""]
    what = ("an integer" if kind is int else "a number") + "".join(" " + b for b in bounds if b)
    what = what.replace(" <=", " and <=").replace(" <", " and <") if any(bounds[:2]) else what

    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if not math.isfinite(value) or (low is not None and value < low) or (above is not None and value <= above) \
                or (high is not None and value > high) or (below is not None and value >= below):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    convert.__name__ = "integer" if kind is int else "number"
    return convert


positive = number(float, above=0)
non_negative = number(float, low=0)
count = number(int, low=1)
probability = number(float, above=0, below=1)
