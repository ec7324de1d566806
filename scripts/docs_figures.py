"""Regenerate the figures README.md and docs/ show, from the commands that write them:
``python scripts/docs_figures.py [NAME ...]`` (all by default; about 2 minutes on 2 cores, most of it the default
``llmsched compare``). Each figure is the command's own output file, stored in docs/images/ with its colours
reduced to a 256-colour palette (no dithering: the same picture at about a third of the bytes), so what the page
shows is what a person running the command gets.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
BASELINES = "vllm,vllm-chunked,sarathi,sarathi-spf,orca,fastertransformer"
# name: (command, {file the command writes: file under docs/images})
FIGURES = {
    "compare": ("llmsched compare", {"latency_cdf.png": "compare_latency_cdf.png"}),
    "compare-baselines": (f"llmsched compare --schedulers {BASELINES}",
                          {"latency_cdf.png": "compare_baselines_latency_cdf.png"}),
    "capacity": ("llmsched capacity --schedulers sarathi,vllm --model llama-3-8b --gpu a100 --workload sharegpt "
                 "--slo ttft_p50<=2s,tbt_p99<=0.2s --no-cache", {"capacity.png": "capacity.png"}),
}


def regenerate(name: str) -> list[Path]:
    from llmsched.cli import main
    command, files = FIGURES[name]
    with tempfile.TemporaryDirectory() as out:
        args = shlex.split(command)[1:] + ["--out", out, "--no-progress"]
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(args)
        if code != 0:
            raise SystemExit(f"`{command}` failed with exit code {code}")
        IMAGES.mkdir(parents=True, exist_ok=True)
        return [palette(Path(out) / src, IMAGES / dst) for src, dst in files.items()]


def palette(src: Path, dst: Path) -> Path:
    from PIL import Image
    image = Image.open(src).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(dst, optimize=True)
    return dst


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help=f"which (default all: {', '.join(FIGURES)})")
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in FIGURES]
    if unknown:
        p.error(f"no figure named {', '.join(unknown)}; known: {', '.join(FIGURES)}")
    for name in args.names or FIGURES:
        for path in regenerate(name):
            print(f"{FIGURES[name][0]}  ->  {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
