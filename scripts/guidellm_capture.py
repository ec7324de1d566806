"""Capture GuideLLM's client-side ground truth with its engine-side twin: ``vllm serve`` (the venv's CPU build) driven
by ``guidellm run`` (vLLM's own client; 0.8's ``kind=...`` options), as scripts/aiperf_capture.py does for AIPerf
(its word-level tiny model, the server, its stamps and the step fit are reused).

GuideLLM's dependencies differ from vLLM's, so it runs from a venv of its own (``--guidellm``: its ``guidellm``
script; ``python -m venv .guidellm && .guidellm/bin/pip install guidellm==0.8.1``). Prompts are ``--input-len``
random words of the model's vocabulary (GuideLLM's synthetic text would be all ``<unk>`` under it), each
``--output-len`` tokens out (``ignore_eos``, GuideLLM's ``output_tokens_count`` column); with ``--turns``,
conversations (GuideLLM 0.8's multi-turn: ``/v1/completions`` gets the earlier turns' prompts and replies joined by
spaces, then the new words). GuideLLM sends no request id
of its own: each request is matched to the engine's stamps by vLLM's (the report's ``response_id``), and its
wall-clock times are put on the engine's monotonic clock with the server's own wall-minus-monotonic offset.

Each rate becomes a folder in ``--out``: ``benchmarks.json`` (GuideLLM's report), ``requests.jsonl`` (the engine's
stamps plus the client's ``client_sent``, ``client_first``, ``client_last``), ``meta.json`` (engine arguments, the
CPU step fit, the client's command) and ``config.json``.

    PYTHONPATH=$PWD python scripts/guidellm_capture.py --guidellm .guidellm/bin/guidellm \\
        --out tests/data/cpu_guidellm_run --rates 4 --num-prompts 24

Run it on a quiet machine: on this 2-core one, with other work running, GuideLLM's client read each streamed reply
as one burst at its end (its TTFT was the whole latency) and sent 90 ms late.
"""
from __future__ import annotations

import argparse
import json
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
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


def guidellm_command(args, model: Path, port: int, rate: float, out: Path, prompts: Path) -> list[str]:
    return [args.guidellm, "run", "--backend", f"kind=openai_http,target=http://127.0.0.1:{port},"
            f"request_format=/v1/completions", "--profile", f"kind=constant,rate={rate:g}",
            "--constraint", f"kind=max_requests,count={args.num_prompts}",
            "--data", f"kind=json_file,path={prompts}", "--tokenizer", f"kind=huggingface_auto,model={model}",
            "--output", f"kind=json,path={out}", "--disable-progress"]


def vllm_key(request_id: str) -> str:
    """vLLM's id for a completion as the report's ``response_id`` has it (the engine's adds ``-<choice>``)."""
    return request_id.rsplit("-", 1)[0] if request_id.count("-") > 1 else request_id


def run_folder(out: Path, report: Path, stamps: list[dict], steps: list[dict], model: Path, command: list, args,
               host: str) -> None:
    """One rate's folder (module docstring)."""
    import vllm
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(report, out / "benchmarks.json")
    by_id = {vllm_key(row["request_id"]): row for row in stamps if str(row.get("request_id", "")).startswith("cmpl-")}
    lines = []
    for rec in json.loads(report.read_text())["benchmarks"][0]["requests"]["successful"]:
        row = by_id.get(rec["response_id"])
        if row is None:
            continue
        sent = rec["request_start_time"] - row["wall_minus_mono"]  # the client's send on the engine's clock
        keep = {"request_id": rec["response_id"], "input_toks": row["prompt_tokens"],
                "output_toks": row["output_tokens"], "arrival_time": round(row["arrival_time"], 6),
                "client_sent": round(sent, 6)}
        for k in ("http_ts", "rendered_ts", "added_ts", "first_out_ts", "last_out_ts", "queued_ts", "scheduled_ts",
                  "first_token_ts", "last_token_ts"):
            if row.get(k) is not None:
                keep[k] = round(row[k], 6)
        keep["client_first"] = round(sent + rec["time_to_first_token_ms"] / 1e3, 6)
        keep["client_last"] = round(sent + rec["request_latency"], 6)
        keep["num_cached_tokens"] = row.get("num_cached_tokens")
        if args.turns > 1:  # its conversation and turn: the replay gives it the history's prefix
            keep["session"], keep["turn"] = rec["info"]["conversation_id"], rec["info"]["turn_index"]
        lines.append(keep)
    if not lines:
        raise SystemExit(f"{report}: no request matched the engine's stamps (by vLLM's id, the report's response_id)")
    lines.sort(key=lambda r: r["arrival_time"])
    (out / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    shutil.copy(model / "config.json", out / "config.json")
    t0, t1 = min(r["client_sent"] for r in lines), max(r["client_last"] for r in lines)
    version = subprocess.run([args.guidellm, "--version"], capture_output=True, text=True).stdout.strip()
    meta = {"model": "tiny (llmsched make-model, word-level vocabulary of 1,024)", "vllm_version": vllm.__version__,
            "gpu": "cpu", "host_cpu": host,
            "engine_kwargs": {**cc.ENGINE_ARGS, "tensor_parallel_size": 1, "data_parallel_size": 1},
            "engine_defaults_seen": {"async_scheduling": False, "enable_prefix_caching": True},
            "front_end": "vllm-serve",
            "front_end_details": {"server": "vllm serve (python -m vllm.entrypoints.openai.api_server)",
                                  "endpoint": "/v1/completions, streamed", "prompt": "text (tokenised by the server)",
                                  "stream_interval": 1, "detokenize": True},
            "client": {"tool": "guidellm", "version": version.rsplit(" ", 1)[-1] or "0.8.1",
                       "command": shlex.join([Path(command[0]).name, *command[1:]])},
            "cpu_step_model": cc.step_model(steps, t0, t1),
            "command": "PYTHONPATH=$PWD python scripts/guidellm_capture.py " + " ".join(sys.argv[1:])}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


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
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    work = Path(tempfile.mkdtemp(prefix="guidellm_capture_"))
    model = ac.word_model(work / "tiny")
    stamps, log, port = work / "stamps.jsonl", work / "server.log", cc.free_port()
    host = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                "unknown")
    with open(log, "w") as f:
        proc = subprocess.Popen(cc.server_command(model, port, stamps, "cpu", []), stdout=f,
                                stderr=subprocess.STDOUT, env=cc.server_env(work, "cpu"), start_new_session=True)
    out = Path(args.out)
    try:
        print(f"server ready in {cc.wait_ready(f'http://127.0.0.1:{port}', proc, log, 600):.0f} s", flush=True)
        for rate in args.rates:
            report = work / f"guidellm-{rate:g}.json"
            prompts = prompts_file(args, work / f"prompts-{rate:g}.jsonl", f"{rate:g}")
            command = guidellm_command(args, model, port, rate, report, prompts)
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=work)
            if done.returncode:
                raise SystemExit(f"guidellm failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            time.sleep(2.0)  # the last finish is written
            run_folder(out / f"rate-{rate:g}", report, cc.read_rows(stamps), cc.read_rows(work / "steps.jsonl"),
                       model, command, args, host)
            print(f"wrote {out / f'rate-{rate:g}'}", flush=True)
    finally:
        cc.stop(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
