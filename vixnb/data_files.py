"""What of a data folder counts: the image files of its class folders, and nothing else. Hidden files and folders
(``.DS_Store``, ``._x.jpg``, ``.ipynb_checkpoints``), notes and files of other extensions are neither read by the
loader nor part of the data's fingerprint (``vixnb.data.source_fingerprint``).

``rgb_pixels`` reads one image as its true 8-bit RGB values, whatever mode PIL opens it in, or refuses it naming the
file: 8-bit modes through PIL's conversion (grayscale repeated, a palette looked up, alpha dropped, CMYK as
R = (255 - C)(255 - K) / 255), 16-bit grayscale scaled to 8 bits (v * 255 / 65535, rounded); 32-bit integer
(``I``) and floating (``F``) pixels, and colour spaces such as LAB or HSV, have no one 8-bit RGB reading and are
refused."""
import hashlib
import os
from pathlib import Path

import numpy as np

class DataError(RuntimeError):
    """A data set on disk is not what its spec says: a class folder missing, a count off, an image unreadable, of
    another size or in a mode without one 8-bit RGB reading. The message names the file or folder and what to do
    (``vixnb.data.DataError`` is this class)."""


#: the extensions of the image files a class folder holds (any case)
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
#: modes whose 8-bit RGB values PIL's conversion gives exactly
EIGHT_BIT_MODES = ("1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr")
#: 16-bit grayscale modes, scaled to 8 bits
SIXTEEN_BIT_MODES = ("I;16", "I;16B", "I;16L", "I;16N")
#: the version of what ``rgb_pixels`` returns (the decoded cache's names carry it)
DECODING = "rgb-v2"


def hidden(path):
    """Whether ``path`` is hidden: its name starts with a dot (what an operating system or a tool leaves)."""
    return Path(path).name.startswith(".")


def is_image(path):
    """Whether ``path`` names an image file of a class folder: not hidden, with an image extension. Read from the
    name's text, without a ``Path`` (a data set's listing asks it 60,000 times)."""
    name = os.path.basename(os.fspath(path))
    return not name.startswith(".") and os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES


def class_folders(split_dir):
    """The folders of ``split_dir`` that can be class folders (every visible folder)."""
    return [d for d in Path(split_dir).iterdir() if d.is_dir() and not hidden(d)]


def images_in(folder):
    """The image files of ``folder`` (``is_image``; not its subfolders), unsorted."""
    folder = Path(folder)
    return [p for p in folder.iterdir() if is_image(p)] if folder.is_dir() else []


def counted_files(folder, classes, splits, *, other=()):
    """The files that make a data set copy under ``folder``: the image files of ``<split>/<class>/`` for each of
    ``splits`` and ``classes`` (where ``classes`` is None, of every visible class folder), and the visible files of
    the folders in ``other`` (relative to ``folder``: torchvision's files, Tiny ImageNet's), or those files
    themselves."""
    folder = Path(folder)
    files = []
    for split in splits:
        split_dir = folder / split
        if split_dir.is_dir():
            for class_dir in class_folders(split_dir):
                if classes is None or class_dir.name in classes:
                    files += images_in(class_dir)
    for extra in other:
        path = folder / extra
        if path.is_dir():
            files += [p for p in path.iterdir() if not hidden(p) and p.is_file()]
        elif path.is_file():
            files.append(path)
    return [p for p in files if p.is_file()]


def folder_times(folder):
    """``((folder, modification time), ...)`` of ``folder`` and of every folder below it: a file added, removed or
    renamed anywhere changes its own folder's time. A folder whose link count says it has no subfolders (2, on
    Linux file systems) is not listed, so this stays cheap on 60,000 files."""
    times, stack = [], [Path(folder)]
    while stack:
        current = stack.pop()
        st = current.stat()
        times.append((str(current), st.st_mtime_ns))
        if st.st_nlink != 2:
            with os.scandir(current) as entries:
                stack += [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    return tuple(sorted(times))


def listing_digest(folder, files):
    """16 hex digits of SHA-256 over the sorted paths (relative to ``folder``) and byte sizes of ``files``."""
    digest = hashlib.sha256()
    base = Path(folder)
    for path in sorted(Path(f) for f in files):
        digest.update(f"{path.relative_to(base).as_posix()}\t{path.stat().st_size}\n".encode())
    return digest.hexdigest()[:16]


def rgb_pixels(image, path):
    """The (H, W, 3) uint8 RGB values of PIL ``image`` (opened from ``path``), or a ``DataError`` naming the file
    and its mode where it has no one 8-bit RGB reading."""
    if image.mode in EIGHT_BIT_MODES:
        return np.asarray(image.convert("RGB"))
    if image.mode in SIXTEEN_BIT_MODES:
        values = np.asarray(image).astype(np.uint32)
        gray = ((values * 255 + 32767) // 65535).astype(np.uint8)
        return np.repeat(gray[:, :, None], 3, axis=2)
    what = {"I": "32-bit integer pixels", "F": "floating-point pixels"}.get(image.mode, "a colour space without "
                                                                             "one RGB reading")
    raise DataError(f"{path}: image mode {image.mode} ({what}) has no one 8-bit RGB reading; save it as 8-bit RGB or "
                    "grayscale (or 16-bit grayscale), or remove it from the data folder")
