"""Datasets: specs (image size, classes) now; loaders are added below."""
from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    image_size: int
    num_classes: int
    channels: int = 3


DATASETS = {
    "cifar10": DatasetSpec("cifar10", 32, 10),
    "cifar100": DatasetSpec("cifar100", 32, 100),
    "tiny-imagenet": DatasetSpec("tiny-imagenet", 64, 200),
    "synthetic": DatasetSpec("synthetic", 32, 10),
}


def dataset_spec(name):
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(sorted(DATASETS))}") from None
