"""vixnb.analysis.attribution (issue 17): captum's attributions on every family, their agreement, and the
deletion/insertion curves. Small models and images throughout."""
import pytest
import torch
from torch import nn

import vixnb
from vixnb.analysis import attribution as A


def _images(n=2, seed=0):
    return torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


class Quadrant(nn.Module):
    """Reads only the top-left 16 x 16 quadrant of the image."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(3 * 16 * 16, 4)
        with torch.no_grad():
            self.head.weight.copy_(torch.randn(4, 3 * 16 * 16, generator=torch.Generator().manual_seed(1)))

    def forward(self, x):
        return self.head(x[:, :, :16, :16].flatten(1))


def test_integrated_gradients_is_complete():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Tanh(), nn.Flatten(), nn.Linear(4 * 32 * 32, 5)).double()
    x = _images().double()
    from captum.attr import IntegratedGradients

    target = torch.tensor([1, 3])
    attr, delta = IntegratedGradients(model).attribute(x, baselines=torch.zeros_like(x), target=target, n_steps=64,
                                                       return_convergence_delta=True)
    gain = (model(x).gather(1, target[:, None]).squeeze(1)
            - model(torch.zeros_like(x)).gather(1, target[:, None]).squeeze(1))
    torch.testing.assert_close(attr.sum(dim=(1, 2, 3)), gain, atol=1e-3, rtol=1e-3)
    ours = A.attribute(model, x, "integrated_gradients", target=target, n_steps=64)
    assert ours["delta"].abs().max() < 1e-3 and ours["map"].shape == (2, 32, 32)
    assert ours["settings"] == {"baseline": "grey", "n_steps": 64}


def test_occlusion_highlights_the_quadrant_the_model_reads():
    out = A.attribute(Quadrant().double(), _images().double(), "occlusion", window=4, stride=4)["map"]
    inside = out[:, :16, :16].abs()
    assert inside.min() > 0
    # outside the quadrant an occlusion changes nothing; only the rounding of a batched matmul remains (its kernel
    # depends on the batch size, so exactly 0 holds on some machines only)
    assert out[:, 16:, :].abs().max() < 1e-9 * inside.max() and out[:, :, 16:].abs().max() < 1e-9 * inside.max()


@pytest.mark.parametrize("name, layer, how", [("resnet18_cifar", "layer4", "conv"),
                                              ("hybrid_vit", "to_patch_embedding.2", "conv"),
                                              ("cpv_5_4", "stem.1", "conv"), ("cct", "tokenizer.convs.6", "conv"),
                                              ("vit", "transformer.layers.0.0.fn", "tokens"),
                                              ("vit_small_simplified", "blocks.0.mixer", "tokens"),
                                              ("cvt", "stages.2.2.layers.0.0.fn", "tokens")])
def test_grad_cam_reads_the_stem_or_the_tokens_and_gives_image_sized_maps(name, layer, how):
    model = vixnb.create_model(name) if name == "resnet18_cifar" else vixnb.create_model(name, depth=1)
    assert A.gradcam_layer(model) == (layer, how)
    hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    out = A.attribute(model, _images(), "grad_cam")
    assert out["map"].shape == (2, 32, 32) and (out["map"] >= 0).all()
    assert sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()) == hooks  # tap gone
    assert out["settings"] == {"layer": layer, "read": how}


@pytest.mark.parametrize("name", ["vit", "vit_small_vanilla"])
def test_grad_cam_on_a_class_token_model_is_not_zero(name):
    # the head reads the class token alone: a tap on the transformer's output would get no gradient at the
    # patches, and Grad-CAM would be zero everywhere
    torch.manual_seed(0)
    model = vixnb.create_model(name, depth=2)
    out = A.attribute(model, _images(), "grad_cam")
    assert (out["map"].flatten(1).amax(dim=1) > 0).all()


def test_tokens_to_grid_round_trips_and_rejects_a_non_square_count():
    tokens = torch.randn(2, 17, 8)
    tap = A.TokensToGrid(cls_tokens=1)
    grid = tap(tokens)
    assert grid.shape == (2, 8, 4, 4) and torch.equal(grid[0, :, 0, 1], tokens[0, 2])
    assert torch.equal(tap.tokens(grid), tokens)
    plain = A.TokensToGrid(cls_tokens=0)
    assert torch.equal(plain.tokens(plain(tokens[:, 1:])), tokens[:, 1:])
    with pytest.raises(ValueError, match="do not form a square grid"):
        plain(tokens)


def test_noise_tunnel_leaves_the_global_rng_alone():
    model, x = Quadrant(), _images()  # building the model draws from the global RNG; attributing must not
    before = torch.random.get_rng_state()
    out = A.attribute(model, x, "integrated_gradients", n_steps=4,
                      noise_tunnel={"nt_samples": 2, "stdevs": 0.1, "nt_type": "smoothgrad"})
    assert torch.equal(torch.random.get_rng_state(), before) and out["delta"] is None
    again = A.attribute(model, x, "integrated_gradients", n_steps=4,
                        noise_tunnel={"nt_samples": 2, "stdevs": 0.1, "nt_type": "smoothgrad"})
    assert torch.equal(out["map"], again["map"])  # the same seed, the same noise


def test_rank_agreement_and_deletion_insertion_on_a_hand_built_case():
    maps = {"a": torch.arange(16.).view(1, 4, 4), "b": -torch.arange(16.).view(1, 4, 4)}
    agreement = A.rank_agreement(maps)
    assert agreement["methods"] == ["a", "b"]
    assert agreement["matrix"][0][0] == pytest.approx(1) and agreement["matrix"][0][1] == pytest.approx(-1)

    class Brightness(nn.Module):  # class 1's logit is the sum of the top-left quadrant, class 0's is 0
        def forward(self, x):
            s = x[:, :, :16, :16].sum(dim=(1, 2, 3))
            return torch.stack((torch.zeros_like(s), s), dim=1)

    x = torch.ones(1, 3, 32, 32)
    inside = torch.zeros(1, 32, 32)
    inside[:, :16, :16] = 1
    curves = A.deletion_insertion(Brightness(), x,
                                  inside + 1e-3 * torch.rand(1, 32, 32, generator=torch.Generator().manual_seed(0)),
                                  steps=4, target=torch.tensor([1]))
    deletion, insertion = curves["deletion"][0], curves["insertion"][0]
    assert torch.equal(curves["fractions"], torch.linspace(0, 1, 5))
    assert deletion[0] > 0.99 and deletion[1] == pytest.approx(0.5)  # the quadrant is a quarter: gone at 0.25
    assert insertion[0] == pytest.approx(0.5) and insertion[1] > 0.99
    assert (deletion[1:] == deletion[-1]).all() and 0 <= curves["deletion_auc"][0] <= curves["insertion_auc"][0] <= 1


def test_attribution_measures_is_json_ready():
    import json

    model = vixnb.create_model("vit", depth=1)
    out = A.attribution_measures(model, _images(), ig_steps=4, window=8, stride=8, steps=4, show=1)
    assert set(out["methods"]) == set(A.METHODS) and len(out["target"]) == 2
    ig = out["methods"]["integrated_gradients"]
    assert len(ig["maps"]) == 1 and max(max(row) for row in ig["maps"][0]) == 1
    assert len(ig["deletion"]) == 2 and len(ig["deletion"][0]) == 5 and len(ig["delta"]) == 2
    assert out["methods"]["grad_cam"]["delta"] is None
    json.dumps(out)
    with pytest.raises(ValueError, match="method must be one of"):
        A.attribute(model, _images(), "lime")
