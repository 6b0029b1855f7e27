"""The package's shape: no import circle between its modules, no module over 500 lines, the training engine apart
from the run policy, and the layers that must not reach up (the plan and the batch never import the page pieces)."""
import ast
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


@pytest.mark.parametrize("low", ["vixnb.plan", "vixnb.batch", "vixnb.record_kinds", "vixnb.runs", "vixnb.train",
                                 "vixnb.results.policy"])
def test_the_plan_batch_and_engine_never_reach_the_page_pieces(low):
    reached = {e for e in import_graph()[low] if e == "vixnb.report" or e.startswith("vixnb.report.")}
    assert not reached, f"{low} imports {sorted(reached)}"


def test_the_engine_does_not_decide_what_is_read_or_made():
    engine = import_graph()["vixnb.train"]
    assert "vixnb.runs" not in engine and "vixnb.results.policy" not in engine


def test_no_module_is_over_500_lines():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


#: the modules whose functions may import anything: what they defer keeps a light path light
DEFERRING_MODULES = {
    "vixnb/cli/commands.py": "the command line stays light (building the parser imports no subcommand's modules)",
    "vixnb/__init__.py": "`import vixnb` stays light (its torch-needing names are imported on first use)",
}
#: (module, imported top-level name) that a function elsewhere may import, and why
DEFERRED_IMPORTS = {
    ("vixnb/measure/costs.py", "timm"): "optional dependency (not one of vixnb's)",
    ("vixnb/results/store.py", "fcntl"): "optional dependency (missing on Windows)",
    ("vixnb/batch.py", "submitit"): "optional dependency (the inline executor runs without it)",
    ("vixnb/stopping.py", "submitit"): "optional dependency (the inline executor runs without it)",
    ("vixnb/report/tables.py", "myst_nb"): "optional dependency (the book's environment only)",
    ("vixnb/models/wavemix.py", "ptwt"): "optional dependency (only WaveMix needs it)",
    ("vixnb/models/warm_start.py", "pandas"): "the command line stays light (`vixnb models` imports no pandas)",
    ("vixnb/errors.py", "traceback"): "the command line stays light (the parser imports it; only --debug needs it)",
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
