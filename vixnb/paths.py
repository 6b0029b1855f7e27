"""Where the repository checkout is: the one place that finds it (results store, notebooks, git commit)."""
from __future__ import annotations

import os
from pathlib import Path

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
    if "VIXNB_RESULTS" in os.environ:
        return Path(os.environ["VIXNB_RESULTS"])
    repo = checkout_root()
    return (repo if repo is not None else Path.cwd()) / "results"
