"""Capture GuideLLM's client-side ground truth with its engine-side twin: ``vllm serve`` (the venv's CPU build) driven
by ``guidellm run`` (vLLM's own client; 0.8's ``kind=...`` options), as scripts/aiperf_capture.py does for AIPerf
(its word-level tiny model, the server, its stamps and the step fit are reused).

GuideLLM's dependencies differ from vLLM's, so it runs from a venv of its own (``--guidellm``: its ``guidellm``
script; ``python -m venv .guidellm && .guidellm/bin/pip install guidellm==0.8.1``). Prompts are ``--input-len``
random words of the model's vocabulary (GuideLLM's synthetic text would be all ``<unk>`` under it), each
``--output-len`` tokens out (``ignore_eos``, GuideLLM's ``output_tokens_count`` column); with ``--turns``,
conversations (GuideLLM 0.8's multi-turn: ``/v1/completions`` gets the earlier turns' prompts and replies joined by
spaces, then the new words; with ``--chat``, ``/v1/chat/completions`` gets them as messages, which the word model's
chat template joins the same way). GuideLLM sends no request id
of its own: each request is matched to the engine's stamps by vLLM's (the report's ``response_id``), and its
wall-clock times are put on the engine's monotonic clock with the server's own wall-minus-monotonic offset.

Each rate becomes a folder in ``--out``: ``benchmarks.json`` (GuideLLM's report), ``requests.jsonl`` (the engine's
stamps plus the client's ``client_sent``, ``client_first``, ``client_last``), ``meta.json`` (engine arguments, the
CPU step fit, the client's command) and ``config.json``.

    PYTHONPATH=$PWD python scripts/guidellm_capture.py --guidellm .guidellm/bin/guidellm \\
        --out tests/data/cpu_guidellm_run --rates 4 --num-prompts 24

(tests/data/cpu_guidellm_run: ``--rates 8 --num-prompts 24 --input-len 200 --turns 3``; tests/data/cpu_guidellm_chat:
the same with ``--chat --seed 1``; tests/data/cpu_guidellm_chat_cached: ``--chat --seed 2 --cached-tokens``.)

Run it on a quiet machine: on this 2-core one, with other work running, GuideLLM's client read each streamed reply
as one burst at its end (its TTFT was the whole latency) and sent 90 ms late.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aiperf_capture as ac  # noqa: E402  (the word-level model)
import client_capture as cc  # noqa: E402  (the server, its stamps and the step fit)


def prompts_file(args, out: Path, salt: str) -> Path:
    """One prompt a request, ``--input-len`` random words, drawn anew for each ``salt`` (a rate: the server's cache
    keeps the last one's), so that no two share a prefix. With ``--turns`` N > 1: ``--num-prompts`` / N
    conversations of N turns (GuideLLM's ``conversation_turns`` column, each turn's parent the one before it, whose
    prompt and reply GuideLLM sends again before the new words)."""
    rng = random.Random(f"{args.seed}/{salt}")

    def words() -> str:
        return " ".join(f"w{rng.randint(3, 1023)}" for _ in range(args.input_len))

    if args.turns > 1:
        rows = [{"conversation_turns": {"turns": [
            {"node_id": f"t{k}", "parents": [{"parent_node_id": f"t{k - 1}"}] if k else [],
             "columns": {"text_column": [words()], "output_tokens_count_column": [args.output_len]}}
            for k in range(args.turns)]}} for _ in range(args.num_prompts // args.turns)]
    else:
        rows = [{"prompt": words(), "output_tokens_count": args.output_len} for _ in range(args.num_prompts)]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def endpoint(args) -> str:
    return "/v1/chat/completions" if args.chat else "/v1/completions"


def guidellm_command(args, model: Path, port: int, rate: float, out: Path, prompts: Path) -> list[str]:
    return [args.guidellm, "run", "--backend", f"kind=openai_http,target=http://127.0.0.1:{port},"
            f"request_format={endpoint(args)}", "--profile", f"kind=constant,rate={rate:g}",
            "--constraint", f"kind=max_requests,count={args.num_prompts}",
            "--data", f"kind=json_file,path={prompts}", "--tokenizer", f"kind=huggingface_auto,model={model}",
            "--output", f"kind=json,path={out}", "--disable-progress"]


def vllm_key(request_id: str) -> str:
    """vLLM's id for a completion as the report's ``response_id`` has it (the engine's adds ``-<choice>``)."""
    return request_id.rsplit("-", 1)[0] if request_id.count("-") > 1 else request_id


def run_folder(out: Path, report: Path, stamps: list[dict], steps: list[dict], model: Path, command: list, args,
               host: str) -> None:
    """One rate's folder (module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(report, out / "benchmarks.json")
    by_id = {vllm_key(row["request_id"]): row for row in stamps
             if str(row.get("request_id", "")).startswith(("cmpl-", "chatcmpl-"))}
    lines = []
    for rec in json.loads(report.read_text())["benchmarks"][0]["requests"]["successful"]:
        row = by_id.get(rec["response_id"])
        if row is None:
            continue
        keep = ac.stamped_row({"request_id": rec["response_id"]}, row, rec["request_start_time"],
                              rec["time_to_first_token_ms"] / 1e3, rec["request_latency"])
        if args.turns > 1:  # its conversation and turn: the replay gives it the history's prefix
            keep["session"], keep["turn"] = rec["info"]["conversation_id"], rec["info"]["turn_index"]
        lines.append(keep)
    if not lines:
        raise SystemExit(f"{report}: no request matched the engine's stamps (by vLLM's id, the report's response_id)")
    lines.sort(key=lambda r: r["arrival_time"])
    (out / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    shutil.copy(model / "config.json", out / "config.json")
    version = subprocess.run([args.guidellm, "--version"], capture_output=True, text=True).stdout.strip()
    ac.write_meta(out, lines, steps, host, {"tool": "guidellm", "version": version.rsplit(" ", 1)[-1] or "0.8.1"},
                  command, endpoint(args), "guidellm_capture.py",
                  {"enable_prompt_tokens_details": True} if args.cached_tokens else None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--guidellm", default="guidellm", help="the guidellm script of GuideLLM's own venv")
    p.add_argument("--rates", type=float, nargs="+", default=[4.0])
    p.add_argument("--num-prompts", type=int, default=24)
    p.add_argument("--input-len", type=int, default=400)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--turns", type=int, default=1, help="turns a conversation (> 1: GuideLLM's multi-turn)")
    p.add_argument("--cached-tokens", action="store_true", help="serve with --enable-prompt-tokens-details, so "
                   "that each reply's usage, and GuideLLM's report, carries the prompt tokens vLLM found cached")
    p.add_argument("--chat", action="store_true", help="through /v1/chat/completions (each later turn's request "
                   "carries the conversation as messages) instead of /v1/completions")
    args = p.parse_args(argv)

    def run_rate(model, port, rate, work, stamps, host):
        report = work / f"guidellm-{rate:g}.json"
        prompts = prompts_file(args, work / f"prompts-{rate:g}.jsonl", f"{rate:g}")
        command = guidellm_command(args, model, port, rate, report, prompts)
        ac.run_client(command, "guidellm", cwd=work)
        run_folder(Path(args.out) / f"rate-{rate:g}", report, cc.read_rows(stamps), cc.read_rows(work / "steps.jsonl"),
                   model, command, args, host)

    return ac.capture(args, "guidellm_capture_", run_rate,
                      ("--enable-prompt-tokens-details",) if args.cached_tokens else ())


if __name__ == "__main__":
    sys.exit(main())
