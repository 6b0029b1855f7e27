"""The `cxv` paper's transformer baselines (its Table 1): ViT-10/4, FNet-10, Hybrid ViN-6/8, Hybrid ViP-6/8, Hybrid
ViLT-6/8, CCT-6/4, CvT-5/4. Exact parameter counts (torchsummary convention) within the paper's "1.3 M", the
paper's MACs (Linear and conv layers only, ``paper_macs``) against its MACs column, CPU training steps."""
from functools import cache

import pytest
import torch

import vixnb
from vixnb import layers
from vixnb.measure import flops, paper_macs
from vixnb.models import model_cfg, model_family, paper_mixers
from vixnb.models.vilt import ViLT
from vixnb.runs.profiles import get_profile
from conftest import seeded_model

LABELS = {"vit_10_4": "ViT-10/4", "fnet_10": "FNet-10", "hybrid_vin_6_8": "Hybrid ViN-6/8",
          "hybrid_vip_6_8": "Hybrid ViP-6/8", "hybrid_vilt_6_8": "Hybrid ViLT-6/8", "cct_6_4": "CCT-6/4",
          "cvt_5_4": "CvT-5/4"}
NAMES = list(LABELS)
FAMILIES = {"vit_10_4": "vix", "fnet_10": "vix", "hybrid_vin_6_8": "vix", "hybrid_vip_6_8": "vix",
            "hybrid_vilt_6_8": "vilt", "cct_6_4": "cct", "cvt_5_4": "cvt"}
PAPER_COUNTS = {"vit_10_4": 1_323_018, "fnet_10": 1_324_298, "hybrid_vin_6_8": 1_282_170,
                "hybrid_vip_6_8": 1_285_194, "hybrid_vilt_6_8": 1_281_866, "cct_6_4": 1_301_323,
                "cvt_5_4": 1_299_722}
# the paper's MACs column (Table 1, G) and what paper_macs counts (CIFAR-10, one image)
TABLE1_GMACS = {"vit_10_4": 1.34, "fnet_10": 1.34, "hybrid_vin_6_8": 1.41, "hybrid_vip_6_8": 1.31,
                "hybrid_vilt_6_8": 0.33, "cct_6_4": 1.32, "cvt_5_4": 1.32}
PAPER_MACS = {"vit_10_4": 1_343_882_496, "fnet_10": 1_343_882_496, "hybrid_vin_6_8": 1_409_090_816,
              "hybrid_vip_6_8": 1_304_397_056, "hybrid_vilt_6_8": 1_303_217_408, "cct_6_4": 1_323_107_584,
              "cvt_5_4": 1_323_959_552}
# Hybrid ViP-6/8 counts 1.304 G (printed 1.31 G: 0.5 % apart); Hybrid ViLT-6/8 1.30 G on its 32 x 32 map, printed
# 0.33 G, which a 16 x 16 map gives (test below; vixnb/models/vilt.py says why the 32 x 32 map is built)
MACS_OFF_TABLE = {"hybrid_vip_6_8", "hybrid_vilt_6_8"}


fresh = seeded_model


@cache
def built(name):
    """The full-size model on the meta device (shapes only): counting and structure need no weights."""
    with torch.device("meta"):
        return vixnb.create_model(name)


@pytest.mark.parametrize("name", NAMES)
def test_paper_count_on_cifar10_is_the_papers_1_3_m(name):
    count = vixnb.count_params(built(name), "paper")
    assert count == PAPER_COUNTS[name]
    assert 1_250_000 <= count < 1_350_000  # "1.3 M"


@pytest.mark.parametrize("name", NAMES)
def test_registered_under_the_cxv_paper(name):
    cfg = model_cfg(name)
    assert (cfg["paper"], cfg["label"], cfg["batch_size"]) == ("cxv", LABELS[name], 32)
    assert model_family(name) == FAMILIES[name]


@pytest.mark.parametrize("name", NAMES)
def test_paper_macs_against_table1(name):
    macs = paper_macs(built(name))
    assert macs == PAPER_MACS[name]
    if name not in MACS_OFF_TABLE:
        assert round(macs / 1e9, 2) == TABLE1_GMACS[name]


def test_paper_macs_leave_out_the_attention_products():
    """ViT-10/4: 1.34 G as printed; the true count adds Q K^T and A V, 2 x 4 heads x 1025^2 x 32 per layer."""
    vit = built("vit_10_4")
    macs = paper_macs(vit)
    assert round(macs / 1e9, 2) == 1.34
    true = flops(vit)["macs"]
    assert macs < true and true - macs == 10 * 2 * 4 * 1025 * 1025 * 32
    # FNet has no matrix product outside its layers (the FFT is not one)
    fnet = built("fnet_10")
    assert paper_macs(fnet) == flops(fnet)["macs"]


def test_paper_macs_reproduce_the_cxv_models_column():
    """The same counter on the paper's own models: CNV-5/4 1.39 G and CPV-5/4 1.37 G as printed (CLTV-5/4: 1.37 G,
    printed 1.38 G)."""
    assert round(paper_macs(built("cnv_5_4")) / 1e9, 2) == 1.39
    assert round(paper_macs(built("cpv_5_4")) / 1e9, 2) == 1.37


def test_paper_macs_count_per_call_in_eval_mode_and_leave_the_model_as_it_was():
    from torch import nn

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3, padding=1, groups=2)
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            x = self.conv(torch.cat([x, x], dim=1))  # (1, 8, 6, 6)
            return self.fc(self.fc.weight.new_ones(1, 3, 8)) + x.mean()

    model = Twice().train()
    state = torch.random.get_rng_state()
    assert paper_macs(model, (2, 6, 6)) == 8 * 36 * (4 // 2) * 9 + 3 * 5 * 8
    assert model.training and next(model.parameters()).device.type == "cpu"
    assert torch.equal(state, torch.random.get_rng_state())
    with pytest.raises(ValueError, match="input_size"):
        paper_macs(model)


def test_hybrid_vilt_macs_printed_are_those_of_a_16_x_16_map():
    with torch.device("meta"):
        half = vixnb.create_model("hybrid_vilt_6_8", stem_stride=2)
    assert vixnb.count_params(half, "paper") == PAPER_COUNTS["hybrid_vilt_6_8"]
    assert round(paper_macs(half) / 1e9, 2) == 0.33


@pytest.mark.parametrize("name", NAMES)
def test_one_training_step_at_smoke_depth(name):
    overrides = get_profile("smoke")["model_overrides"]
    model = fresh(name, **overrides)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([1, 7])
    logits = model(x)
    assert logits.shape == (2, 10)
    torch.nn.functional.cross_entropy(logits, y).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    optimizer.step()
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))


@pytest.mark.parametrize("name", NAMES)
def test_tiny_imagenet_builds(name):
    model = fresh(name, dataset="tiny-imagenet", depth=1).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 200)


def test_tiny_imagenet_geometry():
    """ViT: patches of 2; the others: a first conv of stride 2; every model keeps its 32 x 32 grid."""
    assert fresh("vit_10_4", dataset="tiny-imagenet", depth=1).to_patch_embedding[1].in_features == 12
    for name in ("hybrid_vin_6_8", "hybrid_vip_6_8"):
        assert fresh(name, dataset="tiny-imagenet", depth=1).to_patch_embedding[0].stride == (2, 2)
    assert fresh("hybrid_vilt_6_8", dataset="tiny-imagenet", depth=1).stem[0].stride == (2, 2)
    assert fresh("cct_6_4", dataset="tiny-imagenet", depth=1).tokenizer.convs[0].stride == (2, 2)
    assert fresh("cvt_5_4", dataset="tiny-imagenet", depth=1).stages[0][0].stride == (2, 2)


def test_hybrid_vilt_has_no_class_token_or_position_parameter():
    model = built("hybrid_vilt_6_8")
    assert isinstance(model, ViLT)
    names = [n for n, _ in model.named_parameters()]
    assert not [n for n in names if any(w in n for w in ("cls", "class_token", "pos"))]
    # only the channel norms' g and b are outside the paper count
    assert vixnb.count_params(model, "true") - PAPER_COUNTS["hybrid_vilt_6_8"] == 6 * 2 * 2 * 128


def test_hybrid_vilt_layout():
    model = built("hybrid_vilt_6_8")
    assert [c.out_channels for c in model.stem] == [32, 64, 128] and all(c.stride == (1, 1) for c in model.stem)
    assert len(model.transformer.layers) == 6
    attention = model.transformer.layers[0][0].fn
    assert isinstance(attention, layers.ImageLinearAttention) and attention.heads == 8 and attention.dim_head == 32
    assert all(getattr(attention, p).kernel_size == (1, 1) for p in ("to_q", "to_k", "to_v", "to_out"))
    assert model.transformer.layers[0][1].fn.net[2].p == 0.5


def test_sizes_and_dropout():
    vit = built("vit_10_4")
    assert len(vit.transformer.layers) == 10
    attention, feed_forward = vit.transformer.layers[0][0].fn, vit.transformer.layers[0][1].fn
    assert attention.heads == 4 and attention.to_out[1].p == 0.5 and feed_forward.net[2].p == 0.5
    assert feed_forward.net[0].out_features == 256
    assert built("fnet_10").transformer.layers[0][1].fn.net[0].out_features == 512
    for name in ("hybrid_vin_6_8", "hybrid_vip_6_8"):
        model = built(name)
        mixer = model.transformer.layers[0][0].fn
        assert len(model.transformer.layers) == 6 and mixer.heads == 8 and model.hybrid
    vin = built("hybrid_vin_6_8").transformer.layers[0][0].fn
    assert (vin.num_landmarks, vin.pinv_iterations, vin.res_conv.kernel_size) == (64, 6, (33, 1))
    cct = built("cct_6_4").classifier
    assert len(cct.layers) == 6 and cct.layers[0].linear1.out_features == 512 and cct.dropout.p == 0.5
    assert cct.layers[0].self_attn.attn_dropout == 0.1 and cct.layers[0].dropout1.p == 0.5
    cvt = built("cvt_5_4")
    assert [len(stage[2].layers) for stage in cvt.stages] == [2, 2, 1]
    assert all(stage[0].stride == (1, 1) and stage[0].out_channels == 128 for stage in cvt.stages)
    # dropout= sets the feed-forward's and the mixer's output dropout together
    small = fresh("hybrid_vip_6_8", depth=1, dropout=0.1).transformer.layers[0]
    assert small[0].fn.dropout.p == 0.1 and small[1].fn.net[2].p == 0.1


def test_mixer_options_merge_into_the_base_models_own():
    vin = fresh("hybrid_vin_6_8", depth=1, mixer_options={"pinv_iterations": 3}).transformer.layers[0][0].fn
    assert (vin.num_landmarks, vin.pinv_iterations, vin.to_out[1].p) == (64, 3, 0.5)
    shaped = fresh("vit_10_4", depth=1, mixer="shaped").transformer.layers[0][0].fn
    assert isinstance(shaped, layers.ShapedAttention)
    swapped = fresh("hybrid_vilt_6_8", depth=1, mixer="nystrom", mixer_options={"num_landmarks": 64})
    assert swapped(torch.randn(1, 3, 32, 32)).shape == (1, 10)


def test_cxv_models_stay_out_of_the_vix_papers_mixers():
    assert set(paper_mixers()) == {"vit", "vip", "vil", "vin", "fnet"}
