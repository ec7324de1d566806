"""Workloads: when requests arrive, how long they are, which tier they belong to, and real traces."""
from llmsched.workload.arrivals.processes import (ArrivalProcess, Constant, Gamma, Piecewise, Poisson, TraceReplay,
                                                  TruncatedPoisson)
from llmsched.workload.lengths.length_presets import LENGTH_PRESETS, length_preset
from llmsched.workload.lengths.distributions import (Capped, Empirical, Fixed, Geometric, LengthDist, Lognormal,
                                                     QuantileTable, Uniform, Zipf)
from llmsched.workload.tenants.tiers import assign_tiers, parse_tiers
from llmsched.workload.traces.readers import (DataFileNotFound, Trace, TraceError, read_azure, read_lengths,
                                              read_trace, read_vidur, resolve_data_file)
from llmsched.workload.workload import ClosedLoop, OpenLoop, RequestSource, Workload, named_workload, trace_workload

__all__ = [
    "ArrivalProcess", "Poisson", "TruncatedPoisson", "Gamma", "Constant", "Piecewise", "TraceReplay",
    "LengthDist", "Fixed", "Uniform", "Lognormal", "Zipf", "Geometric", "Empirical", "QuantileTable", "Capped",
    "LENGTH_PRESETS", "length_preset",
    "parse_tiers", "assign_tiers",
    "Trace", "TraceError", "DataFileNotFound", "read_azure", "read_vidur", "read_lengths", "read_trace",
    "resolve_data_file",
    "Workload", "RequestSource", "OpenLoop", "ClosedLoop", "trace_workload", "named_workload",
]
