#!/usr/bin/env python
"""Derive llmsched's length presets (small quantile tables) from the public trace files you name.

    python scripts/derive_length_presets.py sharegpt=/path/to/sharegpt_8k_lengths_llama2_tokenizer.csv
    python scripts/derive_length_presets.py --all --docs docs/workloads.md

``NAME=PATH`` picks the file for one preset; a bare ``NAME`` (or ``--all``) looks for the file under its published
name where resolve_data_file looks ($LLMSCHED_DATA, ../shared/data/traces). The tables go to
llmsched/workload/lengths/presets/NAME.json; ``--docs`` rewrites the measured table (of every shipped preset) in that
markdown file. The trace files themselves are never copied.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from llmsched.workload.lengths.distributions import QuantileTable
from llmsched.workload.traces.readers import read_trace, resolve_data_file

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "llmsched" / "workload" / "lengths" / "presets"
AZURE_LICENCE = "CC-BY 4.0 (Azure Public Dataset, Azure LLM inference trace 2023)"
PRESETS = {
    "sharegpt": dict(
        file="sharegpt_8k_lengths_llama2_tokenizer.csv",
        description="ShareGPT (openchat_sharegpt4) conversation rounds, Llama-2 tokenizer, total length capped at "
                    "8k: the SLAI workload (Bari et al., Table 1)",
        origin="agrimUT/SLAI (from Sarathi-Serve)", licence="MIT (agrimUT/SLAI)"),
    "azure-conv": dict(
        file="AzureLLMInferenceTrace_conv.csv",
        description="one hour of a production conversation service (Azure LLM inference trace 2023, conv)",
        origin="Azure Public Dataset", licence=AZURE_LICENCE),
    "azure-code": dict(
        file="AzureLLMInferenceTrace_code.csv",
        description="one hour of a production code-completion service (Azure LLM inference trace 2023, code)",
        origin="Azure Public Dataset", licence=AZURE_LICENCE),
    "arxiv-summarization": dict(
        file="arxiv_summarization_lengths_llama2_tokenizer.csv",
        description="arXiv summarization, Llama-2 tokenizer: long prompts, short outputs",
        origin="microsoft/vidur", licence="MIT (microsoft/vidur)"),
    "lmsys": dict(
        file="lmsys_chat_1m_lengths_sample_input_lt500_output_lt600.csv",
        description="LMSYS-Chat-1M sample with prompts < 500 and outputs < 600 tokens: the WAIT paper's real-trace "
                    "workload; its zero-length rows are counted as 1 token",
        origin="Luoxiaogan/vidur_or (the WAIT authors' code)",
        licence="not stated by the source repository; LMSYS-Chat-1M is under its own dataset licence agreement",
        zero_lengths="clamp"),
}
# Published figures the shipped tables must reproduce (Bari et al., Table 1).
PAPER = {"sharegpt": ("Bari et al., Table 1", {"prompt": {"median": 1730, "p90": 5696},
                                             "output": {"median": 415, "p90": 834}})}
SAMPLES = 1_000_000
SEED = 0


def stats(prompts: np.ndarray, outputs: np.ndarray) -> dict:
    def side(a):
        return {"median": float(np.median(a)), "p90": round(float(np.percentile(a, 90)), 2),
                "p99": round(float(np.percentile(a, 99)), 2), "mean": round(float(np.mean(a)), 1),
                "min": int(a.min()), "max": int(a.max())}
    corr = float(np.corrcoef(np.log(prompts), np.log(outputs))[0, 1])
    return {"prompt": side(prompts), "output": side(outputs), "log_corr": round(corr, 4)}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def derive(name: str, path: Path) -> dict:
    spec = PRESETS[name]
    policy = spec.get("zero_lengths", "error")
    trace = read_trace(path, zero_lengths=policy)
    meta = {"name": name, "description": spec["description"],
            "source": {"file": path.name, "rows": len(trace) + trace.dropped, "sha256": sha256(path),
                       "origin": spec["origin"], "licence": spec["licence"], "zero_lengths": policy,
                       "clamped": trace.clamped, "dropped": trace.dropped},
            "file_stats": stats(trace.prompt_lens, trace.output_lens),
            "derived_by": "scripts/derive_length_presets.py"}
    return QuantileTable.fit(trace.prompt_lens, trace.output_lens, meta=meta).to_dict()


def sampled(table: dict) -> dict:
    prompts, outputs = QuantileTable.from_dict(table).sample(SAMPLES, np.random.default_rng(SEED))
    return stats(prompts, outputs)


def fmt(x: float) -> str:
    return f"{x:g}"


def docs_block(tables: dict[str, dict]) -> str:
    cols = [("prompt", "median"), ("prompt", "p90"), ("output", "median"), ("output", "p90")]
    lines = [f"Measured by `scripts/derive_length_presets.py`: file = the source file, table = {SAMPLES:,} draws "
             f"(seed {SEED}) from the shipped table; worst = largest relative difference of the four medians and P90s; "
             f"log-corr = correlation of log prompt and log output length.", "",
             "| preset | source file | rows | prompt median file / table | prompt P90 file / table | "
             "output median file / table | output P90 file / table | worst | prompt P99 file / table | "
             "output P99 file / table | log-corr file / table |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    paper_lines = []
    for name, table in tables.items():
        f, s = table["file_stats"], sampled(table)
        cells = [f"{fmt(f[a][b])} / {fmt(s[a][b])}" for a, b in cols]
        worst = max(abs(s[a][b] - f[a][b]) / f[a][b] for a, b in cols)
        lines.append(f"| {name} | {table['source']['file']} | {table['source']['rows']:,} | " + " | ".join(cells)
                     + f" | {worst:.1%} | {fmt(f['prompt']['p99'])} / {fmt(s['prompt']['p99'])} | "
                     f"{fmt(f['output']['p99'])} / {fmt(s['output']['p99'])} | "
                     f"{f['log_corr']:.2f} / {s['log_corr']:.2f} |")
        if name in PAPER:
            where, figs = PAPER[name]
            for a, b in cols:
                paper_lines.append(f"| {name} | {a} {b} | {figs[a][b]} ({where}) | {fmt(f[a][b])} | {fmt(s[a][b])} |")
    if paper_lines:
        lines += ["", "| preset | statistic | paper | file | table |", "|---|---|---|---|---|"] + paper_lines
    return "\n".join(lines)


def write_docs(path: Path, block: str) -> None:
    start, end = "<!-- preset-table:start -->", "<!-- preset-table:end -->"
    text = path.read_text()
    if start not in text or end not in text:
        sys.exit(f"{path}: add the markers {start} and {end} where the measured table belongs")
    head, rest = text.split(start, 1)
    path.write_text(head + start + "\n" + block + "\n" + end + rest.split(end, 1)[1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("presets", nargs="*", metavar="NAME[=PATH]", help=f"presets to derive: {', '.join(PRESETS)}")
    ap.add_argument("--all", action="store_true", help="derive every preset from its published file name")
    ap.add_argument("--out", type=Path, default=OUT, help="folder for the JSON tables (default: the package's)")
    ap.add_argument("--docs", type=Path, help="markdown file whose measured table to rewrite")
    args = ap.parse_args(argv)
    chosen = {}
    for item in (list(PRESETS) if args.all else []) + args.presets:
        name, _, path = item.partition("=")
        if name not in PRESETS:
            ap.error(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
        try:
            chosen[name] = resolve_data_file(path or PRESETS[name]["file"])
        except FileNotFoundError as e:
            ap.error(str(e))
    if not chosen:
        ap.error("name at least one preset (NAME or NAME=PATH), or pass --all")
    args.out.mkdir(parents=True, exist_ok=True)
    for name, path in chosen.items():
        out = args.out / f"{name}.json"
        out.write_text(json.dumps(derive(name, path), separators=(",", ":")) + "\n")
        print(f"{name}: {path} -> {out} ({out.stat().st_size / 1024:.1f} KB)")
    shipped = {name: json.loads((args.out / f"{name}.json").read_text())
               for name in PRESETS if (args.out / f"{name}.json").exists()}
    block = docs_block(shipped)
    print(block)
    if args.docs:
        write_docs(args.docs, block)


if __name__ == "__main__":
    main()
