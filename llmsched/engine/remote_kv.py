"""A decode instance's requests whose prompt KV a prefill instance computed: received, given their blocks when
the KV manager has them, then waiting with the prompt computed but its last token.

This is vLLM v1's path for a request with ``kv_transfer_params`` (``do_remote_prefill``) under a KV connector that
loads asynchronously (NIXL's pull; vllm/v1/core/sched/scheduler.py, read at vLLM 0.32):

* **received**: the request is queued like any arrival, but no step computes its prompt;
* **reserved**: at a scheduling point the connector reports the whole prompt loadable
  (``get_num_new_matched_tokens``: every prompt token), and ``allocate_slots`` takes the blocks of all of them
  before a byte moves; the request is then ``WAITING_FOR_REMOTE_KVS`` (skipped by the scheduler) while the
  transfer runs. Requests are reserved in arrival order while their blocks fit and the running set is below
  ``max_num_seqs`` (the waiting loop's checks); the first that does not fit holds the rest (the loop ``break`` s),
  and a request never runs short of a reserved block later (vLLM admits a load only within the free blocks, so
  running decodes preempt one another, never a load); blocks the policy promised its running prompts
  (``promised_blocks``: Sarathi allocates a prompt's whole KV at admission) are not free to a load;
* **loaded**: when the transfer ends the request waits again with every prompt token but the last computed
  (``_update_waiting_for_remote_kv``: a full-prompt hit re-computes its last token so the next one can be
  sampled), ahead of requests that hold no KV (vLLM 0.32 drains its KV-holding waiting queue first). The step that
  computes that one token samples the first output token: the decode side never recomputes the prompt.

The KV manager stays the only writer of block state (``reserve``, ``land``, ``release``), the replica of its own
fields (``Replica.receive``, ``loaded``, ``take_reserved``: these functions change only its queues' contents); the
replica's policy sees a loaded request as a waiting one with one token to compute
(``ReplicaView.tokens_to_compute``). The event loop starts each reserved request's transfer
(``Replica.take_reserved``, drained like ``take_completed``) and calls ``Replica.loaded`` when it ends.
"""
from __future__ import annotations

from ..request import Request, Status

WAITING = Status.WAITING


def receive(rep, req: Request) -> bool:
    """Queue ``req`` (a decode request whose prompt KV comes from a prefill instance) on ``rep``, or reject it when
    the replica could never serve it. True if queued (``Replica.receive`` moves the replica's clock first)."""
    req.replica = rep.index
    reason = rep.never_fits(req)
    if reason:
        return rep.reject(req, reason)
    req.status = WAITING
    rep.receiving.append(req)
    return True


def to_reserve(rep) -> tuple[int, int]:
    """What the next scheduling point reserves: (how many received requests, the blocks they take). Requests are
    reserved the blocks of their whole prompt, in arrival order, while they fit and the running set has room. The
    blocks the policy promised its running prompts (``promised_blocks``: Sarathi allocates a prompt's KV at
    admission) are not free to them, as they would not be in an engine that allocates them then."""
    if len(rep.running) >= rep.config.max_num_seqs:
        return 0, 0
    kv = rep.kv
    left = kv.free - rep.scheduler.promised_blocks(rep.view)
    n = taken = 0
    for req in rep.receiving:
        need = kv.blocks_for(req.prompt_len)  # (a received request holds no block)
        if need > left:
            break
        left -= need
        taken += need
        n += 1
    return n, taken


def reserve(rep) -> None:
    """A scheduling point: the received requests ``to_reserve`` names take their blocks; each is then in transfer
    (``rep.reserved`` lists those reserved now)."""
    kv = rep.kv
    queue = rep.receiving
    for _ in range(to_reserve(rep)[0]):
        req = queue.popleft()
        kv.reserve(req, req.prompt_len)
        rep.transferring.append(req)
        rep.reserved.append(req)


def loaded(rep, req: Request) -> None:
    """``req``'s prompt KV has arrived on ``rep``: it waits with all but its last prompt token computed (or is
    rejected, its blocks freed, if its policy refuses it). ``Replica.loaded`` moves the replica's clock first."""
    rep.transferring.remove(req)
    req.num_computed = req.prompt_len - 1
    rep.kv.land(req, req.prompt_len)
    reason = rep.scheduler.unservable(req, rep.view) or rep.scheduler.on_arrival(req, rep.view)
    if reason:
        rep.kv.release(req)
        req.num_computed = 0
        rep.reject(req, f"{rep.scheduler.name}: {reason}")
        return
    rep.waiting.insert(front(rep.waiting), req)  # behind the loaded requests already waiting
    if rep.tiers is not None:  # (beside a tier's loads it is told apart from them: Replica.landed)
        rep.landed.add(req)


def drop(rep, req: Request) -> None:
    """``req``'s transfer ended after its client gave up (``Replica.abort``): its reserved blocks are freed, as
    vLLM frees an aborted request's blocks once its receive finished (``_update_from_kv_xfer_finished``)."""
    rep.transferring.remove(req)
    rep.kv.release(req)


def front(waiting: list[Request]) -> int:
    """Where the head of ``waiting`` begins for a request that holds no KV: after the loaded ones (vLLM 0.32 drains
    its KV-holding waiting queue first, so a preempted request cannot hold the blocks a loaded one waits behind)."""
    at = 0
    while at < len(waiting) and waiting[at].num_blocks:
        at += 1
    return at


def holding(rep) -> list[Request]:
    """The requests holding blocks outside the running set: in transfer, or loaded and waiting."""
    return list(rep.transferring) + [r for r in rep.waiting if r.num_blocks]


def stop(rep) -> list[Request]:
    """The run ends: received and in-transfer requests leave, their blocks freed (their status is the caller's)."""
    kv = rep.kv
    for r in rep.transferring:
        kv.release(r)
    left = list(rep.receiving) + rep.transferring
    rep.receiving.clear()
    rep.transferring.clear()
    rep.reserved.clear()
    return left
