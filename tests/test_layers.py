"""Imports go one way (docs/architecture.md, "Layers"): the import graph of llmsched, drawn from the source, has no
circle, no edge from a lower layer to a higher one, and no private name imported from another module; the policy
layer loads without anything above it; and only the command line (llmsched/cli/) parses arguments."""
import ast
import subprocess
import sys
from pathlib import Path


import llmsched

PACKAGE = Path(llmsched.__file__).resolve().parent
REPO = PACKAGE.parent

# Lowest first; a module may import only its own layer or lower. A name is a module or a package (with all it
# holds); the longest name that matches a module decides its layer.
LAYERS = {
    "mechanism": ("llmsched", "llmsched.compiled", "llmsched.results_file", "llmsched.request",
                  "llmsched.run_field", "llmsched.bounds", "llmsched.engine", "llmsched.batchtime", "llmsched.hardware",
                  "llmsched.workload", "llmsched.metrics"),
    "policies": ("llmsched.schedulers", "llmsched.routing"),
    "fleet": ("llmsched.fleet",),
    "runs": ("llmsched.sim", "llmsched.run_config", "llmsched.experiment", "llmsched.executors",
             "llmsched.config_fields", "llmsched.sources", "llmsched.fleet_setup"),
    "analyses": ("llmsched.capacity", "llmsched.plan", "llmsched.theory", "llmsched.reproduce", "llmsched.validate",
                 "llmsched.report", "llmsched.tune"),
    "interfaces": ("llmsched.cli", "llmsched.__main__", "llmsched.vllm"),
}
RANK = {name: rank for rank, names in enumerate(LAYERS.values()) for name in names}
LAYER_NAMES = list(LAYERS)


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its name, for its ``__init__``)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = modules()


def layer(module: str) -> int:
    owners = [name for name in RANK if module == name or module.startswith(name + ".")]
    assert owners, f"{module} is in no layer of tests/test_layers.py's LAYERS: add it where it belongs"
    return RANK[max(owners, key=len)]


def imports(module: str):
    """(target module, imported name or None, module level?) for every llmsched import in ``module``'s source,
    function-level imports included."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "llmsched":
                    yield alias.name, None, id(node) in top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "llmsched":
                continue
            for alias in node.names:
                yield target, alias.name, id(node) in top


def resolve(target: str, name: str | None) -> str:
    """The module an import runs: ``from X import Y`` is module X.Y when that is a module, else X."""
    if name and f"{target}.{name}" in MODULES:
        return f"{target}.{name}"
    while target not in MODULES:
        assert "." in target, f"import of {target}, which is no module of llmsched"
        target = target.rpartition(".")[0]
    return target


def graph(module_level_only: bool) -> dict[str, set[str]]:
    edges = {m: set() for m in MODULES}
    for m in MODULES:
        for target, name, top in imports(m):
            t = resolve(target, name)
            if t != m and (top or not module_level_only):
                edges[m].add(t)
    return edges


def test_every_folder_of_modules_is_a_package():
    """A folder of modules without ``__init__.py`` imports (as a namespace package) but is left out of a wheel."""
    folders = {path.parent for path in PACKAGE.rglob("*.py")}
    assert not [str(f.relative_to(REPO)) for f in folders if not (f / "__init__.py").exists()]


def test_every_module_has_a_layer():
    for m in MODULES:
        layer(m)


def test_no_import_runs_upward():
    upward = [f"{m} ({LAYER_NAMES[layer(m)]}) imports {t} ({LAYER_NAMES[layer(t)]})"
              for m, targets in graph(module_level_only=False).items() for t in sorted(targets)
              if layer(t) > layer(m)]
    assert not upward, "\n".join(upward)


def test_no_import_circle():
    edges = graph(module_level_only=True)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not circles, circles


def test_no_private_name_imported_from_another_module():
    private = [f"{m} imports {name} from {target}" for m in MODULES for target, name, _ in imports(m)
               if name and name.startswith("_") and not name.startswith("__") and resolve(target, None) != m]
    assert not private, "\n".join(private)


def test_only_the_cli_imports_argparse():
    """Every command's options are declared in llmsched/cli/ (docs/architecture.md): the analyses and the plug-in
    are libraries that take typed keyword arguments, not an argparse Namespace."""
    def argparse_imports(module: str) -> bool:
        for node in ast.walk(ast.parse(MODULES[module].read_text())):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names):
                return True
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
                return True
        return False
    users = {m for m in MODULES if argparse_imports(m)}
    assert "llmsched.cli.commands" in users  # the check sees an import where there is one
    assert not sorted(m for m in users if m != "llmsched.cli" and not m.startswith("llmsched.cli.")), users


def test_the_table_is_what_the_test_checks():
    # a layer test that checks nothing would pass: the graph has the edges the package is known to have
    edges = graph(module_level_only=False)
    assert "llmsched.schedulers.base" in edges["llmsched.schedulers.wait.threshold_policy"]
    assert "llmsched.schedulers.fairbatching.pab" in edges["llmsched.routing.pab"]  # a function-level import
    assert layer("llmsched.cli.capacity") > layer("llmsched.capacity.verdict")
    assert layer("llmsched.schedulers.wait.cohorts") == layer("llmsched.routing.registry") < layer("llmsched.sim.simulator")


def test_the_policy_layer_loads_alone():
    """Every module of the policy layer imported, every built-in scheduler and router created: nothing of the runs,
    analyses or interfaces is loaded (experiment, capacity, options and the CLI least of all)."""
    policy_modules = sorted(m for m in MODULES if layer(m) == LAYER_NAMES.index("policies"))
    code = ("import importlib, sys\n"
            f"for m in {policy_modules!r}: importlib.import_module(m)\n"
            "from llmsched.schedulers import create_scheduler, scheduler_names\n"
            "from llmsched.routing.registry import make_router, router_classes\n"
            "[create_scheduler(n) for n in scheduler_names()]\n"
            "[make_router(n) for n in router_classes()]\n"
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('llmsched'))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.split()
    assert set(policy_modules) <= set(loaded)
    for name in ("llmsched.experiment", "llmsched.run_config", "llmsched.capacity", "llmsched.cli"):
        assert name not in loaded
    above = [m for m in loaded if layer(m) > LAYER_NAMES.index("policies")]
    assert not above, above
