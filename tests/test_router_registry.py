"""One home for routers (llmsched/routing/): the registry's table names exactly the modules that register a router,
lists the routers in the table's order whatever was imported first, and is the registry the fleet's pools use."""
import ast
import subprocess
import sys
from pathlib import Path

import llmsched.routing as package
from llmsched.routing.base import Router
from llmsched.routing.registry import BUILTIN_MODULES, make_router, router_classes

ORDER = ["random", "round-robin", "least-outstanding", "least-load", "prefix-affinity", "prefix-hash", "pab",
         "pab-first-fit", "pab-best-fit", "pab-delayed", "vllm-dp", "vllm-dp-fresh", "vllm-dp-0.19", "vllm-dp-latest"]


def test_table_names_exactly_the_modules_that_register():
    root = Path(package.__file__).parent
    registering = set()
    for path in root.rglob("*.py"):
        decorators = {d.id for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)
                      for d in n.decorator_list if isinstance(d, ast.Name)}
        if "register_router" in decorators:
            registering.add(".".join(["llmsched.routing", *path.relative_to(root).with_suffix("").parts]))
    assert registering == set(BUILTIN_MODULES)
    assert {cls.__module__ for cls in router_classes().values()} == set(BUILTIN_MODULES)


def test_routers_listed_in_the_table_order_whatever_was_imported_first():
    assert list(router_classes())[:len(ORDER)] == ORDER
    # a family module imported before the first lookup (the simulator imports round-robin's) does not reorder them
    code = ("import llmsched.routing.vllm_dp, llmsched.routing.least_loaded\n"
            "from llmsched.routing.registry import router_classes\n"
            "print(' '.join(router_classes()))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ORDER


def test_every_router_is_a_router_by_its_name():
    for name, cls in router_classes().items():
        router = make_router(name)
        assert isinstance(router, Router) and type(router) is cls and router.name == name


def test_a_fleet_gets_its_routers_from_the_same_registry():
    """A pool's router (a role one pool serves) and the fleet's (a role several pools serve) are registry routers."""
    from llmsched.fleet.fleet import Fleet
    from llmsched.fleet.pool import Pool
    from llmsched.fleet_setup import build_fleet
    from llmsched.metrics.steps import StepLog
    from llmsched.run_config import RunConfig
    from llmsched.sources.registry import build_source
    cfg = RunConfig(rate=4.0, num_requests=10)
    one = Fleet((Pool("a", 2, fields={"router": "pab-delayed"}),))
    two = Fleet((Pool("a", 1), Pool("b", 2)), router={"router": "vllm-dp-latest"})
    for fleet, name in ((one, "pab-delayed"), (two, "vllm-dp-latest")):
        router = build_fleet(cfg, fleet, build_source(cfg), StepLog()).members["serve"].router
        assert type(router) is router_classes()[name] and isinstance(router, Router)
