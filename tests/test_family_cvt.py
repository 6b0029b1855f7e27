"""The CvT family (CvT, CvP, CvL, CvN) reproduces the `vix` paper's Tables 3 and 4: parameter counts and
Size (MB) of every row, the identities that tie them to Table 1, and runs at both datasets' shapes."""
from functools import cache

import pytest
import torch

import vixnb
from vixnb import layers
from vixnb.models import model_cfg, paper_mixers
from vixnb.models.cvt import ChannelNorm, ConvAttention, TokenMixer2d
from vixnb.report.tables import paper_frame

TABLE1, TABLE3, TABLE4 = (paper_frame("vix", t) for t in ("table1", "table3", "table4"))
NAMES = ["cvt", "cvp", "cvl", "cvn"]
DATASETS = {"cifar10": TABLE3, "tiny-imagenet": TABLE4}
HEAD_200 = 128 * 190 + 190  # Table 4 - Table 3: the 200-class head's extra weights and biases


def fresh(name, dataset="cifar10", **overrides):
    """A model built under a fixed seed in a forked RNG, so the global RNG is left as it was."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return vixnb.create_model(name, dataset=dataset, **overrides)


@cache
def built(name, dataset="cifar10"):
    """One model per (name, dataset) for the whole file (nothing here changes weights)."""
    return fresh(name, dataset)


@cache
def paper(name, dataset="cifar10"):
    return vixnb.count_params(built(name, dataset), "paper")


@cache
def size_mb(name, dataset="cifar10"):
    return vixnb.summary_size_mb(built(name, dataset))


def test_registered_with_labels():
    for name in NAMES:
        cfg = model_cfg(name)
        assert (cfg["paper"], cfg["label"]) == ("vix", TABLE3.loc[name, "label"])


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("name", NAMES)
def test_params_match_tables_3_and_4(name, dataset):
    assert paper(name, dataset) == DATASETS[dataset].loc[name, "params"]


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("name", NAMES)
def test_size_mb_matches_tables_3_and_4(name, dataset):
    """torchsummary's Estimated Total Size on the authors' path (materialised softmax in CvT)."""
    assert round(size_mb(name, dataset), 2) == DATASETS[dataset].loc[name, "size_mb"]


def test_cvt_size_needs_the_materialised_softmax():
    """CvT's Size counts the nn.Softmax output, (b*h) x 1024 x 1024 counted once per head batch: 8 MB a layer
    (one layer here, for speed)."""
    model = fresh("cvt", depth=(1, 0, 0))
    assert vixnb.summary_size_mb(model) - vixnb.summary_size_mb(model, path="as-built") == pytest.approx(8.0)


def test_table4_is_table3_plus_the_200_class_head():
    for name in NAMES:
        assert TABLE4.loc[name, "params"] - TABLE3.loc[name, "params"] == HEAD_200
        assert paper(name, "tiny-imagenet") - paper(name) == HEAD_200


def test_identities_tie_table3_to_table1():
    """Four mixer layers, as in ViX, so the X-former differences are Table 1's: P - N = 1,008, N - L = 115,216."""
    for table, (p, n, l) in ((TABLE3, ("cvp", "cvn", "cvl")), (TABLE1, ("vip", "vin", "vil"))):
        p, n, l = (table.loc[name, "params"] for name in (p, n, l))
        assert (p - n, n - l) == (1008, 115216)
    assert (paper("cvp") - paper("cvn"), paper("cvn") - paper("cvl")) == (1008, 115216)
    for name in NAMES:
        model = built(name)
        assert sum(isinstance(m, (ConvAttention, TokenMixer2d)) for m in model.modules()) == 4


def test_plain_token_softmax_gives_t_equals_n_minus_528():
    """CvT's own attention is not the token softmax, so T = N - 528 does not hold for the printed CvT; with
    ViT's token softmax (heads of 32) in its place it does."""
    model = fresh("cvt", mixer="softmax", dim_head=32)
    assert vixnb.count_params(model, "paper") == TABLE3.loc["cvn", "params"] - 528
    assert TABLE3.loc["cvt", "params"] != TABLE3.loc["cvn", "params"] - 528


def test_mixers_are_the_vix_mixers_at_the_stage_sequence_length():
    mixers = paper_mixers()
    for name, vix in (("cvp", "vip"), ("cvl", "vil"), ("cvn", "vin")):
        for dataset in DATASETS:
            model = built(name, dataset)
            assert (model.mixer_name, model.mixer_options) == mixers[vix]
            if name == "cvl":  # 32 x 32 tokens in every stage, at both image sizes
                assert [m.seq_len for m in model.modules() if isinstance(m, layers.LinformerAttention)] == [1024] * 4


def test_uncounted_parameters_are_the_channel_norms_and_linformer_projections():
    for name in NAMES:
        model = built(name)
        norms = sum(p.numel() for m in model.modules() if isinstance(m, ChannelNorm) for p in m.parameters())
        proj = 4 * 1024 * 64 if name == "cvl" else 0
        assert norms == 11 * 2 * 128
        assert vixnb.count_params(model, "true") - paper(name) == norms + proj


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("name", NAMES)
def test_forward_backward(name, dataset):
    model = built(name, dataset)
    x = torch.randn(2, *model.default_cfg["input_size"], generator=torch.Generator().manual_seed(1))
    out = model(x)
    assert out.shape == (2, 10 if dataset == "cifar10" else 200)
    out.square().mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    model.zero_grad(set_to_none=True)


def test_conv_attention_fused_equals_materialised_and_its_map():
    attn = ConvAttention(16, heads=2, dim_head=8).eval()
    x = torch.randn(2, 16, 5, 5, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        fused = attn(x)
        with layers.fused_attn(attn, False):
            materialised = attn(x)
        amap = attn.attention_map(x)
    torch.testing.assert_close(fused, materialised, rtol=1e-5, atol=1e-5)
    assert amap.shape == (2, 2, 25, 25)
    torch.testing.assert_close(amap.sum(-1), torch.ones(2, 2, 25))
