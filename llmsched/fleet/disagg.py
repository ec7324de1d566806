"""Prefill/decode disaggregation as paths through the fleet: a request is prefilled in a ``prefill`` pool, its KV
moves to a ``decode`` pool, which produces the tokens the client sees; or (a decider's choice) it is served whole
in the decode pool.

The disaggregated path is the one vLLM's disaggregation proxy runs (vLLM ``examples/online_serving/
disaggregated_serving/disagg_proxy_demo.py``, ``create_completion``): the proxy sends the prompt to a prefill
instance with ``max_tokens=1``, waits for that response, then picks a decode instance and sends it the original
request, whose KV connector pulls the prompt's KV from the prefill instance (NIXL: ``kv_transfer_params`` with
``do_remote_prefill``) before the decode instance computes the prompt's last token and streams every output token
to the client. So, per request:

* ``KVHandoff.begin``: the prefill instance serves a copy of the request asking one token (its token is the
  proxy's, never the client's);
* ``KVHandoff.__call__`` at the prefill's end: the client's request goes on to the decode pool, ready after the
  proxy's hop (the prefill response's output path, then the decode instance's request path: the run's front end,
  ``hardware/front_end.py``; nothing at the engine boundary), and keeps the client's send and the engine's first
  arrival, so its TTFT counts the prefill queue, the prefill, the hop, the decode queue, the transfer and the first
  decode step;
* the decode stage ``receives_kv``: its replica reserves the prompt's blocks and the fleet moves the KV
  (``fleet/kv_transfers.py``) before the request can run (``engine/remote_kv.py``).

A request that leaves during its prefill (rejected, or cut by the horizon) is recorded as the client's request
(``KVHandoff.report``). ``records`` keeps, per request, its prefill instance and its transfer (start, end, bytes),
which requests.csv shows in a disaggregated run.
"""
from __future__ import annotations

import math
import re

from ..request import Request
from .path import Path, Stage
from .pool import DECODE, PREFILL

NO_RECORD = (-1, math.nan, math.nan, 0)


class KVHandoff:
    """The prefill -> decode hop of a disaggregated path (module docstring)."""

    def __init__(self, front_end=None, first_token_at_prefill: bool = False):
        self.front_end = front_end  # the run's front end at the client boundary (None: engine boundary)
        # DistServe's and Splitwise's way (``--pd-first-token prefill``): the prefill instance's token is the
        # client's first; request id -> its time, until the request leaves (``finish``)
        self.first_token_at_prefill = first_token_at_prefill
        self.first_tokens: dict[int, float] = {}
        self.clients: dict[int, Request] = {}  # request id -> the client's request, while its prefill runs
        # request id -> [prefill replica, transfer start, transfer end, bytes, prefill span (s), prefill's first
        # scheduling, the prompt tokens its prefill found cached (and their split by KV tier)]
        self.records: dict[int, list] = {}

    def begin(self, req: Request) -> Request:
        """The prefill instance's copy of ``req``: its prompt, one token asked."""
        copy = Request(req.id, req.arrival, req.prompt_len, 1, req.tier, req.tenant, req.content)
        copy.sent = req.sent
        self.clients[req.id] = req
        return copy

    def __call__(self, req: Request, now: float) -> tuple[Request, float]:
        """``req``'s prefill ended at ``now``: the client's request, for the decode pool, and when it reaches it."""
        client = self.clients.pop(req.id)
        client.arrival = req.arrival  # the engine's first queued stamp (the prefill instance's)
        client.replica = req.replica  # its last replica until a decode replica takes it
        self.records[req.id] = [req.replica, math.nan, math.nan, 0, req.finish - req.first_scheduled,
                                req.first_scheduled, req.num_cached, req.tier_cached]
        if self.first_token_at_prefill:
            self.first_tokens[req.id] = req.first_token
        fe = self.front_end
        hop = 0.0 if fe is None else fe.output_delay(1) + fe.request_delay(req.prompt_len)
        return client, now + hop

    def report(self, req: Request) -> Request:
        """The client's request for ``req``, a prefill-stage copy leaving before its prefill ended: its outcome,
        with the client's own lengths; a rejection's reason says it was the prefill copy's."""
        client = self.clients.pop(req.id, None)
        if client is None:
            return req
        for name in ("status", "reject_reason", "finish", "replica", "arrival", "first_scheduled", "preemptions",
                     "num_cached", "tier_cached"):
            setattr(client, name, getattr(req, name))
        if req.reject_reason:  # the copy's own lengths are in it (output 1), not the client's
            client.reject_reason = f"its prefill request (max_tokens=1): {req.reject_reason}"
        self.records[req.id] = [req.replica, math.nan, math.nan, 0, math.nan]
        return client

    def finish(self, req: Request) -> Request:
        """The client's request for ``req``, leaving its decode stage. It was first scheduled by its prefill
        instance (as its arrival is that instance's queued stamp), not the decode instance: the prefill and the
        transfer are service, not a wait in a queue (the waiting-queue timeline and fairness's backlogged periods
        read it). With ``first_token_at_prefill``, its first token is the prefill instance's (the decode
        instance's first step recomputes it: one step more than DistServe's decode instance runs), so its TTFT
        ends at the prefill and the transfer and the decode queue fall in the gap before its second token. Its cached
        tokens are its prefill's: the prompt was computed there, and what a prefix cache (or a KV tier) held of it
        there is what the fleet did not compute (the decode instance's own count, vLLM's ``num_cached_tokens``,
        is the transferred prompt, which says nothing of reuse)."""
        rec = self.records.get(req.id)
        if rec is not None and rec[5] == rec[5]:  # (NaN: a prefill that never ran is not recorded here)
            req.first_scheduled = rec[5]
            req.num_cached = rec[6]
            req.tier_cached = rec[7]
        t = self.first_tokens.pop(req.id, None)
        if t is not None and req.token_times:
            req.first_token = t
            req.token_times[0] = t
        return req

    def record_of(self, rid: int) -> tuple:
        """``(prefill replica, transfer start, transfer end, bytes)`` of request ``rid`` (-1, NaN, NaN, 0 for one
        that never reached a prefill instance)."""
        rec = self.records.pop(rid, None)
        return NO_RECORD if rec is None else tuple(rec[:4])


def pd_path(handoff: KVHandoff) -> Path:
    """Prefill in the prefill pool, the KV over the link, decode in the decode pool."""
    return Path((Stage(PREFILL), Stage(DECODE, receives_kv=True)), (handoff,), begin=handoff.begin,
                report=handoff.report, finish=handoff.finish)


LOCAL = Path((Stage(DECODE),))  # served whole by the decode pool (a decider's choice: prefilled locally)


def unbuilt() -> KVHandoff:
    """A handoff for a fleet's checks before its run builds the real one (``fleet_setup``)."""
    return KVHandoff()


def parse_xpyd(text: str) -> tuple[int, int]:
    """``xPyD`` (e.g. ``2P1D``): x prefill and y decode replicas, each at least 1."""
    m = re.fullmatch(r"\s*(\d+)\s*[pP]\s*(\d+)\s*[dD]\s*", str(text))
    if not m:
        raise ValueError("write it as xPyD, x prefill and y decode replicas, e.g. 2P1D")
    x, y = int(m.group(1)), int(m.group(2))
    for n, what in ((x, "prefill"), (y, "decode")):
        if not 1 <= n <= 4096:
            raise ValueError(f"a {what} pool of {n} replicas: each pool needs 1 to 4096 (xPyD, e.g. 2P1D)")
    return x, y
