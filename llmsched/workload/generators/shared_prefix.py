"""``--workload shared-prefix``: kubernetes-sigs/inference-perf's ``shared_prefix`` data generator, as lengths and
contents.

Followed from inference_perf/datagen/synthetic/shared_prefix_datagen.py at commit 7b902f7 (the last to change it
in the repository's snapshot of 7de5ef2) and inference_perf/apis/user_session.py (the multi-turn context):

* ``num_groups`` system prompts (alias ``num_unique_system_prompts``, default 10) of ``system_prompt_len`` tokens
  (100), each shared by ``num_prompts_per_group`` prompts (alias ``num_users_per_system_prompt``, 10): a prompt is
  its group's system prompt then its own question of ``question_len`` tokens (50), answered in ``output_len``
  tokens (50). The generator shuffles the prompts once (a seeded permutation) and request i sends prompt i mod N,
  N = num_groups x num_prompts_per_group, so prompts repeat whole after N requests.
* ``enable_multi_turn_chat``: prompt k belongs to user k, whose conversation starts from its system prompt; request
  i is round i div N of user i mod N and sends the conversation so far (the user's context: at first the system
  prompt, then the previous round's prompt and reply) followed by the prompt (system prompt and question again, as
  the generator's ``context + " " + prompt`` does). A round waits for the user's previous one to finish (the
  session's lock there): in an open loop it arrives at its scheduled time or when the previous round ends,
  whichever is later; in a closed loop (``--concurrency``) each user sends its next round ``--think-time`` after
  the last, for ``--turns`` rounds (default: until ``--num-requests``), then the next user's session opens.

Lengths are fixed integers here (inference-perf also takes distributions); its tokenizer-exact texts are not needed:
only which tokens are shared matters, and that is what the contents say. Its history truncation to the model's
context (done there only when a system prompt, a tokenizer and max_model_len are configured) is not done: a round
longer than the model's context is rejected at arrival, with that reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from llmsched.bounds import MAX_REQUESTS, MAX_TOKENS
from llmsched.content import Content, Space, piece_id
from llmsched.request import DEFAULT_TIER
from llmsched.workload.arrivals.processes import ArrivalProcess, Constant, Gamma, Poisson
from llmsched.workload.chunks import CHUNK, pieces
from llmsched.workload.generators.closed_sessions import SessionClosedLoop
from llmsched.workload.generators.sessions import Turn, turn_number
from llmsched.workload.tenants.tiers import assign_tiers, check_tiers
from llmsched.workload.workload import ARRIVAL_KINDS, SessionOpenLoop, StreamedOpenLoop, check_seed, streams

NAME = "shared-prefix"
ALIASES = {"num_unique_system_prompts": "num_groups", "num_users_per_system_prompt": "num_prompts_per_group"}
COUNTS = ("num_groups", "num_prompts_per_group")  # the other integers are lengths in tokens


@dataclass(frozen=True)
class SharedPrefix:
    """The generator's parameters (see the module docstring) and a seed for its shuffle."""

    num_groups: int = 10
    num_prompts_per_group: int = 10
    system_prompt_len: int = 100
    question_len: int = 50
    output_len: int = 50
    enable_multi_turn_chat: bool = False
    seed: int = 0

    @classmethod
    def from_params(cls, params: dict, seed: int = 0) -> "SharedPrefix":
        """From ``--wl-param`` / ``workload_params`` (inference-perf's names and aliases)."""
        values = {}
        for key, value in (params or {}).items():
            name = ALIASES.get(key, key)
            if name not in DEFAULTS:
                raise ValueError(f"workload {NAME} has no parameter {key!r} (--wl-param); its parameters are: "
                                 f"{', '.join(DEFAULTS)} (aliases {', '.join(ALIASES)})")
            if name in values:
                raise ValueError(f"workload {NAME} parameter {name} is given twice (as {key}); give it once")
            kind = type(DEFAULTS[name])
            if kind is bool and not isinstance(value, bool) or kind is int and (
                    isinstance(value, bool) or not isinstance(value, int) or value < 1):
                want = "true or false" if kind is bool else "an integer >= 1"
                raise ValueError(f"workload {NAME} parameter {key} = {value!r} must be {want} "
                                 f"(--wl-param {key}=VALUE)")
            high = MAX_REQUESTS if name in COUNTS else MAX_TOKENS
            if kind is int and value > high:
                what = "prompts" if name in COUNTS else "tokens"
                raise ValueError(f"workload {NAME} parameter {key} = {value!r} must be at most {high:,} {what} "
                                 f"(--wl-param {key}=VALUE)")
            values[name] = value
        out = cls(**values, seed=check_seed(seed))
        if out.num_prompts > MAX_REQUESTS:  # the generator draws a permutation of every distinct prompt
            raise ValueError(f"workload {NAME}: num_groups {out.num_groups:,} x num_prompts_per_group "
                             f"{out.num_prompts_per_group:,} = {out.num_prompts:,} distinct prompts, more than "
                             f"{MAX_REQUESTS:,}; lower one of them (--wl-param)")
        return out

    @property
    def num_prompts(self) -> int:
        return self.num_groups * self.num_prompts_per_group

    def prompts(self) -> np.ndarray:
        """Each request slot's prompt: the generator's prompts (group-major) in its seeded shuffle."""
        return np.random.default_rng(np.random.SeedSequence(self.seed).spawn(4)[3]).permutation(self.num_prompts)

    def group(self, prompt: int) -> int:
        return prompt // self.num_prompts_per_group

    def prompt_pieces(self, prompt: int) -> list[tuple[int, int]]:
        """Prompt ``prompt``'s system prompt and question."""
        return [(piece_id(Space.SHARED, self.group(prompt)), self.system_prompt_len),
                (piece_id(Space.SHARED, self.num_groups + prompt), self.question_len)]

    def single(self, prompt: int, reply: int) -> Content:
        return Content.of_pieces(self.prompt_pieces(prompt), piece_id(Space.REPLY, reply))

    def rounds(self, prompt: int, replies, not_before=None, tier=DEFAULT_TIER):
        """User ``prompt``'s rounds as Turns: round r replies with id ``replies[r]``, not before ``not_before[r]``."""
        content = None
        system = (piece_id(Space.SHARED, self.group(prompt)), self.system_prompt_len)
        for r, reply in enumerate(replies):
            if content is None:  # the context starts as the system prompt, then the prompt is added to it
                content = Content.of_pieces([system, *self.prompt_pieces(prompt)], piece_id(Space.REPLY, reply))
            else:
                content = content.then(self.output_len, self.prompt_pieces(prompt), piece_id(Space.REPLY, reply))
            yield Turn(content.length, self.output_len, content, not_before=0.0 if not_before is None
                       else float(not_before[r]), tier=tier)

    def describe(self) -> dict:
        return {"kind": NAME, "source": "kubernetes-sigs/inference-perf shared_prefix_datagen.py @ 7b902f7",
                **{k: getattr(self, k) for k in DEFAULTS}, "seed": self.seed}

    def open_loop(self, rate: float | None = None, num_requests: int | None = None, duration: float | None = None,
                  arrival: str = "poisson", cv: float | None = None, tiers=(DEFAULT_TIER,), chunk: int = CHUNK,
                  process: ArrivalProcess | None = None):
        """Requests at ``rate`` (Poisson, gamma or constant arrivals), or timed by ``process`` (a rate schedule's):
        each its slot's prompt, or with multi-turn chat each its user's next round, arriving when scheduled or when
        that user's previous round ends."""
        if process is None:
            process = renewal(rate, arrival, cv)
        time_rng, _, tier_rng = streams(self.seed, 3)
        times = process.times(num_requests, time_rng) if num_requests is not None else process.until(duration,
                                                                                                     time_rng)
        n = len(times)
        tiers = check_tiers(tiers)
        drawn = assign_tiers(n, tiers, tier_rng)
        order = self.prompts()
        N = len(order)
        if not self.enable_multi_turn_chat:
            prompt_lens = np.full(n, self.system_prompt_len + self.question_len, np.int64)
            return StreamedOpenLoop(n, lambda: pieces(times, chunk),
                                    lambda: pieces_of(prompt_lens, self.output_len, chunk),
                                    lambda: pieces(drawn, chunk), lambda: self._single_chunks(order, n, chunk))
        heads = min(n, N)

        def sessions():
            for u in range(heads):
                replies = range(u, n, N)
                turns = self.rounds(int(order[u]), replies, times[u::N], drawn[u])
                first = next(turns)
                yield first, (turns if len(replies) > 1 else None)

        firsts = [first for first, _ in sessions()]  # a user's first round: N of them at most
        return SessionOpenLoop(heads, lambda: pieces(times[:heads], chunk),
                               lambda: pieces_of(np.array([f.prompt_len for f in firsts], np.int64), self.output_len,
                                                 chunk),
                               lambda: pieces([f.tier for f in firsts], chunk),
                               lambda: pieces([f.content for f in firsts], chunk),
                               lambda: pieces([rest for _, rest in sessions()], chunk), n)

    def _single_chunks(self, order: np.ndarray, n: int, chunk: int):
        N = len(order)
        for a in range(0, n, chunk):
            yield [self.single(int(order[i % N]), i) for i in range(a, min(n, a + chunk))]

    def closed_loop(self, concurrency: int, num_requests: int, think_time: float = 0.0, turns: int | None = None,
                    tiers=(DEFAULT_TIER,)) -> SessionClosedLoop:
        """``concurrency`` users; session s is user s mod N's: one request, or with multi-turn chat (or ``turns``
        > 1) ``turns`` rounds (default: as many as ``num_requests`` allows)."""
        order = self.prompts()
        N = len(order)
        multi = self.enable_multi_turn_chat or (turns or 1) > 1
        rounds = 1 if not multi else turns or num_requests
        tier_of = assign_tiers(num_requests, check_tiers(tiers), streams(self.seed, 3)[2])

        def plan(s: int):
            prompt = int(order[s % N])
            tier = tier_of[s % num_requests]
            if not multi:
                content = self.single(prompt, turn_number(s, 0))
                return iter([Turn(content.length, self.output_len, content, tier=tier)])
            return self.rounds(prompt, (turn_number(s, r) for r in range(rounds)), tier=tier)

        return SessionClosedLoop(concurrency, plan, num_requests, think_time, describe=self.describe())


DEFAULTS = {f.name: f.default for f in fields(SharedPrefix) if f.name != "seed"}  # the --wl-param names


def pieces_of(prompt_lens: np.ndarray, output_len: int, chunk: int):
    for a in range(0, len(prompt_lens), chunk):
        p = prompt_lens[a:a + chunk]
        yield p, np.full(len(p), output_len, np.int64)


def renewal(rate: float, arrival: str = "poisson", cv: float | None = None) -> ArrivalProcess:
    """Poisson, gamma (give ``cv``) or constant arrivals at ``rate``."""
    if arrival not in ARRIVAL_KINDS:
        raise ValueError(f"unknown arrival process {arrival!r}; valid: {', '.join(ARRIVAL_KINDS)}")
    return Gamma(rate, cv) if arrival == "gamma" else Poisson(rate) if arrival == "poisson" else Constant(rate)


def open_loop_rate(rate) -> float:
    if rate is None or not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"--workload {NAME} in an open loop needs --rate (requests/s), got {rate!r}")
    return float(rate)
