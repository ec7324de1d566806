"""The policy side of the policy/mechanism split.

A scheduler reads a ``ReplicaView`` and returns a ``BatchPlan``; it never touches
blocks or request state. Its parameters are dataclass fields, so the registry can
list them with their defaults and build one from a config file or the CLI.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from typing import ClassVar

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from ..request import Request


@dataclass
class Scheduler:
    name: ClassVar[str] = "?"
    source: ClassVar[str] = ""  # paper / system, seed and section
    family: ClassVar[str] = "baselines"  # the paper (or "baselines") a policy comes from: groups it in plots
    needs_oracle: ClassVar[bool] = False  # decides from true output lengths (runs only with oracle=True)
    chunks_prompts: ClassVar[bool] = True  # False: every prefill runs whole in one step (see prefill_limit)
    recompute_only: ClassVar[bool] = False  # True: the policy cannot run with preemption_mode="swap"
    # True: it plans a waiting request whose prompt KV a prefill instance sent (engine/remote_kv.py: it holds its
    # blocks and has one token to compute, ``view.tokens_to_compute``/``admission_blocks``) as vLLM v1 does, so it
    # may run a disaggregated fleet's decode pool; a policy that plans waiting requests as holding nothing may not.
    # Such a policy plans from the KV manager's free blocks, so on a prefill instance it also runs beside the blocks
    # of finished prompts kept for the decode side (disagg_config.sending); a policy with a ledger of its own
    # (Orca's and FasterTransformer's seats, InferMax's) counts only what it runs, and its prefill instance frees
    # them at once
    serves_transferred_kv: ClassVar[bool] = False
    # False: the policy cannot run beside KV tiers below the GPU (a waiting request may hold the blocks a tier loaded
    # for it, or be loading): its plans were checked to overrun the cache, list a loading request, or stall
    # (Orca's and FasterTransformer's reserved seats, InferMax's static and single-group settings, RAD's Appendix D
    # mirror; 2026-11-30), so a run with tiers refuses it before it starts
    runs_beside_tier_loads: ClassVar[bool] = True
    # True: the policy is vLLM's own scheduler, so a run refuses the limits vLLM refuses at start-up
    # (config_fields.refuse_as_vllm)
    models_vllm: ClassVar[bool] = False
    # True: with a prefix cache, it plans its admissions through ``view.step_draft`` (running work first, then each
    # admission as the ones before it leave the cache), so the replica takes the step's blocks in vLLM v1's order
    # (engine/cache_draft.py); False: the replica references every admission's hit before any block is taken, so
    # an admission finds at least what the policy saw (a policy that runs prompts whole needs that)
    looks_up_in_order: ClassVar[bool] = False
    # The three properties below let the simulator skip work; a policy built on RunningFirst (running_first.py:
    # its order, budget, chunk and admission hooks) has all three by construction, one that writes its own
    # ``schedule`` declares those it keeps.
    # True: once this policy decodes every running request and nothing else, with no request waiting or swapped,
    # it returns that same plan at every step until a request arrives or finishes or a decode finds no free KV
    # block (it reads neither the clock nor step times, and keeps no per-step state). The simulator then
    # fast-forwards such runs of steps in one go, with identical results (docs/simulator.md).
    steady_decodes: ClassVar[bool] = False
    # True (with steady_decodes): after requests finish in such a run, with none waiting or swapped, it decodes
    # every request still running, so the run is fast-forwarded past finishes too (open-loop sources)
    steady_after_finishes: ClassVar[bool] = False
    # True (with steady_decodes): it reads the running requests through ``RunningWork`` (decode_pass.py), which
    # plans from the view's decode group while one is formed, and holds no running request of its own to read
    # between steps; the simulator then steps the group without per-request work
    plans_decode_group: ClassVar[bool] = False
    # True: ``load(view)`` depends only on the replica's queues and requests, not on the clock, so a router may
    # keep it until the replica next changes (``Replica.version``); a subclass with its own ``load`` declares it
    load_from_state: ClassVar[bool] = True
    # the parameters that are this policy's own per-step token budgets (None: the replica's cap); see
    # fit_token_budgets
    token_budgets: ClassVar[tuple[str, ...]] = ()
    lowered_token_budgets: ClassVar[dict] = {}  # what fit_token_budgets lowered (an instance's own, once set)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "load" in cls.__dict__ and "load_from_state" not in cls.__dict__:
            cls.load_from_state = False
        new_rule = "schedule" in cls.__dict__ or "on_step_end" in cls.__dict__
        for name in ("steady_decodes", "steady_after_finishes", "plans_decode_group"):
            if new_rule and name not in cls.__dict__:
                setattr(cls, name, False)  # a new decision rule must declare the property itself
        for name in ("steady_after_finishes", "plans_decode_group"):
            if getattr(cls, name) and not cls.steady_decodes:
                raise TypeError(f"scheduler {cls.__name__}: {name} needs steady_decodes")
        if cls.steady_decodes and cls.on_step_end is not Scheduler.on_step_end:
            raise TypeError(f"scheduler {cls.__name__} keeps per-step state (on_step_end): it cannot declare "
                            f"steady_decodes")

    def schedule(self, view: ReplicaView) -> BatchPlan:
        raise NotImplementedError

    def prefill_limit(self, view: ReplicaView) -> int | None:
        """The longest prefill (prompt, plus the output recomputed after a preemption) this policy ever runs for
        one request in one step; None when it chunks prefills, so any length runs in pieces."""
        return None if self.chunks_prompts else view.max_num_batched_tokens

    def check_limits(self, view: ReplicaView) -> None:
        """A ValueError (one line: the limit and the fix) when this policy can never run on a replica with
        ``view``'s limits. Asked when the replica is built, so such a run is refused before it starts, even in a
        fleet whose pools differ in their limits."""

    def unservable(self, req: Request, view: ReplicaView) -> str | None:
        """Why this policy can never run ``req``'s next prefill, or None. The replica asks at arrival and after a
        recompute preemption and rejects with this reason, so such a request never waits forever."""
        limit = self.prefill_limit(view)
        n = req.num_tokens - req.num_computed  # a prompt a prefill instance sent: only its last token is computed
        if limit is None or n <= limit:
            return None
        what = "prompt" if n == req.prompt_len else f"prefill ({req.prompt_len} prompt + {req.num_generated} " \
                                                   f"generated tokens to recompute after a preemption)"
        return (f"its {n}-token {what} exceeds {limit} tokens, the most this scheduler runs in one step "
                f"(max_num_batched_tokens {view.max_num_batched_tokens}), and it does not chunk prompts: raise "
                f"--max-num-batched-tokens or use a chunking scheduler (sarathi, vllm-chunked)")

    def on_arrival(self, req: Request, view: ReplicaView) -> str | None:
        """Admission control at arrival: a reason to reject ``req``, or None to queue it."""
        return None

    def on_step_end(self, view: ReplicaView, plan: BatchPlan, duration: float) -> None:
        """Called after every step with what ran and how long it took (observed, not predicted)."""

    def promised_blocks(self, view: ReplicaView) -> int:
        """Free KV blocks this policy has promised its running requests (Sarathi allocates a prompt's whole KV at
        admission, so its chunks take no block of their own): whatever else the replica gives blocks to outside a
        plan (a prefill instance's KV, reserved at a scheduling point) leaves them free. Default: none."""
        return 0

    def stats(self) -> dict | None:
        """Figures the policy keeps about its own decisions (its preemptions and the work they threw away), summed
        over the replicas into the run summary's ``policy`` section; None when it keeps none."""
        return None

    def load(self, view: ReplicaView) -> float:
        """Load estimate for routers; default: tokens of work outstanding (prefill left + one per decode)."""
        pending = 0
        for r in view.waiting:
            pending += r.prompt_len + r.num_generated
        group = view.decode_group
        if group is not None:  # a member has one token left to compute; reading running would dissolve the group
            pending += group.size
        for r in view.running if group is None else group.partials:
            pending += r.prompt_len + r.num_generated - r.num_computed
        for r in view.swapped:
            pending += 1
        return float(pending)

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def fit_token_budgets(self, cap: int, given=()) -> dict:
        """Lower each of this policy's ``token_budgets`` above ``cap`` (the replica's max_num_batched_tokens) to
        it, before a run: a step never holds more than the cap, so such a budget could never be used. A
        documented choice, not a silent one: ``describe()`` (the run's meta.json) records what was lowered
        (``{parameter: {"given": value, "used": cap}}``, also returned), the policy's parameters show what is used,
        and a budget the user set (``given``: the parameters set) is warned about. With the defaults (cap 8192)
        none is lowered."""
        lowered = {}
        for name in self.token_budgets:
            value = getattr(self, name)
            if value is not None and value > cap:
                lowered[name] = {"given": value, "used": cap}
                setattr(self, name, cap)
        if lowered:
            self.lowered_token_budgets = {**self.lowered_token_budgets, **lowered}
        told = [f"{name} {lowered[name]['given']}" for name in lowered if name in given]
        if told:
            warnings.warn(f"scheduler {self.name!r}: {', '.join(told)} above max_num_batched_tokens {cap}: each "
                          f"step uses at most {cap} (lower the parameter or raise --max-num-batched-tokens)",
                          stacklevel=2)
        return lowered

    def describe(self) -> dict:
        out = {"name": self.name, "source": self.source, "params": self.params()}
        if self.lowered_token_budgets:
            out["token_budgets"] = self.lowered_token_budgets
        return out

