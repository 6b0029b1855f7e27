"""Colab, Kaggle or local (issue 18): ``vixnb.env()``, the notebooks' install and runtime cells, and the book's
launch links to the committed notebooks."""
import os
import shutil
import subprocess
import venv
from pathlib import Path

import nbformat
import pytest
import yaml

import vixnb
from vixnb import runtime
from vixnb.book.build import toc_notebooks
from vixnb.book.links import launch_links, source_notebook
from vixnb.book.execute import (EXECUTED_DIR, install_cell_source, notebook_parameters, repo_root, runtime_cell_source,
                             stamp_head_cells)

ROOT = repo_root()
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_place_is_found_from_the_runtime_variables():
    assert runtime.place({}, {}) == "local"
    assert runtime.place({"COLAB_RELEASE_TAG": "release-x"}, {}) == "colab"
    assert runtime.place({}, {"google.colab": object()}) == "colab"
    assert runtime.place({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}, {}) == "kaggle"


def test_env_points_vixnb_data_at_each_place_and_prints_one_line(tmp_path, capsys):
    colab = {"COLAB_GPU": ""}
    found = vixnb.env(environ=colab, modules={}, input_root=tmp_path / "none")
    assert colab["VIXNB_DATA"] == "/content/vixnb-data" == found.data and found.place == "colab"
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and line.startswith(f"vixnb {vixnb.__version__} on colab: "
                                                     f"this machine's device {found.device}, ")
    assert f"torch {found.torch}" in line

    kaggle = {"KAGGLE_KERNEL_RUN_TYPE": "Batch"}
    assert vixnb.env(environ=kaggle, modules={}, input_root=tmp_path / "none", verbose=False).data == \
        "/kaggle/working/vixnb-data" == kaggle["VIXNB_DATA"]
    # attached inputs, in the layouts Kaggle datasets come in, are linked into the working data folder
    inputs = tmp_path / "input"
    (inputs / "cifar10-python" / "cifar-10-batches-py").mkdir(parents=True)  # torchvision's files at the top
    (inputs / "tiny" / "files" / "tiny-imagenet-200").mkdir(parents=True)  # two folders down
    (inputs / "tiny" / "files" / "tiny-imagenet-200" / "wnids.txt").write_text("n01\n")
    (inputs / "other" / "stuff").mkdir(parents=True)
    assert runtime.attached_data(inputs) == {"cifar10": inputs / "cifar10-python",
                                             "tiny-imagenet-200": inputs / "tiny" / "files" / "tiny-imagenet-200"}
    kaggle = {"KAGGLE_KERNEL_RUN_TYPE": "Batch"}
    found = vixnb.env(environ=kaggle, modules={}, input_root=inputs, working={"kaggle": tmp_path / "working"},
                      verbose=False)
    root = tmp_path / "working" / "vixnb-data"
    assert kaggle["VIXNB_DATA"] == str(root) and found.data_reason.endswith("cifar10, tiny-imagenet-200 linked in")
    assert (root / "cifar10" / "cifar-10-batches-py").is_dir() and (root / "tiny-imagenet-200" / "wnids.txt").is_file()
    vixnb.env(environ={"KAGGLE_KERNEL_RUN_TYPE": "Batch"}, modules={}, input_root=inputs,
              working={"kaggle": tmp_path / "working"}, verbose=False)  # again: the links are there, kept
    mine = {"COLAB_GPU": "", "VIXNB_DATA": "/somewhere"}  # the user's choice is kept, and not printed
    assert (vixnb.env(environ=mine, modules={}, verbose=False).data == "$VIXNB_DATA"
            and mine["VIXNB_DATA"] == "/somewhere")
    local = {}
    assert vixnb.env(environ=local, modules={}, verbose=False).place == "local" and local == {}


def test_auto_resolves_to_stored_budget_results_on_colab_and_kaggle_and_smoke_here():
    def at(place):
        return runtime.Runtime(place, "cpu", "", "", "", "")

    assert at("colab").resolve("auto", "auto") == at("kaggle").resolve("auto", "auto") == ("budget", "never")
    assert at("local").resolve("auto", "auto") == ("smoke", "missing")
    assert at("colab").resolve("smoke", "missing") == ("smoke", "missing")  # one parameter away


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_starts_with_the_install_cell_and_resolves_its_runtime(path):
    nb = nbformat.read(path, as_version=4)
    fix = f"run vixnb.book.execute.stamp_head_cells('notebooks/{path.name}')"
    first = nb.cells[0]
    assert first.cell_type == "code" and first.source == install_cell_source(), f"{path.name}: {fix}"
    assert "remove-input" in first.metadata.get("tags", []), f"{path.name}: {fix}"
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    assert nb.cells[at + 1].source == runtime_cell_source(), f"{path.name}: {fix}"
    declared = notebook_parameters(path)
    assert {"profile", "compute"} <= set(declared)
    if path.stem != "plan":  # the plan lists a GPU profile's entries: budget unless told
        assert declared["profile"]["default"].strip() == '"auto"'


def test_stamping_is_idempotent_and_replaces_old_head_cells(tmp_path):
    path = tmp_path / "x.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# X"),
                                         nbformat.v4.new_code_cell('profile = "auto"\ncompute = "auto"',
                                                                   metadata={"tags": ["parameters"]}),
                                         nbformat.v4.new_code_cell("print(profile)")])
    nbformat.write(nb, path)
    assert stamp_head_cells(path) is True and stamp_head_cells(path) is False
    cells = nbformat.read(path, as_version=4).cells
    assert [c.metadata.get("vixnb") for c in cells] == ["install", None, None, "runtime", None]
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), path)
    with pytest.raises(ValueError, match="x.ipynb: no cell tagged `parameters`"):
        stamp_head_cells(path)


def test_the_install_and_runtime_cells_are_no_ops_where_vixnb_is_installed(capsys):
    scope = {"profile": "auto", "compute": "auto"}
    exec(install_cell_source(), scope)  # vixnb imports here: nothing is installed
    assert "torch_before" not in scope
    exec(runtime_cell_source(), scope)
    assert (scope["profile"], scope["compute"]) == ("smoke", "missing") and capsys.readouterr().out.count("\n") == 1


def test_config_names_the_same_repository_and_release_as_the_package():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["repository"]["url"] == vixnb.REPOSITORY_URL
    assert config["repository"]["branch"] == vixnb.RELEASE_TAG == f"v{vixnb.__version__}"
    assert config["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert "vixnb.book.links" in config["sphinx"]["extra_extensions"]


def _committed():
    done = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        pytest.skip("not a git checkout: the committed files cannot be listed")
    return set(done.stdout.split())


def test_every_pages_launch_links_open_a_committed_notebook():
    committed, tag = _committed(), vixnb.RELEASE_TAG
    for name in toc_notebooks(ROOT):
        page = f"{EXECUTED_DIR.as_posix()}/{name}"
        links = launch_links(page)
        path = source_notebook(page)
        assert path in committed, f"{page}: its launch links open {path}, which is not committed"
        assert links["Colab"] == f"https://colab.research.google.com/github/vixnb/vixnb/blob/{tag}/{path}"
        assert links["Kaggle"] == f"https://kaggle.com/kernels/welcome?src={vixnb.REPOSITORY_URL}/blob/{tag}/{path}"
    assert launch_links("book/intro") is None
    # a page of book/executed made from no notebook (the errata page, from book/errata.template.md) has no launch links
    assert not (ROOT / "notebooks" / "errata.ipynb").exists() and launch_links("book/executed/errata") is None


def _pip_reaches_the_registry(python):
    done = subprocess.run([python, "-m", "pip", "download", "--no-deps", "-q", "-d",
                           str(Path(python).parent.parent / "probe"), "einops"], capture_output=True, text=True)
    return done.returncode == 0


def _runtime_distribution(site_packages, name, version):
    """A preinstalled distribution as pip sees one (a package and its dist-info with a RECORD): the runtime's
    torch or torchvision. pip resolves vixnb's requirements from this metadata alone, so the multi-GB wheels
    need not be installed for the cell's promise (install vixnb, leave the runtime's torch) to be checked."""
    package = site_packages / name
    package.mkdir()
    (package / "__init__.py").write_text(f"__version__ = {version!r}\n")
    info = site_packages / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("runtime\n")
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n{info.name}/METADATA,,\n{info.name}/INSTALLER,,\n"
                                 f"{info.name}/RECORD,,\n")
    return package / "__init__.py"


def test_install_cell_installs_vixnb_into_a_fresh_venv_and_keeps_its_torch(tmp_path):
    """A fresh venv whose torch and torchvision are the runtime's (this interpreter's versions) and which has no
    vixnb, as on Colab: the install cell, its source pointed at a copy of this checkout, installs vixnb and its
    other requirements from the registry and leaves torch and torchvision as they were."""
    import torch
    import torchvision

    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = str(env / "bin" / "python")
    if not _pip_reaches_the_registry(python):
        pytest.skip("pip cannot reach a package registry here: the install cell cannot be run for real")
    site_packages = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        check=True, capture_output=True, text=True).stdout.strip())
    versions = {"torch": torch.__version__.split("+")[0], "torchvision": torchvision.__version__.split("+")[0]}
    kept = {name: _runtime_distribution(site_packages, name, version) for name, version in versions.items()}
    before = {name: path.stat().st_mtime_ns for name, path in kept.items()}
    source = tmp_path / "src"  # a copy, so the build leaves the checkout alone
    shutil.copytree(ROOT / "vixnb", source / "vixnb", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    cell = tmp_path / "cell.py"
    cell.write_text(install_cell_source())
    run = subprocess.run([python, str(cell)], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "VIXNB_INSTALL_SOURCE": str(source)})
    assert run.returncode == 0, run.stderr[-2000:]
    shown = subprocess.run([python, "-c", "import importlib.metadata as m, vixnb, torch, torchvision; "
                            "print(vixnb.__version__, m.version('vixnb'), torch.__version__, torchvision.__version__)"],
                           check=True, capture_output=True, text=True, cwd=tmp_path).stdout.split()
    assert shown == [vixnb.__version__, vixnb.__version__, versions["torch"], versions["torchvision"]]
    assert {name: path.stat().st_mtime_ns for name, path in kept.items()} == before, "pip reinstalled torch"
    assert not list(site_packages.glob("nvidia*")), "pip installed CUDA libraries beside the runtime's torch"
    again = subprocess.run([python, str(cell)], capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 0 and again.stdout == again.stderr == ""  # installed now: a no-op


def test_a_page_rendered_from_the_store_names_the_devices_that_made_its_results(capsys, isolated_results):
    from vixnb.results import ResultsStore

    runtime = vixnb.env(verbose=False)
    ResultsStore().save_record("measure", "x", {"rows": {}, "provenance": {"device": "NVIDIA H100 80GB HBM3"}},
                               profile="budget")
    assert runtime.resolve("budget", "never") == ("budget", "never")
    out = capsys.readouterr().out
    assert "made on NVIDIA H100 80GB HBM3." in out and "this machine" not in out and out.count("\n") == 1
    runtime.resolve("budget", "missing")
    assert capsys.readouterr().out == ""  # a page that may compute says nothing of the kind


def _git(*args, cwd):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main",
                    *args], cwd=cwd, check=True, capture_output=True, text=True)


def _tagged_repository(tmp_path, files, tag="v9.9.9", after=None):
    """A bare repository (``file://`` URL) whose ``tag`` holds ``files`` ({path: text}) and whose branch moved on
    to ``after`` (other texts of the same paths), as a release's repository does."""
    work = tmp_path / "work"
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    _git("init", "-q", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", "release", cwd=work)
    _git("tag", tag, cwd=work)
    for path, text in (after or {}).items():
        (work / path).write_text(text)
        _git("commit", "-qam", "later", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(tmp_path / "bare.git"), cwd=tmp_path)
    return f"file://{tmp_path / 'bare.git'}"


def test_the_release_store_is_the_results_of_the_tag_fetched_once(tmp_path, monkeypatch):
    url = _tagged_repository(tmp_path, {"results/budget/r.json": '{"at": "tag"}', "vixnb/__init__.py": ""},
                             after={"results/budget/r.json": '{"at": "later"}'})
    working = tmp_path / "content"
    working.mkdir()
    results, line = runtime.release_store(f"git+{url}@v9.9.9", working)
    assert results == working / "vixnb-store-v9.9.9" / "results"
    assert (results / "budget" / "r.json").read_text() == '{"at": "tag"}' and line == f"results store: {url} at v9.9.9"
    monkeypatch.setattr(runtime.subprocess, "run", lambda *a, **k: pytest.fail("fetched twice"))
    assert runtime.release_store(f"git+{url}@v9.9.9", working)[0] == results  # a notebook run again: kept


@pytest.mark.parametrize("source, why", [
    ("git+file:///no/such/repository.git@v9.9.9", "could not fetch results/ of file:///no/such/repository.git at "
                                                  "v9.9.9"),
    ("vixnb-0.1.0-py3-none-any.whl", "carries no results/"),
    ("git+https://example.org/vixnb", "carries no results/"),  # no tag: which release's store is unknown
])
def test_a_store_that_cannot_be_fetched_is_said_in_one_line_and_nothing_is_set(tmp_path, source, why):
    results, line = runtime.release_store(source, tmp_path)
    assert results is None and why in line and "not yet run" in line and "\n" not in line


def test_env_on_colab_without_a_checkout_points_vixnb_results_at_the_releases_store(tmp_path, monkeypatch, capsys):
    url = _tagged_repository(tmp_path, {"results/budget/r.json": "{}"})
    monkeypatch.setattr(runtime, "checkout_root", lambda: None)  # a regular install, as pip gives Colab
    working = tmp_path / "content"
    working.mkdir()
    environ = {"COLAB_RELEASE_TAG": "x", "VIXNB_INSTALL_SOURCE": f"git+{url}@v9.9.9"}
    found = vixnb.env(environ=environ, modules={}, input_root=tmp_path / "none", working={"colab": working})
    assert environ["VIXNB_RESULTS"] == str(working / "vixnb-store-v9.9.9" / "results")
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.rstrip().endswith(f"; results store: {url} at v9.9.9") and found.store
    kept = {"COLAB_RELEASE_TAG": "x", "VIXNB_RESULTS": "mine", "VIXNB_INSTALL_SOURCE": f"git+{url}@v9.9.9"}
    vixnb.env(environ=kept, modules={}, input_root=tmp_path / "none", working={"colab": working}, verbose=False)
    assert kept["VIXNB_RESULTS"] == "mine"  # the user's store is kept
    assert runtime.install_source({}) == f"git+{vixnb.REPOSITORY_URL}@{vixnb.RELEASE_TAG}"
    assert runtime.install_source({"VIXNB_INSTALL_SOURCE": " "}) == runtime.install_source({})  # blank is unset


def _python_without_vixnb(tmp_path):
    """A venv where vixnb is not installed but this interpreter's other packages are importable (torch, papermill,
    ipykernel: linked into a folder its ``.pth`` names, without vixnb's own entries), with a kernel of its own."""
    import sysconfig

    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    ours = Path(sysconfig.get_paths()["purelib"])
    shared = tmp_path / "shared-site"
    shared.mkdir()
    for entry in ours.iterdir():
        if not entry.name.lower().startswith(("vixnb", "__editable__", "_virtualenv", "distutils-precedence")) and \
                entry.suffix != ".pth":
            (shared / entry.name).symlink_to(entry)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "shared.pth").write_text(f"{shared}\n")
    subprocess.run([str(python), "-m", "ipykernel", "install", "--prefix", str(env), "--name", "colab-like"],
                   check=True, capture_output=True, text=True)
    return python


def test_a_chapter_opened_as_on_colab_shows_the_stored_results_of_its_release(tmp_path):
    """Issue 46: a chapter notebook run as Colab runs it (``COLAB_RELEASE_TAG`` set, vixnb not installed, an empty
    folder) installs vixnb from ``VIXNB_INSTALL_SOURCE`` (``git+URL@TAG`` of a local bare clone of this tree) and
    shows the committed store of that tag: the devices that made its stored runs, not "no device yet"."""
    python = _python_without_vixnb(tmp_path)
    if not _pip_reaches_the_registry(str(python)):
        pytest.skip("pip cannot reach a package registry here: the install cell cannot be run for real")
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode:
        pytest.skip("not a git checkout: the tree cannot be tagged")
    files = {path: (ROOT / path).read_bytes() for path in listed.stdout.splitlines() if (ROOT / path).is_file()}
    work = tmp_path / "release"
    for path, data in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_bytes(data)
    _git("init", "-q", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", "release", cwd=work)
    _git("tag", "v9.9.9-test", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(tmp_path / "bare.git"), cwd=tmp_path)
    folder = tmp_path / "colab"
    folder.mkdir()
    shutil.copy2(ROOT / "notebooks" / "vix_table1.ipynb", folder / "vix_table1.ipynb")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIXNB_RESULTS", "PYTHONPATH", "VIRTUAL_ENV"))}
    env.update(COLAB_RELEASE_TAG="simulated", VIXNB_INSTALL_SOURCE=f"git+file://{tmp_path / 'bare.git'}@v9.9.9-test")
    done = subprocess.run([str(python), "-m", "papermill", "vix_table1.ipynb", "out.ipynb", "-k", "colab-like",
                           "-p", "profile", "auto", "-p", "compute", "auto"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    shown = "".join(o.get("text", "") for c in nbformat.read(folder / "out.ipynb", as_version=4).cells
                    if c.cell_type == "code" for o in c.get("outputs", []))
    assert "no device yet" not in shown
    assert "made on NVIDIA H100 80GB HBM3" in shown, shown[:3000]
    assert f"results store: file://{tmp_path / 'bare.git'} at v9.9.9-test" in shown
    assert (folder / "vixnb-store-v9.9.9-test" / "results" / "budget").is_dir()  # /content is missing: the cwd
