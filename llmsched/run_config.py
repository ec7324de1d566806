"""What one run is: every field declared once (type, default, range, help, CLI flag), and the config files.

The command line's run options, a config file's keys and the checks of both are generated from RunConfig's
declarations (``llmsched/run_field.py``); a replica's limits are declared in ``engine/limits.py`` and shared with
``ReplicaConfig`` and the vLLM engine. Each value is checked once, where it is written (a config file, the command
line, Python code), and an error names it as the user wrote it: the option, the file and line, or the keyword.
A text that needs parsing (tiers, a rate schedule) is parsed by that check and kept parsed (``Parsed``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from .bounds import MAX_BLOCKS, MAX_REQUESTS, MAX_SECONDS, MAX_TOKENS, MIN_RATE
from .config_fields import DEFAULT_MAX_REPLICAS, DEFAULT_MIN_REPLICAS, check_combination, check_params
from .fleet.autoscalers import AUTOSCALER_NAMES
from .engine.limits import (BLOCK_SIZE, CHECK_INVARIANTS, FAST_FORWARD, MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS,
                            MAX_NUM_SEQS, ORACLE, OVERFLOW, PREEMPTION_MODE, PREFIX_CACHING)
from .hardware.batch_defaults import LIMITS as GPU_LIMITS, GpuDefault, on_gpu
from .hardware.front_end import DEFAULT as DEFAULT_FRONT_END, FRONT_ENDS
from .engine.offload_spec import MODES as KV_OFFLOAD_MODES, parse_kv_offload
from .hardware.gpus import gpu_from_file
from .hardware.hf_config import KV_CACHE_DTYPE_BYTES
from .run_field import API, Origin, declare, declare_parsed, declared, default_of
from .user_files import read_user_file
from .workload.arrivals.rate_schedule import EXAMPLE as SCHEDULE_EXAMPLE, RateSchedule, parse_rate_schedule
from .workload.tenants.streams import EXAMPLE as TENANTS_EXAMPLE, parse_tenants
from .workload.traces.bench_command import parse_bench_command
from .workload.tenants.tiers import parse_tiers


def parse_rate_schedule_text(text: str) -> RateSchedule:
    return parse_rate_schedule(text)


def gpu_spec_file(text: str):
    return gpu_from_file(text)


def parse_xpyd_text(text: str):
    from .fleet.disagg import parse_xpyd  # here: a run without disaggregation loads none of the fleet layer
    return parse_xpyd(text)


def fleet_file(text: str):
    """A fleet file (llmsched/fleet/fleet_file.py): its pools' run fields checked by their declarations here."""
    from .fleet.fleet_file import read_fleet  # here: a run without a fleet loads none of the fleet layer
    data = load_config(text, "fleet file")
    return read_fleet(data, text, Path(text).read_text(), checked_fields)


@dataclass
class RunConfig:
    """Everything one run needs. Field names match the CLI options and config-file keys."""

    scheduler: str = declare("sarathi", "scheduler name (see `llmsched presets`)", hint="see `llmsched presets`")
    scheduler_params: dict = declare({}, "scheduler parameter (repeatable); in compare/sweep use "
                                         "SCHEDULER.KEY=VALUE", flag="--param", metavar="KEY=VALUE")
    model: str = declare("llama-3-8b", "model preset (see `llmsched presets`), e.g. llama-3-8b, or a Hugging Face "
                                       "config.json (or a folder holding one)",
                         hint="a model preset (see `llmsched presets`) or a Hugging Face config.json")
    gpu: str = declare("a100", "GPU preset, e.g. a100, h100, rtx-pro-6000 (or a GPU spec file, as --gpu-spec)",
                       hint="a GPU preset (see `llmsched presets`) or a GPU spec file")
    # a GPU spec file; becomes the run's gpu
    gpu_spec: str | None = declare_parsed("a GPU spec file (.toml/.json) of its datasheet figures, for a card "
                                          "without a preset", hint="a GPU spec file (.toml/.json) of datasheet figures",
                                          parse=gpu_spec_file)
    tp: int | None = declare(None, "tensor-parallel degree (overrides the model preset's)", kind=int, optional=True,
                             low=1, high=64)
    batch_time: str = declare("vllm-v1", "batch-time model: vllm-v1 (vLLM v1's engine terms around the roofline, "
                                         "validated against vLLM: the default), roofline, roofline-staircase, "
                                         "calibrated, engine, linear, or a stored profile")
    batch_time_params: dict = declare({}, "batch-time model parameter (repeatable)", flag="--bt-param",
                                      metavar="KEY=VALUE")
    replicas: int = declare(1, "number of replicas behind the router", low=1, high=4096)
    router: str = declare("round-robin", "router for several replicas: random, round-robin, least-outstanding, "
                                         "least-load, prefix-affinity, prefix-hash, ... (see `llmsched presets`)")
    router_params: dict = declare({}, "router parameter (repeatable), e.g. balance_abs=16 for prefix-affinity "
                                      "(see docs/prefix-routing.md)", flag="--router-param", metavar="KEY=VALUE")
    # pools of replicas, each with its own run fields, their start-up phases and scale events (llmsched/fleet/)
    fleet: str | None = declare_parsed("a fleet file (TOML/YAML): pools of replicas, each its own model, GPU, TP, "
                                       "scheduler and router, with their start-up phases and scale events in time "
                                       "(docs/fleet.md)", hint="a fleet file (.toml/.yaml), see docs/fleet.md",
                                       parse=fleet_file)
    # prefill/decode disaggregation (docs/disaggregation.md): a prefill pool and a decode pool, the KV over a link
    disaggregate: str | None = declare_parsed("prefill/decode disaggregation: xPyD, x prefill and y decode replicas "
                                              "(e.g. 2P1D); each request is prefilled in the prefill pool, its KV "
                                              "crosses --kv-link, the decode pool produces its tokens "
                                              "(docs/disaggregation.md)",
                                              hint="e.g. 2P1D (x prefill, y decode replicas, each >= 1)",
                                              parse=parse_xpyd_text)
    prefill_gpu: str | None = declare(None, "the prefill pool's GPU preset (default --gpu)", kind=str, optional=True,
                                      hint="a GPU preset (see `llmsched presets`)")
    prefill_tp: int | None = declare(None, "the prefill pool's tensor parallelism (default --tp)", kind=int,
                                     optional=True, low=1, high=64)
    decode_gpu: str | None = declare(None, "the decode pool's GPU preset (default --gpu)", kind=str, optional=True,
                                     hint="a GPU preset (see `llmsched presets`)")
    decode_tp: int | None = declare(None, "the decode pool's tensor parallelism (default --tp)", kind=int,
                                    optional=True, low=1, high=64)
    prefill_pool: dict = declare({}, "a run field for the prefill pool alone (repeatable), e.g. scheduler=vllm, "
                                     "max_num_batched_tokens=8192, router=prefix-affinity", flag="--prefill-pool",
                                 metavar="FIELD=VALUE")
    decode_pool: dict = declare({}, "a run field for the decode pool alone (repeatable), e.g. scheduler=vllm, "
                                    "max_num_seqs=512, router=least-outstanding", flag="--decode-pool",
                                metavar="FIELD=VALUE")
    kv_link: str = declare("ib-400g", "the link a disaggregated run's KV crosses, per GPU: nvlink3/4/5, ib-100g, "
                                      "ib-200g, ib-400g, pcie-gen4/5, pcie or same-node (the GPU's), nvme, or "
                                      "bw=RATE,latency=SECONDS (hardware/links.py)",
                           hint="a link preset or bw=25GB/s,latency=5us")
    kv_connector: str = declare("nixl", "how a disaggregated run's KV moves: nixl (vLLM's NixlConnector: the decode "
                                        "side pulls the prompt's KV once the prefill ended) or layerwise (sent layer "
                                        "by layer during the prefill, as LMCache and Splitwise do)",
                                choices=("nixl", "layerwise"))
    pd_first_token: str = declare("decode", "which instance of a disaggregated run gives the client its first token: "
                                            "decode (vLLM's proxy: the prefill's token is dropped and the decode "
                                            "instance streams every token) or prefill (DistServe, Splitwise: the "
                                            "prefill instance returns it, the transfer and the decode queue fall "
                                            "in the second token's gap)", choices=("decode", "prefill"))
    pd_decider: str = declare("always", "which requests a disaggregated run prefills remotely: always, llm-d "
                                        "(llm-d's prefix-based P/D decider), dynamo (Dynamo's conditional "
                                        "disaggregation); the rest are served whole by the decode pool",
                              choices=("always", "llm-d", "dynamo"))
    pd_decider_params: dict = declare({}, "a decider parameter (repeatable): llm-d non_cached_tokens=16; dynamo "
                                          "eff_isl_threshold=2048, eff_isl_ratio_threshold=0.7",
                                      flag="--pd-param", metavar="KEY=VALUE")
    # an autoscaler of the run's pool (or of every pool of its fleet), the bounds it keeps, and the cold start of the
    # replicas it adds (llmsched/fleet/: autoscalers.py, cold_start.py; docs/autoscaling.md)
    autoscaler: str | None = declare(None, "autoscale the replicas: hpa (Kubernetes HPA), kpa (Knative), dynamo-sla "
                                           "(NVIDIA Dynamo's SLA planner), saturation (llm-d's variant autoscaler), "
                                           "predictive (the rate forecast ahead of the cold start); see "
                                           "docs/autoscaling.md", kind=str, optional=True,
                                     choices=AUTOSCALER_NAMES, hint="see docs/autoscaling.md")
    min_replicas: int = declare(DEFAULT_MIN_REPLICAS, "--autoscaler: fewest replicas of a pool", low=1, high=4096)
    max_replicas: int = declare(DEFAULT_MAX_REPLICAS, "--autoscaler: most replicas of a pool", low=1, high=4096)
    autoscaler_params: dict = declare({}, "autoscaler parameter (repeatable), e.g. metric=kv, down_window=600 "
                                          "(docs/autoscaling.md lists each policy's)", flag="--autoscaler-param",
                                      metavar="KEY=VALUE")
    cold_start: float | None = declare(None, "seconds from asking for a replica to its first request, the whole path "
                                             "(provisioning, image pull, weight load, engine start, warm-up in the "
                                             "default model's proportions); default with --autoscaler: the cold-start "
                                             "model of docs/autoscaling.md", kind=float, optional=True, low=0,
                                       high=MAX_SECONDS, hint="seconds")
    cold_start_params: dict = declare({}, "a cold-start phase in seconds (provisioning, image_pull, weight_load, "
                                          "engine_start, warmup) or storage=remote|nvme|page-cache for the weights "
                                          "(repeatable)", flag="--cold-start-param", metavar="KEY=VALUE")
    # vLLM's data parallelism: dp engines (attention ranks), each with its own scheduler and KV cache, behind
    # vLLM's DP load balancer (the router, unless one is named); expert_parallel shards a MoE model's experts
    # over them, and a MoE model's ranks step in lockstep (sim/dp_lockstep.py)
    dp: int = declare(1, "vLLM's data_parallel_size: DP ranks, each with its own scheduler and KV cache, fed by "
                         "vLLM's DP load balancer (vllm-dp-latest, unless --router names another)", low=1, high=1024,
                      hint="vLLM's data_parallel_size")
    expert_parallel: bool = declare(False, "vLLM's enable_expert_parallel: a MoE model's experts sharded over the "
                                           "--dp ranks (and their tensor-parallel GPUs)", switch=True)
    # workload: a named length preset with an arrival process, a real trace, or a closed loop
    workload: str = declare("sharegpt", "named length preset paired with --arrival at --rate (sharegpt, "
                                        "azure-conv, ...)", hint="a length preset, see `llmsched presets`")
    trace: str | None = declare(None, "replay a real trace file with arrival times (Azure 2023 CSV, Vidur CSV, "
                                      "Mooncake or LLMServingSim JSONL, llmsched's session JSONL); a bare name is "
                                      "looked up in $LLMSCHED_DATA and ../shared/data/traces (length-only files go "
                                      "to --lengths)", kind=str, optional=True)
    lengths: str | None = declare(None, "your own length file (CSV with num_prefill_tokens,num_decode_tokens or "
                                        "question_length,answer_length; or any trace, its arrivals unused) as the "
                                        "length distribution, with --rate", kind=str, optional=True,
                                  hint="a length CSV (num_prefill_tokens,num_decode_tokens or question_length,"
                                       "answer_length)")
    rate: float | None = declare(2.0, "arrival rate in requests/s (for --trace: rescale its arrivals to this mean "
                                      "rate)", kind=float, optional=True, low=MIN_RATE,
                                 must=f"a positive number of requests/s, at least {MIN_RATE:g} (a mean gap of at "
                                      f"most 11.6 days)")
    num_requests: int | None = declare(None, "number of requests (default 1000 for named workloads, the whole trace "
                                             "for --trace)", kind=int, optional=True, low=1, high=MAX_REQUESTS)
    duration: float | None = declare(None, "generate arrivals for this many seconds instead of a request count",
                                     kind=float, optional=True, above=0, high=MAX_SECONDS, hint="seconds")
    arrival: str = declare("poisson", "arrival process for named workloads: poisson, gamma (bursty, see --cv), "
                                      "constant; inference-perf (with --rate-schedule stages or an inference-perf "
                                      "config): int(rate x duration) requests a stage, timed as its load.type "
                                      "(constant: exponential gaps scaled to fill the stage)",
                           choices=("poisson", "gamma", "constant", "inference-perf"))
    cv: float | None = declare(None, "coefficient of variation of gamma inter-arrival times (>1 is burstier than "
                                     "Poisson)", kind=float, optional=True, low=1e-3, high=1e3)
    rate_schedule: str | None = declare_parsed("arrival rate over time (docs/workloads.md, \"Time-varying traffic\"): "
                                               "steps 'START:RATE,...', inference-perf stages 'stages:RATE@SECONDS,"
                                               "...' (or its config file), 'diurnal:peak=R,trough=R[,period=S]"
                                               "[,peak_at=S]', each with any ';burst:at=T,x=K,for=D'; with --workload, "
                                               "--lengths, --tenants (their rates split it) or --trace (bends its "
                                               "time)", hint=f"e.g. {SCHEDULE_EXAMPLE}",
                                               parse=parse_rate_schedule_text)
    time_scale: float | None = declare(None, "--trace: multiply every timestamp by this factor (0.5 replays it "
                                             "twice as fast, 2 at half its rate)", kind=float, optional=True, above=0,
                                       high=1e6, hint="a factor > 0 (with --trace)")
    bench_command: str | None = declare_parsed("--trace of a vllm bench serve result (or of the requests.jsonl of "
                                               "a run it drove) saved without meta.json: the `vllm bench serve ...` "
                                               "line it ran with, whose dataset flags say which prompts began with "
                                               "the same tokens (random with --random-prefix-len, prefix_repetition) "
                                               "and --num-warmups what it sent before the run",
                                               parse=parse_bench_command, hint="the vllm bench serve command line")
    concurrency: int | None = declare(None, "closed loop: keep this many requests in flight (a new one arrives as "
                                            "one finishes)", kind=int, optional=True, low=1, high=MAX_REQUESTS)
    turns: int | None = declare(None, "closed loop: each user's requests form sessions of this many turns, each "
                                      "prompt carrying the conversation so far (default 1)", kind=int, optional=True,
                                low=1, high=MAX_REQUESTS, hint="requests per user session (closed loop)")
    think_time: float = declare(0.0, "closed loop: seconds from a request's end to its user's next request "
                                     "(default 0)", low=0, high=MAX_SECONDS, hint="seconds (closed loop)")
    workload_params: dict = declare({}, "workload parameter (repeatable), for --workload shared-prefix: num_groups, "
                                        "num_prompts_per_group, system_prompt_len, question_len, output_len, "
                                        "enable_multi_turn_chat", flag="--wl-param", metavar="KEY=VALUE")
    tiers: str | None = declare_parsed("SLO tiers, e.g. 'paid:tbt=0.1:share=0.05,free:tbt=0.5' (keys ttft, tbt, "
                                       "tpot in seconds; share; priority, an integer class, lower more urgent)",
                                       hint="e.g. 'paid:tbt=0.1:share=0.05,free:tbt=0.5'", parse=parse_tiers)
    tenants: str | None = declare_parsed("tenants, each its own arrival stream: 'heavy:rate=8,light:rate=0.5:weight=2' "
                                         "(keys rate, weight, workload, priority; with --trace its tenant column names "
                                         "them: weight and priority only)",
                                         hint=f"e.g. {TENANTS_EXAMPLE} (keys rate, weight, workload, priority)",
                                         parse=parse_tenants)
    max_total_tokens: int | None = declare(None, "cap prompt+output tokens of each request (generated or replayed): a "
                                                 "prompt over N-1 tokens is cut to N-1, then the output to N minus the "
                                                 "prompt (generation cut short, as a max_tokens limit); the run prints "
                                                 "how many it clipped (summary.json: max_total_tokens)", kind=int,
                                           optional=True, low=2, high=MAX_TOKENS)
    # replica limits, named as in vLLM
    block_size: int = BLOCK_SIZE.field()
    # a run's defaults are vLLM's for its GPU (hardware/batch_defaults.py), resolved with the GPU
    max_num_seqs: int = MAX_NUM_SEQS.field(default=GpuDefault(MAX_NUM_SEQS.default), kind=int, help=(
        "most requests running at once (vLLM's max_num_seqs; default by GPU as vllm serve's, docs/fidelity.md: "
        "1024 on cards of >= 70 GiB but the A100, else 256)"))
    max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS.field(default=GpuDefault(MAX_NUM_BATCHED_TOKENS.default),
                                                               kind=int, help=(
        "most tokens in one step (vLLM's max_num_batched_tokens; default by GPU, docs/fidelity.md: 16384 on cards of "
        ">= 160 GiB, else 8192)"))
    # a run's default is its model's context length (build_replicas resolves it)
    max_model_len: int | None = MAX_MODEL_LEN.field(default=None, optional=True, hint="at most the model's context "
                                                    "length", help="longest prompt+output served (default: the "
                                                                   "model's context length)")
    gpu_memory_utilization: float | None = declare(None, "fraction of GPU memory for weights+KV, vLLM's "
                                                         "gpu_memory_utilization (default: vLLM's, 0.92 since v0.21; "
                                                         "a real run's log: the run's; 0.9 for the reserve estimate "
                                                         "of the engine-agnostic batch-time kinds)",
                                                   kind=float, optional=True, above=0, high=1)
    kv_cache_dtype: str = declare("auto", "KV cache data type, vLLM's kv_cache_dtype: auto (the model's), fp8 (one "
                                          "byte an element: twice the tokens in the same memory, half the bytes an "
                                          "attention step reads), bfloat16, ...", choices=tuple(KV_CACHE_DTYPE_BYTES))
    num_blocks: int | None = declare(None, "KV cache size in blocks (overrides the size derived from the GPU)",
                                     kind=int, optional=True, low=1, high=MAX_BLOCKS,
                                     hint="leave it out to size the KV cache from the GPU")
    preemption_mode: str = PREEMPTION_MODE.field()
    overflow: str = OVERFLOW.field()
    swap_space_gb: float = declare(4.0, "host swap space per replica in GiB (for --preemption-mode swap)", low=0,
                                   high=1e6)
    oracle: bool = ORACLE.field()
    prefix_caching: bool = PREFIX_CACHING.field()
    timeline_window: float | None = declare(None, "seconds per window of summary.json's timeline and timeline.csv "
                                                  "(offered load per window); default with --rate-schedule: the "
                                                  "shortest of 1, 5, 10, 30, 60 s, 5, 10, 15, 30, 60 min giving at "
                                                  "most 300 windows", kind=float, optional=True, above=0,
                                            high=MAX_SECONDS, hint="seconds")
    # where latencies are measured (metrics/client_side.py, hardware/front_end.py)
    latency_boundary: str = declare("client", "where TTFT, TPOT, ITL and E2E are measured: client (from the send "
                                              "to the streamed bytes, as vllm bench serve, inference-perf and "
                                              "GuideLLM time them: the front end and the wait for the step in "
                                              "flight included) or engine (vLLM's own queued, first-token and "
                                              "last-token stamps)", choices=("client", "engine"))
    front_end: str = declare(DEFAULT_FRONT_END, "the serving front end a client goes through (client boundary): "
                                           "vllm-serve (HTTP, a text prompt tokenised, output detokenised and "
                                           "streamed), vllm-async-llm (in-process AsyncLLM, token ids), none",
                             choices=tuple(FRONT_ENDS))
    stream_interval: int = declare(1, "vLLM's stream_interval: the front end streams a request's tokens in chunks "
                                      "of this many (its first token at once); the client's ITL is per chunk",
                                   low=1, high=4096)
    client_timeout: float | None = declare(None, "seconds after its send when the client gives up on a request "
                                                 "(aborted: a miss, its KV freed when the abort reaches the "
                                                 "engine); benchmarks' defaults: inference-perf 300, GuideLLM 300, "
                                                 "vllm bench serve 21600; default none",
                                           kind=float, optional=True, above=0, high=MAX_SECONDS, hint="seconds")
    # KV tiers below the GPU cache (docs/kv-offload.md): host memory, local disk, a remote store
    kv_offload: str | None = declare_parsed("KV offload tiers below the GPU's prefix cache, per replica (a "
                                            "disaggregated fleet's prefill replicas): cpu:200GiB "
                                            "(vLLM's --kv-offloading-size), several as cpu:200GiB,disk:2TB, a tier's "
                                            "settings after its size (cpu:200GiB:link=pcie-gen4:chunk=256), or a "
                                            ".toml/.yaml file of [[tier]] tables",
                                            hint="e.g. cpu:200GiB or cpu:200GiB,disk:2TB or a .toml file of [[tier]] "
                                                 "tables", parse=parse_kv_offload)
    kv_offload_mode: str = declare("vllm", "the connector --kv-offload models: vllm (vLLM's native "
                                           "OffloadingConnector: async loads and stores), lmcache (LMCache's CPU/disk "
                                           "backends: loads and stores inside the step), lmcache-layerwise",
                                   choices=KV_OFFLOAD_MODES)
    # run control
    horizon: float | None = declare(None, "stop simulating at this time (s); requests in flight end unfinished",
                                    kind=float, optional=True, above=0, high=MAX_SECONDS, hint="seconds")
    warmup: float = declare(0.0, "exclude requests arriving in the first WARMUP seconds from the summary", low=0,
                            high=MAX_SECONDS, hint="seconds")
    cooldown: float = declare(0.0, "exclude requests arriving in the last COOLDOWN seconds from the summary", low=0,
                              high=MAX_SECONDS, hint="seconds")
    keep_gaps: bool = declare(True, "keep TBT samples only as quantile sketches (for runs of millions of requests)",
                              flag="--sketch", switch=True)
    # fast-forward runs of decode-only steps (identical results; docs/simulator.md)
    fast_forward: bool = FAST_FORWARD.field()
    # run replicas that cannot affect each other one at a time (docs/simulator.md)
    lanes: bool = declare(True, "run every replica in the one event loop instead of one at a time where routing "
                                "and source allow it (the same rows; rows tied across replicas in event order, not "
                                "by replica)", flag="--no-lanes", switch=True)
    check_invariants: bool = CHECK_INVARIANTS.field()  # the full KV and decode-group accounting after every step
    seed: int = declare(0, "random seed: same seed, same result", low=0, high=2**63 - 1)

    def __post_init__(self):
        """A config written in Python: every field checked here (the CLI and config files check theirs where
        they read them, and build through ``checked``)."""
        unset = [name for name in GPU_LIMITS if isinstance(getattr(self, name), GpuDefault)]
        for name in RUN_FIELDS:
            setattr(self, name, check_field(name, getattr(self, name)))
        check_combination({name: value for name, value in self.__dict__.items() if value != DEFAULTS[name]})
        if self.gpu_spec:
            self.gpu = self.gpu_spec  # every reader of the run's GPU resolves the spec file through gpu()
        self.__dict__.update({name: GpuDefault(getattr(self, name)) for name in unset})
        resolve_gpu_defaults(self)

    @classmethod
    def checked(cls, data: dict) -> "RunConfig":
        """A config of values each already checked where it was read (``check_field``) and checked together
        (``check_combination``): not checked again."""
        cfg = cls.__new__(cls)
        cfg.__dict__.update({name: default_of(f) for name, f in FIELD_OF.items()})
        cfg.__dict__.update({k: dict(v) if isinstance(v, dict) else v for k, v in data.items()})
        if cfg.gpu_spec:
            cfg.gpu = cfg.gpu_spec
        resolve_gpu_defaults(cfg)
        return cfg

    @classmethod
    def from_dict(cls, data: dict, origin: str | Origin | dict = "config") -> "RunConfig":
        """A config from user-written values; ``origin`` says where each was written (one Origin, or one per
        key), so an error names the option or the file and line."""
        def origin_of(key):
            if isinstance(origin, dict):
                return origin.get(key, API)
            return origin if isinstance(origin, Origin) else API
        label = origin if isinstance(origin, str) else "config"
        unknown = sorted(set(data) - set(RUN_FIELDS))
        if unknown:
            where = origin_of(unknown[0]).path if origin_of(unknown[0]).kind == "file" else label
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: "
                             f"{', '.join(sorted(RUN_FIELDS))}")
        data = {k: check_field(k, v, origin_of(k)) for k, v in data.items()}
        check_combination(data, origin_of)
        if "scheduler_params" in data:
            data["scheduler_params"] = checked_params(data, origin_of("scheduler_params"))
        if "router_params" in data:
            data["router_params"] = checked_router_params(data, origin_of("router_params"))
        if data.get("batch_time_params"):
            check_batch_time_params(data, origin_of("batch_time_params"))
        return cls.checked(data)

    @property
    def runs_as_fleet(self) -> bool:
        """Whether the run's replicas are pools of their own (a fleet file, prefill/decode disaggregation, or an
        autoscaler that changes them): the fleet layer runs it (fleet_setup.py)."""
        return bool(self.fleet or self.disaggregate or self.autoscaler)

    def with_values(self, **changes) -> "RunConfig":
        """This config with ``changes``, each checked (the other values were checked when this one was made)."""
        data = {**self.__dict__, **{k: check_field(k, v) for k, v in changes.items()}}
        check_combination({name: value for name, value in data.items() if value != DEFAULTS[name]})
        return RunConfig.checked(data)


RUN_FIELDS = declared(RunConfig)
FIELD_OF = {f.name: f for f in dataclasses.fields(RunConfig)}
DEFAULTS = {name: default_of(f) for name, f in FIELD_OF.items()}
CLI_FLAGS = {name: spec.flag_of(name) for name, spec in RUN_FIELDS.items()}


def resolve_gpu_defaults(cfg: RunConfig) -> None:
    """The limits ``cfg`` does not give (``GpuDefault``) set to its GPU's: vLLM's rule (hardware/batch_defaults.py)."""
    cfg.__dict__.update(on_gpu(cfg.__dict__, getattr(cfg.gpu, "value", cfg.gpu)))


def check_field(key: str, value, origin: Origin = API):
    """``value`` checked against field ``key``'s declaration, as that field's type (see ``RunField.check``)."""
    if key not in RUN_FIELDS:
        raise ValueError(f"{origin.name(key)}: unknown field; valid fields: {', '.join(sorted(RUN_FIELDS))}")
    return RUN_FIELDS[key].check(key, value, origin)


def checked_params(data: dict, origin: Origin) -> dict:
    """``data``'s scheduler parameters checked against its scheduler's (by name and by their defaults' types)."""
    from .schedulers.registry import scheduler_info
    name = data.get("scheduler", DEFAULTS["scheduler"])
    return check_params(f"scheduler {name!r}", data["scheduler_params"], scheduler_info(name)["params"],
                        origin.name("scheduler_params"))


def check_batch_time_params(data: dict, origin: Origin) -> None:
    """``data``'s batch-time parameters checked by name against its batch-time model's (a stored profile's kind), so
    that a wrong name is named where it was written; the model checks their values when it is built."""
    from .batchtime.registry import BATCH_TIME_MODELS, resolve_kind
    params = data["batch_time_params"]
    kind = resolve_kind(data.get("batch_time", DEFAULTS["batch_time"]))[0]
    known = BATCH_TIME_MODELS[kind]["params"]
    unknown = [key for key in params if key not in known]
    if unknown:
        raise ValueError(f"{origin.name('batch_time_params')}: batch-time model {kind!r} has no parameter "
                         f"{unknown[0]!r}; its parameters are: {', '.join(dict.fromkeys(known))}")


def checked_fields(data: dict, origin: Origin) -> dict:
    """``data``'s fields each checked by its declaration and together, and the parameters of a scheduler or router
    that ``data`` names checked against it (a fleet file's pool; parameters for the run's scheduler are checked
    with the run's)."""
    out = {k: check_field(k, v, origin) for k, v in data.items()}
    check_combination(out, lambda key: origin)
    if "scheduler" in out and "scheduler_params" in out:
        out["scheduler_params"] = checked_params(out, origin)
    if "router" in out and "router_params" in out:
        out["router_params"] = checked_router_params(out, origin)
    if "batch_time" in out and out.get("batch_time_params"):
        check_batch_time_params(out, origin)
    return out


def checked_router_params(data: dict, origin: Origin) -> dict:
    """``data``'s router parameters checked against its router's (by name and by their defaults' types)."""
    from .routing.registry import router_params
    name = data.get("router", DEFAULTS["router"])
    return check_params(f"router {name!r}", data["router_params"], router_params(name),
                        origin.name("router_params"))


def load_config(path: str | Path, what: str = "config file") -> dict:
    """Read a TOML or YAML run config (or, as ``what`` says, another file of the same form) safely (data only, no
    code, no tags)."""
    path = Path(path)
    text = read_user_file(path, what)
    if path.suffix == ".toml":
        import tomllib  # here: most runs have no config file
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{what} {path} is not valid TOML: {e}") from None
    elif path.suffix in (".yaml", ".yml"):
        import yaml
        try:
            data = yaml.load(text, Loader=unique_keys_loader()) or {}
        except DuplicateKey as e:
            raise ValueError(f"{what} {path}:{e.line}: {e.key} is given twice (first at line {e.first}); "
                             f"give each key once") from None
        except yaml.YAMLError as e:
            raise ValueError(f"{what} {path} is not valid YAML: {e}") from None
    else:
        raise ValueError(f"{what} {path}: use a .toml, .yaml or .yml file")
    if not isinstance(data, dict):
        raise ValueError(f"{what} {path} must hold a table/mapping of run options")
    out, spelt = {}, {}
    for key, value in data.items():
        name = key.replace("-", "_") if isinstance(key, str) else key
        if name in out:
            raise ValueError(f"{what} {path}: {name} is given twice (as {spelt[name]} and as {key}); give it "
                             f"once")
        out[name], spelt[name] = value, key
    return out


class DuplicateKey(Exception):
    def __init__(self, key, line: int, first: int):
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


def unique_keys_loader():
    """YAML's safe loader refusing a key given twice in one mapping (as TOML does), where plain YAML keeps the
    last value without a word."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            first = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if key in first:
                    raise DuplicateKey(key, line, first[key])
                first[key] = line
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def read_run_config(path: str | Path) -> tuple[dict, Origin]:
    """A run config file's keys, each checked against RunConfig's declarations, and its Origin for later errors."""
    data = load_config(path)
    origin = Origin.file(path, Path(path).read_text())
    unknown = sorted(set(data) - set(RUN_FIELDS))
    if unknown:
        raise ValueError(f"config file {path}{origin.line_of(unknown[0])}: unknown key(s) {', '.join(unknown)}; "
                         f"valid keys: {', '.join(sorted(RUN_FIELDS))}")
    return {k: check_field(k, v, origin) for k, v in data.items()}, origin
