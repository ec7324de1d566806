"""``llmsched reproduce wait``: Ao et al.'s experiments in the simulator; llmsched/reproduce/wait.py runs them."""
from __future__ import annotations

from ..reproduce.wait import reproduce
from ..reproduce.wait_runs.experiments import SETTINGS
from .package_commands import run_field_option

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true", help="small sizes for CI (seconds)")
    p.add_argument("--out", default=None, help="write results.json here")
    p.add_argument("--settings", default=",".join(["authors", *SETTINGS]),
                   help=f"§6 settings to run, comma-separated (default all: authors, {', '.join(SETTINGS)})")
    run_field_option(p, "model", "model preset (default %(default)s, the paper's)")
    run_field_option(p, "gpu", "GPU preset (default %(default)s, the paper's)")
    p.add_argument("--requests", type=int, default=None, help="requests per §6 run (default 4000; --fast 200)")
    p.add_argument("--only", default="", help="run only these parts, comma-separated: authors (§6 in the authors' "
                                              "setting), capacity (LMSYS capacities), reserve (preemption ablation)")
    p.add_argument("--capacity", action="store_true",
                   help="also the LMSYS capacities (shared capacity definition; on by default without --fast)")
    p.add_argument("--capacity-requests", type=int, default=1000, help="requests per capacity probe (default 1000)")
    p.add_argument("--capacity-slo", default="", help="SLOs for the capacities, e.g. 'e2e_p50<=30' (default: "
                                                      "stability only)")
    p.add_argument("--skip-lmsys", action="store_true", help="skip the LMSYS-lengths run (needs the data file)")
