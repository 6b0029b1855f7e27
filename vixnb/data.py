"""Datasets: specs (image size, classes) and loaders.

Every loader returns raw pixels: ``images`` uint8 (N, 3, H, W) and ``labels`` int64 (N,), both contiguous
on the CPU. The training engine moves the whole tensors to the device and calls :func:`normalize` there.
"""
import errno
import hashlib
import numbers
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from tqdm import tqdm

from .data_files import (DECODING, DataError, class_folders, counted_files, folder_times, images_in, is_image,
                         listing_digest, rgb_pixels)
from .files import atomic_write
from .validate import Invalid, checked, env_text


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset's image size, classes, and the number of images in its full train and test splits."""
    name: str
    image_size: int
    num_classes: int
    train_images: int
    test_images: int
    channels: int = 3

    def split_images(self, split):
        return {"train": self.train_images, "test": self.test_images}[split]

    def per_class(self, split):
        """Images per class in the full ``split`` (the data sets here are balanced)."""
        return self.split_images(split) // self.num_classes


DATASETS = {
    "cifar10": DatasetSpec("cifar10", 32, 10, train_images=50_000, test_images=10_000),
    "cifar100": DatasetSpec("cifar100", 32, 100, train_images=50_000, test_images=10_000),
    # the "test" split is the labelled val folder (the official test set has no labels)
    "tiny-imagenet": DatasetSpec("tiny-imagenet", 64, 200, train_images=100_000, test_images=10_000),
    "synthetic": DatasetSpec("synthetic", 32, 10, train_images=2048, test_images=512),
}


def dataset_spec(name):
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(sorted(DATASETS))}") from None


SPLITS = ("train", "test")

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
# CIFAR-100's fine labels; the release lists them in alphabetical order.
CIFAR100_CLASSES = tuple("""
apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus butterfly camel
can castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile cup dinosaur
dolphin elephant flatfish forest fox girl hamster house kangaroo keyboard lamp lawn_mower leopard lion
lizard lobster man maple_tree motorcycle mountain mouse mushroom oak_tree orange orchid otter palm_tree
pear pickup_truck pine_tree plain plate poppy porcupine possum rabbit raccoon ray road rocket rose sea
seal shark shrew skunk skyscraper snail snake spider squirrel streetcar sunflower sweet_pepper table
tank telephone television tiger tractor train trout tulip turtle wardrobe whale willow_tree wolf woman
worm""".split())

TINY_IMAGENET_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
TINY_IMAGENET_MD5 = "90528d7ca1a48142e341f4ef8d21d0de"
_ROOT_HINT = "Without root=, datasets are looked for under $VIXNB_DATA, else ~/.cache/vixnb/data."


class DatasetNotFoundError(FileNotFoundError):
    """A dataset is not on disk (and was not, or could not be, downloaded)."""


def data_root():
    """Where datasets live: ``$VIXNB_DATA`` if set, else ``~/.cache/vixnb/data``."""
    env = env_text("VIXNB_DATA")  # set to the empty string is unset
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "vixnb" / "data"
    if root.exists() and not root.is_dir():  # a variable of the environment given wrong: a usage error (exit 2)
        raise Invalid(f"VIXNB_DATA={env} is a file, not a folder; point VIXNB_DATA at the folder holding the data sets")
    return root


@checked("seed")
def load_split(name, split, *, root=None, download=False, seed=0, size=None, allow_resize=False):
    """Load one split of dataset ``name`` as ``(images uint8 (N,3,H,W), labels int64 (N,))``.

    ``split`` is "train" or "test" (for tiny-imagenet, "test" is the labelled val set). ``root``
    defaults to :func:`data_root`; ``seed`` is used by "synthetic" only. ``size`` keeps the first
    ``size`` examples (for "synthetic" it sets the number generated; a prefix of a larger set).
    Image folders are read interleaved across classes (the first file of every class in class order,
    then the second, ...), so such a prefix holds every class; only the kept files are decoded. A full
    split is checked against the spec (every class folder, the images per class); an unreadable image, or
    one of another size (unless ``allow_resize``), is a ``DataError`` that names the file.
    """
    spec = dataset_spec(name)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0):
        raise ValueError(f"size={size!r}: give a whole number >= 0 (the first examples kept), or None for all")
    if name == "synthetic":
        return synthetic_split(split, seed=seed, size=size)
    root = Path(root).expanduser() if root is not None else data_root()
    if name == "tiny-imagenet":
        images, labels = _load_tiny_imagenet(root, split, download, size, allow_resize)
    else:
        images, labels = _load_cifar(name, root, split, download, size, allow_resize)
    assert images.shape[1:] == (spec.channels, spec.image_size, spec.image_size), images.shape
    return images[:size].contiguous(), labels[:size].contiguous()


def describe_source(name, split="train", *, root=None):
    """Which copy of a dataset ``load_split`` reads, in words, for a result's provenance."""
    if name == "synthetic":
        return "synthetic (embedded, generated from a seed)"
    root = Path(root).expanduser() if root is not None else data_root()
    if name == "tiny-imagenet":
        return f"tiny-imagenet-200 folder under {shown_root(root)}"
    folder = root / name / split
    if folder.is_dir():
        suffixes = sorted({p.suffix.lower()
                           for p in next((d for d in folder.iterdir() if d.is_dir()), folder).iterdir()})
        return f"{name} image-folder copy ({', '.join(suffixes) or 'empty'}) under {shown_root(root)}"
    return f"{name} torchvision files under {shown_root(root)}"


def source_fingerprint(name, *, root=None):
    """A short fingerprint of the data set copy ``load_split`` would read (names and sizes of the files it reads:
    the image files of the class folders of both splits, ``data_files.counted_files``; hidden files, notes and
    other extensions do not count; for the synthetic set, its generator's version), or None when no copy is here.
    A stored result that recorded another fingerprint was made from other data."""
    if name == "synthetic":
        return "synthetic-v1"
    root = Path(root).expanduser() if root is not None else data_root()
    folder = root / ("tiny-imagenet-200" if name == "tiny-imagenet" else name)
    if not folder.is_dir():
        return None
    return fingerprint(name, str(folder), folder_times(folder))


@lru_cache(maxsize=16)
def fingerprint(name, folder, times):
    """``source_fingerprint`` of the copy in ``folder``, cached on ``times`` (``data_files.folder_times``: every
    folder's modification time, so a file added, removed or renamed in a class folder is seen)."""
    folder = Path(folder)
    if name == "tiny-imagenet":
        wnids = (folder / "wnids.txt").read_text().split() if (folder / "wnids.txt").is_file() else []
        files = [p for w in wnids for p in images_in(folder / "train" / w / "images")] + images_in(
            folder / "val" / "images") + counted_files(folder, None, (), other=("wnids.txt", "val/val_annotations.txt"))
    else:
        classes = CIFAR10_CLASSES if name == "cifar10" else CIFAR100_CLASSES
        read = [s for s in SPLITS if (folder / s).is_dir()]
        if not read:  # torchvision's files (torchvision, imported where used, loads torch._dynamo: ~2 s a process)
            from torchvision import datasets
        files = counted_files(folder, classes, read, other=() if read else (
            (datasets.CIFAR10 if name == "cifar10" else datasets.CIFAR100).base_folder,))
    return listing_digest(folder, files)


def shown_root(root):
    """$VIXNB_DATA or ~ instead of this machine's absolute path."""
    env = env_text("VIXNB_DATA")
    if env and Path(env).expanduser() == root:
        return "$VIXNB_DATA"
    home = Path.home()
    return f"~/{root.relative_to(home)}" if root.is_relative_to(home) else root.name


def normalize(images, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)):
    """uint8 pixels -> ``(x / 255 - mean) / std`` per channel in the default float type (float32; float64 where set)
    on the input's device (defaults: ToTensor() and Normalize(0.5, 0.5)); constants kept per device (no host read)."""
    made = _normalize_constants if type(images) is torch.Tensor else _normalize_constants.__wrapped__
    mean, std = made(tuple(mean), tuple(std), images.device)
    return (images.to(torch.get_default_dtype()) / 255 - mean) / std

@lru_cache(maxsize=32)
def _normalize_constants(mean, std, device):
    with torch.inference_mode(False), torch.no_grad():  # normal tensors, even when first made under inference mode
        return tuple(torch.tensor(v, dtype=torch.float32, device=device).view(-1, 1, 1) for v in (mean, std))


# ----- synthetic ----------------------------------------------------------------------------------
# Ten classes of Gabor-like patches: class k is a grating at orientation (k % 5) * 36 degrees with a
# coarse (k < 5) or fine (k >= 5) spatial frequency. Everything else is per-image noise the model has
# to see through: orientation jitter, frequency jitter, phase, patch position and width, contrast,
# background colour and additive pixel noise. Colour carries no information about the class.

_SYNTHETIC_CHUNK = 256


@checked("seed")
def synthetic_split(split, *, seed=0, size=None):
    """The embedded synthetic dataset: deterministic in ``(seed, split)``; never touches the global RNG.

    Examples are generated in chunks, each from its own generator seeded from ``(seed, split, chunk)``:
    train and test are different samples of one distribution, and a smaller ``size`` gives a prefix of a larger
    one."""
    n = dataset_spec("synthetic").split_images(split) if size is None else size
    num_chunks = max(1, -(-n // _SYNTHETIC_CHUNK))
    images, labels = zip(*(_synthetic_chunk(_chunk_seed(seed, split, i)) for i in range(num_chunks)))
    return torch.cat(images)[:n].contiguous(), torch.cat(labels)[:n].contiguous()


def _chunk_seed(seed, split, chunk):
    digest = hashlib.sha256(f"vixnb-synthetic/{seed}/{split}/{chunk}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def _synthetic_chunk(generator_seed, n=_SYNTHETIC_CHUNK, image_size=32):
    g = torch.Generator().manual_seed(generator_seed)

    def uniform(lo, hi, *shape):
        return lo + (hi - lo) * torch.rand(n, *shape, generator=g)

    labels = torch.randint(0, 10, (n,), generator=g)
    theta = (labels % 5) * (torch.pi / 5) + uniform(-0.2, 0.2)
    cycles = torch.where(labels < 5, 3.0, 5.0) * uniform(0.88, 1.12)
    phase = uniform(0, 2 * torch.pi)
    centre = uniform(-0.2, 0.2, 2)
    width = uniform(0.12, 0.3)
    contrast = uniform(0.08, 0.3)
    background = uniform(0.2, 0.8, 3)

    coords = (torch.arange(image_size) + 0.5) / image_size - 0.5  # pixel centres in [-0.5, 0.5)
    y, x = coords.view(1, -1, 1), coords.view(1, 1, -1)
    along = x * theta.cos().view(-1, 1, 1) + y * theta.sin().view(-1, 1, 1)
    grating = torch.sin(2 * torch.pi * cycles.view(-1, 1, 1) * along + phase.view(-1, 1, 1))
    distance2 = (x - centre[:, 0].view(-1, 1, 1)) ** 2 + (y - centre[:, 1].view(-1, 1, 1)) ** 2
    envelope = torch.exp(-distance2 / (2 * width.view(-1, 1, 1) ** 2))
    pattern = (contrast.view(-1, 1, 1) * grating * envelope).unsqueeze(1)  # (n, 1, H, W)
    noise = 0.1 * torch.randn(n, 3, image_size, image_size, generator=g)
    images = background.view(n, 3, 1, 1) + pattern + noise
    return (images.clamp(0, 1) * 255).round().to(torch.uint8), labels


# ----- image files --------------------------------------------------------------------------------

DECODED_DIR = ".decoded"  # under the data root: decoded splits, one .npy per list of files


def _decoded_cache(paths, image_size, allow_resize, cache_dir):
    """The cache file of decoding ``paths``: named by a digest of their paths, sizes and modification times
    (any changed, added or removed file gives another name) and of the decoding options."""
    digest = hashlib.sha256(f"{image_size}|{allow_resize}|{DECODING}".encode())
    for path in paths:
        st = _stat(path)
        digest.update(f"{path}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return cache_dir / f"{digest.hexdigest()[:20]}.npy"


def _stat(path):
    """``path.stat()``, or a ``DataError`` naming an image file that cannot be reached (a symbolic link that loops
    or points nowhere)."""
    try:
        return path.stat()
    except OSError as e:
        what = "a symbolic link that loops" if e.errno == errno.ELOOP else f"unreachable ({e.strerror or e})"
        raise DataError(f"{path}: the image file is {what}; replace it with the image file, or remove it and restore "
                        "the image from the data set's archive") from None


def _decode_files(paths, image_size, desc, *, allow_resize=False, cache_dir=None):
    """Decode image files to one uint8 (N, 3, S, S) tensor (grayscale expanded). An unreadable file, or one
    of another size than S x S (unless ``allow_resize``: then it is resized), is a ``DataError`` naming it.

    With ``cache_dir``, the decoded array is kept there (``_decoded_cache``; a plain ``.npy`` read back with
    ``allow_pickle=False``) and later calls on the same unchanged files read it instead of decoding (CIFAR-10's
    training split: about 20 s of decoding against well under a second); a cache that cannot be written is
    skipped. Uses PIL (what torchvision's ImageFolder uses): torchvision.io's decoders are deprecated since 0.29.
    """
    cache = _decoded_cache(paths, image_size, allow_resize, cache_dir) if cache_dir is not None and paths else None
    if cache is not None and cache.is_file():
        try:
            array = np.load(cache, allow_pickle=False)
            if array.shape == (len(paths), 3, image_size, image_size) and array.dtype == np.uint8:
                return torch.from_numpy(array)
        except (OSError, ValueError):
            pass  # a damaged cache is decoded again and rewritten
    images = decode_image_files(paths, image_size, desc, allow_resize=allow_resize)
    if cache is not None:
        try:
            atomic_write(cache, lambda f: np.save(f, images.numpy(), allow_pickle=False), binary=True)
        except OSError:
            pass  # a read-only data folder: decode every time
    return images


def decode_image_files(paths, image_size, desc, *, allow_resize=False):
    """The image files ``paths`` decoded into one (n, 3, image_size, image_size) uint8 tensor (``desc`` labels
    the progress bar); an image of another size is a ``DataError`` unless ``allow_resize``."""
    images = np.empty((len(paths), image_size, image_size, 3), dtype=np.uint8)
    for i, path in enumerate(tqdm(paths, desc=desc, unit="img", disable=len(paths) < 5000)):
        try:
            with Image.open(path) as image:  # an image too large to decode is named as any unreadable one
                pixels = rgb_pixels(image, path)  # its true 8-bit RGB values, or a DataError naming it
        except (OSError, UnidentifiedImageError, SyntaxError, ValueError, MemoryError,
                Image.DecompressionBombError) as e:
            raise DataError(f"{path}: unreadable image ({type(e).__name__}: {e}); "
                            "replace or restore the file") from None
        if pixels.shape[:2] != (image_size, image_size):
            if not allow_resize:
                raise DataError(f"{path}: image is {pixels.shape[1]}x{pixels.shape[0]}, the data set's are "
                                f"{image_size}x{image_size}; fix the file, or allow resizing (allow_resize=True, "
                                "`vixnb train --allow-resize`)")
            pixels = np.asarray(Image.fromarray(pixels).resize((image_size, image_size), Image.Resampling.BICUBIC))
        images[i] = pixels
    return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous()


def _interleaved_files(folders_by_label, size=None):
    """``{label: folder}`` -> (paths, labels) of the first ``size`` images (all with None): each folder's images
    sorted by name, interleaved across labels (rank 0 of every label in label order, then rank 1, ...). The folders
    are listed by name and a path made only for the images taken (a run of two images of CIFAR-10 no longer builds
    60,000 paths)."""
    entries = [(rank, label, name)
               for label, folder in folders_by_label.items()
               for rank, name in enumerate(sorted(n for n in os.listdir(folder) if is_image(n)))]
    entries.sort(key=lambda entry: entry[:2])
    if size is not None:
        del entries[size:]
    return ([Path(folders_by_label[label]) / name for _, label, name in entries],
            [label for _, label, _ in entries])


def _load_image_folder(split_dir, class_names, image_size, size, *, per_class=None, allow_resize=False):
    """``split_dir/<class>/*`` -> tensors; labels are indices into ``class_names`` (not alphabetical). Every
    class needs its folder; with ``per_class``, each folder must hold that many images."""
    index = {name: i for i, name in enumerate(class_names)}
    folders = class_folders(split_dir)  # hidden folders (.ipynb_checkpoints) are no class's
    unknown = sorted(d.name for d in folders if d.name not in index)
    if unknown:
        raise DataError(f"{split_dir}: unknown class folder(s) {unknown}; expected names from {list(class_names)}")
    missing = [c for c in class_names if not (split_dir / c).is_dir()]
    if missing:
        raise DataError(f"{split_dir}: class folder(s) {', '.join(missing)} missing ({len(class_names)} expected); "
                        "restore them from the data set's archive")
    paths, labels = _interleaved_files({index[d.name]: d for d in folders}, size)
    if per_class is not None:
        counts = {c: 0 for c in class_names}
        for label in labels:
            counts[class_names[label]] += 1
        _check_counts(split_dir, counts, per_class)
    images = _decode_files(paths, image_size, desc=f"decoding {split_dir}", allow_resize=allow_resize,
                           cache_dir=split_dir.parent.parent / DECODED_DIR)
    return images, torch.tensor(labels, dtype=torch.int64)


def _check_counts(split_dir, counts, per_class):
    """A ``DataError`` where a class folder of a full split holds fewer images than ``per_class`` (restore them)
    or more (the extra files named: the newest of the folder, likely the ones added)."""
    short = {c: n for c, n in counts.items() if n < per_class}
    if short:
        shown = ", ".join(f"{c}: {n}" for c, n in list(short.items())[:5])
        raise DataError(f"{split_dir}: {len(short)} class folder(s) do not hold {per_class} images ({shown}); "
                        "restore the missing files from the data set's archive")
    over = {c: n for c, n in counts.items() if n > per_class}
    if over:
        extra = []
        for c, n in list(over.items())[:5]:
            files = sorted((p for p in (split_dir / c).iterdir() if is_image(p)),
                           key=lambda p: (p.lstat().st_mtime_ns, p.name))
            extra += [str(p) for p in files[per_class - n:]]
        shown = ", ".join(f"{c}: {n}" for c, n in list(over.items())[:5])
        raise DataError(f"{split_dir}: {len(over)} class folder(s) hold more than {per_class} images ({shown}); the "
                        f"extra file(s), the newest there: {', '.join(extra[:10])}; move the files that do not belong "
                        "out of the data folder")


# ----- CIFAR-10 / CIFAR-100 -----------------------------------------------------------------------

def _load_cifar(name, root, split, download, size, allow_resize=False):
    folder = root / name
    from torchvision import datasets  # see fingerprint
    torchvision_cls = datasets.CIFAR10 if name == "cifar10" else datasets.CIFAR100
    class_names = CIFAR10_CLASSES if name == "cifar10" else CIFAR100_CLASSES
    image_folder = folder / split
    if image_folder.is_dir():
        per_class = dataset_spec(name).per_class(split) if size is None else None
        return _load_image_folder(image_folder, class_names, image_size=32, size=size, per_class=per_class,
                                  allow_resize=allow_resize)
    torchvision_files = folder / torchvision_cls.base_folder
    if torchvision_files.is_dir() or download:
        try:
            ds = torchvision_cls(root=str(folder), train=split == "train", download=download)
        except (OSError, RuntimeError) as e:  # offline download (URLError is an OSError), bad files
            raise _missing_cifar(name, folder, torchvision_files, image_folder, reason=e,
                                 url=torchvision_cls.url if download else None) from e
        images = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()
        return images, torch.tensor(ds.targets, dtype=torch.int64)
    raise _missing_cifar(name, folder, torchvision_files, image_folder)


def _missing_cifar(name, folder, torchvision_files, image_folder, reason=None, url=None):
    because = f" ({type(reason).__name__}: {reason})" if reason is not None else ""
    failed = (f"Downloading {url} failed{because}; by hand: fetch that file and extract it into {folder} "
              "(torchvision's layout, 1 below).\n") if url else ""
    return DatasetNotFoundError(
        f"{name} not found in {folder}{'' if url else because}.\n{failed}"
        f"Looked for either layout:\n"
        f"  1. torchvision's files: {torchvision_files}\n"
        f"  2. an image-folder copy: {image_folder}/<class>/*.jpg|png (and the other split beside it)\n"
        "To get it: when online, call load_split(..., download=True) (or `vixnb train ... --download`), "
        f"which fetches layout 1; or extract an image-folder copy into {folder}. {_ROOT_HINT}"
    )


# ----- Tiny ImageNet ------------------------------------------------------------------------------

def _load_tiny_imagenet(root, split, download, size, allow_resize=False):
    """Tiny ImageNet from ``root/tiny-imagenet-200``; labels index the wnids of ``wnids.txt`` sorted
    alphabetically; the "test" split is the labelled val folder (the official test set has no labels)."""
    folder = root / "tiny-imagenet-200"
    if not (folder / "wnids.txt").is_file() and download:
        from torchvision.datasets.utils import download_and_extract_archive  # see fingerprint
        try:
            download_and_extract_archive(TINY_IMAGENET_URL, download_root=str(root), md5=TINY_IMAGENET_MD5)
        except (OSError, RuntimeError) as e:
            raise _missing_tiny_imagenet(folder, reason=e, url=TINY_IMAGENET_URL) from e
    if not (folder / "wnids.txt").is_file():
        raise _missing_tiny_imagenet(folder)
    wnids = sorted((folder / "wnids.txt").read_text().split())
    index = {wnid: i for i, wnid in enumerate(wnids)}
    if split == "train":
        paths, labels = _interleaved_files({i: folder / "train" / wnid / "images" for i, wnid in enumerate(wnids)})
    else:
        paths, labels = _tiny_imagenet_val(folder, index)
    images = _decode_files(paths[:size], image_size=64, desc=f"decoding tiny-imagenet {split}",
                           allow_resize=allow_resize, cache_dir=root / DECODED_DIR)
    return images, torch.tensor(labels[:size], dtype=torch.int64)


def _tiny_imagenet_val(folder, index):
    """The val split's image paths and labels from ``val/val_annotations.txt`` (file name, wnid, box)."""
    annotations = folder / "val" / "val_annotations.txt"
    if not annotations.is_file():
        raise DataError(f"{annotations} is missing; re-extract tiny-imagenet-200.zip into {folder.parent}")
    paths, labels = [], []
    for number, line in enumerate(annotations.read_text().splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2 or fields[1] not in index:
            raise DataError(f"{annotations}, line {number}: expected '<file>\\t<wnid>\\t...' with a wnid of "
                            f"wnids.txt, got {line[:60]!r}; re-extract tiny-imagenet-200.zip into {folder.parent}")
        paths.append(folder / "val" / "images" / fields[0])
        labels.append(index[fields[1]])
    return paths, labels


def _missing_tiny_imagenet(folder, reason=None, url=None):
    because = f" ({type(reason).__name__}: {reason})" if reason is not None else ""
    failed = (f"Downloading {url} (checked against MD5 {TINY_IMAGENET_MD5}) failed{because}; by hand: fetch that "
              f"file and extract it into {folder.parent}.\n") if url else ""
    return DatasetNotFoundError(
        f"tiny-imagenet not found in {folder}{'' if url else because}.\n{failed}"
        f"Looked for {folder / 'wnids.txt'} in the standard layout: wnids.txt, train/<wnid>/images/*.JPEG, "
        f"val/images/*.JPEG and val/val_annotations.txt.\n"
        "To get it: when online, call load_split(..., download=True) (or `vixnb train ... --download`), "
        f"which fetches {TINY_IMAGENET_URL}; or extract tiny-imagenet-200.zip into {folder.parent}. {_ROOT_HINT}"
    )


@checked("classes", "train_per_class", "val_per_class", "seed")
def make_tiny_imagenet_miniature(root, *, classes=3, train_per_class=4, val_per_class=2, seed=0):
    """Write a miniature Tiny ImageNet (real 64x64 JPEG files, one of them grayscale) in the standard
    layout under ``root/tiny-imagenet-200`` and return that folder; ``load_split("tiny-imagenet", ...,
    root=root)`` reads it. ``wnids.txt`` is written in reverse order, so loaders must sort it."""
    folder = Path(root) / "tiny-imagenet-200"
    g = torch.Generator().manual_seed(seed)
    wnids = [f"n{9000000 + 17 * i:08d}" for i in range(classes)]
    (folder / "val" / "images").mkdir(parents=True, exist_ok=True)
    (folder / "wnids.txt").write_text("".join(f"{w}\n" for w in reversed(wnids)))

    def write_random_jpeg(path, grayscale=False):
        channels = 1 if grayscale else 3
        base = torch.randint(0, 256, (1, 1, channels), generator=g)
        noise = torch.randint(-40, 41, (64, 64, channels), generator=g)
        pixels = (base + noise).clamp(0, 255).to(torch.uint8).squeeze(-1).numpy()  # (64, 64) is grayscale
        Image.fromarray(pixels).save(path, format="JPEG", quality=90)

    for c, wnid in enumerate(wnids):
        images = folder / "train" / wnid / "images"
        images.mkdir(parents=True, exist_ok=True)
        for i in range(train_per_class):
            grayscale = c == 0 and i == 0
            write_random_jpeg(images / f"{wnid}_{i}.JPEG", grayscale)
    annotations = []
    for i in range(classes * val_per_class):
        wnid = wnids[i % classes]
        write_random_jpeg(folder / "val" / "images" / f"val_{i}.JPEG")
        annotations.append(f"val_{i}.JPEG\t{wnid}\t0\t0\t63\t63\n")
    (folder / "val" / "val_annotations.txt").write_text("".join(annotations))
    return folder
