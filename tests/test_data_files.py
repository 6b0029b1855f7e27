"""Data folders hold images of classes, and nothing else counts: hidden files, notes and other extensions change
neither the data's fingerprint nor the images the loader yields; every image mode PIL opens decodes to its true
8-bit RGB values or is refused, naming the file."""
import io

import numpy as np
import pytest
import torch
from PIL import Image

from vixnb import data
from vixnb.data import CIFAR10_CLASSES, DataError, DatasetSpec

SIZE = 4
rng = np.random.default_rng(0)
GRAY = rng.integers(0, 256, (SIZE, SIZE), dtype=np.uint8)
ALPHA = rng.integers(0, 256, (SIZE, SIZE), dtype=np.uint8)
RGB = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
WIDE = rng.integers(0, 65536, (SIZE, SIZE), dtype=np.uint16)


def _tiff_named_png(array, mode):
    """A file named .png that PIL opens in ``mode`` (TIFF inside: PNG has no 32-bit or float grayscale)."""
    buffer = io.BytesIO()
    Image.fromarray(array, mode=mode).save(buffer, format="TIFF")
    return buffer.getvalue()


def _palette_image():
    image = Image.fromarray(GRAY % 4, mode="L").convert("P")
    image.putpalette([10, 20, 30, 40, 50, 60, 70, 80, 90, 200, 210, 220] + [0] * (768 - 12))
    return image


def _write(path, mode):
    """Write a SIZE x SIZE image that PIL opens in ``mode``; return its true 8-bit RGB values (H, W, 3)."""
    if mode == "L":
        Image.fromarray(GRAY, mode="L").save(path)
        return np.repeat(GRAY[..., None], 3, 2)
    if mode == "LA":
        Image.fromarray(np.stack([GRAY, ALPHA], 2), mode="LA").save(path)
        return np.repeat(GRAY[..., None], 3, 2)  # alpha is dropped, the gray values kept
    if mode == "P":
        _palette_image().save(path)
        palette = np.array([[10, 20, 30], [40, 50, 60], [70, 80, 90], [200, 210, 220]], dtype=np.uint8)
        return palette[GRAY % 4]
    if mode == "RGBA":
        Image.fromarray(np.concatenate([RGB, ALPHA[..., None]], 2), mode="RGBA").save(path)
        return RGB
    if mode == "I;16":
        Image.fromarray(WIDE).save(path)  # a 16-bit grayscale PNG
        return np.repeat(np.round(WIDE.astype(np.float64) * 255 / 65535).astype(np.uint8)[..., None], 3, 2)
    if mode == "I":
        path.write_bytes(_tiff_named_png(WIDE.astype(np.int32) * 7, "I"))
        return None  # refused
    if mode == "F":
        path.write_bytes(_tiff_named_png(GRAY.astype(np.float32) / 255, "F"))
        return None
    if mode == "CMYK":
        Image.fromarray(np.concatenate([RGB, ALPHA[..., None]], 2), mode="CMYK").save(path, quality=100)
        stored = np.asarray(Image.open(path)).astype(np.float64)  # what the JPEG holds, in CMYK
        c, k = stored[..., :3], stored[..., 3:]
        return np.round((255 - c) * (255 - k) / 255).astype(np.uint8)
    raise AssertionError(mode)


@pytest.mark.parametrize("mode", ["L", "LA", "P", "RGBA", "I;16", "I", "F", "CMYK"])
def test_every_image_mode_decodes_to_its_true_values_or_is_refused_by_name(mode, tmp_path):
    path = tmp_path / ("x.jpg" if mode == "CMYK" else "x.png")
    expected = _write(path, mode)
    with Image.open(path) as opened:
        assert opened.mode == mode  # the file really is in that mode
    if expected is None:
        with pytest.raises(DataError) as e:
            data.decode_image_files([path], SIZE, "test")
        assert str(e.value).startswith(f"{path}: image mode {mode} (")
        assert "has no one 8-bit RGB reading; save it as 8-bit RGB or grayscale" in str(e.value)
        return
    decoded = data.decode_image_files([path], SIZE, "test")
    assert decoded.dtype == torch.uint8 and decoded.shape == (1, 3, SIZE, SIZE)
    assert np.array_equal(decoded[0].permute(1, 2, 0).numpy(), expected), mode


@pytest.fixture
def class_folders(tmp_path, monkeypatch):
    """A CIFAR-10 image folder of 1 train and 1 test PNG per class under $VIXNB_DATA, the spec shrunk to it."""
    root = tmp_path / "data"
    for split in ("train", "test"):
        for c, name in enumerate(CIFAR10_CLASSES):
            (root / "cifar10" / split / name).mkdir(parents=True)
            Image.fromarray(np.full((32, 32, 3), 20 * c, dtype=np.uint8)).save(
                root / "cifar10" / split / name / "0.png")
    monkeypatch.setenv("VIXNB_DATA", str(root))
    monkeypatch.setitem(data.DATASETS, "cifar10", DatasetSpec("cifar10", 32, 10, train_images=10, test_images=10))
    return root / "cifar10"


def test_only_the_image_files_of_class_folders_count(class_folders):
    fingerprint = data.source_fingerprint("cifar10")
    images, labels = data.load_split("cifar10", "train")
    # what a person or an operating system leaves in a data folder
    (class_folders / "README.md").write_text("notes")
    (class_folders / "train" / ".DS_Store").write_bytes(b"\0\1")
    (class_folders / "train" / "cat" / "._0.png").write_bytes(b"AppleDouble")  # macOS's resource fork: hidden
    (class_folders / "train" / "cat" / "notes.txt").write_text("odd ones")
    (class_folders / "train" / "cat" / "0.png.bak").write_bytes(b"old")
    (class_folders / "train" / ".ipynb_checkpoints").mkdir()
    (class_folders / "test" / "dog" / ".hidden").mkdir()
    assert data.source_fingerprint("cifar10") == fingerprint
    again, again_labels = data.load_split("cifar10", "train")
    assert torch.equal(again, images) and torch.equal(again_labels, labels)
    # an image file of a class folder does count
    Image.fromarray(np.zeros((32, 32, 3), dtype=np.uint8)).save(class_folders / "test" / "dog" / "1.png")
    assert data.source_fingerprint("cifar10") != fingerprint
    with pytest.raises(DataError, match=r"hold more than 1 images .*dog/1.png"):
        data.load_split("cifar10", "test")
