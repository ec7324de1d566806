"""A client's failed requests in its per-request log: which of them a replay sends, and what it says of the rest.

An overloaded or misconfigured run has requests its client saw fail: a timeout, a dropped connection, an HTTP error
(vLLM answers 400 to a prompt longer than ``max_model_len`` before the engine sees it). None has latencies to
compare, and none of the formats keeps the output length it asked for. What the server did for one is known only
by the tokens the client got before it failed:

* a failed request that got tokens was admitted and decoded that far, so the replay sends it at its send with its
  prompt and those tokens as its output, and compares nothing of it (its latencies are NaN, as for GuideLLM's
  cancelled requests);
* one that got none is not replayed: the server sent it nothing, and what it cost the server (nothing for a
  refusal, a queue slot and perhaps a partial prefill until the client gave up) is not in the log. Where the server
  held it, the replay offers the server less load than the run did, which the note says, with the count and the
  first error.

Sources: vllm/benchmarks/lib/endpoint_request_func.py (a failed request keeps its ``ttft`` and ``itl`` of the
chunks that came before the failure, ``latency`` 0, ``output_lens`` 0); inference-perf's
``openai_client.py`` (a failed request's ``info`` is ``InferenceInfo(input_tokens=0)`` unless its API's
``process_failure`` fills it); GuideLLM's ``requests.errored`` (``GenerativeRequestStats``, with the
``output_tokens`` its usage counted, if any).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class FailedRequests:
    """The failed requests of one log of ``total`` requests: ``got`` maps each one's position in the file to the
    output tokens it got (0: none, or none recorded); ``first_error`` is the first one's message as the client
    recorded it; ``unknown``: why the log cannot say more of those that got none."""

    got: dict[int, int]
    first_error: str
    total: int
    unknown: str = "the server sent them nothing"

    @cached_property  # (asked once a row where a log is read: built once)
    def replayed(self) -> dict[int, int]:
        """Position -> tokens, for the failed requests the replay sends (those that got a token)."""
        return {i: n for i, n in self.got.items() if n >= 1}

    @property
    def note(self) -> str:
        sent, left = len(self.replayed), len(self.got) - len(self.replayed)
        parts = [f"{len(self.got)} of {self.total} requests failed at the client (first: {self.first_error[:80]!r})"]
        if sent:
            parts.append(f"{sent} that got tokens replayed with those tokens as their output, not compared")
        if left:
            parts.append(f"{left} that got none not replayed ({self.unknown}): where the server held them before "
                         f"they failed, the replay offers it less load than the run did")
        return "; ".join(parts)


def error_text(error) -> str:
    """One line of a client's recorded error: a traceback's last line, an HTTP reason, an error object's type and
    message."""
    if isinstance(error, dict):
        kind, message = error.get("error_type"), error.get("error_msg")
        return ": ".join(str(x) for x in (kind, message) if x) or str(error)
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else str(error)
