"""Where the repository checkout is: the one place that finds it (results store, notebooks, git commit)."""
from __future__ import annotations

from pathlib import Path

from .validate import env_text

#: The file that marks the checkout's root (the Jupyter Book's table of contents).
ROOT_MARKER = "_toc.yml"


def checkout_root() -> Path | None:
    """The checkout this package runs from: the nearest folder above the package that holds ``_toc.yml``
    and ``vixnb/`` (an editable install or a run from the checkout); ``None`` for a regular install."""
    package = Path(__file__).resolve().parent
    for candidate in package.parents:
        if (candidate / ROOT_MARKER).is_file() and (candidate / "vixnb").is_dir():
            return candidate
    return None


def repo_root() -> Path:
    """The checkout holding ``_toc.yml`` (``checkout_root``), or a ``RuntimeError`` saying how to get one: a regular
    (non-editable) install has no notebooks or book next to it."""
    root = checkout_root()
    if root is None:
        raise RuntimeError(
            "vixnb is not running from a checkout of its repository (no _toc.yml found "
            f"above {Path(__file__).resolve().parent}). Notebooks and the book live in the "
            "repository: clone it and install it editable (pip install -e '.[book]'), "
            "or pass notebook paths explicitly."
        )
    return root


def cache_root() -> Path:
    """Where vixnb keeps what it can compute again (``models.facts``): ``$VIXNB_CACHE`` if set, else
    ``~/.cache/vixnb``."""
    root = env_text("VIXNB_CACHE")
    return Path(root).expanduser() if root is not None else Path.home() / ".cache" / "vixnb"


def results_root() -> Path:
    """The results store's folder: ``$VIXNB_RESULTS`` if set, else ``results/`` of the checkout, else of the cwd."""
    if (root := env_text("VIXNB_RESULTS")) is not None:  # empty is unset
        return Path(root).expanduser()
    repo = checkout_root()
    return (repo if repo is not None else Path.cwd()) / "results"
