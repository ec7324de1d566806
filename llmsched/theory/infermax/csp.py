"""Kim et al. §3: the optimal offline schedule as a constraint problem, solved exactly with OR-Tools CP-SAT.

The paper's formulation (§3.1, solved with Gurobi) completed with the constraints it leaves implicit. For requests i and
batches j = 1..J (state after batch j; j = 0 is S = I, m = 0):

* S_ij known tokens, m_ij KV held, c_ij tokens processed, g_ij a token generated, e_ij evicted (m = c = 0);
* (T) Σ_j g_ij = O_i; (S) S_ij = S_i,j−1 + g_ij; (1) m_ij = m_i,j−1 + c_ij unless evicted;
  (2) c_ij ≤ S_i,j−1 − m_i,j−1; (3) g_ij = 1 ⇔ c_ij = S_i,j−1 − m_i,j−1 (both directions);
  (4) Σ_i c_ij ≤ C, Σ_i (prefill tokens) ≤ P, Σ_i m_ij ≤ M;
* a finished request releases its KV in the next batch (a free, forced "eviction" that is not counted);
* a request is in decode phase when it has generated a token and one token is left (d_ij), else its chunk is
  a prefill or refill (p_ij), as the replica classifies it;
* objective: Σ_j of the batch-time model (any ``LinearBatchTime`` without the staircase term; InferMax's §2
  form included) evaluated on batch j; c² + 2mc = m_ij² − m_i,j−1², one square per (i, j); products of a
  phase flag and an integer are indicator constraints (no Big-M); empty batches cost nothing and come last.

Coefficients are scaled to integers (relative rounding below 1e-5), so "optimal" means optimal for the
rounded model; the returned latency is recomputed by replaying the schedule on the real replica. The
horizon J bounds the number of batches: by default the largest of the one-at-a-time schedule and the
heuristic schedules it is warm-started from, so every one of those is a feasible point and the optimum can
never be worse than them.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from ...batchtime.linear import LinearBatchTime
from .schedule import Instance, Schedule, replay

STATUS = {"OPTIMAL": "optimal", "FEASIBLE": "feasible", "INFEASIBLE": "infeasible", "UNKNOWN": "unknown",
          "MODEL_INVALID": "invalid"}


@dataclass
class CspResult:
    status: str  # optimal | feasible (time limit hit: see gap) | infeasible | unknown (no solution in time)
    latency: float | None  # seconds, replayed on the replica
    objective: float | None  # seconds, the solver's (rounded-coefficient) objective
    bound: float | None  # seconds, proven lower bound on any schedule within the horizon
    horizon: int
    solve_seconds: float
    schedule: Schedule | None = None
    message: str = ""
    stats: dict = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        """Relative gap between the schedule found and the proven bound (0 when proven optimal)."""
        if self.objective is None or self.bound is None or self.objective <= 0:
            return None
        return max(0.0, (self.objective - self.bound) / self.objective)


def _scale(coefficients: dict) -> float:
    smallest = min((v for v in coefficients.values() if v > 0), default=1.0)
    return 10.0 ** max(0, math.ceil(math.log10(1e5 / smallest)))


def solve(instance: Instance, cost: LinearBatchTime, horizon: int | None = None, time_limit: float = 30.0,
          workers: int = 8, hints: list[Schedule] | None = None, seed: int = 0, chunking: bool = True,
          search: dict | None = None) -> CspResult:
    """Minimise total latency over schedules of at most ``horizon`` batches (``chunking=False``: only over
    schedules that process a request's whole pending tokens whenever they process it, as vLLM does; a
    smaller space, solved much faster, whose optimum bounds the full one from above)."""
    from ortools.sat.python import cp_model

    if not isinstance(cost, LinearBatchTime):
        raise ValueError("the CSP prices batches with a LinearBatchTime model (e.g. from_infermax); got "
                         f"{type(cost).__name__}")
    k = cost.coefficients
    if k["staircase_tokens"]:
        raise ValueError("the CSP does not model the staircase term; use a linear model without staircase_tokens")
    if time_limit <= 0:
        raise ValueError(f"time_limit must be > 0 seconds, got {time_limit}")
    hints = [h for h in (hints or []) if h.batches]
    scale = _scale(k)
    w = {t: round(v * scale) for t, v in k.items()}
    N, C, P, M = instance.n, instance.batch_tokens, instance.P, instance.kv_slots
    I, O = instance.inputs, instance.outputs
    upper = min((replay(h, instance, cost) for h in hints), default=None)  # seconds, the best warm start
    # Any schedule better than ``upper`` has at most J_ub batches: each real batch costs at least the fixed cost
    # of a batch with a prefill or a decode, on top of every request's own floor. With a horizon >= J_ub,
    # "optimal" within the horizon is optimal over all schedules.
    floors = [_request_floor(w, I[i], O[i]) for i in range(N)]
    per_batch = w["const"] + min(w["has_prefill"], w["has_decode"])
    J_ub = (max(1, math.floor((upper * scale * (1 + 2e-5) - sum(floors)) / per_batch))
            if upper is not None and per_batch > 0 else None)
    J = horizon or max([1, *(len(h.batches) for h in hints)] if J_ub is not None else
                       [instance.sequential_batches(), *(len(h.batches) for h in hints)])
    if horizon is None and J_ub is not None:
        J = max(J, J_ub)
    if J < 1:
        raise ValueError(f"horizon must be >= 1 batch, got {J}")

    model = cp_model.CpModel()
    nv, bv = model.new_int_var, model.new_bool_var
    y = [bv(f"y{j}") for j in range(J)]
    yp = [bv(f"yp{j}") for j in range(J)]
    yd = [bv(f"yd{j}") for j in range(J)]
    V = {name: [[None] * J for _ in range(N)] for name in ("S", "m", "c", "g", "e", "z", "d", "p", "fin", "q", "r",
                                                           "pm", "dm", "sq", "many", "fresh")}
    objective = []
    request_cost = [[] for _ in range(N)]
    general_attention = w["prefill_cached_attention"] != w["prefill_attention"]
    for i in range(N):
        U = I[i] + O[i] - 1
        s_prev, m_prev, fin_prev, sq_prev = I[i], 0, None, 0
        for j in range(J):
            S = nv(I[i], I[i] + O[i], f"S{i}_{j}")
            m = nv(0, U, f"m{i}_{j}")
            c = nv(0, min(U, C), f"c{i}_{j}")
            g, e, z, d, p, fin = (bv(f"{t}{i}_{j}") for t in ("g", "e", "z", "d", "p", "fin"))
            todo = s_prev - m_prev
            # a finished request releases its KV (free), and does nothing more
            if fin_prev is None:
                model.add(e == 0)
            else:
                model.add_implication(fin_prev, e)
                model.add_bool_or([~e, y[j]]).only_enforce_if(~fin_prev)  # evictions happen before real batches
            model.add(m == 0).only_enforce_if(e)
            model.add(c == 0).only_enforce_if(e)
            model.add(m == m_prev + c).only_enforce_if(~e)
            model.add(c <= todo)
            model.add(m <= S - 1).only_enforce_if(~e)
            model.add(c == todo).only_enforce_if(g)
            if not chunking:
                model.add(g == z)  # whole passes only: every processed request completes its pass
            model.add(c <= todo - 1).only_enforce_if(~g)
            model.add(S == s_prev + g)
            model.add(S == I[i] + O[i]).only_enforce_if(fin)
            model.add(S <= I[i] + O[i] - 1).only_enforce_if(~fin)
            model.add(c >= 1).only_enforce_if(z)
            model.add(c == 0).only_enforce_if(~z)
            # phase of a processed request: decode iff it has generated a token and one is left
            model.add(d + p == z)
            if j == 0:
                model.add(d == 0)
            else:
                model.add(todo == 1).only_enforce_if(d)
                model.add(s_prev >= I[i] + 1).only_enforce_if(d)
                many, fresh = bv(f"many{i}_{j}"), bv(f"fresh{i}_{j}")
                model.add(todo >= 2).only_enforce_if(many)
                model.add(s_prev <= I[i]).only_enforce_if(fresh)
                model.add_bool_or([many, fresh]).only_enforce_if(p)
                V["many"][i][j], V["fresh"][i][j] = many, fresh
            model.add_implication(z, y[j])
            model.add_implication(p, yp[j])
            model.add_implication(d, yd[j])
            # cost terms of this (i, j): contexts before the batch, prefill attention c² + 2mc = m² − m_prev²
            pm = nv(0, U, f"pm{i}_{j}")
            dm = nv(0, U, f"dm{i}_{j}")
            model.add(pm == m_prev).only_enforce_if(p)
            model.add(pm == 0).only_enforce_if(~p)
            model.add(dm == m_prev).only_enforce_if(d)
            model.add(dm == 0).only_enforce_if(~d)
            sq = nv(0, U * U, f"sq{i}_{j}")
            model.add_multiplication_equality(sq, [m, m])
            q = nv(0, U * U, f"q{i}_{j}")
            model.add(q == sq - sq_prev).only_enforce_if(p)
            model.add(q == 0).only_enforce_if(~p)
            terms = [w["per_token"] * c, w["per_context"] * (pm + dm + c), w["per_prefill"] * p,
                     w["per_decode"] * d, w["prefill_tokens"] * (c - d), w["decode_context"] * (dm + d),
                     w["prefill_context"] * pm, w["prefill_attention"] * q]
            objective += terms
            request_cost[i] += terms
            if general_attention:  # c·m_prev priced apart when the two attention coefficients differ
                r = nv(0, U * U, f"r{i}_{j}")
                model.add_multiplication_equality(r, [c, pm])
                objective.append((w["prefill_cached_attention"] - w["prefill_attention"]) * r)
                V["r"][i][j] = r
            for name, var in (("S", S), ("m", m), ("c", c), ("g", g), ("e", e), ("z", z), ("d", d), ("p", p),
                              ("fin", fin), ("q", q), ("pm", pm), ("dm", dm), ("sq", sq)):
                V[name][i][j] = var
            s_prev, m_prev, fin_prev, sq_prev = S, m, fin, sq
        model.add(sum(V["g"][i]) == O[i])
        # redundant cuts that tighten the relaxation: every token of I+O-1 is processed at least once, each
        # generation needs a batch, and the first prefill pass costs at least I² in c² + 2mc
        model.add(sum(V["c"][i]) >= U)
        model.add(sum(V["z"][i]) >= O[i])
        model.add(sum(V["q"][i]) >= I[i] * I[i])
        for j in range(J):
            model.add_implication(V["g"][i][j], V["z"][i][j])
            model.add(V["m"][i][j] >= (I[i] + 1) * V["d"][i][j])  # a decode holds more than its prompt
            model.add(V["m"][i][j] >= I[i] * V["g"][i][j])  # so does a request that generates
        model.add(sum(request_cost[i]) >= _request_floor(w, I[i], O[i]))
    # KV area: the batch that generates a request's k-th token holds m = S_prev = I+k-1 of its slots (c = S - m
    # completes its pass), so request i occupies at least O·I + O(O-1)/2 slot-batches in any schedule, and the
    # cache offers M per batch: a bound on the number of batches that the relaxation cannot see by itself
    area = sum(O[i] * I[i] + O[i] * (O[i] - 1) // 2 for i in range(N))
    model.add(M * sum(y) >= area)
    model.add(sum(y) >= min_batches(instance))
    model.add(sum(yp) >= min_prefill_batches(instance))
    for i in range(N):
        model.add(sum(V["m"][i]) >= O[i] * I[i] + O[i] * (O[i] - 1) // 2)
        for j in range(1, J):  # the generating batch's m is the known tokens before it
            model.add(V["m"][i][j] >= V["S"][i][j - 1]).only_enforce_if(V["g"][i][j])
    # identical requests are interchangeable: the earlier one finishes no later
    for i in range(N - 1):
        if (I[i], O[i]) == (I[i + 1], O[i + 1]):
            model.add(sum(V["fin"][i]) >= sum(V["fin"][i + 1]))
    for j in range(J):
        model.add(sum(V["c"][i][j] for i in range(N)) <= C)
        model.add(sum(V["c"][i][j] - V["d"][i][j] for i in range(N)) <= P)
        model.add(sum(V["m"][i][j] for i in range(N)) <= M * y[j])  # an empty batch comes after every request
        if j + 1 < J:
            model.add_implication(y[j + 1], y[j])
        model.add(sum(V["z"][i][j] for i in range(N)) >= y[j])  # a batch that costs processes something
        model.add(yp[j] + yd[j] >= y[j])
        objective += [w["const"] * y[j], w["has_prefill"] * yp[j], w["has_decode"] * yd[j]]
    total = sum(objective)
    if upper is not None:  # no worse than the best warm start (rounded coefficients: a relative slack of 2e-5)
        model.add(total <= math.ceil(upper * scale * (1 + 2e-5)))
    model.minimize(total)
    for h in hints[:1]:
        _hint(model, V, y, yp, yd, instance, h, J)

    solver = cp_model.CpSolver()
    # Deterministic: the limit is CP-SAT's deterministic time (work units calibrated to about a second each),
    # one worker or interleaved (deterministic) parallel search, a fixed seed; the wall clock is only a
    # safety net, and hitting it is reported, because only then can two runs differ.
    solver.parameters.max_deterministic_time = float(time_limit)
    solver.parameters.max_time_in_seconds = 10.0 * float(time_limit) + 60.0
    solver.parameters.num_workers = max(1, int(workers))
    if workers > 1:
        solver.parameters.interleave_search = True
    solver.parameters.random_seed = int(seed)
    for name, value in (search or {}).items():
        setattr(solver.parameters, name, value)
    t0 = time.perf_counter()
    code = solver.solve(model)
    elapsed = time.perf_counter() - t0
    status = STATUS.get(solver.status_name(code), solver.status_name(code).lower())
    result = CspResult(status, None, None, None, J, elapsed,
                       stats={"variables": len(model.proto.variables),
                              "constraints": len(model.proto.constraints), "scale": scale,
                              "deterministic_time": solver.deterministic_time, "J_ub": J_ub,
                              "horizon_covers_J_ub": J_ub is not None and J >= J_ub,
                              "wall_limit_hit": elapsed >= solver.parameters.max_time_in_seconds * 0.99})
    if status == "infeasible":
        result.message = (f"no schedule finishes every request within {J} batches under M={M}, C={C}, P={P} "
                          f"(raise the horizon)")
        return result
    best_hint = min(((replay(h, instance, cost), h) for h in hints if len(h.batches) <= J), default=None,
                    key=lambda x: x[0])
    if status in ("optimal", "feasible"):
        schedule = _extract(solver, V, y, N, J)
        result.schedule, result.latency = schedule, replay(schedule, instance, cost)
        result.objective = solver.objective_value / scale
        result.bound = solver.best_objective_bound / scale
    if status != "optimal" and best_hint is not None and (result.latency is None or best_hint[0] < result.latency):
        # the solver stopped before matching its warm start: the warm start is still a valid incumbent
        status = result.status = "feasible"
        result.latency, result.schedule = best_hint
        result.objective = best_hint[0]
        result.bound = min(solver.best_objective_bound / scale, best_hint[0])
    if result.schedule is None:
        result.message = f"no schedule found within the {time_limit:g} s time limit (status {status})"
    elif status == "feasible":
        result.message = f"time limit {time_limit:g} s reached: gap {result.gap:.2%} to the proven bound"
    return result


def min_batches(instance: Instance) -> int:
    """A lower bound on the number of batches of any schedule: the batch that generates request i's k-th token
    holds I_i+k-1 of its KV slots, a request generates at most one token per batch and a batch holds at most M
    slots, so the generations are items of a bin-packing problem with bins of size M; Martello and Toth's L2
    bound (1990) of that problem."""
    items = sorted((i + k for i, o in zip(instance.inputs, instance.outputs) for k in range(o)), reverse=True)
    M = instance.kv_slots
    best = 0
    for alpha in sorted({0, *(x for x in items if x <= M / 2)}):
        big = [x for x in items if x > M - alpha]
        mid = [x for x in items if M - alpha >= x > M / 2]
        small = sum(x for x in items if M / 2 >= x >= alpha)
        spare = len(mid) * M - sum(mid)
        best = max(best, len(big) + len(mid) + max(0, -(-(small - spare) // M)))
    return best


def min_prefill_batches(instance: Instance) -> int:
    """Batches with a prefill in any schedule: every request's first pass is a prefill that ends holding its I
    slots, so a batch holds at most as many first passes as the smallest prompts fit in M (and P tokens)."""
    fit, used = 0, 0
    for i in sorted(instance.inputs):
        if used + i > instance.kv_slots:
            break
        fit, used = fit + 1, used + i
    return max(-(-instance.n // max(1, fit)), -(-sum(instance.inputs) // instance.P))


def _request_floor(w: dict, prompt: int, output: int) -> int:
    """A lower bound on one request's own (per-item) cost terms in any schedule: its first prefill pass, then for
    each later token the cheaper of a decode over S tokens and the last chunk of a refill (from m ≤ S−2)."""
    def prefill(new: int, cached: int) -> int:
        return ((w["per_token"] + w["per_context"] + w["prefill_tokens"]) * new + w["per_prefill"]
                + (w["per_context"] + w["prefill_context"]) * cached
                + w["prefill_attention"] * ((cached + new) ** 2 - cached ** 2)
                + min(w["prefill_cached_attention"] - w["prefill_attention"], 0) * new * cached)

    total = prefill(prompt, 0) - w["per_context"] * 0
    for s in range(prompt + 1, prompt + output):
        decode = w["per_token"] + w["per_context"] * s + w["per_decode"] + w["decode_context"] * s
        refill = min(prefill(s - m, m) for m in (0, s - 2)) if s >= 2 else decode
        total += min(decode, refill)
    return max(0, total)


def _extract(solver, V, y, N, J) -> Schedule:
    batches, evictions = [], []
    finished = [False] * N
    pending: set[int] = set()  # evictions decided before a batch that processes nothing carry to the next one
    for j in range(J):
        batch = {i: solver.value(V["c"][i][j]) for i in range(N) if solver.value(V["c"][i][j]) > 0}
        pending |= {i for i in range(N) if solver.value(V["e"][i][j]) and not finished[i]
                    and (j == 0 or solver.value(V["m"][i][j - 1]) > 0)}
        for i in range(N):
            finished[i] = bool(solver.value(V["fin"][i][j]))
        if batch:
            batches.append(batch)
            evictions.append(pending)
            pending = set()
    return Schedule(batches, evictions)


def relabel(instance: Instance, schedule: Schedule) -> Schedule:
    """The same schedule with identical requests renamed so that the lower index finishes first, as the model's
    symmetry breaking requires."""
    finish = {}
    for j, batch in enumerate(schedule.batches):
        for k in batch:
            finish[k] = j
    name = list(range(instance.n))
    for key in dict.fromkeys(zip(instance.inputs, instance.outputs)):
        group = [k for k in range(instance.n) if (instance.inputs[k], instance.outputs[k]) == key]
        for slot, k in zip(group, sorted(group, key=lambda k: (finish.get(k, -1), k))):
            name[k] = slot
    return Schedule([{name[k]: c for k, c in b.items()} for b in schedule.batches],
                    [{name[k] for k in e} for e in schedule.evictions])


def _hint(model, V, y, yp, yd, instance: Instance, schedule: Schedule, J: int) -> None:
    """Warm start from a heuristic's schedule (the paper warm-starts Gurobi the same way, §3.1)."""
    if len(schedule.batches) > J:
        return
    schedule = relabel(instance, schedule)
    for i in range(instance.n):
        s, m, fin, sq_prev = instance.inputs[i], 0, False, 0
        for j in range(J):
            batch = schedule.batches[j] if j < len(schedule.batches) else {}
            evicted = fin or (j < len(schedule.evictions) and i in schedule.evictions[j])
            c = 0 if evicted else batch.get(i, 0)
            todo = s - m
            decode = c > 0 and s > instance.inputs[i] and todo == 1
            g = c > 0 and c == todo
            m_prev = m
            m = 0 if evicted else m + c
            s += g
            values = {"c": c, "e": evicted, "g": g, "z": c > 0, "d": decode, "p": c > 0 and not decode,
                      "S": s, "m": m, "pm": m_prev if (c > 0 and not decode) else 0, "dm": m_prev if decode else 0,
                      "q": (m * m - sq_prev) if (c > 0 and not decode) else 0}
            values["sq"] = m * m
            if j > 0:
                values["many"], values["fresh"] = todo >= 2, s - g <= instance.inputs[i]
            for name, value in values.items():
                model.add_hint(V[name][i][j], int(value))
            fin = fin or s == instance.inputs[i] + instance.outputs[i]
            model.add_hint(V["fin"][i][j], int(fin))
            sq_prev = m * m
    for j in range(J):
        batch = schedule.batches[j] if j < len(schedule.batches) else {}
        model.add_hint(y[j], int(bool(batch)))
