"""The PiT family (``vixnb.models.pit``) reproduces the `vix` paper's Table 5 counts and Size (MB) exactly."""
import functools
import inspect

import pytest
import torch

import vixnb
from vixnb import layers
from vixnb.models import model_cfg, model_entrypoint, paper_mixers
from vixnb.models.pit import PiX, Pool
from vixnb.report.tables import paper_frame

TABLE5 = paper_frame("vix", "table5")
PLAIN = {"pit": "PiT", "pin": "PiN", "pip": "PiP"}
NAMES = [*PLAIN, *(f"hybrid_{n}" for n in PLAIN)]
LIKE = {"pit": "vit", "pin": "vin", "pip": "vip"}  # the ViX model whose mixer each uses
# Tiny ImageNet (no paper table): the 200-class head at dim 256 (256 * 190 + 190) and, for the patch
# embedding, 2 x 2 patches (Linear(12, 128): 9 * 128 more weights); the token grid is unchanged.
HEAD_200, PATCH_2 = 256 * 190 + 190, 9 * 128


@functools.cache
def paper_count(name, dataset="cifar10"):
    return vixnb.count_params(vixnb.create_model(name, dataset=dataset), "paper")


def test_the_six_models_are_registered_one_function_each():
    assert vixnb.list_models("pi?") == ["pin", "pip", "pit"]
    assert vixnb.list_models("hybrid_pi?") == ["hybrid_pin", "hybrid_pip", "hybrid_pit"]
    for name in NAMES:
        fn = model_entrypoint(name)
        assert fn.__name__ == name and fn.__module__ == "vixnb.models.pit"
        own = ["key_max"] if name.endswith("pip") else []  # the Performer's keys' stabiliser (a changed default)
        assert list(inspect.signature(fn).parameters) == ["image_size", "num_classes", "channels", *own, "config"]
        plain = name.removeprefix("hybrid_")
        label = PLAIN[plain] if plain == name else f"Hybrid {PLAIN[plain]}"
        assert model_cfg(name)["label"] == label == TABLE5.loc[name, "label"] and model_cfg(name)["paper"] == "vix"


@pytest.mark.parametrize("name", NAMES)
def test_table5_params(name):
    assert paper_count(name) == TABLE5.loc[name, "params"]


@pytest.mark.parametrize("name", NAMES)
def test_table5_size_mb(name):
    """torchsummary's Estimated Total Size with the authors' materialised softmax (PiT's nn.Softmax)."""
    assert round(vixnb.summary_size_mb(vixnb.create_model(name)), 2) == TABLE5.loc[name, "size_mb"]


@pytest.mark.parametrize("name", NAMES)
def test_tiny_imagenet_params(name):
    extra = HEAD_200 + (0 if name.startswith("hybrid_") else PATCH_2)
    assert paper_count(name, "tiny-imagenet") == TABLE5.loc[name, "params"] + extra


def test_table5_identities():
    """P - N = 1,008 and T = N - 528 (as in Tables 1-4), hybrid = plain + 92,736: in the table and in ours."""
    ours = {n: paper_count(n) for n in NAMES}
    for p in (TABLE5["params"].to_dict(), ours):
        for prefix in ("", "hybrid_"):
            assert p[f"{prefix}pip"] - p[f"{prefix}pin"] == 1008
            assert p[f"{prefix}pit"] == p[f"{prefix}pin"] - 528
        for n in PLAIN:
            assert p[f"hybrid_{n}"] - p[n] == 92736


def test_structure_two_stages_and_pool():
    model = vixnb.create_model("pin")
    first, pool, second = model.layers
    assert isinstance(pool, Pool) and len(first.layers) == len(second.layers) == 2
    a1, a2 = first.layers[0][0].fn, second.layers[0][0].fn
    assert (a1.to_qkv.in_features, a1.to_qkv.out_features) == (128, 384)
    assert (a2.to_qkv.in_features, a2.to_qkv.out_features) == (256, 384)  # 4 heads of 32 at dim 256
    assert second.layers[0][1].fn.net[0].out_features == 256  # MLP hidden 256 in both stages
    assert pool.downsample.net[0].groups == 128 and pool.cls_ff.out_features == 256
    assert model.mlp_head[1].in_features == 256


@pytest.mark.parametrize("name", NAMES)
def test_mixers_are_the_vix_models(name):
    """Kind and options come from the ViX model functions (``paper_mixers``), in both stages."""
    model = vixnb.create_model(name)
    kind, options = paper_mixers()[LIKE[name.removeprefix("hybrid_")]]
    assert (model.mixer_name, model.mixer_options) == (kind, options)
    assert all(isinstance(stage.layers[0][0].fn, layers.MIXERS[kind]) for stage in model.layers[::2])


def test_stage_sequence_lengths():
    """1024 pixel tokens + class token, pooled to 16 x 16 + class token: Nystrom pads 257 to 320."""
    model = vixnb.create_model("pin", depth=1)
    seen = []
    hooks = [stage.register_forward_pre_hook(lambda _m, args: seen.append(args[0].shape[1]))
             for stage in model.layers[::2]]
    with torch.no_grad():
        model(torch.rand(1, 3, 32, 32))
    for h in hooks:
        h.remove()
    assert seen == [1025, 257]


@pytest.mark.parametrize("dataset,side,classes", [("cifar10", 32, 10), ("tiny-imagenet", 64, 200)])
@pytest.mark.parametrize("name", NAMES)
def test_forward_backward(name, dataset, side, classes):
    """The full models at batch 2: every parameter gets a gradient."""
    model = vixnb.create_model(name, dataset=dataset)
    out = model(torch.rand(2, 3, side, side))
    assert out.shape == (2, classes)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_tiny_imagenet_geometry():
    """64 px: 2 x 2 non-overlapping patches, or the stem's first conv at stride 2, to the same 32 x 32 grid."""
    plain = vixnb.create_model("pit", dataset="tiny-imagenet")
    unfold = plain.to_patch_embedding[0]
    assert (unfold.kernel_size, unfold.stride) == (2, 2) and plain.to_patch_embedding[2].in_features == 12
    assert plain.pos_embedding.shape == (1, 1025, 128)
    assert vixnb.create_model("hybrid_pip", dataset="tiny-imagenet").to_patch_embedding[0].stride == (2, 2)


def test_fused_and_materialised_paths_agree():
    model = vixnb.create_model("pit", depth=(1, 1)).eval()
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        fused = model(x)
        with layers.fused_attn(model, False):
            materialised = model(x)
    torch.testing.assert_close(fused, materialised, rtol=1e-4, atol=1e-5)
    # each materialised stage-1 layer's nn.Softmax output, 4 x 1025 x 1025 floats counted twice
    grown = vixnb.summary_size_mb(model, path="authors") - vixnb.summary_size_mb(model, path="as-built")
    assert grown > 8 * 4 * 1025**2 / 2**20


def test_overrides():
    small = vixnb.create_model("pip", depth=(1, 1), dropout=0.1, mixer_options={"kernel": "relu"})
    assert [len(s.layers) for s in small.layers[::2]] == [1, 1]
    attention = small.layers[0].layers[0][0].fn
    assert attention.fast_attention.kernel == "relu" and attention.to_q.bias is not None  # merged options
    assert small.layers[0].layers[0][1].fn.net[2].p == 0.1
    assert [len(s.layers) for s in vixnb.create_model("pin", depth=1).layers[::2]] == [1, 1]  # smoke profile
    shaped = vixnb.create_model("pin", mixer="shaped", depth=(1, 1))
    assert isinstance(shaped.layers[2].layers[0][0].fn, layers.ShapedAttention) and shaped.mixer_options == {}
    assert isinstance(vixnb.create_model("pit"), PiX)
