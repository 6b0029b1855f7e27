"""The package's shape: no import circle between its modules, no module over 500 lines, the training engine apart
from the run policy, and the layers that must not reach up (the plan and the batch never import the page pieces)."""
import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "vixnb"
MAX_LINES = 500


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module, node):
    """The absolute module an ``ImportFrom`` names (relative imports resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    package = base if module_is_package(module) else base[:-1]
    anchor = package[:len(package) - node.level + 1]
    return ".".join(anchor + ([node.module] if node.module else []))


def module_is_package(module):
    return (PACKAGE.parent / Path(*module.split(".")) / "__init__.py").is_file()


def import_graph():
    """``{module: {imported vixnb module}}`` over every import of every module (at the top or inside a function):
    ``from . import x`` names the module ``x`` where it is one."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for module, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.split(".")[0] == "vixnb"}
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(module, node)
                if target.split(".")[0] != "vixnb":
                    continue
                named = {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules}
                edges |= named or {target}
        graph[module] = {e for e in edges if e in modules and e != module}
    return graph


def _cycles(graph):
    """Every strongly connected set of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_circle():
    """A package's ``__init__`` importing its modules counts: importing any of them runs it first."""
    assert _cycles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("low", ["vixnb.plan.plan", "vixnb.plan.batch", "vixnb.record_kinds", "vixnb.runs.make",
                                 "vixnb.engine.train", "vixnb.runs.policy"])
def test_the_plan_batch_and_engine_never_reach_the_page_pieces(low):
    reached = {e for e in import_graph()[low] if e == "vixnb.report" or e.startswith("vixnb.report.")}
    assert not reached, f"{low} imports {sorted(reached)}"


#: the page pieces' packages (``vixnb.report``), lowest first: a module of one imports only its own package and those
#: before it. Each package's ``__init__`` imports its modules, so an import upwards would be a circle when imported.
REPORT_LAYERS = ("figures", "cost", "records", "tables", "claims")


def test_the_page_pieces_packages_import_downwards_only():
    prefix = "vixnb.report."
    layer = {m: REPORT_LAYERS.index(m[len(prefix):].split(".")[0]) for m in import_graph() if m.startswith(prefix)}
    upward = [f"{m} imports {e}" for m, edges in import_graph().items() if m in layer
              for e in sorted(edges) if e in layer and layer[e] > layer[m]]
    assert not upward, "\n".join(upward)


def test_the_engine_does_not_decide_what_is_read_or_made():
    engine = import_graph()["vixnb.engine.train"]
    assert "vixnb.runs.make" not in engine and "vixnb.runs.policy" not in engine


def _reaches(package, others, graph=None):
    """``[(module, imported)]``: each import of a module of ``package`` (its ``__init__`` too) into one of ``others``
    (packages or modules, dotted), at the top or inside a function (``graph``: default the package's)."""
    inside = lambda m, p: m == p or m.startswith(p + ".")  # noqa: E731
    return [(m, e) for m, edges in sorted((graph or import_graph()).items()) if inside(m, package)
            for e in sorted(edges) if any(inside(e, o) for o in others)]


#: the packages, lowest first: a package imports only those before it (and the loose modules); an import upwards is
#: a circle between packages or a layer that knows more than it should
PACKAGE_LAYERS = ("vixnb.results", "vixnb.engine", "vixnb.runs", "vixnb.plan")


@pytest.mark.parametrize("package", PACKAGE_LAYERS)
def test_the_store_engine_runs_and_plan_packages_import_downwards_only(package):
    above = PACKAGE_LAYERS[PACKAGE_LAYERS.index(package) + 1:]
    assert _reaches(package, above) == []


def test_the_store_knows_no_run_model_or_profile():
    """``results/`` stores: it imports nothing of a run's identity, the profiles, the compute policy or the models
    (what a stored run means is ``runs/``'s)."""
    assert _reaches("vixnb.results", ["vixnb.runs", "vixnb.models", "vixnb.engine", "vixnb.analysis"]) == []


def test_the_plan_never_reaches_into_the_analysis():
    """Which runs the book asks for, and what each keeps, is ``runs.asked``'s: the plan and the batch never import
    ``analysis/`` for it."""
    assert _reaches("vixnb.plan", ["vixnb.analysis"]) == []


def test_the_package_check_finds_an_import_upwards():
    graph = {"vixnb.results.store": {"vixnb.runs.spec", "vixnb.files"}, "vixnb.runs.spec": {"vixnb.results.store"},
             "vixnb.resultsx": {"vixnb.runs"}}
    assert _reaches("vixnb.results", ["vixnb.runs"], graph) == [("vixnb.results.store", "vixnb.runs.spec")]


#: the most modules at the top of the package (beside its packages): the rest live in a package of their concept
MAX_TOP_MODULES = 12


def test_the_top_level_holds_at_most_12_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


#: the modules whose functions may import anything: what they defer keeps a light path light
DEFERRING_MODULES = {
    "vixnb/cli/commands.py": "the command line stays light (building the parser imports no subcommand's modules)",
    "vixnb/cli/batch.py": "the command line stays light (building the parser imports no subcommand's modules)",
    "vixnb/__init__.py": "`import vixnb` stays light (its torch-needing names are imported on first use)",
}
_TORCHVISION = ("every process stays light: torchvision loads torch._dynamo (about 2 s a process), which only "
                "reading torchvision's files, RandAugment, a ResNet and the reference loader need")
#: (module, imported top-level name) that a function elsewhere may import, and why
DEFERRED_IMPORTS = {
    ("vixnb/measure/costs.py", "timm"): "optional dependency (not one of vixnb's)",
    ("vixnb/results/store.py", "fcntl"): "optional dependency (missing on Windows)",
    ("vixnb/plan/batch.py", "submitit"): "optional dependency (the inline executor runs without it)",
    ("vixnb/plan/stopping.py", "submitit"): "optional dependency (the inline executor runs without it)",
    ("vixnb/report/tables/pages.py", "myst_nb"): "optional dependency (the book's environment only)",
    ("vixnb/models/wavemix.py", "ptwt"): "optional dependency (only WaveMix needs it)",
    ("vixnb/models/warm_start.py", "pandas"): "the command line stays light (`vixnb models` imports no pandas)",
    ("vixnb/data.py", "torchvision"): _TORCHVISION,
    ("vixnb/engine/augment.py", "torchvision"): _TORCHVISION,
    ("vixnb/models/resnet_cifar.py", "torchvision"): _TORCHVISION,
    ("vixnb/bench/training.py", "torchvision"): _TORCHVISION,
    ("vixnb/errors.py", "traceback"): "the command line stays light (the parser imports it; only --verbose needs it)",
}


def function_level_imports(path):
    """``[(line, imported module)]`` of the imports inside the functions of ``path`` (relative imports with their
    dots)."""
    found = set()
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    found |= {(node.lineno, alias.name) for alias in node.names}
                elif isinstance(node, ast.ImportFrom):
                    found.add((node.lineno, "." * node.level + (node.module or "")))
    return sorted(found)


def test_imports_are_at_the_top_of_their_module_unless_they_keep_a_path_light():
    """A function imports nothing, except where that keeps a path light or a dependency optional: the modules
    ``DEFERRING_MODULES`` and the imports ``DEFERRED_IMPORTS`` (never a vixnb module)."""
    misplaced = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel in DEFERRING_MODULES:
            continue
        for line, module in function_level_imports(path):
            if (rel, module.split(".")[0]) not in DEFERRED_IMPORTS:
                misplaced.append(f"{rel}:{line} imports {module} inside a function")
    assert not misplaced, "move these imports to the top of their module:\n" + "\n".join(misplaced)


def test_the_import_check_finds_an_import_inside_a_function(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import os\n\n\ndef f():\n    from . import x\n    import yaml\n\n    class C:\n"
                    "        def g(self):\n            from ..data import y\n            import json, timm\n")
    assert function_level_imports(path) == [(5, "."), (6, "yaml"), (10, "..data"), (11, "json"), (11, "timm")]


TESTS = Path(__file__).resolve().parent
PRIVATE_PROBES = ("setattr", "getattr", "delattr", "hasattr")  # calls that name an attribute by a string


def is_private(name):
    """A leading underscore, neither a dunder (``__init__``) nor the throwaway ``_``."""
    return name.startswith("_") and name.strip("_") != "" and not (name.startswith("__") and name.endswith("__"))


def package_sources():
    """``{module: source}`` of every module of the package."""
    return {_module_name(p): p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}


def _private_definitions(nodes):
    """The private names a module (its ``nodes``) defines: functions, classes, assigned names and attributes,
    arguments, imports."""
    names = set()
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            names.add(node.id if isinstance(node, ast.Name) else node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return {n for n in names if is_private(n)}


def _module_aliases(module, nodes, modules):
    """``{name: vixnb module}`` of the names a file (its ``nodes``) binds to a module of the package
    (``import vixnb.x as y``, ``from . import x``, ``y = importlib.import_module("vixnb.x")``); ``module``: None for a
    file outside it."""
    bound = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    bound[alias.asname or "vixnb"] = alias.name if alias.asname else "vixnb"
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node) if module else (node.module or "")
            bound |= {a.asname or a.name: f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules}
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
              and isinstance(node.value, ast.Call) and node.value.args
              and isinstance(node.value.args[0], ast.Constant) and node.value.args[0].value in modules):
            bound[node.targets[0].id] = node.value.args[0].value
    return bound


class _Sources:
    """The package's modules parsed once: their nodes, the private names each defines, the module names each binds."""

    def __init__(self, sources):
        self.nodes = {m: list(ast.walk(ast.parse(s))) for m, s in sources.items()}
        self.private = {m: _private_definitions(n) for m, n in self.nodes.items()}
        self.aliases = {m: _module_aliases(m, n, self.nodes) for m, n in self.nodes.items()}
        self.defined = set().union(*self.private.values())

    def module_of(self, node, aliases):
        """The vixnb module an expression names (``plan``, ``vixnb.plan.plan``, ``rehearsal.planning``), else None."""
        if isinstance(node, ast.Name):
            return aliases.get(node.id)
        if isinstance(node, ast.Attribute) and (base := self.module_of(node.value, aliases)):
            name = f"{base}.{node.attr}"
            return name if name in self.nodes else self.aliases.get(base, {}).get(node.attr)
        return None


def _private_reaches(nodes, module, known, own):
    """``[(line, what)]``: the private names of the package's modules other than ``module`` that a file imports,
    reads through a module (``plan._finite``), names as a string to ``setattr`` and the like (or as ``"vixnb.x._y"``),
    or reads off an object where no module but another defines the name (``entry._needs``); ``own``: the private
    names the file may read off an object or name as a string."""
    aliases = known.aliases[module] if module else _module_aliases(module, nodes, known.nodes)
    others = known.defined - own
    found = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            target = _resolve(module, node) if module else (node.module or "")
            if target in known.nodes and target != module:
                found += [(node.lineno, f"from {target} import {a.name}") for a in node.names if is_private(a.name)]
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            base = known.module_of(node.value, aliases)
            if (base and base != module) or (not base and node.attr in others):
                found.append((node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
        elif (isinstance(node, ast.Call)
              and getattr(node.func, "id", getattr(node.func, "attr", None)) in PRIVATE_PROBES):
            for arg in node.args:
                text = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ""
                if text in others or text.startswith("vixnb.") and any(map(is_private, text.split("."))):
                    found.append((node.lineno, f"{ast.unparse(node.func)}(..., {text!r})"))
    return sorted(found)


@functools.cache
def package_parsed():
    """The package's ``_Sources``, parsed once for the checks that read them."""
    return _Sources(package_sources())


def private_crossings(known):
    """``["module:line what"]``: each private name of one module of the package (``known``: its ``_Sources``) that
    another module reaches."""
    return [f"{m}:{line} {what}" for m, nodes in known.nodes.items()
            for line, what in _private_reaches(nodes, m, known, known.private[m])]


def private_test_reads(tests, known):
    """``["file:line what"]``: each private name of the package (``known``: its ``_Sources``) that a test
    (``{file: source}``) imports, reads, calls or patches; a test's own classes (``self._x``) aside."""
    found = []
    for name, source in tests.items():
        nodes = list(ast.walk(ast.parse(source)))
        own = {n.attr for n in nodes if isinstance(n, ast.Attribute)
               and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")}
        found += [f"{name}:{line} {what}" for line, what in _private_reaches(nodes, None, known, own)]
    return found


def test_no_private_name_crosses_modules():
    """A name with a leading underscore is its module's own: another module that needs it needs a public name (with
    a docstring that says what it is), or the code that uses it belongs in its module."""
    crossing = private_crossings(package_parsed())
    assert not crossing, "make these names public, or use them in their own module only:\n" + "\n".join(crossing)


def test_no_test_reads_a_private_name_of_the_package():
    """The tests use the package as another module would: no private attribute read, no private function called or
    imported, none patched (``monkeypatch.setattr(module, "_name", ...)``). There is no exception: a seam a test
    patches (a clock, a file, an epoch) is public, with a docstring that says what it is."""
    tests = {p.name: p.read_text(encoding="utf-8") for p in sorted(TESTS.glob("*.py"))}
    reads = private_test_reads(tests, package_parsed())
    assert not reads, "make these names public, or test through a public one:\n" + "\n".join(reads)


PLANTED_PACKAGE = {
    "vixnb.planted_a": "_CACHE = {}\n\n\ndef _helper():\n    return 1\n\n\nclass Thing:\n"
                       "    def __init__(self):\n        self._state = 0\n",
    "vixnb.planted_b": "from . import planted_a\nfrom .planted_a import Thing, _helper\n\n\n"
                       "def f(thing):\n    return _helper() + planted_a._CACHE.get(1, 0) + thing._state "
                       "+ thing.__dict__\n",
}


def test_the_crossing_check_finds_a_private_name_imported_or_reached_from_another_module():
    assert private_crossings(_Sources(PLANTED_PACKAGE)) == [
        "vixnb.planted_b:2 from vixnb.planted_a import _helper", "vixnb.planted_b:6 planted_a._CACHE",
        "vixnb.planted_b:6 thing._state"]


def test_the_test_check_finds_a_private_name_read_called_imported_or_patched():
    test = ("import importlib\n\nfrom vixnb import planted_a\nfrom vixnb.planted_a import _helper\n"
            "b = importlib.import_module('vixnb.planted_b')\n\n\n"
            "def test_it(monkeypatch):\n    monkeypatch.setattr(planted_a, '_helper', lambda: 2)\n"
            "    monkeypatch.setattr('vixnb.planted_a._CACHE', {})\n    assert b.planted_a.Thing()._state == 0\n"
            "    for _ in range(2):\n        assert self._own == planted_a.Thing.__name__\n")
    assert private_test_reads({"test_x.py": test}, _Sources(PLANTED_PACKAGE)) == [
        "test_x.py:4 from vixnb.planted_a import _helper", "test_x.py:9 monkeypatch.setattr(..., '_helper')",
        "test_x.py:10 monkeypatch.setattr(..., 'vixnb.planted_a._CACHE')", "test_x.py:11 b.planted_a.Thing()._state"]


def test_the_readme_layout_names_every_module_and_package():
    """README's Layout is where a newcomer finds a module: each top-level module and package of vixnb is named there."""
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout"):readme.index("A new kind of measurement touches")]
    modules = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    packages = [f"{p.name}/" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()]
    assert [m for m in modules + packages if f"`{m}`" not in layout] == []
