"""``dynamo-sla``: NVIDIA Dynamo's SLA planner (ai-dynamo/dynamo, components/planner/src/dynamo/planner/utils/
planner_core.py ``Planner``, defaults in planner/defaults.py ``SLAPlannerDefaults``; docs "SLA-based Planner").

Every ``interval`` seconds (``adjustment_interval``, 180) it observes the last interval's requests (how many arrived,
their mean input length; the mean output length of those that finished), predicts the next interval's three with
its load predictor (``predictor``: ``constant`` or ``arima``, load_predictor.py; window 50), and sizes
(``_compute_replica_requirements``):

    prefill replicas = ceil(requests x ISL / interval / prefill tokens/s of a replica at ISL)
    decode replicas  = ceil(requests x OSL / interval / decode tokens/s of a replica within the ITL target at
                            context ISL + OSL / 2)

with a replica's figures from its batch-time model (replica_sizing.py, where Dynamo reads its profiling sweeps) and
``itl`` the ITL target (default the run's TPOT target, else Dynamo's 0.05 s). A ``prefill`` pool takes the first,
a ``decode`` pool the second; a pool serving whole requests (this project's aggregated replicas) takes the two loads
together, ``ceil(prefill load + decode load)``: a replica's time is shared between its prefills and its decodes.
A pool one of several of its role takes its share. An interval with no request is skipped (Dynamo: "no active
requests, skipping adjustment"). Dynamo corrects its sizing by the observed TTFT and ITL against the profile's
(``p_correction_factor``, ``d_correction_factor``); here, as in its dry-run mode and with ``--no-correction``,
it does not.
"""
from __future__ import annotations

from .autoscaler import Autoscaler, ceil
from .load_predictor import PREDICTORS, Predictor
from .replica_sizing import decode, prefill

DYNAMO_ITL = 0.05  # SLAPlannerDefaults.itl


class DynamoSLA(Autoscaler):
    name = "dynamo-sla"
    summary = "NVIDIA Dynamo's SLA planner: predicted next-interval load over a replica's throughput at the ITL target"
    source = ("ai-dynamo/dynamo components/planner/src/dynamo/planner/utils/planner_core.py (Planner), "
              "utils/load_predictor.py, defaults.py (SLAPlannerDefaults)")
    PARAMS = {"interval": 180.0, "predictor": "arima", "window": 50, "itl": 0.0}
    DURATIONS = ("interval",)
    CHOICES = {"predictor": PREDICTORS}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.params["window"] < 1 or self.params["itl"] < 0:
            raise ValueError("--autoscaler-param window must be >= 1 and itl >= 0 seconds")
        kind, window = self.params["predictor"], self.params["window"]
        self.requests, self.isl, self.osl = (Predictor(kind, window) for _ in range(3))
        self.seen = None
        self.last_osl = None

    @property
    def period(self) -> float:
        return self.params["interval"]

    @property
    def itl(self) -> float:
        return self.params["itl"] or self.context.tpot or DYNAMO_ITL

    def begin(self, now: float) -> None:
        self.seen = self.snapshot()
        super().begin(now)

    def snapshot(self) -> tuple:
        load = self.load()
        return load.arrived, load.prompt_tokens, load.finished, load.output_tokens

    def observe(self) -> bool:
        """The last interval's requests, ISL and OSL into the predictors; False when none arrived."""
        now = self.snapshot()
        arrived, prompt, finished, output = (b - a for a, b in zip(self.seen, now))
        self.seen = now
        if arrived <= 0:
            return False
        if finished > 0:
            self.last_osl = output / finished
        if self.last_osl is None:
            return False  # no output length seen yet
        self.requests.add(arrived)
        self.isl.add(prompt / arrived)
        self.osl.add(self.last_osl)
        return True

    def decide(self, now: float) -> int | None:
        if not self.observe():
            return None
        num, isl, osl = self.requests.predict(), self.isl.predict(), self.osl.predict()
        rep = self.state.replicas[0]
        interval, share = self.params["interval"], 1 / self.context.role_pools
        p_load = num * isl / interval * share / prefill(rep, max(isl, 1.0))[0]
        d_load = num * osl / interval * share / decode(rep, isl + osl / 2, self.itl).tokens_per_s
        role = self.state.spec.role
        if role == "prefill":
            return ceil(p_load)
        if role == "decode":
            return ceil(d_load)
        return ceil(p_load + d_load)


POLICY = DynamoSLA
