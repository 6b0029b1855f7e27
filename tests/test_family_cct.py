"""The CCT family (CCT, CCP, CCL, CCN) reproduces the `vix` paper's Tables 3 and 4: counts and Size (MB)."""
from functools import cache

import pytest
import torch

import vixnb
from vixnb import analysis, layers
from vixnb.models import model_cfg, model_entrypoint
from vixnb.models.cct import CCTAttention, DropPath
from vixnb.report.tables import paper_frame

TABLE3, TABLE4 = paper_frame("vix", "table3"), paper_frame("vix", "table4")
NAMES = ["cct", "ccp", "ccl", "ccn"]
DATASETS = {"cifar10": TABLE3, "tiny-imagenet": TABLE4}


@cache
def built(name, dataset):
    """One model per (name, dataset), shared by the counting tests (counting changes no state)."""
    return vixnb.create_model(name, dataset=dataset)


@cache
def paper_count(name, dataset):
    return vixnb.count_params(built(name, dataset), "paper")


@cache
def size_mb_of(name, dataset, path="authors"):
    return vixnb.summary_size_mb(built(name, dataset), path=path)


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("name", NAMES)
def test_paper_counts(name, dataset):
    assert paper_count(name, dataset) == DATASETS[dataset].loc[name, "params"]


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("name", NAMES)
def test_size_mb(name, dataset):
    """Every row reproduces, CCL's (no script of the authors') and Table 4's included."""
    assert round(size_mb_of(name, dataset), 2) == DATASETS[dataset].loc[name, "size_mb"]


def test_tiny_imagenet_adds_only_the_200_class_head():
    for name in NAMES:
        assert paper_count(name, "tiny-imagenet") - paper_count(name, "cifar10") == 24510 == 128 * 190 + 190


def test_identities_between_mixers():
    """Notes section 2: P - N = 1,008, N - L = 115,216 and T = N - 528 (CCT's attention has ViT's modules)."""
    for dataset, table in DATASETS.items():
        ours = {name: paper_count(name, dataset) for name in NAMES}
        for counts in (ours, {name: table.loc[name, "params"] for name in NAMES}):
            assert counts["ccp"] - counts["ccn"] == 1008
            assert counts["ccn"] - counts["ccl"] == 115216
            assert counts["cct"] == counts["ccn"] - 528


def test_true_count_adds_the_position_embedding_and_linformer_projections():
    for name in NAMES:
        extra = 1024 * 128 + (4 * 1024 * 64 if name == "ccl" else 0)
        model = built(name, "cifar10")
        assert vixnb.count_params(model, "true") - paper_count(name, "cifar10") == extra


def test_size_of_cct_depends_on_the_materialised_softmax():
    assert size_mb_of("cct", "cifar10") - size_mb_of("cct", "cifar10", "as-built") == pytest.approx(
        4 * 4 * 1024 * 1024 * 2 * 4 / 1024**2)  # one (4, 1024, 1024) Softmax output per layer


@pytest.mark.parametrize("dataset, shape, classes", [("cifar10", 32, 10), ("tiny-imagenet", 64, 200)])
@pytest.mark.parametrize("name", NAMES)
def test_forward_backward(name, dataset, shape, classes):
    """One layer, in training mode (the full depth runs forward in the counting tests)."""
    model = vixnb.create_model(name, dataset=dataset, depth=1)
    out = model(torch.randn(2, 3, shape, shape))
    assert out.shape == (2, classes)
    out.square().mean().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_geometry_and_options():
    tiny, cifar = built("ccn", "tiny-imagenet"), built("ccn", "cifar10")
    assert tiny.tokenizer.convs[0].stride == (2, 2) and cifar.tokenizer.convs[0].stride == (1, 1)
    assert tiny.classifier.pos_embedding.shape == cifar.classifier.pos_embedding.shape == (1, 1024, 128)
    assert [conv.out_channels for conv in cifar.tokenizer.convs if isinstance(conv, torch.nn.Conv2d)] == [64, 64, 128]
    layer = cifar.classifier.layers[0]
    assert layer.linear1.out_features == 512 and isinstance(layer.self_attn, layers.NystromAttention)
    assert [lay.drop_path.p for lay in cifar.classifier.layers] == pytest.approx([0, 1 / 30, 2 / 30, 0.1])
    assert built("ccl", "cifar10").classifier.layers[0].self_attn.seq_len == 1024
    ccp = built("ccp", "cifar10").classifier.layers[0].self_attn
    assert ccp.to_q.bias is not None and ccp.fast_attention.kernel == "softmax"
    cct = built("cct", "cifar10").classifier.layers[0].self_attn
    assert isinstance(cct, CCTAttention) and cct.attn_dropout == 0.1 and cct.fused
    # overrides as in vix: options merge, another kind starts from none, other keys replace arguments
    ccn = vixnb.create_model("ccn", depth=1, drop_path=0.0, mixer_options={"pinv_iterations": 3})
    mixer = ccn.classifier.layers[0].self_attn
    assert len(ccn.classifier.layers) == 1 and (mixer.num_landmarks, mixer.pinv_iterations) == (64, 3)
    assert isinstance(vixnb.create_model("cct", mixer="fnet", depth=1).classifier.layers[0].self_attn,
                      layers.FourierMixer)


def test_cct_attention_paths_agree_and_dropout_only_in_training():
    with torch.random.fork_rng():  # the test's random draws leave the global generator as it was
        torch.manual_seed(0)
        attn, x = CCTAttention(dim=128, heads=4, dim_head=32, attn_dropout=0.1).eval(), torch.randn(2, 16, 128)
        fused = attn(x)
        with layers.fused_attn(attn, False):
            assert torch.allclose(attn(x), fused, atol=1e-5)
        assert not torch.allclose(attn.train()(x), fused, atol=1e-5)
        drop = DropPath(0.5)
        assert torch.equal(drop.eval()(x), x)
        kept = drop.train()(torch.ones(64, 3, 5)).flatten(1)
    assert set(kept.unique().tolist()) == {0.0, 2.0} and (kept == kept[:, :1]).all()  # whole samples dropped


@pytest.mark.parametrize("name", NAMES)
def test_registered_in_the_family_file(name):
    fn = model_entrypoint(name)
    assert fn.__module__ == "vixnb.models.cct"
    assert model_cfg(name)["label"] == name.upper() and model_cfg(name)["paper"] == "vix"


def test_attention_maps_of_cct():
    maps = analysis.collect_attention_maps(vixnb.create_model("cct", depth=1), torch.randn(1, 3, 32, 32))
    assert len(maps) == 1 and maps[0].shape == (1, 4, 1024, 1024)
