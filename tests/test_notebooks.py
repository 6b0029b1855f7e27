"""vixnb.notebooks.run_notebook on small throwaway notebooks (tmp_path)."""
import sys
from pathlib import Path

import nbformat
import pytest

from vixnb.notebooks import notebook_parameters, run_notebook


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
    assert out.is_file(), "the executed copy must be kept for inspection"
    executed = nbformat.read(str(out), as_version=4)
    kinds = [o.get("output_type") for c in executed.cells for o in c.get("outputs", [])]
    assert "error" in kinds
    assert "before the error" in outputs_text(out)


def test_notebook_without_kernelspec_runs(tmp_path):
    nb = write_nb(tmp_path / "bare.ipynb", [(["parameters"], 'profile = "smoke"'), ([], "print(profile * 2)")],
                  kernelspec=False)
    out = run_notebook(nb, profile="paper", output=tmp_path / "bare_out.ipynb", progress=False)
    assert "paperpaper" in outputs_text(out)


def test_unknown_stem_lists_available():
    with pytest.raises(FileNotFoundError, match="no notebook named"):
        run_notebook("no_such_notebook_xyz", profile="smoke", progress=False)
