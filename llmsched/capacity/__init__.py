"""One definition of capacity and stability for every command and reproduction (docs/capacity.md)."""
from .cache import ProbeCache
from .probe import Probe, measure_point, probe_config, run_probe
from .rate_search import CapacityResult, find_capacities, find_capacity
from .slo import SLO, parse_slos
from .stability import VERDICTS
from .verdict import evaluate, measure

__all__ = ["SLO", "VERDICTS", "CapacityResult", "Probe", "ProbeCache", "evaluate", "find_capacities",
           "find_capacity", "measure", "measure_point", "parse_slos", "probe_config", "run_probe"]
