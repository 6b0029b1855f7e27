"""Where a notebook runs, and what it does there by default: ``vixnb.env()``.

Three places: Colab, Kaggle, or a local machine (a laptop, a GPU box, a Slurm node, CI). ``env()`` finds which,
points ``VIXNB_DATA`` at that place's writable working folder (on Kaggle, at an attached input dataset that holds
CIFAR or Tiny ImageNet in a layout ``vixnb.data`` reads, when there is one), picks the device, and prints one line.
A ``VIXNB_DATA`` the user set is kept.

A notebook's ``profile`` and ``compute`` parameters default to ``"auto"``; ``Runtime.resolve`` turns them into
``budget`` read from the committed results store (``compute="never"``) on Colab and Kaggle, where a reader opens a
page to look at it and edit it, and ``smoke`` (``compute="missing"``) on a local machine. Papermill, ``vixnb run``
and ``make book`` always pass both, so ``auto`` only decides for a notebook opened by hand.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

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


def holds_data(folder):
    """The data sets under ``folder`` in a layout ``vixnb.data.load_split`` reads with ``folder`` as its root."""
    folder = Path(folder)
    torchvision_folders = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}
    found = [name for name, files in torchvision_folders.items()
             if (folder / name / "train").is_dir() or (folder / name / files).is_dir()]
    if (folder / "tiny-imagenet-200" / "wnids.txt").is_file():
        found.append("tiny-imagenet")
    return found


def attached_data(input_root=KAGGLE_INPUT):
    """``(folder, data sets)`` of the first attached Kaggle input (``/kaggle/input/<name>``, or one folder below
    it) that holds CIFAR or Tiny ImageNet in ``vixnb.data``'s layout, or ``(None, [])``."""
    input_root = Path(input_root)
    if not input_root.is_dir():
        return None, []
    for candidate in sorted(input_root.iterdir()):
        for folder in (candidate, *sorted(p for p in candidate.iterdir() if p.is_dir())) if candidate.is_dir() else ():
            found = holds_data(folder)
            if found:
                return folder, found
    return None, []


@dataclass(frozen=True)
class Runtime:
    """What ``env()`` found: the place, the device, the data folder (and why that one), torch and vixnb."""
    place: str
    device: str
    data: str
    data_reason: str
    torch: str
    vixnb: str

    def resolve(self, profile="auto", compute="auto"):
        """``(profile, compute)`` with ``"auto"`` replaced by this place's default (``DEFAULTS``)."""
        default_profile, default_compute = DEFAULTS[self.place]
        return (default_profile if profile == "auto" else profile,
                default_compute if compute == "auto" else compute)

    def line(self):
        return (f"vixnb {self.vixnb} on {self.place}: device {self.device}, torch {self.torch}, "
                f"data in {self.data} ({self.data_reason})")


def env(*, environ=None, modules=None, input_root=KAGGLE_INPUT, verbose=True):
    """Detect Colab, Kaggle or a local machine; set ``VIXNB_DATA`` there (kept where already set; on a local
    machine left to vixnb's default, ``~/.cache/vixnb/data``); pick ``cuda`` or ``cpu``; print one line (unless
    ``verbose=False``). Returns a ``Runtime``. ``environ`` (default ``os.environ``, which is what is changed),
    ``modules`` and ``input_root`` are there for tests."""
    import torch

    from . import __version__
    from .data import _shown, data_root

    environ = os.environ if environ is None else environ
    where = place(environ, modules)
    folder, found = attached_data(input_root) if where == "kaggle" else (None, [])
    if environ.get("VIXNB_DATA"):  # shown as "$VIXNB_DATA": a page never names a machine's folders
        data, reason = "$VIXNB_DATA", "as set"
    elif folder is not None:
        data = environ["VIXNB_DATA"] = str(folder)
        reason = f"the attached input dataset with {', '.join(found)}"
    elif where in WORKING:
        data = environ["VIXNB_DATA"] = str(WORKING[where] / "vixnb-data")
        reason = f"{where}'s working folder"
    else:
        data, reason = _shown(data_root()), "vixnb's default; set VIXNB_DATA to change it"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    runtime = Runtime(where, device, data, reason, torch.__version__, __version__)
    if verbose:
        print(runtime.line())
    return runtime
