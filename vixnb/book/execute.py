"""Run the study's notebooks with papermill (``vixnb.book.build`` builds the Jupyter Book from them).

Papermill is the only executor: Jupyter Book is configured with ``execute_notebooks: off`` and renders the copies
papermill writes to ``book/executed/<stem>.ipynb`` (run in the book's profile) and
``book/executed/<profile>/<stem>.ipynb`` (run in that fixed profile with ``compute="never"``: rendered from the
results store, nothing trained or measured).  This module adds the checks papermill itself does not make:

* a notebook must have a cell tagged ``parameters`` and every parameter passed in must be declared there (papermill
  only warns about unknown names);
* a failing cell, or any error output left in the executed notebook, is an error naming the notebook and the cell
  (the executed copy is kept so it can be inspected);
* the kernel runs the same Python interpreter as the caller;

The command line is ``vixnb run`` / ``vixnb book`` (``vixnb.cli``).
"""
from __future__ import annotations

import ast
import os
import re
import secrets
import sys
import time
from pathlib import Path
from typing import Any, Mapping

import nbformat
import papermill
from ipykernel.kernelspec import install
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from papermill.exceptions import PapermillExecutionError
from papermill.translators import PythonTranslator

from .. import RELEASE_TAG, REPOSITORY_URL
from ..files import remove_leftovers, temp_prefix, writing
from ..parameters import as_list, check_parameter
from ..paths import checkout_root, repo_root
from ..runs.profiles import get_profile, gpu_profile

__all__ = [
    "repo_root",
    "notebook_path",
    "notebook_parameters",
    "coerce_parameters",
    "ensure_kernel",
    "run_notebook",
]

#: Kernel spec name used when papermill runs a notebook (falls back to a dedicated spec installed into
#: ``sys.prefix`` if ``python3`` would not run ``sys.executable``; see :func:`ensure_kernel`).
DEFAULT_KERNEL = "python3"
FALLBACK_KERNEL = "vixnb-python"

EXECUTED_DIR = Path("book") / "executed"
NOTEBOOK_DIR = Path("notebooks")
#: What Jupyter Book reads from the book root, besides the executed chapters in ``EXECUTED_DIR``.
BOOK_SOURCES = ("_config.yml", "_toc.yml", "book")
#: Cells carrying this tag may show an error on purpose (same tag as nbclient/JB).
ALLOWED_ERROR_TAG = "raises-exception"
#: Parameters of a chapter in a fixed profile (``book/executed/<profile>/<stem>``): the results store only.
STORED_ONLY = {"compute": "never"}
#: Cells carrying this tag are removed from the page of a smoke-profile run (they show stored GPU results).
REMOVE_IN_SMOKE = "remove-in-smoke"


def say(msg: str) -> None:
    """Print a progress message of the book commands (``[vixnb] msg``)."""
    print(f"[vixnb] {msg}", flush=True)


def relative_path(path: Path) -> str:
    """Path relative to the repository (or cwd) for messages; absolute otherwise."""
    path = Path(path).resolve()
    for base in (checkout_root(), Path.cwd()):
        if base is not None:
            try:
                return str(path.relative_to(base))
            except ValueError:
                pass
    return str(path)


# --------------------------------------------------------------------------
# Repository layout
# --------------------------------------------------------------------------
class NotebookNotFound(FileNotFoundError, ValueError):
    """A notebook named on the command line or in the API that is not there: a usage error (exit 2)."""


def notebook_path(notebook: str | os.PathLike) -> Path:
    """Resolve a notebook stem (``vix_table1``) or a path to an existing file."""
    text = os.fspath(notebook)
    is_path = (
        isinstance(notebook, os.PathLike)
        or text.endswith(".ipynb")
        or os.sep in text
        or "/" in text
    )
    if is_path:
        path = Path(text).expanduser()
        if not path.is_file():
            raise NotebookNotFound(f"notebook not found: {text}; give a stem of {NOTEBOOK_DIR}/ (e.g. vix_table1) "
                                   "or the path of an existing .ipynb file")
        return path.resolve()
    nb_dir = repo_root() / NOTEBOOK_DIR
    path = nb_dir / f"{text}.ipynb"
    if not path.is_file():
        avail = sorted(p.stem for p in nb_dir.glob("*.ipynb"))
        raise NotebookNotFound(
            f"no notebook named {text!r} in {NOTEBOOK_DIR}/; available: "
            + (", ".join(avail) if avail else "(none)")
        )
    return path


# --------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------
def _has_parameters_cell(path: Path) -> bool:
    nb = nbformat.read(str(path), as_version=4)
    return any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb.cells)


def notebook_parameters(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Parameters declared in the notebook's ``parameters`` cell: ``{name: {"name", "inferred_type_name",
    "default", "help"}}`` as :func:`papermill.inspect_notebook` gives them (``default`` is the source text); empty
    when the notebook has no ``parameters`` cell."""
    path = Path(path)
    try:
        return papermill.inspect_notebook(str(path))
    except ValueError:
        # The notebook names no kernel: papermill cannot pick a translator.
        # Our notebooks are Python, so inspect the cell with the Python one.
        nb = nbformat.read(str(path), as_version=4)
        for cell in nb.cells:
            if "parameters" in cell.get("metadata", {}).get("tags", []):
                return {p.name: p._asdict() for p in PythonTranslator.inspect(cell)}
        return {}


# --------------------------------------------------------------------------
# The cells every notebook starts with: install (Colab, Kaggle) and runtime
# --------------------------------------------------------------------------
#: Tags of the two head cells: their code is hidden in the book, the runtime cell's one line is shown.
HEAD_CELL_TAGS = ["remove-input"]


def install_cell_source(repository: str | None = None, tag: str | None = None) -> str:
    """The first cell of every notebook: where ``vixnb`` cannot be imported (a fresh Colab or Kaggle runtime),
    pip-install it from ``repository`` (default ``vixnb.REPOSITORY_URL``) at ``tag`` (default
    ``vixnb.RELEASE_TAG``), or from ``$VIXNB_INSTALL_SOURCE`` when set and not empty (a checkout, a wheel). vixnb's torch and
    torchvision requirements are lower bounds, so the runtime's torch stays; the cell asserts it. A no-op
    wherever vixnb is installed (locally, under papermill)."""
    source = f"git+{repository or REPOSITORY_URL}@{tag or RELEASE_TAG}"
    return f"""# Colab and Kaggle: install vixnb at this book's release (a no-op where it is installed).
# vixnb asks only lower bounds of torch and torchvision: the runtime's torch stays.
import importlib.metadata, importlib.util, os, subprocess, sys

if importlib.util.find_spec("vixnb") is None:
    source = os.environ.get("VIXNB_INSTALL_SOURCE", "").strip() or "{source}"  # empty is unset
    torch_before = importlib.metadata.version("torch")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", source], check=True)
    torch_after = importlib.metadata.version("torch")
    assert torch_after == torch_before, (
        f"installing vixnb replaced torch {{torch_before}} by {{torch_after}}")"""


def runtime_cell_source() -> str:
    """The cell after the parameters cell (and papermill's injected one): ``vixnb.env()`` (Colab, Kaggle or
    local; the data folder; the device; one line) and the ``"auto"`` profile and compute policy resolved for
    that place (``vixnb.runtime.Runtime.resolve``)."""
    return """import vixnb

runtime = vixnb.env()  # Colab, Kaggle or local: data folder, device; one line
profile, compute = runtime.resolve(profile, compute)"""


def stamp_head_cells(path: str | os.PathLike) -> bool:
    """Put the install cell first and the runtime cell right after the ``parameters`` cell of notebook ``path``
    (replacing older copies of either); True when the file changed. The notebooks' tests ask for this where a
    notebook lacks them."""
    path = Path(path)
    nb = nbformat.read(str(path), as_version=4)
    before = nbformat.writes(nb)
    heads = {install_cell_source(): "install", runtime_cell_source(): "runtime"}
    cells = [c for c in nb.cells if c.get("metadata", {}).get("vixnb") not in ("install", "runtime")]
    at = next((i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if at is None:
        raise ValueError(f"{relative_path(path)}: no cell tagged `parameters`; add one (profile, compute) first")
    made = {role: nbformat.v4.new_code_cell(src, id=f"vixnb-{role}",
                                            metadata={"tags": list(HEAD_CELL_TAGS), "vixnb": role})
            for src, role in heads.items()}
    cells.insert(at + 1, made["runtime"])
    cells.insert(0, made["install"])
    nb.cells = cells
    after = nbformat.writes(nb)
    if after != before:
        path.write_text(after, encoding="utf-8")
    return after != before


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _declared_default(spec: Mapping[str, Any]) -> Any:
    try:
        return ast.literal_eval(str(spec.get("default", "")).strip())
    except (ValueError, SyntaxError):
        return None


def _as_type(value: Any, expected: type, name: str, shown: str) -> Any:
    """``value`` as type ``expected`` (a command line's string converted), or a ``ValueError`` naming ``name``."""
    if expected is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
    elif expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    elif expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif expected is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
    else:
        return value
    raise ValueError(f"parameter {name!r} takes {shown}, got {value!r}")


def coerce_parameters(
    parameters: Mapping[str, Any], declared: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    """Check each value against the declared default's type, converting strings from a command line.

    An ``int``, ``float``, ``bool`` or ``str`` default takes a value of its type (``"7"`` -> 7). A list default
    takes a list whose elements have the type of the default's elements; a single value of that type
    becomes a one-element list (``-p models vit`` -> ``["vit"]``), anything else is refused. A ``None``
    default takes anything. A value that does not fit raises ``ValueError`` naming the parameter, the type
    and an example, before any kernel starts.
    """
    out: dict[str, Any] = {}
    for name, value in parameters.items():
        spec = declared.get(name)
        default = _declared_default(spec) if spec is not None else None
        if isinstance(default, (list, tuple)):
            item_type = type(default[0]) if default else None
            shown = f"a list of {item_type.__name__ if item_type else 'values'} (e.g. -p {name} '{list(default) or ['...']}')"
            items = as_list(value, name)  # "vit,vil", '["vit", "vil"]', a single value
            value = [_as_type(v, item_type, name, shown) if item_type else v for v in items]
        elif default is not None:
            value = _as_type(value, type(default), name, f"a {type(default).__name__} (default {spec.get('default')})")
        out[name] = check_parameter(name, value, default)  # the numbers it takes (vixnb.validate)
    return out


# --------------------------------------------------------------------------
# Kernel
# --------------------------------------------------------------------------
def _spec_python(name: str) -> str | None:
    """The interpreter a kernel spec would launch, as jupyter_client resolves it."""
    try:
        spec = KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel:
        return None
    if not spec.argv:
        return None
    exe = spec.argv[0]
    major, minor = sys.version_info[:2]
    # jupyter_client substitutes sys.executable for these bare names.
    if exe in {"python", f"python{major}", f"python{major}.{minor}"}:
        return sys.executable
    return exe


def _same_python(exe: str | None) -> bool:
    # Compare without resolving symlinks: a venv's python is a symlink to the
    # base interpreter, but only the venv path gives the venv's packages.
    return exe is not None and os.path.abspath(exe) == os.path.abspath(sys.executable)


def ensure_kernel() -> str:
    """Name of a kernel spec that runs ``sys.executable`` (installing one if needed).

    ``python3`` normally resolves to the current interpreter (jupyter_client
    substitutes ``sys.executable`` for a bare ``python``, and a venv's own
    spec comes first).  If a spec elsewhere shadows it, a spec called
    ``vixnb-python`` is written into ``sys.prefix`` with ipykernel.
    """
    if _same_python(_spec_python(DEFAULT_KERNEL)):
        return DEFAULT_KERNEL
    if not _same_python(_spec_python(FALLBACK_KERNEL)):
        install(kernel_name=FALLBACK_KERNEL, display_name="Python (vixnb)", prefix=sys.prefix)
        if not _same_python(_spec_python(FALLBACK_KERNEL)):
            raise RuntimeError(
                f"could not set up a Jupyter kernel running {sys.executable}; "
                f"{FALLBACK_KERNEL!r} resolves to {_spec_python(FALLBACK_KERNEL)}"
            )
    return FALLBACK_KERNEL


# --------------------------------------------------------------------------
# Running one notebook
# --------------------------------------------------------------------------
def error_outputs(path: Path) -> list[tuple[int, str]]:
    """(cell index, 'ename: evalue') for every error output in a notebook."""
    nb = nbformat.read(str(path), as_version=4)
    found = []
    for i, cell in enumerate(nb.cells):
        if ALLOWED_ERROR_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append((i, f"{out.get('ename', '?')}: {out.get('evalue', '')}"))
    return found


def run_notebook(
    notebook: str | os.PathLike,
    *,
    profile: str,
    parameters: Mapping[str, Any] | None = None,
    output: str | os.PathLike | None = None,
    progress: bool = True,
    log_output: bool = False,
    kernel_name: str | None = None,
) -> Path:
    """Execute ``notebook`` with papermill in ``profile``; return the executed copy's path.

    ``notebook`` is a stem of ``notebooks/<stem>.ipynb`` or a path.  Parameters
    are validated against the notebook's ``parameters`` cell before anything
    runs (``ValueError`` for unknown names or a missing cell); string values
    are converted to the declared type (:func:`coerce_parameters`).  The
    notebook runs with its own folder as working directory.  The executed copy
    goes to ``output`` (default ``book/executed/<stem>.ipynb``) and is kept when
    a cell fails, in which case ``RuntimeError`` names the notebook and cell.
    """
    src = notebook_path(notebook)
    get_profile(profile)  # an unknown profile is refused before any kernel starts
    params = dict(parameters or {})
    if "profile" in params and params["profile"] != profile:
        raise ValueError(
            f"profile given twice: profile={profile!r} and parameters['profile']={params['profile']!r}"
        )
    params["profile"] = profile

    if not _has_parameters_cell(src):
        raise ValueError(
            f"{relative_path(src)} has no cell tagged 'parameters'; papermill would ignore every "
            "parameter (tag the cell that defines `profile = \"smoke\"` with 'parameters')"
        )
    declared = notebook_parameters(src)
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise ValueError(
            f"unknown parameter(s) for {relative_path(src)}: {', '.join(unknown)}; "
            f"declared in its parameters cell: {', '.join(sorted(declared)) or '(none)'}"
        )
    params = coerce_parameters(params, declared)
    for name, value in params.items():  # what each takes (parameters.PARAMETERS), before a kernel starts
        params[name] = check_parameter(name, value, _declared_default(declared[name]))

    if output is None:
        out = repo_root() / EXECUTED_DIR / f"{src.stem}.ipynb"
    else:
        out = Path(output).expanduser().resolve()
    sources = (repo_root() / NOTEBOOK_DIR).resolve()
    if out == src.resolve() or (out.parent == sources and out.exists()):  # the executed copy would replace a source
        raise ValueError(f"--output {relative_path(out)} is a source notebook (the one run, or another of "
                         f"{NOTEBOOK_DIR}/); give another path (default: {EXECUTED_DIR}/{src.stem}.ipynb)")
    out.parent.mkdir(parents=True, exist_ok=True)
    # the run writes beside the executed copy, under a name of this process (``files.temp_prefix``: the next run
    # there removes what a killed one left); the copy is replaced only when the run succeeds, and a failed run is
    # kept for inspection as <stem>.failed.ipynb (the previous good copy stays as it was)
    remove_leftovers(out.parent, name=out.stem)
    running = out.with_name(f"{temp_prefix(out.stem)}{secrets.token_hex(4)}.running.ipynb")
    failed = out.with_name(f"{out.stem}.failed.ipynb")
    kernel = kernel_name or ensure_kernel()

    shown = " ".join(f"{k}={v!r}" for k, v in params.items())
    say(f"run {relative_path(src)} [{shown}] -> {relative_path(out)}")
    t0 = time.monotonic()
    try:
        with writing(out, fix="free some space, and run it again"):  # a full disk names the executed copy
            papermill.execute_notebook(str(src), str(running), parameters=params, kernel_name=kernel,
                                       language="python", cwd=str(src.parent), progress_bar=progress,
                                       log_output=log_output)
    except PapermillExecutionError as exc:
        where = f"cell {exc.cell_index}" + (
            f" (In [{exc.exec_count}])" if exc.exec_count is not None else ""
        )
        first = (exc.source or "").strip().splitlines()
        os.replace(running, failed)
        raise RuntimeError(
            f"notebook {relative_path(src)} failed in {where}: {exc.ename}: {exc.evalue}\n"
            f"  cell starts: {first[0] if first else ''}\n"
            f"  executed copy kept for inspection: {relative_path(failed)}"
        ) from exc
    except BaseException:
        running.unlink(missing_ok=True)
        raise

    errors = error_outputs(running)
    if errors:
        idx, msg = errors[0]
        os.replace(running, failed)
        raise RuntimeError(
            f"notebook {relative_path(src)} has {len(errors)} error output(s); first in cell {idx}: {msg}\n"
            f"  executed copy kept for inspection: {relative_path(failed)}"
        )
    try:  # marked before it takes its name: the executed copy is replaced whole
        with writing(out, fix="free some space, and run it again"):
            mark_executed_copy(running, profile, stored_only=params.get("compute") == "never")
        os.replace(running, out)
    finally:
        running.unlink(missing_ok=True)
    failed.unlink(missing_ok=True)
    say(f"done {relative_path(src)} in {time.monotonic() - t0:.1f} s")
    return out


WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _without_widgets(output):
    """``output`` without a widget view among its representations."""
    if output.get("data") and WIDGET_MIME in output["data"]:
        output["data"] = {k: v for k, v in output["data"].items() if k != WIDGET_MIME}
    return output


def display_only(source: str) -> bool:
    """Whether a code cell only displays: every statement an expression (a call, a table), no name bound."""
    try:
        return bool(source.strip()) and all(isinstance(s, ast.Expr) for s in ast.parse(source).body)
    except SyntaxError:  # a magic or a shell line: not plain Python
        return False


#: the first words of ``Runtime.line`` (``vixnb.env``): where a notebook runs, which a page read from the store omits
ENV_LINE = re.compile(r"^vixnb \S+ on \S+: this machine's device .*\n?", re.M)


def mark_executed_copy(path: Path, profile: str, *, stored_only: bool = False) -> None:
    """Make the executed copy say which profile it ran in: in the smoke profile its first heading gets the
    profile's page title (a pipeline check's pages are marked as such; a GPU profile is named once, in the book's
    navigation caption), and papermill's injected-parameters cell
    is tagged ``remove-cell`` (the page's banner says which profile ran), as is, in the smoke profile, every
    cell tagged ``REMOVE_IN_SMOKE`` (stored GPU results, shown once: on the GPU results page). Every other code
    cell but the ``parameters`` cell is tagged ``remove-input`` where it only displays (``display_only``: the page
    shows its output alone), else ``hide-input`` (its output and a toggle for its code), and widget outputs (a
    progress bar's) are dropped: the page keeps their text form, if any.
    ``stored_only`` (a page rendered from the store): the line of ``vixnb.env`` about the machine that rendered it
    is dropped; the page names the devices that made its results (``Runtime.resolve``)."""
    nb = nbformat.read(path, as_version=4)
    suffix = f" ({get_profile(profile).get('page_title', profile)})"
    titled = gpu_profile(profile)
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        hidden = "injected-parameters" in tags or (profile == "smoke" and REMOVE_IN_SMOKE in tags)
        if hidden and "remove-cell" not in tags:
            cell.metadata["tags"] = tags = [*tags, "remove-cell"]
        if cell.cell_type == "code" and not {"parameters", "remove-cell", "remove-input", "hide-input"} & set(tags):
            cell.metadata["tags"] = [*tags, "remove-input" if display_only(cell.source) else "hide-input"]
        if cell.cell_type == "code":
            cell.outputs = [_without_widgets(out) for out in cell.get("outputs", [])
                            if not (out.get("data") and set(out["data"]) <= {WIDGET_MIME, "text/plain"}
                                    and WIDGET_MIME in out["data"])]
            for out in cell.outputs if stored_only else []:
                if out.get("output_type") == "stream":
                    out["text"] = ENV_LINE.sub("", out.get("text", ""))
            cell.outputs = [out for out in cell.outputs if out.get("output_type") != "stream" or out.get("text")]
        if not titled and cell.cell_type == "markdown" and cell.source.startswith("# "):
            first, _, rest = cell.source.partition("\n")
            cell.source = (first if first.endswith(suffix) else first + suffix) + (f"\n{rest}" if rest else "")
            titled = True
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, path)
