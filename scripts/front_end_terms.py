"""The front end's terms (llmsched/hardware/front_end.py) measured from the client+engine pairs the project holds.

* ``vllm-async-llm``: tests/data/gpu_runs/h100-* (vLLM 0.26's AsyncLLM in its own process, token ids in, no
  detokenisation), whose requests.jsonl carry ``client_sent``/``client_first``/``client_last`` beside the engine's
  ``queued_ts``/``first_token_ts``/``last_token_ts`` on one monotonic clock, and whose steps.csv gives each step's
  ``generation_tokens``. ``handoff``: the median over the runs of the least ``queued_ts − client_sent`` (a request
  that found the engine between steps; later ones include the step in flight). ``output_fixed`` and
  ``output_per_request``: the least-squares line of ``client_first − first_token_ts`` and ``client_last −
  last_token_ts`` against the generation tokens of the step whose outputs reached the front end next.
* ``vllm-serve``: the H200 capture (tests/data/gpu_runs/h200-llama-3.1-8b-serve-sharegpt-8, ``client_capture.py
  --engine gpu``: vLLM 0.26's ``vllm serve`` with its GPU defaults and ``vllm bench serve`` on the lent H200 machine),
  the terms llmsched uses (``serve_gpu_terms``). Before it, and printed beside it: the CPU capture
  (tests/data/cpu_client_run, scripts/client_capture.py: vLLM 0.32's API server, ``vllm bench serve`` on the same
  machine), whose requests.jsonl also carry the API server's ``http_ts`` (the
  completion handler entered), ``added_ts`` (the request handed to the engine client), ``first_out_ts``/
  ``last_out_ts`` (the output processor took the request's first/last outputs). ``per_prompt_token``: the
  tokeniser's CPU time per token, timed here on texts of 80-5,000 tokens (the capture's own spread is too noisy on
  a shared machine to regress on); ``request_fixed``: the median ``added_ts − client_sent`` less that
  tokenisation; ``handoff``: the median over the capture's runs of the least ``queued_ts − added_ts``;
  ``output_fixed``: ``client_first − first_token_ts`` and ``client_last − last_token_ts`` at the capture's small
  batches less ``output_per_request`` times their batch. The capture's machine is shared (2 cores, a load average
  near 10 during the captures): contention only ever adds delay, so ``request_fixed`` and ``output_fixed`` are the
  10th percentile over the capture's stamps (the uncontended cost's estimate; the medians are printed beside);
  ``output_per_request``: ``vllm-async-llm``'s (the capture runs at most 16 requests a step, too few to resolve
  it) plus the detokenisation of one token, timed here.

    PYTHONPATH=$PWD python scripts/front_end_terms.py [--gpu-runs tests/data/gpu_runs] [--cpu tests/data/cpu_client_run]
        [--serve-run tests/data/gpu_runs/h200-llama-3.1-8b-serve-sharegpt-8] [--no-cpu]
"""
from __future__ import annotations

import argparse
import csv
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TEXT_BYTES_PER_TOKEN = 4  # English text (OpenAI's tokenizer guide: a token is about 4 characters)
QUANTILE = 10  # the lower envelope of delays that contention on a shared machine only ever lengthens
H100_RUNS = ("h100-llama-3.1-8b", "h100-llama-3.1-8b-mooncake", "h100-qwen3-30b-a3b-warm")
SERVE_RUN = "h200-llama-3.1-8b-serve-sharegpt-8"  # vllm serve + vllm bench serve on the H200 (client_capture.py)


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def async_llm_terms(root: Path) -> dict:
    minima, delays, batches = [], [], []
    for name in H100_RUNS:
        rows = rows_of(root / name / "requests.jsonl")
        minima.append(min(r["queued_ts"] - r["client_sent"] for r in rows))
        steps = list(csv.DictReader(open(root / name / "steps.csv")))
        t = np.array([float(s["t"]) for s in steps])
        gen = np.array([float(s["generation_tokens"] or "nan") for s in steps])
        for engine, client in (("first_token_ts", "client_first"), ("last_token_ts", "client_last")):
            stamp = np.array([r[engine] for r in rows])
            delay = np.array([r[client] - r[engine] for r in rows])
            batch = gen[np.clip(np.searchsorted(t, stamp), 0, len(t) - 1)]
            ok = np.isfinite(batch)
            delays.append(delay[ok])
            batches.append(batch[ok])
    d, b = np.concatenate(delays), np.concatenate(batches)
    fixed, per = np.linalg.lstsq(np.vstack([np.ones_like(b), b]).T, d, rcond=None)[0]
    return {"handoff": float(np.median(minima)), "handoff_minima": [float(m) for m in minima],
            "output_fixed": float(fixed), "output_per_request": float(per), "stamps": int(len(d)),
            "correlation": float(np.corrcoef(b, d)[0, 1])}


def tokeniser_costs() -> dict:
    """CPU seconds per token of make-model's tokeniser: encoding texts as the server does, and incremental
    detokenisation (tokenizers' DecodeStream, which vLLM's fast incremental detokeniser uses) of one token."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tokenizers.decoders import DecodeStream
    from transformers import AutoTokenizer

    from llmsched.vllm.model import write_model
    tok = AutoTokenizer.from_pretrained(str(write_model(Path(tempfile.mkdtemp()) / "tiny")))
    rng = random.Random(0)
    sizes, costs, nbytes = [], [], 0
    for n in (80, 160, 320, 640, 1280, 2560, 5120):
        text = tok.decode([rng.randrange(3, tok.vocab_size) for _ in range(n)])
        k = len(tok.encode(text))
        t0 = time.process_time()
        for _ in range(30):
            tok(text)
        costs.append((time.process_time() - t0) / 30)
        sizes.append(k)
        nbytes += len(text.encode())
    per_token = float(np.linalg.lstsq(np.vstack([np.ones(len(sizes)), sizes]).T, costs, rcond=None)[0][1])
    per_byte = per_token * sum(sizes) / nbytes
    stream, raw = DecodeStream(skip_special_tokens=True), tok._tokenizer
    ids = [rng.randrange(3, tok.vocab_size) for _ in range(5000)]
    t0 = time.process_time()
    for i in ids:
        stream.step(raw, i)
    detok = (time.process_time() - t0) / len(ids)
    return {"encode_per_token": per_token, "encode_per_byte": per_byte, "encode_mib_per_s": 1 / per_byte / 2**20,
            "detok_per_token": detok, "bytes_per_token": nbytes / sum(sizes),
            "per_prompt_token": per_byte * TEXT_BYTES_PER_TOKEN}


def serve_terms(cpu: Path, per_request: float, tokens: dict) -> dict:
    runs = sorted(p for p in cpu.iterdir() if (p / "requests.jsonl").is_file())
    rows = [r for run in runs for r in rows_of(run / "requests.jsonl")]
    handoff = float(np.median([min(r["queued_ts"] - r["added_ts"] for r in rows_of(run / "requests.jsonl"))
                               for run in runs]))
    front = np.array([r["added_ts"] - r["client_sent"] - tokens["encode_per_token"] * r["input_toks"] for r in rows])
    out = []
    for run in runs:
        mine = rows_of(run / "requests.jsonl")
        spans = [(r["first_token_ts"], r["last_token_ts"]) for r in mine]
        for r in mine:
            for engine, client in (("first_token_ts", "client_first"), ("last_token_ts", "client_last")):
                batch = sum(a <= r[engine] <= b for a, b in spans)  # requests decoding at that moment
                out.append(r[client] - r[engine] - per_request * batch)
    return {"request_fixed": float(np.percentile(front, QUANTILE)), "request_fixed_median": float(np.median(front)),
            "per_prompt_token": tokens["per_prompt_token"], "handoff": handoff,
            "output_fixed": float(np.percentile(out, QUANTILE)), "output_fixed_median": float(np.median(out)),
            "output_per_request": per_request + tokens["detok_per_token"], "requests": len(rows),
            "runs": [p.name for p in runs]}


def step_batch(run: Path, stamps: np.ndarray) -> np.ndarray:
    """The generation tokens of the step whose outputs reached the front end next after each engine stamp."""
    steps = rows_of(run / "steps.jsonl")
    t = np.array([s["t"] for s in steps])
    gen = np.array([s["generation_tokens"] for s in steps], dtype=float)
    return gen[np.clip(np.searchsorted(t, stamps), 0, len(t) - 1)]


def line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    fixed, per = np.linalg.lstsq(np.vstack([np.ones_like(x), x]).T, y, rcond=None)[0]
    return float(fixed), float(per)


def serve_gpu_terms(run: Path) -> dict:
    """``vllm-serve`` from a GPU server's capture (``client_capture.py --engine gpu``): a dedicated host, so the
    figures are medians and least-squares lines over the run's requests, not lower envelopes. ``per_prompt_token``:
    the slope of the server's rendering time (``rendered_ts − http_ts``) on the prompt's tokens, per byte of the
    capture's prompts (meta.json ``client.prompt_bytes_per_token``), times 4 bytes a token of English text;
    ``request_fixed``: the median ``added_ts − client_sent`` less that slope times the prompt; ``handoff``: the
    least ``queued_ts − added_ts``; the output terms: the lines of ``client_last − last_token_ts`` (any token) and
    ``client_first − first_token_ts`` (a stream's first chunk) on the step's generation tokens."""
    rows = rows_of(run / "requests.jsonl")
    meta = json.loads((run / "meta.json").read_text())
    tokens = np.array([r["input_toks"] for r in rows], dtype=float)
    render = np.array([r["rendered_ts"] - r["http_ts"] for r in rows])
    slope = line(tokens, render)[1]
    per_byte = slope / meta["client"]["prompt_bytes_per_token"]
    front = np.array([r["added_ts"] - r["client_sent"] for r in rows]) - slope * tokens
    out = {"run": run.name, "requests": len(rows), "gpu": meta["gpu"], "vllm_version": meta["vllm_version"],
           "encode_per_byte": per_byte, "encode_mib_per_s": 1 / per_byte / 2**20,
           "per_prompt_token": per_byte * TEXT_BYTES_PER_TOKEN, "request_fixed": float(np.median(front)),
           "handoff": float(min(r["queued_ts"] - r["added_ts"] for r in rows))}
    for key, engine, client in (("output", "last_token_ts", "client_last"),
                                ("first_output", "first_token_ts", "client_first")):
        stamps = np.array([r[engine] for r in rows])
        delay = np.array([r[client] for r in rows]) - stamps
        batch = step_batch(run, stamps)
        out[f"{key}_fixed"], out[f"{key}_per_request"] = line(batch, delay)
        out[f"{key}_correlation"] = float(np.corrcoef(batch, delay)[0, 1])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpu-runs", default="tests/data/gpu_runs")
    p.add_argument("--cpu", default="tests/data/cpu_client_run")
    p.add_argument("--serve-run", default=f"tests/data/gpu_runs/{SERVE_RUN}")
    p.add_argument("--no-cpu", action="store_true", help="leave out the CPU capture (it times a tokeniser here)")
    args = p.parse_args(argv)
    report = {"vllm-async-llm": async_llm_terms(Path(args.gpu_runs)),
              "vllm-serve": serve_gpu_terms(Path(args.serve_run))}
    if not args.no_cpu:
        tokens = tokeniser_costs()
        report["tokeniser"] = tokens
        report["vllm-serve (CPU capture)"] = serve_terms(Path(args.cpu), report["vllm-async-llm"]["output_per_request"],
                                                         tokens)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
