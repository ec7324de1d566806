"""Capture AIPerf's client-side ground truth with its engine-side twin: ``vllm serve`` (the venv's CPU build)
driven by ``aiperf profile --export-level records`` (NVIDIA's client), as scripts/client_capture.py does for
``vllm bench serve`` (its server, stamps and step fit are reused).

AIPerf's dependencies clash with vLLM's, so it runs from a venv of its own (``--aiperf``: its ``aiperf`` script;
``python -m venv .aiperf && .aiperf/bin/pip install aiperf==0.13.0``). The model is make-model's tiny with a
word-level tokenizer of 1,024 words (``word_model``): every token a random-weight model emits has text, so every
streamed chunk carries content and AIPerf's TTFT (its first chunk with content) is the first token's; with
make-model's byte-level tokenizer most chunks are empty. ``skip_special_tokens`` is off for the same reason and
``ignore_eos`` keeps every output at its length. AIPerf sends each request's id as ``X-Request-ID``, which vLLM
takes as its own, so each record is matched to the engine's stamps by it; AIPerf's wall-clock sends are put on the
engine's monotonic clock with the server's own wall-minus-monotonic offset.

Each rate becomes a folder in ``--out``: ``profile_export.jsonl`` (AIPerf's records, warm-up phase included),
``requests.jsonl`` (the engine's stamps plus the client's ``client_sent``, ``client_first``, ``client_last``, and
with ``--turns`` each request's ``session`` and ``turn``),
``meta.json`` (engine arguments, the CPU step fit, the client's command) and ``config.json``.

    PYTHONPATH=$PWD python scripts/aiperf_capture.py --aiperf .aiperf/bin/aiperf --out tests/data/cpu_aiperf_run \
        --rates 4 --num-prompts 40
    PYTHONPATH=$PWD python scripts/aiperf_capture.py --aiperf .aiperf/bin/aiperf --out tests/data/cpu_aiperf_multiturn \
        --rates 4 --num-prompts 36 --turns 3 --input-len 200 --output-len 32 --warmups 0

(Run it on a quiet machine: on this 2-core one, with other work running, AIPerf's client read a streamed chat reply
as one chunk at its end, so its TTFT was the whole latency.)
"""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import client_capture as cc  # noqa: E402  (the server, its stamps and the step fit)


def word_model(out: Path) -> Path:
    """make-model's tiny with a vocabulary of 1,024 whole words (``<unk>``, ``<s>``, ``</s>``, ``w3`` ... ``w1023``)
    and a word-level tokenizer: every token a random-weight model emits decodes to text on its own, so every
    streamed chunk carries content (a byte-level tokenizer's bytes of a character come out empty until the
    character is whole, and AIPerf times the first chunk with content)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from llmsched.vllm.model import write_model
    write_model(out, vocab_size=1024)
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, 1024)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # (joins whole words with spaces)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    # the chat endpoint's (multi-turn): the messages' words in order, so a turn's prompt starts with the one before
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    fast.save_pretrained(out)
    return out


def prompts_file(args, out: Path, salt: str) -> Path:
    """AIPerf's single_turn dataset: one prompt a request (its warm-ups first), each ``--input-len`` random words
    of the vocabulary, drawn anew for each ``salt`` (a rate: the server's cache keeps the last one's), so that no two
    share a prefix (AIPerf's own synthetic text would be all ``<unk>`` here). With ``--turns`` N > 1, its
    multi_turn dataset: ``--num-prompts`` / N conversations of N turns, each turn's user text ``--input-len`` words
    (AIPerf sends each turn with the conversation so far, its replies as the server gave them)."""
    import random
    rng = random.Random(f"{args.seed}/{salt}")

    def turn() -> dict:
        return {"text": " ".join(f"w{rng.randint(3, 1023)}" for _ in range(args.input_len)),
                "output_length": args.output_len}

    if args.turns > 1:
        rows = [{"session_id": f"session_{k:03d}", "turns": [turn() for _ in range(args.turns)]}
                for k in range(args.num_prompts // args.turns)]
    else:
        rows = [turn() for _ in range(args.warmups + args.num_prompts)]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def aiperf_command(args, model: Path, port: int, rate: float, out: Path, prompts: Path) -> list[str]:
    chat = args.turns > 1
    return [args.aiperf, "profile", "--model", str(model), "--tokenizer", str(model),
            "--url", f"http://127.0.0.1:{port}", "--endpoint-type", "chat" if chat else "completions", "--streaming",
            "--request-rate", f"{rate:g}", "--request-count", str(args.num_prompts),
            "--input-file", str(prompts), "--custom-dataset-type", "multi_turn" if chat else "single_turn",
            "--dataset-sampling-strategy", "sequential",
            "--extra-inputs", "ignore_eos:true", "--extra-inputs", "skip_special_tokens:false",
            "--use-server-token-count", *(["--warmup-request-count", str(args.warmups)] if args.warmups else []),
            "--random-seed",
            str(args.seed), "--output-artifact-dir", str(out), "--export-level", "records", "--ui", "none"]


def request_key(vllm_id: str) -> str:
    """AIPerf's X-Request-ID (a UUID) in vLLM's id for it: ``cmpl-<id>-<n>`` (completions), ``chatcmpl-<id>``."""
    rest = vllm_id.split("-", 1)[1]
    return rest if rest.count("-") == 4 else rest.rsplit("-", 1)[0]


def run_folder(out: Path, records: list[dict], stamps: list[dict], steps: list[dict], model: Path, command: list,
               args, host: str) -> None:
    """One rate's folder (module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile_export.jsonl").write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    by_id = {request_key(row["request_id"]): row for row in stamps
             if str(row.get("request_id", "")).startswith(("cmpl-", "chatcmpl-"))}
    lines = []
    for rec in records:
        meta, metrics = rec["metadata"], rec["metrics"]
        row = by_id.get(meta["x_request_id"])
        if row is None or rec.get("error") is not None:
            continue
        keep = stamped_row({"request_id": meta["x_request_id"], "phase": meta["benchmark_phase"]}, row,
                           meta["request_start_ns"] / 1e9, metrics["time_to_first_token"]["value"] / 1e3,
                           metrics["request_latency"]["value"] / 1e3)
        if args.turns > 1:  # its conversation (one live session) and turn: the replay gives it the history's prefix
            keep["session"], keep["turn"] = meta["x_correlation_id"], meta["turn_index"]
        lines.append(keep)
    lines.sort(key=lambda r: r["arrival_time"])
    (out / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    shutil.copy(model / "config.json", out / "config.json")
    version = subprocess.run([args.aiperf, "--version"], capture_output=True, text=True).stdout.strip()
    endpoint = "/v1/chat/completions" if args.turns > 1 else "/v1/completions"
    write_meta(out, [r for r in lines if r["phase"] == "profiling"], steps, host,
               {"tool": "aiperf", "version": version or "0.13.0"}, command, endpoint, "aiperf_capture.py")


def stamped_row(head: dict, row: dict, sent_wall: float, ttft: float, latency: float) -> dict:
    """A requests.jsonl line: ``head`` (its id and the client's own fields), the engine's stamps ``row`` of the
    request, and the client's send (``sent_wall``, wall clock, put on the engine's monotonic clock with the server's
    own offset), first chunk and last byte (``ttft`` and ``latency`` after it, seconds)."""
    sent = sent_wall - row["wall_minus_mono"]
    keep = {**head, "input_toks": row["prompt_tokens"], "output_toks": row["output_tokens"],
            "arrival_time": round(row["arrival_time"], 6), "client_sent": round(sent, 6)}
    for k in ("http_ts", "rendered_ts", "added_ts", "first_out_ts", "last_out_ts", "queued_ts", "scheduled_ts",
              "first_token_ts", "last_token_ts"):
        if row.get(k) is not None:
            keep[k] = round(row[k], 6)
    keep["client_first"] = round(sent + ttft, 6)
    keep["client_last"] = round(sent + latency, 6)
    keep["num_cached_tokens"] = row.get("num_cached_tokens")
    return keep


def write_meta(out: Path, lines: list[dict], steps: list[dict], host: str, client: dict, command: list,
               endpoint: str, script: str, front_end: dict | None = None) -> None:
    """A rate folder's meta.json: the engine's arguments, the client and its command, and the CPU step fit over the
    span of ``lines`` (the compared requests)."""
    import vllm
    t0, t1 = min(r["client_sent"] for r in lines), max(r["client_last"] for r in lines)
    meta = {"model": "tiny (llmsched make-model, word-level vocabulary of 1,024)", "vllm_version": vllm.__version__,
            "gpu": "cpu", "host_cpu": host,
            "engine_kwargs": {**cc.ENGINE_ARGS, "tensor_parallel_size": 1, "data_parallel_size": 1},
            "engine_defaults_seen": {"async_scheduling": False, "enable_prefix_caching": True},
            "front_end": "vllm-serve",
            "front_end_details": {"server": "vllm serve (python -m vllm.entrypoints.openai.api_server)",
                                  "endpoint": f"{endpoint}, streamed", "prompt": "text (tokenised by the server)",
                                  "stream_interval": 1, "detokenize": True, **(front_end or {})},
            "client": {**client, "command": shlex.join([Path(command[0]).name, *command[1:]])},
            "cpu_step_model": cc.step_model(steps, t0, t1),
            "command": f"PYTHONPATH=$PWD python scripts/{script} " + " ".join(sys.argv[1:])}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def capture(args, prefix: str, run_rate, server_args: tuple = ()) -> int:
    """Start ``vllm serve`` (the word-level tiny model, the engine's stamps; ``server_args`` added to its command),
    then ``run_rate(model, port, rate, work, stamps, host)`` for each of ``args.rates`` (it runs the client and
    writes the rate's folder); stop it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    work = Path(tempfile.mkdtemp(prefix=prefix))
    model = word_model(work / "tiny")
    stamps, log, port = work / "stamps.jsonl", work / "server.log", cc.free_port()
    host = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                "unknown")
    with open(log, "w") as f:
        proc = subprocess.Popen(cc.server_command(model, port, stamps, "cpu", list(server_args)), stdout=f,
                                stderr=subprocess.STDOUT, env=cc.server_env(work, "cpu"), start_new_session=True)
    try:
        print(f"server ready in {cc.wait_ready(f'http://127.0.0.1:{port}', proc, log, 600):.0f} s", flush=True)
        for rate in args.rates:
            run_rate(model, port, rate, work, stamps, host)
            print(f"wrote {Path(args.out) / f'rate-{rate:g}'}", flush=True)
    finally:
        cc.stop(proc)
    return 0


def run_client(command: list, name: str, cwd: Path | None = None) -> None:
    """Run a client's command; its output's tail in the error where it fails."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd)
    if done.returncode:
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    time.sleep(2.0)  # the last finish is written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--aiperf", default="aiperf", help="the aiperf script of AIPerf's own venv")
    p.add_argument("--rates", type=float, nargs="+", default=[4.0])
    p.add_argument("--num-prompts", type=int, default=40)
    p.add_argument("--input-len", type=int, default=400)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--warmups", type=int, default=2, help="aiperf's --warmup-request-count")
    p.add_argument("--turns", type=int, default=1,
                   help="turns a conversation (> 1: AIPerf's multi_turn dataset through the chat endpoint)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    def run_rate(model, port, rate, work, stamps, host):
        result = work / f"aiperf-{rate:g}"
        prompts = prompts_file(args, work / f"prompts-{rate:g}.jsonl", f"{rate:g}")
        command = aiperf_command(args, model, port, rate, result, prompts)
        run_client(command, "aiperf")
        run_folder(Path(args.out) / f"rate-{rate:g}", cc.read_rows(result / "profile_export.jsonl"),
                   cc.read_rows(stamps), cc.read_rows(work / "steps.jsonl"), model, command, args, host)

    return capture(args, "aiperf_capture_", run_rate)


if __name__ == "__main__":
    sys.exit(main())
