"""Models check their input: a model built for one image size refuses another, naming both sizes (unless it resizes
images itself), and ``create_model`` refuses a keyword argument it would pass twice."""
import pytest
import torch

from vixnb.models import create_model, list_models
from vixnb.models.registry import FROM_DATASET, SettingError


def test_every_registered_model_refuses_another_image_size_naming_both():
    resizing = []
    for name in list_models():
        with torch.device("meta"):  # the check comes before any computation: no memory, no random numbers
            model = create_model(name)
            if getattr(model, "resize_to", None) is not None:  # documented to resize (224 px ViT-B/16 on CIFAR)
                resizing.append((name, model.resize_to))
                continue
            for bad in ((1, 3, 28, 28), (1, 3, 33, 33), (1, 3, 32, 28), (1, 1, 32, 32)):
                with pytest.raises(ValueError) as e:
                    model(torch.empty(bad))
                assert str(e.value).startswith(
                    f"model {name!r} was built for 32x32 images with 3 channels (cifar10), got {bad[2]}x{bad[3]} "
                    f"with {bad[1]}; resize the images to 32x32 (--allow-resize)"), name
    assert {size for _, size in resizing} <= {224}, resizing
    assert len(resizing) < len(list_models()) // 4  # resizing is the exception


def test_a_model_takes_its_own_size_and_refuses_a_smaller_one():
    torch.manual_seed(0)
    model = create_model("vit", depth=1, dim=32, heads=2, dim_head=16, mlp_dim=64).eval()
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(ValueError, match=r"built for 32x32 images with 3 channels \(cifar10\), got 28x28 with 3"):
        model(torch.randn(2, 3, 28, 28))
    tiny = create_model("vit", dataset="tiny-imagenet", depth=1, dim=32, heads=2, dim_head=16, mlp_dim=64)
    with pytest.raises(ValueError, match=r"built for 64x64 images with 3 channels \(tiny-imagenet\), got 32x32"):
        tiny(torch.randn(1, 3, 32, 32))


@pytest.mark.parametrize("key", FROM_DATASET)
def test_create_model_refuses_what_the_data_set_sets(key):
    with pytest.raises(SettingError) as e:
        create_model("vit", **{key: 0})
    assert str(e.value) == (f"{key}=0: model 'vit' takes its image size, classes and channels from its data set "
                            "(cifar10: 32x32, 10 classes, 3 channels); choose another dataset= instead")
