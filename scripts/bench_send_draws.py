"""What replaying a vllm bench serve result without its send times costs: the run's errors from its recorded
sends, then with ``start_times`` removed (the sends drawn as vllm bench serve draws them) for several seeds
(docs/fidelity.md, "A bench result without send times").

    python scripts/bench_send_draws.py tests/data/gpu_runs/h200-llama-3.1-8b-serve-sharegpt-8 --gpu h200 --seeds 10
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import llmsched.workload.traces.bench_sends as bench_sends
from llmsched.validate.serving import validate
from llmsched.validate.serving_run import load_run

FIGURES = (("ttft", "p50"), ("tpot", "p50"), ("e2e", "p50"), ("throughput", "output_tps"))


def errors(folder: Path, gpu: str) -> list[float]:
    row = validate(load_run(folder), gpu=gpu)
    return [row["errors"][metric][stat] for metric, stat in FIGURES]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a run folder whose bench result has start_times")
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()
    bench = json.loads((args.run / "bench.json").read_text())
    if "start_times" not in bench:
        raise SystemExit(f"{args.run / 'bench.json'}: no start_times to compare the draws with")
    with tempfile.TemporaryDirectory() as tmp:
        recorded, drawn = Path(tmp, "recorded"), Path(tmp, "drawn")
        for folder in (recorded, drawn):
            folder.mkdir()
            if (args.run / "config.json").is_file():
                (folder / "config.json").write_text((args.run / "config.json").read_text())
        (recorded / "bench.json").write_text(json.dumps(bench))
        (drawn / "bench.json").write_text(json.dumps({k: v for k, v in bench.items() if k != "start_times"}))
        print("sends      " + "  ".join(f"{m} {s}".rjust(18) for m, s in FIGURES))
        print("recorded   " + "  ".join(f"{e:+18.1f}" for e in errors(recorded, args.gpu)))
        draw = bench_sends.drawn_sends
        rows = []
        for seed in range(args.seeds):
            bench_sends.drawn_sends = lambda n, rate, burst=1.0, ramp=None, _s=seed: draw(n, rate, burst, ramp, _s)
            rows.append(errors(drawn, args.gpu))
            print(f"seed {seed:<5}" + "  ".join(f"{e:+18.1f}" for e in rows[-1]), flush=True)
        bench_sends.drawn_sends = draw
    columns = list(zip(*rows))
    print("median     " + "  ".join(f"{statistics.median(c):+18.1f}" for c in columns))
    print("range      " + "  ".join(f"{min(c):+8.1f}..{max(c):+.1f}".rjust(18) for c in columns))


if __name__ == "__main__":
    main()
