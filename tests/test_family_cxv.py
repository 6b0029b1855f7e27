"""The CXV family (CNV, CPV, CLTV) of the `cxv` paper: exact parameter counts (torchsummary convention) of the
authors' layout, CPU training steps, and what distinguishes the repository's CLTV from the paper-size one."""
from functools import cache

import pytest
import torch

import vixnb
from vixnb.models import model_cfg
from vixnb.models.cxv import CXV, Transformer2d
from vixnb.runs.profiles import get_profile
from conftest import seeded_model

NAMES = ["cnv_5_4", "cpv_5_4", "cltv_5_4", "cltv_repo"]
PAPER_COUNTS = {"cnv_5_4": 1_343_454, "cpv_5_4": 1_344_714, "cltv_5_4": 1_344_714, "cltv_repo": 3_966_154}
LABELS = {"cnv_5_4": "CNV-5/4", "cpv_5_4": "CPV-5/4", "cltv_5_4": "CLTV-5/4", "cltv_repo": "CLTV-5/4 (repository)"}


fresh = seeded_model


@cache
def built(name):
    return fresh(name)


@pytest.mark.parametrize("name", NAMES)
def test_paper_count_on_cifar10(name):
    assert vixnb.count_params(built(name), "paper") == PAPER_COUNTS[name]


@pytest.mark.parametrize("name", NAMES)
def test_registered_under_the_cxv_paper(name):
    cfg = model_cfg(name)
    assert (cfg["paper"], cfg["label"], cfg["batch_size"]) == ("cxv", LABELS[name], 32)


@pytest.mark.parametrize("name", NAMES)
def test_forward_backward_on_cpu(name):
    model = fresh(name, depth=2)
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([1, 7])
    logits = model(x)
    assert logits.shape == (2, 10)
    torch.nn.functional.cross_entropy(logits, y).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("name", NAMES)
def test_no_class_token_or_position_embedding(name):
    names = [n for n, _ in built(name).named_parameters()]
    assert not [n for n in names if any(w in n for w in ("cls", "class_token", "pos"))]


@pytest.mark.parametrize("name", NAMES)
def test_five_layers_of_dim_128_after_a_3_32_64_stem(name):
    model = built(name)
    assert isinstance(model, CXV) and len(model.layers) == 5
    assert [c.out_channels for c in model.stem] == [32, 64]
    assert sum(isinstance(m, Transformer2d) for m in model.modules()) == 5


def test_cltv_repo_differs_only_in_projection_kernels():
    small, repo = built("cltv_5_4").state_dict(), built("cltv_repo").state_dict()
    assert small.keys() == repo.keys()
    differing = {k for k in small if small[k].shape != repo[k].shape}
    assert differing and all(k.rsplit(".", 2)[-2] in ("to_q", "to_k", "to_v", "to_out") for k in differing)
    assert all(k.endswith(".weight") and small[k].shape[-2:] == (1, 1) and repo[k].shape[-2:] == (3, 3)
               for k in differing)
    assert len(differing) == 4 * 5  # four projections in each of the five layers


def test_smoke_profile_depth_gives_one_layer():
    overrides = get_profile("smoke")["model_overrides"]
    assert overrides == {"depth": 1}
    for name in NAMES:
        model = fresh(name, **overrides)
        assert len(model.layers) == 1
        assert model(torch.randn(1, 3, 32, 32)).shape == (1, 10)


def test_tiny_imagenet_keeps_the_32_x_32_map():
    model = fresh("cnv_5_4", dataset="tiny-imagenet", depth=1)
    assert model.stem[0].stride == (2, 2)
    assert model(torch.randn(1, 3, 64, 64)).shape == (1, 200)
