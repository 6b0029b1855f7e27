"""Where a notebook runs, and what it does there by default: ``vixnb.env()``.

Three places: Colab, Kaggle, or a local machine (a laptop, a GPU box, a Slurm node, CI). ``env()`` finds which,
points ``VIXNB_DATA`` at that place's writable working folder (on Kaggle with the CIFAR or Tiny ImageNet of an
attached input dataset linked into it, so they are read in place rather than downloaded), picks the device, and
prints one line. A ``VIXNB_DATA`` the user set is kept.

On Colab and Kaggle vixnb is a regular install (a wheel carries the package, not ``results/``), so ``env()`` also
fetches the committed results store of the release the notebook was opened at (``release_store``): ``results/`` of
the repository and tag that ``$VIXNB_INSTALL_SOURCE`` names (a pip requirement ``git+URL@TAG``, or a checkout's
folder), by default ``vixnb.REPOSITORY_URL`` at ``vixnb.RELEASE_TAG``, the install cell's own source, and points
``VIXNB_RESULTS`` there. Where it cannot be reached it says so in one line, and the pages read "not yet run".

A notebook's ``profile`` and ``compute`` parameters default to ``"auto"``; ``Runtime.resolve`` turns them into
``budget`` read from the committed results store (``compute="never"``) on Colab and Kaggle, where a reader opens a
page to look at it and edit it, and ``smoke`` (``compute="missing"``) on a local machine. Papermill, ``vixnb run``
and ``make book`` always pass both, so ``auto`` only decides for a notebook opened by hand.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from . import RELEASE_TAG, REPOSITORY_URL, __version__
from .paths import checkout_root
from .results import ResultsStore
from .data import CIFAR100_CLASSES, CIFAR10_CLASSES, shown_root, data_root
from .parameters import check_injected

PLACES = ("colab", "kaggle", "local")
#: each place's writable working folder, where ``VIXNB_DATA`` goes (a local machine keeps vixnb's default)
WORKING = {"colab": Path("/content"), "kaggle": Path("/kaggle/working")}
KAGGLE_INPUT = Path("/kaggle/input")
#: what a notebook does by default in each place: (profile, compute)
DEFAULTS = {"colab": ("budget", "never"), "kaggle": ("budget", "never"), "local": ("smoke", "missing")}


def place(environ=None, modules=None):
    """``"colab"``, ``"kaggle"`` or ``"local"``: Colab by its module or its runtime's variables, Kaggle by its
    kernel's variables."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if "google.colab" in modules or "COLAB_RELEASE_TAG" in environ or "COLAB_GPU" in environ:
        return "colab"
    if "KAGGLE_KERNEL_RUN_TYPE" in environ or "KAGGLE_URL_BASE" in environ:
        return "kaggle"
    return "local"


def dataset_folder(folder):
    """``(name, link)`` when ``folder`` is one data set as ``vixnb.data`` reads it below its root, else None:
    ``cifar10``/``cifar100`` (torchvision's ``cifar-10-batches-py``/``cifar-100-python`` inside, or an image-folder
    copy ``train/<class>/``), or ``tiny-imagenet`` (``wnids.txt`` inside). ``link`` is the name the data root
    must give it (``cifar10``, ``cifar100``, ``tiny-imagenet-200``)."""
    folder = Path(folder)
    if (folder / "cifar-10-batches-py").is_dir() or (folder / "train" / CIFAR10_CLASSES[0]).is_dir():
        return "cifar10", "cifar10"
    if (folder / "cifar-100-python").is_dir() or (folder / "train" / CIFAR100_CLASSES[0]).is_dir():
        return "cifar100", "cifar100"
    if (folder / "wnids.txt").is_file():
        return "tiny-imagenet", "tiny-imagenet-200"
    return None


def attached_data(input_root=KAGGLE_INPUT, depth=3):
    """``{link name: folder}`` of the data sets among a Kaggle notebook's attached inputs (``/kaggle/input/<name>``
    and up to ``depth`` folders below it; the first found of each data set), whatever folder they sit in."""
    found = {}

    def walk(folder, left):
        named = dataset_folder(folder)
        if named is not None:
            found.setdefault(named[1], folder)
            return
        if left:
            for child in sorted(p for p in folder.iterdir() if p.is_dir()):
                walk(child, left - 1)

    input_root = Path(input_root)
    if input_root.is_dir():
        for candidate in sorted(p for p in input_root.iterdir() if p.is_dir()):
            walk(candidate, depth - 1)
    return found


def install_source(environ=None):
    """The pip requirement the notebooks' install cell installs vixnb from: ``$VIXNB_INSTALL_SOURCE`` when set and
    not blank, else this release, ``git+REPOSITORY_URL@RELEASE_TAG``."""
    environ = os.environ if environ is None else environ
    return (environ.get("VIXNB_INSTALL_SOURCE") or "").strip() or f"git+{REPOSITORY_URL}@{RELEASE_TAG}"


#: a git requirement as pip reads one: ``git+<url>@<tag or branch>`` (the ref after the last ``@`` past the host)
GIT_SOURCE = re.compile(r"^git\+(?P<url>.+?)@(?P<ref>[^@/]+)$")
STORE_FOLDER = "vixnb-store"  # the release's store, fetched into the working folder as vixnb-store-<ref>/results
FETCH_SECONDS = 120


def release_store(source, folder):
    """``(results folder or None, one line)``: the committed results store of ``source`` (``install_source``).
    ``git+URL@REF``: a shallow clone of ``URL`` at ``REF`` into ``folder/vixnb-store-<REF>`` (kept: a notebook run
    again reads it at once); a local folder holding ``results/`` (a checkout): its ``results/``. Anything else (a
    wheel, a package name), or a repository that cannot be reached, gives None and says why."""
    local = Path(source).expanduser()
    if not source.startswith("git+") and (local / "results").is_dir():
        return local / "results", f"results store: {local.name}/results (VIXNB_INSTALL_SOURCE)"
    found = GIT_SOURCE.match(source)
    if found is None:
        return None, (f"results store: none (vixnb comes from {source!r}, which carries no results/; give "
                      "VIXNB_INSTALL_SOURCE as git+URL@TAG or a checkout's folder): the pages show 'not yet run'")
    url, ref = found["url"], found["ref"]
    clone = Path(folder) / f"{STORE_FOLDER}-{re.sub(r'[^A-Za-z0-9._-]', '_', ref)}"
    if not (clone / "results").is_dir():
        try:
            done = subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--branch", ref, url, str(clone)],
                                  capture_output=True, text=True, timeout=FETCH_SECONDS)
            why = (done.stderr.strip().splitlines() or [f"git exited with {done.returncode}"])[-1] \
                if done.returncode else "" if (clone / "results").is_dir() else "it holds no results/"
        except (OSError, subprocess.TimeoutExpired) as e:
            why = f"{type(e).__name__}: {e}"
        if why:
            return None, (f"results store: could not fetch results/ of {url} at {ref} ({why[:200]}); the pages show "
                          "'not yet run'")
    return clone / "results", f"results store: {url} at {ref}"


@dataclass(frozen=True)
class Runtime:
    """What ``env()`` found: the place, the device, the data folder (and why that one), torch and vixnb."""
    place: str
    device: str
    data: str
    data_reason: str
    torch: str
    vixnb: str
    store: str = ""  # where the results store was fetched from (Colab, Kaggle), or why none was

    def resolve(self, profile="auto", compute="auto", *, verbose=True):
        """``(profile, compute)`` with ``"auto"`` replaced by this place's default (``DEFAULTS``).

        Called from a notebook's runtime cell, it first checks what papermill injected into the calling notebook
        (``parameters.check_injected`` on the caller's globals): a name the ``parameters`` cell does not declare
        is refused, a list parameter given as a string becomes a list. With ``compute="never"`` it also says
        (unless ``verbose=False``) which devices made the stored results the page shows, and nothing of the machine
        that renders the page (it made none of them)."""
        check_injected(sys._getframe(1).f_globals)
        default_profile, default_compute = DEFAULTS[self.place]
        profile = default_profile if profile == "auto" else profile
        compute = default_compute if compute == "auto" else compute
        if verbose and compute == "never":
            made = ResultsStore().devices(profile)
            print(f"Results shown: read from the results store (results/{profile}/), made on "
                  f"{', '.join(made) if made else 'no device yet (none stored)'}.")
        return profile, compute

    def line(self):
        return (f"vixnb {self.vixnb} on {self.place}: this machine's device {self.device}, torch {self.torch}, "
                f"data in {self.data} ({self.data_reason})" + (f"; {self.store}" if self.store else ""))


def env(*, environ=None, modules=None, input_root=KAGGLE_INPUT, working=None, verbose=True):
    """Detect Colab, Kaggle or a local machine; set ``VIXNB_DATA`` to ``<working folder>/vixnb-data`` there (kept
    where already set; on a local machine left to vixnb's default, ``~/.cache/vixnb/data``); on Kaggle, link the
    data sets of the attached inputs into it (``attached_data``: read in place, whatever folder they sit in); pick
    ``cuda`` or ``cpu``; on Colab and Kaggle, where vixnb runs from no checkout and ``VIXNB_RESULTS`` is unset,
    fetch the release's results store into the working folder (``release_store``; the current folder where the
    place's is missing) and set ``VIXNB_RESULTS`` to it; print one line (unless ``verbose=False``). Returns a
    ``Runtime``. ``environ`` (default ``os.environ``, which is what is changed), ``modules``, ``input_root`` and
    ``working`` (``{place: folder}``, default ``WORKING``) are there for tests."""
    working = working or {}

    environ = os.environ if environ is None else environ
    where = place(environ, modules)
    if environ.get("VIXNB_DATA"):  # shown as "$VIXNB_DATA": a page never names a machine's folders
        data, reason = "$VIXNB_DATA", "as set"
    elif where in WORKING:
        root = Path(working.get(where, WORKING[where])) / "vixnb-data"
        data = environ["VIXNB_DATA"] = str(root)
        reason = f"{where}'s working folder"
        attached = attached_data(input_root) if where == "kaggle" else {}
        if attached:  # read in place (inputs are read-only): linked into the writable data folder
            root.mkdir(parents=True, exist_ok=True)
            for link, folder in attached.items():
                if not (root / link).exists():
                    (root / link).symlink_to(folder, target_is_directory=True)
            reason += f", with the attached {', '.join(attached)} linked in"
    else:
        data, reason = shown_root(data_root()), "vixnb's default; set VIXNB_DATA to change it"
    store = ""
    if where in WORKING and not (environ.get("VIXNB_RESULTS") or "").strip() and checkout_root() is None:
        folder = Path(working.get(where, WORKING[where]))
        results, store = release_store(install_source(environ), folder if folder.is_dir() else Path.cwd())
        if results is not None:
            environ["VIXNB_RESULTS"] = str(results)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    runtime = Runtime(where, device, data, reason, torch.__version__, __version__, store)
    if verbose:
        print(runtime.line())
    return runtime
