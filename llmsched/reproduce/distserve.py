"""DistServe's goodput comparison (Zhong et al., "DistServe: Disaggregating Prefill and Decoding for
Goodput-optimized Large Language Model Serving", OSDI 2024) against colocated vLLM (``llmsched reproduce
distserve``, llmsched/cli/reproduce_distserve.py).

The settings are the paper's artifact's (LLMServe/DistServe ``evaluation/ae-scripts/e2e/_plot.py`` and
``evaluation/2-benchmark-serving/2-start-api-server.py``): A100-80GB SXM, OPT models, Poisson arrivals, the
figure of merit the **per-GPU rate at which 90% of requests meet both their TTFT and their TPOT target**
(``get_attainment`` counts a request when ``ftl <= ttft_slo and tpot <= tpot_slo``):

* **chatbot, OPT-13B** on ShareGPT: TTFT 0.25 s, TPOT 0.1 s; DistServe one prefill instance at TP 2 and one
  decode instance at TP 1 (3 GPUs), vLLM one instance at TP 1;
* **chatbot, OPT-66B** on ShareGPT: TTFT 0.4 s, TPOT 0.1 s; DistServe prefill TP 4 and decode TP 2 × PP 2
  (8 GPUs), vLLM TP 4. llmsched has no pipeline parallelism, so the decode instance is modelled at TP 4 on the
  same four GPUs (same weights per GPU; PP's bubbles and TP's all-reduces differ);
* **summarization, OPT-66B** on LongBench: TTFT 15 s, TPOT 0.15 s. LongBench's lengths are not available here;
  the arXiv-summarization lengths (../shared/data/traces/arxiv_summarization_lengths_llama2_tokenizer.csv),
  truncated as the artifact truncates LongBench's contexts (to about 1,900-2,040 tokens), stand in, so this row
  is a stand-in, not the paper's workload;
* **code completion** (OPT-66B, HumanEval: TTFT 0.125 s, TPOT 0.2 s) is not run: HumanEval's token lengths
  (OPT's tokenizer) are not available here.

Engines as the artifact starts them: vLLM with ``--max-num-batched-tokens 16384 --max-num-seqs 1024`` (vLLM of
early 2024: whole prompts first, no chunking: ``vllm``); DistServe's prefill instance FCFS with at most 8192
tokens a batch, its decode instance FCFS with up to 1024 requests (``vllm`` on both pools with those limits); the
KV over the node's NVLink (``same-node``), prefill and decode instances in one node as the paper places them for
these models; the first token is the prefill instance's, as in DistServe (``pd_first_token=prefill``: the
transfer and the decode queue count in TPOT, not TTFT).

OPT is a ReLU MLP of two matrices; it is written here as an equivalent Llama-shaped config (a gated MLP of three
matrices with two thirds of OPT's ``ffn_dim``: the same weights and FLOPs per token; no grouped KV heads, as
OPT) with OPT's 2,048-token context, and requests longer than that are left out of the length files, as the
artifact's dataset preparation filters them.

The batch-time model is checked against DistServe's own fitted step-time model of its A100-80GB measurements
(``simdistserve/estimators/profile_data/profiler-a100-80g.{distserve,vllm}.json``: prefill ``a + b·Σtokens +
c·Σtokens²`` ms, decode ``a + b·Σcontext + c·batch`` ms), not fitted to it.

Figures compared: the OSDI abstract's "7.4× more requests or 12.6× tighter SLO" (the arXiv v1 and the
authors' blog said "up to 4.48× goodput or 10.2× tighter SLO"): both "up to" figures over all settings and
baselines; per-setting figures are read off the OSDI paper's Figures 8 and 9, which are not reproduced here.
A second, exact comparison: DistServe's simulator README (``simdistserve/README.md``) reports for OPT-13B on
ShareGPT, TTFT 200 ms and TPOT 100 ms each met by 90% of requests, prefill TP 2 and decode TP 1, a best per-GPU
rate of 1.56 req/s; ``chatbot-13b-simulator`` runs that.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ..executors import make_executor
from ..run_config import RunConfig

PAPER = {"OSDI'24 abstract: more requests (up to)": 7.4, "OSDI'24 abstract: tighter SLO (up to)": 12.6,
         "arXiv v1 / blog: goodput (up to)": 4.48, "arXiv v1 / blog: tighter SLO (up to)": 10.2,
         "simdistserve README: OPT-13B ShareGPT per-GPU rate, req/s": 1.56}
# OPT's shapes (facebook/opt-13b, opt-66b config.json): hidden, layers, heads, ffn_dim
OPT = {"opt-13b": (5120, 40, 40, 20480), "opt-66b": (9216, 64, 72, 36864)}
CONTEXT = 2048
# DistServe's prefill instance batches at most this many tokens (its artifact's engine settings, module docstring):
# DistServe's own limit, not vLLM's default, though the number is the same
DISTSERVE_PREFILL_BATCH = 8192
LENGTHS = {"sharegpt": "sharegpt_8k_lengths_llama2_tokenizer.csv",
           "arxiv": "arxiv_summarization_lengths_llama2_tokenizer.csv"}
# setting -> model, lengths, TTFT and TPOT targets, (prefill TP, decode TP) of DistServe, vLLM's TP, requests per
# GPU (the artifact's), joint attainment (the paper's figures) or each target met separately (simdistserve)
SETTINGS = {
    "chatbot-13b": dict(model="opt-13b", lengths="sharegpt", ttft=0.25, tpot=0.1, pd=(2, 1), vllm_tp=1,
                        per_gpu=100, joint=True),
    "chatbot-13b-simulator": dict(model="opt-13b", lengths="sharegpt", ttft=0.2, tpot=0.1, pd=(2, 1), vllm_tp=1,
                                  per_gpu=100, joint=False),
    "chatbot-66b": dict(model="opt-66b", lengths="sharegpt", ttft=0.4, tpot=0.1, pd=(4, 4), vllm_tp=4,
                        per_gpu=25, joint=True),
    "summarization-66b (stand-in lengths)": dict(model="opt-66b", lengths="arxiv", ttft=15.0, tpot=0.15, pd=(4, 4),
                                                 vllm_tp=4, per_gpu=25, joint=True),
}
FAST = ("chatbot-13b",)
# the per-GPU rates the artifact sweeps (ae-scripts/e2e/_plot.py), per model and lengths
# with two lower rates each, for a deployment that misses 90% already at the artifact's lowest
RATES = {"opt-13b/sharegpt": [0.05, 0.125, 0.25, 0.5, 1, 1.5, 2, 2.25, 2.5, 3],
         "opt-66b/sharegpt": [0.015, 0.03, 0.0625, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75],
         "opt-66b/arxiv": [0.015, 0.03, 0.0625, 0.125, 0.1875, 0.25, 0.3125, 0.375, 0.4375, 0.5, 0.5625, 0.625]}


def model_file(folder: Path, name: str) -> str:
    """OPT ``name`` as a Llama-shaped config.json (module docstring) in ``folder``/``name``."""
    hidden, layers, heads, ffn = OPT[name]
    path = folder / name / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": hidden,
        "intermediate_size": 2 * ffn // 3, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": heads, "max_position_embeddings": CONTEXT, "rms_norm_eps": 1e-05,
        "tie_word_embeddings": True, "torch_dtype": "float16", "vocab_size": 50272}, indent=1))
    return str(path.parent)


def length_file(folder: Path, name: str) -> str:
    """``name``'s lengths as the artifact's ``0-prepare-dataset.py`` prepares its data sets: ShareGPT's pairs
    below OPT's context (``prompt_len + output_len >= 2048`` pruned); the summarization stand-in cut as LongBench's
    contexts are (each prompt truncated to ``min(2040 - answer_len, randint(1900, 2048))`` tokens). Outputs of one
    token are left out (TPOT needs two)."""
    from ..workload.traces.readers import resolve_data_file
    rng = np.random.default_rng(0)
    out = folder / f"lengths-{name}.csv"
    with open(resolve_data_file(LENGTHS[name]), newline="") as f, open(out, "w", newline="") as g:
        w = csv.writer(g)
        w.writerow(["num_prefill_tokens", "num_decode_tokens"])
        for row in csv.DictReader(f):
            p, d = int(row["num_prefill_tokens"]), int(row["num_decode_tokens"])
            if name == "arxiv":
                p = min(p, 2040 - d, int(rng.integers(1900, 2049)))
            if p >= 1 and d >= 2 and p + d < CONTEXT:
                w.writerow([p, d])
    return str(out)


def configs(setting: str, folder: Path, seed: int, scale: float = 1.0,
            measured: bool = False) -> dict[str, tuple[RunConfig, int]]:
    """DistServe's and vLLM's deployments of ``setting`` and their GPUs; ``measured``: each engine's step times
    DistServe's fitted ones (``linear``, :func:`measured_steps`) instead of ``vllm-v1`` (the explanatory run)."""
    s = SETTINGS[setting]
    (ptp, dtp), vtp = s["pd"], s["vllm_tp"]
    model = model_file(folder, s["model"])
    base = dict(model=model, gpu="a100", lengths=length_file(folder, s["lengths"]), seed=seed, rate=1.0,
                batch_time="vllm-v1", tiers=f"all:ttft={s['ttft']:g}:tpot={s['tpot']:g}", scheduler="vllm")
    dist_gpus = ptp + dtp
    pools = {"prefill": dict(role="prefill", tp=ptp, max_num_batched_tokens=DISTSERVE_PREFILL_BATCH,
                             max_num_seqs=128),
             "decode": dict(role="decode", tp=dtp, max_num_seqs=1024, max_num_batched_tokens=65536)}
    vllm_fields = dict(tp=vtp, max_num_batched_tokens=16384, max_num_seqs=1024)
    if measured:
        name = "facebook/" + s["model"]
        # DistServe's decode instance of OPT-66B is TP 2 x PP 2: its simulator prices a PP stage's step as the
        # TP 2 step over PP (simdistserve get_decode_time: delay * 1/pp)
        pp = 2 if (s["model"], dtp) == ("opt-66b", 4) else 1
        pools["prefill"].update(batch_time="linear", batch_time_params=measured_steps("distserve", name, ptp))
        pools["decode"].update(batch_time="linear", batch_time_params=measured_steps("distserve", name, dtp // pp,
                                                                                     1 / pp))
        vllm_fields.update(batch_time="linear", batch_time_params=measured_steps("vllm", name, vtp))
    fleet = folder / f"fleet-{setting.split()[0]}{'-measured' if measured else ''}.toml"
    fleet.write_text("".join(f"[pools.{p}]\nreplicas = 1\n" + "".join(
        f"{k} = {json.dumps(v)}\n" for k, v in f.items() if k != "batch_time_params")
        + (f"[pools.{p}.batch_time_params.extra]\n" + "".join(f"{k} = {v!r}\n" for k, v in
                                                                f["batch_time_params"]["extra"].items())
           if "batch_time_params" in f else "") for p, f in pools.items()))
    dist = RunConfig(**base, fleet=str(fleet), kv_link="same-node", pd_first_token="prefill",
                     num_requests=max(20, round(s["per_gpu"] * dist_gpus / scale)))
    vllm = RunConfig(**{**base, **vllm_fields}, num_requests=max(20, round(s["per_gpu"] * vtp / scale)))
    return {"DistServe": (dist, dist_gpus), "vLLM": (vllm, vtp)}


def measured_steps(engine: str, model: str, tp: int, factor: float = 1.0) -> dict:
    """DistServe's fitted step time of ``engine`` (distserve or vllm) for ``model`` at ``tp`` as ``linear``'s
    terms in seconds: a prefill step ``a + b·Σtokens + c·Σtokens²``, a decode step ``a + b·Σcontext + c·batch``
    (its small-batch fit; below 95 requests); a negative coefficient (one, 1e-5 ms a token², in OPT-66B TP 2) is
    taken as 0 (``linear`` takes none)."""
    p = _profiles()[engine][model][str(tp)]
    (pa, pb, pc), (da, db, dc) = p["prefill"], p["decoding_smallbs"]
    ms = factor / 1e3
    return {"extra": {"has_prefill": max(pa, 0) * ms, "prefill_tokens": max(pb, 0) * ms,
                      "prefill_attention": max(pc, 0) * ms, "has_decode": max(da, 0) * ms,
                      "decode_context": max(db, 0) * ms, "per_decode": max(dc, 0) * ms}}


def validate_model(kind: str = "vllm-v1", folder: Path | None = None) -> dict:
    """The batch-time model against DistServe's fitted A100-80GB step times (its engine's and its vLLM's), per
    model, TP and phase: median and largest |error| %. Prefill: one prompt of 128..2048 tokens; decode: batches
    of 1..256 at 512 tokens of context each."""
    import tempfile

    from ..batchtime.registry import make_batch_time_model
    from ..batchtime.base import Batch
    from ..hardware.models import model as model_preset
    profiles = {k: v for k, v in _profiles().items() if k != "source"}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(folder or tmp)
        for engine, data in profiles.items():
            for model, tps in data.items():
                name = model.split("/")[-1]
                if name not in OPT:
                    continue
                spec = model_preset(model_file(where, name))
                for tp, p in tps.items():
                    bt = make_batch_time_model(kind, spec.with_tp(int(tp)), "a100")
                    errs = {"prefill": [], "decode": []}
                    for n in (128, 256, 512, 1024, 2048):
                        a, b, c = p["prefill"]
                        ref = (a + b * n + c * n * n) / 1e3
                        errs["prefill"].append(100 * (bt.step_time(Batch([n], [0], [])) - ref) / ref)
                    for bs in (1, 8, 32, 128, 256):
                        a, b, c = p["decoding_smallbs" if bs < p["decoding_large_small_bs_threshold"]
                                      else "decoding_largebs"]
                        ref = (a + b * 512 * bs + c * bs) / 1e3
                        errs["decode"].append(100 * (bt.step_time(Batch([], [], [512] * bs)) - ref) / ref)
                    for phase, e in errs.items():
                        e = np.array(e)
                        out[f"{engine} {name} TP{tp} {phase}"] = {
                            "median_abs_pct": round(float(np.median(np.abs(e))), 1),
                            "median_pct": round(float(np.median(e)), 1),
                            "max_abs_pct": round(float(np.max(np.abs(e))), 1)}
    return out


# DistServe's fitted step-time models (LLMServe/DistServe simdistserve/estimators/profile_data/
# profiler-a100-80g.{distserve,vllm}.json at commit 82831f1): the coefficients this check needs, in ms
def _profiles() -> dict:
    path = Path(__file__).with_name("distserve_a100_profiles.json")
    return json.loads(path.read_text())


def attainment(cfg: RunConfig) -> tuple[float, float]:
    """One run's share of requests meeting TTFT and TPOT (each): the module's process-pool unit."""
    from ..experiment import run
    from ..metrics.summary import summarize
    a = summarize(run(cfg))["tiers"]["all"]["attainment"]
    return a["ttft"], a["tpot"], a["all"]


def crossing(xs: list[float], ys: list[float], target: float) -> float | None:
    """Where the curve first falls through ``target`` (linear between the points; the artifact's
    ``find_intersection``); the last rate if it never does, None if it starts below."""
    if not ys or ys[0] < target:
        return None
    for x0, x1, y0, y1 in zip(xs, xs[1:], ys, ys[1:]):
        if (y0 < target) != (y1 < target):
            return x0 + (target - y0) * (x1 - x0) / (y1 - y0)
    return xs[-1]


def reproduce(*, fast: bool = False, out: str = "reproduce-distserve", seed: int = RunConfig.seed, jobs: int = 2,
              seeds: int = 3) -> dict:
    """The model check, then DistServe's and vLLM's attainment over the artifact's per-GPU rates and the rate at
    which it crosses 90%, in every setting (module docstring)."""
    import dataclasses
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    scale = 2.0 if fast else 1.0
    if fast:
        seeds = 1
    validation = validate_model(folder=folder)
    for cell, e in validation.items():
        print(f"vllm-v1 vs DistServe's fitted A100 step times, {cell}: median |error| {e['median_abs_pct']}% "
              f"(signed {e['median_pct']}%), max {e['max_abs_pct']}%", flush=True)
    rows = []
    with make_executor("local", jobs=jobs) as executor:
        for setting, measured in [(k, m) for k in (FAST if fast else SETTINGS) for m in ((False,) if fast else
                                                                                          (False, True))]:
            s = SETTINGS[setting]
            rates = RATES[s["model"] + "/" + s["lengths"]]
            deployments = configs(setting, folder, seed, scale, measured)
            row = {"setting": setting, "step_times": "DistServe's fitted (explanatory)" if measured else "vllm-v1",
                   "ttft": s["ttft"], "tpot": s["tpot"], "attainment": "joint" if s["joint"] else "each",
                   "per_gpu_rates": rates}
            for name, (cfg, gpus) in deployments.items():
                runs = [dataclasses.replace(cfg, rate=r * gpus, seed=seed + k) for r in rates for k in range(seeds)]
                got = executor.map(attainment, runs)
                curve = []
                for i in range(len(rates)):
                    a = np.mean(got[i * seeds:(i + 1) * seeds], axis=0)
                    curve.append(float(a[2] if s["joint"] else min(a[0], a[1])))
                row[f"{name}_gpus"] = gpus
                row[f"{name}_attainment"] = [round(y, 4) for y in curve]
                row[f"{name}_rps_per_gpu"] = crossing(rates, curve, 0.9)
                row[f"{name}_beyond_grid"] = curve[-1] >= 0.9  # its rate is then a lower bound
            d, v = row["DistServe_rps_per_gpu"], row["vLLM_rps_per_gpu"]
            row["ratio"] = d / v if d and v else None
            rows.append(row)
            ge = {k: ">=" if row[f"{k}_beyond_grid"] else "" for k in deployments}
            print(f"{setting}, step times {row['step_times']}: per-GPU rate at 90% attainment: DistServe "
                  f"{ge['DistServe']}{_fmt(d)} req/s ({row['DistServe_gpus']} GPUs), vLLM {ge['vLLM']}{_fmt(v)} "
                  f"({row['vLLM_gpus']} GPUs): {_fmt(row['ratio'])}x", flush=True)
    result = {"paper": PAPER, "seeds": seeds, "scale": scale, "model_validation": validation, "rows": rows}
    (folder / "results.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {folder}/results.json")
    return result


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.3g}"
