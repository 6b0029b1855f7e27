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


def results_root() -> Path:
    """The results store's folder: ``$VIXNB_RESULTS`` if set, else ``results/`` of the checkout, else of the cwd."""
    if (root := env_text("VIXNB_RESULTS")) is not None:  # empty is unset
        return Path(root).expanduser()
    repo = checkout_root()
    return (repo if repo is not None else Path.cwd()) / "results"
