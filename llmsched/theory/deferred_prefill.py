"""Exact ρ(K) (Theorem 1), Prop. 1 and the optimal threshold K* of deferred prefill (Mohanty et al.), as
``llmsched theory deferred-prefill`` (llmsched/cli/theory_deferred_prefill.py) reports them."""
from __future__ import annotations

import numpy as np

from ..batchtime.registry import make_batch_time_model
from ..hardware.memory import kv_capacity_tokens
from ..hardware.models import model as model_preset
from ..run_config import RunConfig
from ..schedulers.deferred.k_star import alpha_from_mean_output
from ..schedulers.deferred.renewal import check_K, cycle_stats
from ..schedulers.deferred.throughput import exact_throughput, optimal_K, prop1_throughput, r_interval
from ..schedulers.deferred.timing_constants import Timing, timing_from_batch_time, timing_from_steps

# Spec Appendix A: constants back-solved from the paper's Table 1 (not published by the paper). (C, c_p, c_d, A)
APPENDIX_A = {"g-exact": (331, 0.02725, 0.03733, 0.05183), "g-approx": (331, 0.01239, 0.01797, 0.06458),
              "l-exact": (410, 0.01650, 0.00652, 0.04381), "l-approx": (410, 0.00674, 0.00275, 0.04596)}
DEFAULT_K = (1, 2, 5, 10, 26, 32, 58, 75, 100, 200)


def compute(*, C: int | None = None, mean_output: float = 201.0, prompt: int = 285, preset: str | None = None,
            timing: str | None = None, steps: str | None = None, model: str = RunConfig.model,
            gpu: str = RunConfig.gpu, batch_time: str = RunConfig.batch_time,
            max_num_batched_tokens: int | None = None, K: str | None = None) -> dict:
    """ρ(K) exact and by Prop. 1, K*, and a table over ``K`` (comma-separated; default a spread plus K*), with
    the timing constants from one source: an Appendix A ``preset``, explicit ``timing`` "C_P,S_P,C_D,T_D", a
    ``steps`` CSV, or else fitted to ``model`` on ``gpu``."""
    alpha = alpha_from_mean_output(mean_output)
    fit = None
    if sum(x is not None for x in (preset, timing, steps)) > 1:
        raise ValueError("give one timing source: --preset, --timing or --steps (or none, to fit --model/--gpu)")
    if preset:
        C_pre, c_p, c_d, A = APPENDIX_A[preset]
        C = C or C_pre
        constants = Timing.from_A(c_p, c_d, A, alpha)
        source = f"spec Appendix A '{preset}' (back-solved from the paper's Table 1; only A = t_d/α + s_p counts)"
    elif timing:
        try:
            values = [float(v) for v in timing.split(",")]
            if len(values) != 4:
                raise ValueError
        except ValueError:
            raise ValueError(f"--timing {timing!r}: give four numbers C_P,S_P,C_D,T_D in seconds") from None
        C, constants, source = C or 331, Timing(*values), "given"
    elif steps:
        fit = timing_from_steps(steps)
        C, constants, source = C or 331, fit.timing, fit.source
    else:
        C = C or 331
        spec = model_preset(model)
        held = kv_capacity_tokens(spec, gpu)        # one line naming the fix where the weights do not fit
        need = C * (prompt + mean_output)
        if need > held:
            raise ValueError(f"--C {C}: {C} running requests of {prompt} + {mean_output:g} tokens hold about "
                             f"{need:,.0f} KV tokens, but {spec.name} on {gpu} holds {held:,}; lower --C to at most "
                             f"{max(1, int(held // (prompt + mean_output)))} or use a GPU with more memory")
        bt = make_batch_time_model(batch_time, spec, gpu)
        fit = timing_from_batch_time(bt, C, prompt, alpha, max_num_batched_tokens)
        constants, source = fit.timing, fit.source
    stats = cycle_stats(C, alpha)
    rho = exact_throughput(C, alpha, constants, stats)
    approx = prop1_throughput(C, alpha, constants)
    K_star, K_prop1 = optimal_K(rho), optimal_K(approx)
    Ks = DEFAULT_K if K is None else _parse_K(K)
    Ks = sorted({check_K(k, C) for k in Ks if k <= C or K is not None} | {1, K_star, K_prop1, C})
    r = constants.c_p / constants.c_d if constants.c_d > 0 else float("inf")
    out = {"C": C, "alpha": alpha, "mean_output": mean_output, "timing": constants.as_dict(),
           "timing_source": source, "r": r, "A": constants.t_d / alpha + constants.s_p,
           "K_star": K_star, "rho_K_star": float(rho[K_star]), "rho_1": float(rho[1]),
           "gain": float(rho[K_star] / rho[1]), "K_star_prop1": K_prop1,
           "r_interval_for_K_star": list(r_interval(C, alpha, K_star, r_max=max(1e3, 10 * r))),
           "table": [{"K": k, "E_N": float(stats.iterations[k]), "E_D": float(stats.departures[k]),
                      "rho": float(rho[k]), "rho_prop1": None if np.isnan(approx[k]) else float(approx[k])}
                     for k in Ks]}
    if fit is not None:
        out["fit"] = {"prompt_len": fit.prompt_len, "prefill": fit.prefill.as_dict(), "decode": fit.decode.as_dict()}
    return out


def _parse_K(text: str) -> list[int]:
    try:
        return [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--K {text!r}: give comma-separated integers, e.g. 1,26,32") from None
