"""``llmsched reproduce infermax``: Kim et al.'s experiments; llmsched/reproduce/infermax.py runs them."""
from __future__ import annotations

from ..reproduce.infermax import PARTS, reproduce

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated parts (default all: {','.join(PARTS)})")
    p.add_argument("--fast", action="store_true", help="small sizes for CI (seconds)")
    p.add_argument("--trace", dest="trace_file", metavar="TRACE", default="vidur_splitwise_conv.csv",
                   help="§6 trace (default vidur_splitwise_conv.csv, the Azure conversation trace as Vidur ships it)")
    p.add_argument("--csp-time-limit", type=float, default=None,
                   help="CP-SAT deterministic time per §5.1 instance (about a second of one core per unit; default "
                        "30; 2 with --fast)")
    p.add_argument("--workers", type=int, default=1,
                   help="CP-SAT workers (default 1; more run an interleaved, still deterministic search)")
    p.add_argument("--out", default=None, help="write results.json (every table) into this folder")
