"""vixnb.book.execute.run_notebook on small throwaway notebooks (tmp_path)."""
import sys
from pathlib import Path

import nbformat
import pytest

from vixnb.book.execute import notebook_parameters, run_notebook


def write_nb(path: Path, cells, *, kernelspec=True) -> Path:
    nb = nbformat.v4.new_notebook()
    for tags, source in cells:
        cell = nbformat.v4.new_code_cell(source)
        if tags:
            cell.metadata["tags"] = list(tags)
        nb.cells.append(cell)
    if kernelspec:
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))
    return path


def outputs_text(path: Path) -> str:
    nb = nbformat.read(str(path), as_version=4)
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out.get("text", ""))
            elif "data" in out:
                parts.append(str(out["data"].get("text/plain", "")))
    return "".join(parts)


@pytest.fixture
def param_nb(tmp_path):
    return write_nb(
        tmp_path / "params.ipynb",
        [
            (["parameters"], 'profile = "smoke"\nepochs = 1\nlr = 0.001\nuse_amp = False\nname = "x"'),
            ([], "import os, sys\n"
                 "print(f'profile={profile} epochs={epochs!r} lr={lr!r} amp={use_amp!r} name={name!r}')\n"
                 "print('python=' + sys.executable)\n"
                 "print('cwd=' + os.getcwd())"),
        ],
    )


def test_notebook_parameters(param_nb):
    params = notebook_parameters(param_nb)
    assert set(params) == {"profile", "epochs", "lr", "use_amp", "name"}
    assert params["profile"]["default"] == '"smoke"'


def test_parameters_are_injected(param_nb, tmp_path):
    out = run_notebook(param_nb, profile="budget", parameters={"epochs": 3, "name": "y"},
                       output=tmp_path / "out" / "params.ipynb", progress=False)
    assert out == (tmp_path / "out" / "params.ipynb").resolve() and out.is_file()
    text = outputs_text(out)
    assert "profile=budget epochs=3 lr=0.001 amp=False name='y'" in text
    # the kernel is the caller's interpreter (the venv's), and cwd is the notebook's folder
    assert f"python={sys.executable}\n" in text
    assert f"cwd={param_nb.parent}" in text


def test_string_values_take_the_declared_type(param_nb, tmp_path):
    out = run_notebook(param_nb, profile="smoke",
                       parameters={"epochs": "7", "lr": "1e-2", "use_amp": "true", "name": "5"},
                       output=tmp_path / "o.ipynb", progress=False)
    assert "epochs=7 lr=0.01 amp=True name='5'" in outputs_text(out)
    with pytest.raises(ValueError, match="epochs"):
        run_notebook(param_nb, profile="smoke", parameters={"epochs": "many"},
                     output=tmp_path / "bad.ipynb", progress=False)
    assert not (tmp_path / "bad.ipynb").exists()


def test_unknown_parameter_refused_before_running(param_nb, tmp_path):
    out = tmp_path / "never.ipynb"
    with pytest.raises(ValueError) as err:
        run_notebook(param_nb, profile="smoke", parameters={"epoch": 2, "batch": 8},
                     output=out, progress=False)
    msg = str(err.value)
    assert "batch" in msg and "epoch" in msg
    for valid in ("epochs", "lr", "name", "profile", "use_amp"):
        assert valid in msg
    assert not out.exists()


def test_notebook_without_parameters_cell_refused(tmp_path):
    nb = write_nb(tmp_path / "noparams.ipynb", [([], 'profile = "smoke"\nprint(profile)')])
    out = tmp_path / "never.ipynb"
    with pytest.raises(ValueError, match="parameters"):
        run_notebook(nb, profile="smoke", output=out, progress=False)
    assert not out.exists()


def test_profile_must_be_declared(tmp_path):
    nb = write_nb(tmp_path / "noprofile.ipynb", [(["parameters"], "epochs = 1"), ([], "print(epochs)")])
    out = tmp_path / "never.ipynb"
    with pytest.raises(ValueError, match="profile"):
        run_notebook(nb, profile="smoke", output=out, progress=False)
    assert not out.exists()


def test_error_cell_raises_and_keeps_output(tmp_path):
    nb = write_nb(
        tmp_path / "boom.ipynb",
        [
            (["parameters"], 'profile = "smoke"'),
            ([], "print('before the error')"),
            ([], "raise ZeroDivisionError('deliberate failure ' + profile)"),
            ([], "print('never reached')"),
        ],
    )
    out = tmp_path / "executed" / "boom.ipynb"
    with pytest.raises(RuntimeError) as err:
        run_notebook(nb, profile="smoke", output=out, progress=False)
    msg = str(err.value)
    assert "boom.ipynb" in msg and "ZeroDivisionError" in msg and "deliberate failure smoke" in msg
    assert "cell" in msg
    failed = out.with_name("boom.failed.ipynb")
    assert failed.is_file() and "boom.failed.ipynb" in msg, "the failed copy must be kept for inspection"
    assert not out.exists(), "a failed run does not pass for an executed copy"
    executed = nbformat.read(str(failed), as_version=4)
    kinds = [o.get("output_type") for c in executed.cells for o in c.get("outputs", [])]
    assert "error" in kinds
    assert "before the error" in outputs_text(failed)


def test_a_failed_run_keeps_the_previous_executed_copy(tmp_path):
    nb = write_nb(tmp_path / "flaky.ipynb", [(["parameters"], 'profile = "smoke"\nfail = False'),
                                             ([], "assert not fail, 'asked to fail'\nprint('ran ' + profile)")])
    out = tmp_path / "executed" / "flaky.ipynb"
    run_notebook(nb, profile="smoke", output=out, progress=False)
    good = out.read_bytes()
    with pytest.raises(RuntimeError, match="asked to fail"):
        run_notebook(nb, profile="smoke", parameters={"fail": True}, output=out, progress=False)
    assert out.read_bytes() == good and out.with_name("flaky.failed.ipynb").is_file()
    assert not list(out.parent.glob(".*running*"))
    run_notebook(nb, profile="smoke", output=out, progress=False)
    assert not out.with_name("flaky.failed.ipynb").exists()


def test_parameters_are_checked_against_the_declared_types_before_a_kernel_starts(tmp_path, monkeypatch):
    import vixnb.book.execute as nbmod

    nb = write_nb(tmp_path / "typed.ipynb", [(["parameters"], 'profile = "smoke"\nseeds = [0]\nmodels = []'),
                                             ([], "print(seeds, models)")])
    monkeypatch.setattr(nbmod, "ensure_kernel", lambda: pytest.fail("a kernel started before the check"))
    out = tmp_path / "typed-out.ipynb"
    with pytest.raises(ValueError,
                       match=r"parameter 'seeds' takes a list of int \(e.g. -p seeds '\[0\]'\), got 'notalist'"):
        run_notebook(nb, profile="smoke", parameters={"seeds": "notalist"}, output=out, progress=False)
    with pytest.raises(ValueError, match=r"parameter models=\['v'\]: element 0, 'v', is not a registered model"):
        run_notebook(nb, profile="smoke", parameters={"models": ["v"]}, output=out, progress=False)
    with pytest.raises(ValueError, match="unknown profile 'full'"):
        run_notebook(nb, profile="full", output=out, progress=False)
    assert nbmod.coerce_parameters({"models": "vit", "seeds": 3}, nbmod.notebook_parameters(nb)) == {
        "models": ["vit"], "seeds": [3]}


def test_notebook_without_kernelspec_runs(tmp_path):
    nb = write_nb(tmp_path / "bare.ipynb", [(["parameters"], 'profile = "smoke"'), ([], "print(profile * 2)")],
                  kernelspec=False)
    out = run_notebook(nb, profile="paper", output=tmp_path / "bare_out.ipynb", progress=False)
    assert "paperpaper" in outputs_text(out)


def test_unknown_stem_lists_available():
    with pytest.raises(FileNotFoundError, match="no notebook named"):
        run_notebook("no_such_notebook_xyz", profile="smoke", progress=False)


# --------------------------------------------------------------------------------------------------
# the book's chapters: _toc.yml entries in the book's profile and in a fixed profile (stored results)

from vixnb.book import build as bookmod  # noqa: E402
from vixnb.book import execute as nbmod  # noqa: E402

TOC = """format: jb-book
root: book/intro
parts:
  - caption: GPU results (budget profile)
    chapters:
      - file: book/executed/budget/vix_table1
      - file: book/executed/budget/efficiency.ipynb
  - caption: Pipeline check (smoke profile, CPU)
    chapters:
      - file: book/executed/vix_table1
      - file: ./book/executed/efficiency
"""


def book_root(folder, toc=TOC):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_toc.yml").write_text(toc, encoding="utf-8")
    return folder


def test_toc_lists_chapters_in_the_books_profile_and_in_fixed_profiles(tmp_path):
    names = bookmod.toc_notebooks(book_root(tmp_path))
    assert names == ["budget/vix_table1", "budget/efficiency", "vix_table1", "efficiency"]
    assert bookmod.chapter_run("budget/efficiency", "smoke") == ("efficiency", "budget", {"compute": "never"})
    assert bookmod.chapter_run("efficiency", "paper") == ("efficiency", "paper", {})


@pytest.mark.parametrize("entry", ["book/executed/gpu/vix_table1", "book/executed/budget/x/vix_table1"])
def test_toc_refuses_a_folder_that_is_not_a_profile(tmp_path, entry):
    root = book_root(tmp_path, f"format: jb-book\nroot: book/intro\nchapters:\n  - file: {entry}\n")
    with pytest.raises(ValueError) as err:
        bookmod.toc_notebooks(root)
    msg = str(err.value)
    assert entry in msg and "is not a profile" in msg
    assert all(p in msg for p in ("smoke", "budget", "paper")) and "<profile>/<stem>" in msg


@pytest.fixture
def fake_book(tmp_path, monkeypatch):
    """build_book with run_notebook and the jupyter-book subprocess replaced: returns (root, calls)."""
    root = book_root(tmp_path / "book")
    calls = []

    def run_notebook(notebook, *, profile, parameters=None, output=None, progress=True):
        calls.append({"notebook": Path(notebook).name, "profile": profile, "parameters": dict(parameters or {}),
                      "output": Path(output).relative_to(root).as_posix()})
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        write_nb(Path(output), [(["parameters"], f"profile = {profile!r}")])

    class Build:  # jupyter-book build: writes index.html, prints nothing, exits 0
        def __init__(self, cmd, cwd, **kwargs):
            (Path(cwd) / "_build" / "html").mkdir(parents=True, exist_ok=True)
            (Path(cwd) / "_build" / "html" / "index.html").write_text("<html></html>")
            self.stdout = iter(())

        def wait(self):
            return 0

    monkeypatch.setattr(bookmod, "run_notebook", run_notebook)
    monkeypatch.setattr(bookmod.subprocess, "Popen", Build)
    # the intro's totals are tested on their own (tests/test_published_book.py); here they would build two plans
    monkeypatch.setattr(bookmod, "write_contents",
                        lambda root, toc, *profile: calls.append({"contents": Path(toc).name}))
    return root, calls


def test_build_book_runs_fixed_profile_chapters_from_stored_results(fake_book):
    root, calls = fake_book
    html = bookmod.build_book("smoke", book_root=root, parameters={"dataset": "cifar10"})
    assert html == root / "_build" / "html"
    # the pipeline check's book runs its own part only: the published part is the published book's
    assert calls == [  # the intro's contents first: its plans keep the models' facts the chapters then read
        {"contents": "_toc.smoke.yml"},
        {"notebook": "vix_table1.ipynb", "profile": "smoke", "output": "book/executed/vix_table1.ipynb",
         "parameters": {"dataset": "cifar10"}},
        {"notebook": "efficiency.ipynb", "profile": "smoke", "output": "book/executed/efficiency.ipynb",
         "parameters": {"dataset": "cifar10"}},
    ]
    # a GPU profile's book is the published one: every chapter once, in that profile, from the store only,
    # whatever the caller passes, under its own table of contents
    calls.clear()
    bookmod.build_book("paper", book_root=root, parameters={"compute": "missing"})
    assert [(c.get("output"), c.get("profile"), c.get("parameters")) for c in calls] == [
        (None, None, None),
        ("book/executed/paper/vix_table1.ipynb", "paper", {"compute": "never"}),
        ("book/executed/paper/efficiency.ipynb", "paper", {"compute": "never"}),
    ]
    assert calls[0] == {"contents": "_toc.paper.yml"} and (root / "book/executed/_toc.paper.yml").is_file()


def test_build_book_selection_and_checks_cover_fixed_profile_chapters(fake_book):
    root, calls = fake_book
    with pytest.raises(ValueError) as err:
        bookmod.build_book("smoke", book_root=root, notebooks=["budget/efficiency"])
    assert "budget/efficiency" in str(err.value) and "chapters: vix_table1, efficiency" in str(err.value) and not calls
    with pytest.raises(RuntimeError, match="no executed copy for chapter.*efficiency"):
        bookmod.build_book("smoke", book_root=root, notebooks=["vix_table1"])
    bookmod.build_book("smoke", book_root=root)
    broken = root / "book" / "executed" / "efficiency.ipynb"
    write_nb(broken, [(["parameters"], 'profile = "smoke"')])
    nb = nbformat.read(str(broken), as_version=4)
    nb.cells[0].outputs = [nbformat.v4.new_output("error", ename="KeyError", evalue="x", traceback=[])]
    nbformat.write(nb, str(broken))
    with pytest.raises(RuntimeError, match="executed copy of efficiency holds an error"):
        bookmod.build_book("smoke", book_root=root, notebooks=[])


def test_book_sources_leave_executed_copies_behind(tmp_path):
    dest = bookmod.copy_book_sources(tmp_path / "copy")
    assert (dest / "_toc.yml").is_file() and (dest / "book" / "intro.md").is_file()
    assert not (dest / nbmod.EXECUTED_DIR).exists()


def test_an_executed_copy_hides_its_code_behind_a_toggle_and_keeps_no_widgets(tmp_path):
    from vixnb.book.execute import WIDGET_MIME, mark_executed_copy

    path = write_nb(tmp_path / "page.ipynb", [(["parameters"], 'profile = "budget"'), ([], "x = 1"),
                                              (["remove-input"], "import vixnb"), ([], "progress()")])
    nb = nbformat.read(str(path), as_version=4)
    bar = {"text/plain": "HBox(children=...)", WIDGET_MIME: {"model_id": "abc"}}
    nb.cells[3].outputs = [nbformat.v4.new_output("display_data", data=bar),
                           nbformat.v4.new_output("display_data", data={"text/html": "<b>5</b>", WIDGET_MIME: {}})]
    nb.metadata["widgets"] = {"state": {}}
    nbformat.write(nb, str(path))
    mark_executed_copy(path, "budget")
    nb = nbformat.read(str(path), as_version=4)
    # a cell that binds a name keeps its code behind a toggle; one that only displays (progress()) shows no code
    assert [c.metadata.get("tags") for c in nb.cells] == [["parameters"], ["hide-input"], ["remove-input"],
                                                         ["remove-input"]]
    assert [dict(o["data"]) for o in nb.cells[3].outputs] == [{"text/html": "<b>5</b>"}]  # the bar alone is gone
    assert "widgets" not in nb.metadata


def test_a_page_from_the_store_names_its_profile_once_and_nothing_of_the_rendering_machine(tmp_path):
    from vixnb.book.execute import mark_executed_copy

    for profile, stored_only in (("budget", True), ("smoke", False)):
        path = write_nb(tmp_path / f"{profile}.ipynb", [(["remove-input"], "env()")])
        nb = nbformat.read(str(path), as_version=4)
        nb.cells.insert(0, nbformat.v4.new_markdown_cell("# A chapter\n\ntext"))
        nb.cells[1].outputs = [nbformat.v4.new_output(
            "stream", name="stdout",
            text="vixnb 0.1 on local: this machine's device cpu, torch 2\nResults shown: x.\n")]
        nbformat.write(nb, str(path))
        mark_executed_copy(path, profile, stored_only=stored_only)
        nb = nbformat.read(str(path), as_version=4)
        heading, text = nb.cells[0].source.partition("\n")[0], nb.cells[1].outputs[0]["text"]
        if stored_only:  # the navigation caption names the GPU profile; the device line is the results' own
            assert heading == "# A chapter" and text == "Results shown: x.\n"
        else:
            assert heading == "# A chapter (pipeline check, smoke profile)" and text.startswith("vixnb 0.1 on local")


def test_build_book_runs_chapters_side_by_side_and_refuses_no_jobs(fake_book):
    root, calls = fake_book
    bookmod.build_book("smoke", book_root=root, jobs=2)
    assert sorted(c["notebook"] for c in calls if "notebook" in c) == ["efficiency.ipynb", "vix_table1.ipynb"]
    with pytest.raises(ValueError, match=r"jobs=0: give 1 or more"):
        bookmod.build_book("smoke", book_root=root, jobs=0)


def test_chapters_side_by_side_share_the_cores_and_leave_the_environment_as_it_was(fake_book, monkeypatch):
    import os

    root, calls = fake_book
    seen = []
    real = bookmod.run_notebook
    monkeypatch.setattr(bookmod, "run_notebook", lambda *a, **k: (seen.append(os.environ.get("OMP_NUM_THREADS")),
                                                                  real(*a, **k))[1])
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    bookmod.build_book("smoke", book_root=root, jobs=2)
    assert seen == ["1", "1"] and "OMP_NUM_THREADS" not in os.environ
    seen.clear()
    bookmod.build_book("smoke", book_root=root, jobs=1)
    assert seen == [None, None]


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")),
                         ids=lambda p: p.stem)
def test_only_the_parameters_cell_shows_code_and_display_cells_show_no_toggle(path, tmp_path):
    """A page shows the code of its ``parameters`` cell alone: a page that only reads the store (``compute =
    "never"``: the results, synthesis, ledger, plan and provenance pages) tags every other code cell
    ``remove-input`` in its source; on a chapter, a cell that only displays gets ``remove-input`` when the book is
    built, and one that computes keeps its code behind a toggle (``hide-input``)."""
    from vixnb.book.execute import mark_executed_copy, display_only

    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    [parameters] = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    if 'compute = "never"' in parameters.source:
        bare = [c.source.split("\n")[0] for c in code if c is not parameters
                and "remove-input" not in c.metadata.get("tags", [])]
        assert not bare, f"{path.name}: code cells without remove-input: {bare}"
    copy = tmp_path / path.name
    nbformat.write(nb, str(copy))
    mark_executed_copy(copy, "budget", stored_only=True)
    for cell in nbformat.read(str(copy), as_version=4).cells:
        tags = set(cell.metadata.get("tags", [])) if cell.cell_type == "code" else {"markdown"}
        assert tags & {"parameters", "remove-input", "hide-input", "remove-cell", "markdown"}, cell.source[:60]
        assert not (display_only(cell.source) and "hide-input" in tags), f"{path.name}: {cell.source[:60]}"


def test_every_notebook_parameter_is_declared_once_and_checked_before_a_kernel(monkeypatch, tmp_path):
    """Issue 48, class 7: `vixnb run` checked `models` only; a bad `compute`, an unknown dataset or an unknown model in
    `accuracy_models` ran 5-20 cells first, then failed and left a `.failed` copy. Every parameter of every notebook
    now has one declaration of what it takes (``parameters.PARAMETERS``, numbers by the vocabulary), checked before
    a kernel starts, and by the same rule inside the notebook under plain papermill (``check_injected``)."""
    import json

    import papermill

    from vixnb import validate
    from vixnb.book.execute import run_notebook
    from vixnb.parameters import PARAMETERS, check_injected, declared

    import re

    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        source = next("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
        for name in declared(source):
            assert name in PARAMETERS or name in validate.NAMED, (path.name, name)
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: pytest.fail("a kernel started"))
    for name, value, why in (("compute", "sometimes", "give one of 'auto', 'never', 'missing', 'always'"),
                             ("dataset", "cifar11", "give a dataset: 'cifar10'"),
                             ("accuracy_models", ["vti"], "element 0, 'vti', is not a registered model")):
        with pytest.raises(ValueError, match=rf"^notebook parameter {name}=.*{re.escape(why)}"):
            run_notebook("efficiency", profile="smoke", parameters={name: value}, output=tmp_path / "o.ipynb")
    assert not list(tmp_path.glob("*.failed.ipynb"))
    namespace = {"In": ["profile = 'auto'\ncompute = 'auto'\n", "# Parameters\ncompute = 'sometimes'\n"],
                 "compute": "sometimes"}
    with pytest.raises(ValueError, match=r"^notebook parameter compute='sometimes': give one of"):
        check_injected(namespace)
