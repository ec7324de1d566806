"""A pool: replicas alike (one model, GPU, parallelism, scheduler, KV configuration and limits) serving one role
of a request's path, with the router that routes over them and the figures of their start-up phases.

A pool's settings are run fields (``llmsched/run_config.py``), written with the same names and checked by the same
declarations; a field the pool leaves out is the run's. ``replicas`` is how many it has when the run starts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .lifecycle import PhaseTimes

# what a pool's replicas do for a request, matched by a path's stages: a role is a name; a fleet file's pools serve
# whole requests, or (disaggregation, fleet/disagg.py) the prefill of a request and the decode that follows it
SERVE = "serve"
PREFILL = "prefill"
DECODE = "decode"
FILE_ROLES = (SERVE, PREFILL, DECODE)
# the run fields a pool may set: what a replica is, and the router over the pool; the workload, the run's control
# and vLLM's data parallelism (a DP group is one server: a pool of several replicas behind vllm-dp-latest is the
# fleet's way to write it) stay the run's
POOL_FIELDS = ("scheduler", "scheduler_params", "model", "gpu", "gpu_spec", "tp", "batch_time", "batch_time_params",
               "replicas", "router", "router_params", "block_size", "max_num_seqs", "max_num_batched_tokens",
               "max_model_len", "gpu_memory_utilization", "kv_cache_dtype", "num_blocks", "preemption_mode",
               "overflow", "swap_space_gb", "oracle", "prefix_caching", "kv_offload", "kv_offload_mode", "fast_forward",
               "check_invariants", "autoscaler", "min_replicas", "max_replicas", "autoscaler_params", "cold_start",
               "cold_start_params")
# the fields of a pool's KV tiers below the GPU (a decode pool has only those it sets: Pool.run_fields)
OFFLOAD_KEYS = ("kv_offload", "kv_offload_mode")
# a field whose parameters belong to it: a pool that names its own scheduler (router, batch-time model) does not
# take the run's parameters for another one
PARAMS_OF = {"scheduler": "scheduler_params", "router": "router_params", "batch_time": "batch_time_params",
             "autoscaler": "autoscaler_params"}


@dataclass(frozen=True)
class Pool:
    name: str
    replicas: int = 1
    role: str = SERVE
    fields: dict = field(default_factory=dict)  # run fields the pool sets, each checked by its declaration
    phases: object = None  # a duration source of its start-up phases (PhaseTimes, a ColdStart); None: not given
    origin: object = field(default=None, compare=False, repr=False)  # where it was written (run_field.Origin)

    def __post_init__(self):
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"a pool needs a name, got {self.name!r}")
        if not self.role or not isinstance(self.role, str):
            raise ValueError(f"pool {self.name!r}: a role is a name (e.g. {SERVE!r}), got {self.role!r}")
        if not (isinstance(self.replicas, int) and self.replicas >= 1):
            raise ValueError(f"pool {self.name!r}: replicas must be an integer >= 1, got {self.replicas!r}")
        unknown = sorted(set(self.fields) - set(POOL_FIELDS))
        if unknown:
            raise ValueError(f"pool {self.name!r}: {', '.join(unknown)} cannot be set per pool; a pool sets "
                             f"{', '.join(POOL_FIELDS)}")

    @property
    def durations(self):
        """Its start-up phases' duration source: the one given, else 0 s each (a replica serves once asked for)."""
        return self.phases if self.phases is not None else PhaseTimes()

    def run_fields(self, run: dict) -> dict:
        """The run fields of this pool's replicas: ``run``'s (a run config's values), with the pool's own; a
        scheduler, router or batch-time model the pool names takes only the parameters the pool gives it. A decode
        pool does not take the run's KV tiers below the GPU: they are the prefill pools', where prompts are computed
        and their prefixes found again; a decode pool that sets its own keeps them."""
        out = dict(run)
        if self.role == DECODE:
            for key in OFFLOAD_KEYS:
                out.pop(key, None)
        if "gpu" in self.fields or "gpu_spec" in self.fields:  # the pool's card replaces the run's, however written
            out.pop("gpu", None)
            out.pop("gpu_spec", None)
        for name, params in PARAMS_OF.items():
            if name in self.fields and self.fields[name] != run.get(name):
                out[params] = {}
        out.update(self.fields)
        out["replicas"] = self.replicas
        return out
