"""Request sources register by kind (llmsched/sources/registry.py): an explicit table of modules, each with a
predicate on the RunConfig and a builder, tried in order; the first that applies builds the run's source."""
import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import llmsched.sources
from llmsched.experiment import RunConfig, build_source
from llmsched.sources.registry import SOURCE_MODULES, source_kind

TRACE = "AzureLLMInferenceTrace_conv.csv"


def test_the_table_names_every_kind_module_and_only_those():
    folder = Path(llmsched.sources.__file__).parent
    kinds = set()
    for path in folder.glob("*.py"):
        names = {node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}
        if {"applies", "build"} <= names:
            kinds.add(f"llmsched.sources.{path.stem}")
    assert kinds == set(SOURCE_MODULES)
    for name in SOURCE_MODULES:
        module = importlib.import_module(name)
        assert isinstance(module.NAME, str) and callable(module.applies) and callable(module.build)
    assert len({importlib.import_module(n).NAME for n in SOURCE_MODULES}) == len(SOURCE_MODULES)


@pytest.mark.parametrize("fields, kind, source_type", [
    ({}, "generated", "StreamedOpenLoop"),
    ({"rate_schedule": "0:2,30:4", "duration": 60.0}, "rate-schedule", "StreamedOpenLoop"),
    ({"concurrency": 4, "num_requests": 20, "rate": None}, "closed-loop", "ClosedLoop"),
    ({"concurrency": 4, "num_requests": 20, "rate": None, "turns": 1}, "closed-loop", "ClosedLoop"),
    ({"concurrency": 4, "num_requests": 20, "rate": None, "turns": 3}, "sessions", "SessionClosedLoop"),
    ({"tenants": "a:rate=2,b:rate=1", "rate": None, "num_requests": 30}, "tenants", "TenantMerge"),
    ({"workload": "shared-prefix", "num_requests": 20}, "shared-prefix", "StreamedOpenLoop"),
    # shared-prefix before the closed loop: its own closed loop of sessions
    ({"workload": "shared-prefix", "concurrency": 4, "num_requests": 20, "rate": None}, "shared-prefix",
     "SessionClosedLoop"),
])
def test_the_first_kind_that_applies_builds_the_source(fields, kind, source_type):
    cfg = RunConfig(**fields)
    assert source_kind(cfg).NAME == kind
    assert type(build_source(cfg)).__name__ == source_type


@pytest.mark.shared_data
def test_a_trace_is_replayed_before_any_other_kind_applies(shared_data):
    trace = str(shared_data / "traces" / TRACE)
    assert source_kind(RunConfig.checked({"trace": trace, "concurrency": 4, "workload": "shared-prefix"})).NAME == \
        "trace"
    cfg = RunConfig(trace=trace, num_requests=50, rate=None)
    assert source_kind(cfg).NAME == "trace"
    assert type(build_source(cfg)).__name__ == "StreamedOpenLoop"


def test_generated_is_last_and_applies_to_every_config():
    last = importlib.import_module(SOURCE_MODULES[-1])
    assert last.NAME == "generated" and last.applies(RunConfig(trace=TRACE, rate=None))


def test_a_kind_is_imported_only_when_a_run_reaches_it():
    code = ("import sys; from llmsched.experiment import RunConfig, build_source; "
            "build_source(RunConfig(workload='shared-prefix', num_requests=10)); "
            "print(sorted(m for m in sys.modules if m.startswith('llmsched.sources.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out)
    assert "llmsched.sources.shared_prefix" in loaded
    assert not {"llmsched.sources.sessions", "llmsched.sources.generated"} & set(loaded)


def test_a_kind_s_error_names_what_to_change():
    with pytest.raises(ValueError, match="needs rate"):
        build_source(RunConfig.checked({"rate": None}))
    with pytest.raises(ValueError, match="concurrency .a closed loop. needs num_requests"):
        build_source(RunConfig.checked({"concurrency": 3, "turns": 2, "rate": None}))


def test_a_schedule_that_offers_no_request_over_the_duration_is_refused():
    """A diurnal schedule's trough sits at t=0: a minute of it offers no request, which ran as an empty run."""
    with pytest.raises(ValueError, match="less than one: run longer"):
        build_source(RunConfig(rate_schedule="diurnal:peak=5,trough=0", duration=60.0))
    assert len(build_source(RunConfig(rate_schedule="diurnal:peak=5,trough=0", duration=6000.0))) > 0
