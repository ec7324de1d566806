"""Regenerate README.md's compare table from the command it documents: ``python scripts/readme_table.py``.

The block between the two markers in README.md is the command and its output, in the columns below; the script
rewrites it in place, so a change to a model or a default (e.g. the batch-time model) is one command away from a
README that matches. ``--check`` only compares (exit 1 when the README is stale); tests/test_readme_table.py runs
that check.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COMMAND = "llmsched compare --schedulers vllm,vllm-chunked,sarathi,sarathi-spf,orca,fastertransformer"
COLUMNS = ["scheduler", "finished", "rejected", "ttft_p50", "ttft_p99", "tbt_p99", "tpot_p50", "e2e_p50",
           "throughput_rps", "goodput_rps", "slo_attainment"]
START = "<!-- compare-table: written by scripts/readme_table.py from the command below; do not edit by hand -->"
END = "<!-- end compare-table -->"


def table() -> str:
    """Runs COMMAND (in-process, into a temporary folder) and formats its results in COLUMNS."""
    from llmsched.cli import main
    from llmsched.metrics.writers import format_table
    with tempfile.TemporaryDirectory() as out:
        args = shlex.split(COMMAND)[1:] + ["--out", out, "--no-progress"]
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(args)
        if code != 0:
            raise SystemExit(f"`{COMMAND}` failed with exit code {code}")
        rows = json.loads((Path(out) / "results.json").read_text())
    return format_table(rows, COLUMNS)


def block(text: str) -> str:
    return f"{START}\n```\n$ {COMMAND}\n{text}\n```\n{END}"


def rewrite(readme: str, text: str) -> str:
    """``readme`` with its compare-table block replaced by ``text``'s."""
    if readme.count(START) != 1 or readme.count(END) != 1 or readme.index(START) > readme.index(END):
        raise ValueError(f"{README}: expected one block between {START!r} and {END!r}")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + block(text) + tail


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check; exit 1 if README.md is stale")
    args = p.parse_args(argv)
    current = README.read_text()
    fresh = rewrite(current, table())
    if args.check:
        if fresh != current:
            print(f"{README} is stale: run python scripts/readme_table.py", file=sys.stderr)
            return 1
        print(f"{README}: the compare table matches `{COMMAND}`")
        return 0
    README.write_text(fresh)
    print(f"rewrote the compare table in {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
