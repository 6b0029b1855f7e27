"""environment.yml (exact pins, the batch/GPU path) against pyproject.toml (lower bounds, the install cell):
the same packages, and every pin inside pyproject's bounds (issue 18). There is no conda solve here: no machine of
this project's (CPU or GPU) has conda or reaches conda-forge, so a solve test could only skip. What checks
environment.yml is these tests (same packages as pyproject.toml, every pin inside its bounds) and, on a machine with
conda, `conda env create -f environment.yml && conda activate vixnb && make test` (README)."""
import re
import tomllib

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from vixnb.book.execute import repo_root

ROOT = repo_root()
#: conda-forge names of PyPI packages that differ
CONDA_NAMES = {"torch": "pytorch"}
NOT_PACKAGES = {"python", "pip"}


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in project["dependencies"] + extras["book"] + extras["test"]], set(extras)


def _environment():
    """``({canonical PyPI name: (version, where)}, [editable lines])`` of environment.yml."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pins, editable = {}, []
    to_pypi = {conda: pypi for pypi, conda in CONDA_NAMES.items()}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for line in dep["pip"]:
                if line.startswith("-e "):
                    editable.append(line)
                    continue
                name, sep, version = line.partition("==")
                assert sep, f"environment.yml: pip entry {line!r} is not an exact pin; write {name}==<version>"
                pins[_canonical(name)] = (version, "pip")
            continue
        name, sep, version = dep.partition("=")
        if name in NOT_PACKAGES:
            continue
        assert sep and not version.startswith("="), \
            f"environment.yml: conda entry {dep!r} is not an exact pin; write {name}=<version>"
        pins[_canonical(to_pypi.get(name, name))] = (version, "conda")
    return pins, editable


def test_environment_pins_every_pyproject_package_within_its_bounds():
    requirements, extras = _pyproject()
    pins, editable = _environment()
    wanted = {_canonical(r.name) for r in requirements}
    for r in requirements:
        name = _canonical(r.name)
        assert name in pins, (f"environment.yml lacks {r.name} (pyproject.toml asks {r}); add "
                              f"{CONDA_NAMES.get(r.name, r.name)} with an exact pin")
        version = pins[name][0]
        assert r.specifier.contains(Version(version), prereleases=True), \
            f"environment.yml pins {r.name} {version}, outside pyproject.toml's {r}; change one of them"
    extra = sorted(set(pins) - wanted)
    assert not extra, f"environment.yml names {extra}, which pyproject.toml does not; add them there or drop them"
    assert editable == ["-e .[book,test]"] and {"book", "test"} <= extras


def test_pyproject_keeps_lower_bounds_for_torch_so_colab_keeps_its_own():
    requirements, _ = _pyproject()
    torch = {r.name: r for r in requirements}
    for name in ("torch", "torchvision"):
        assert all(s.operator == ">=" for s in torch[name].specifier), \
            f"pyproject.toml: {torch[name]} must be a lower bound"


