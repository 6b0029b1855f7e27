"""Checks of ``vixnb.analysis``'s maps: collecting maps from every family, what each family's map is (every mixer's
own ``map_description``), rollout, the measures of maps (exact values on hand-made maps), the exact softmax map and its
Performer and Nystrom approximations, and the randomisation sanity check. CPU, small shapes."""
import math

import pytest
import torch
from torch import nn

import vixnb
from vixnb import analysis as M
from vixnb import layers as A
from vixnb.analysis import maps as maps_module
from vixnb.layers import maps as declared_maps
from vixnb.analysis import records
from vixnb.analysis import sanity_checks
from vixnb.layers.performer import FEATURES, FastAttention, orthogonal_gaussian

# the mixer tests' shapes, input and (autouse) seed
from test_attention import DH, DIM, HEADS, N, _seed, x_input  # noqa: F401,E402


def tiny_vit(depth=2, mixer="softmax", **options):
    from vixnb.models import ViX

    return ViX(image_size=8, num_classes=10, mixer=mixer, mixer_options=options, dim=DIM, depth=depth, heads=HEADS,
               dim_head=DH, mlp_dim=64)


def uniform(n, b=1, h=2):
    return torch.full((b, h, n, n), 1.0 / n)


def identity(n, b=1, h=2):
    return torch.eye(n).expand(b, h, n, n)


# ---------------------------------------------------------------- rollout


def test_attention_rollout_by_hand():
    a = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    one = M.attention_rollout([a[None, None]])  # (A + I) / 2
    torch.testing.assert_close(one, torch.tensor([[[0.75, 0.25], [0.25, 0.75]]]))
    two = M.attention_rollout([a[None, None]] * 2)
    torch.testing.assert_close(two, torch.tensor([[[0.625, 0.375], [0.375, 0.625]]]))
    plain = M.attention_rollout([a[None, None]] * 2, add_residual=False)
    torch.testing.assert_close(plain, a[None])
    # head fusion: heads [[1, 0], [0, 1]] and [[0, 1], [1, 0]]
    h = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])[None]
    torch.testing.assert_close(M.attention_rollout([h], add_residual=False), torch.full((1, 2, 2), 0.5))
    torch.testing.assert_close(M.attention_rollout([h], head_fusion="max", add_residual=False),
                               torch.full((1, 2, 2), 0.5))
    torch.testing.assert_close(M.attention_rollout([h], head_fusion="min"), torch.eye(2)[None])  # min: 0, + I
    # order: later layers multiply on the left
    l1 = torch.tensor([[1.0, 0.0], [1.0, 0.0]])[None]
    l2 = torch.tensor([[0.0, 1.0], [0.0, 1.0]])[None]
    torch.testing.assert_close(M.attention_rollout([l1, l2], add_residual=False), (l2 @ l1))


def test_attention_rollout_discard_keeps_the_diagonal():
    a = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.05, 0.15, 0.8]])[None]
    out = M.attention_rollout([a], discard_ratio=0.34, add_residual=False)  # drops the 3 smallest off-diagonal
    expected = torch.tensor([[0.7, 0.2, 0.0], [0.0, 0.6, 0.3], [0.0, 0.15, 0.8]])
    torch.testing.assert_close(out[0], expected / expected.sum(-1, keepdim=True))
    with pytest.raises(ValueError):
        M.attention_rollout([a], head_fusion="median")


@pytest.mark.parametrize("residual", [True, False])
def test_rollout_of_identity_maps_is_the_identity(residual):
    n = 17  # a class token and a 4 x 4 grid
    maps = {f"layer{i}": identity(n) for i in range(3)}
    torch.testing.assert_close(M.attention_rollout(maps.values(), add_residual=residual), torch.eye(n)[None])
    # the class token attends only to itself: nothing of it reaches the patches
    torch.testing.assert_close(M.rollout(maps, residual=residual), torch.zeros(1, 4, 4))
    # the mean row of the identity: every token 1/n
    torch.testing.assert_close(M.rollout([identity(16)] * 2, start="mean", residual=residual),
                               torch.full((1, 4, 4), 1 / 16))


def test_rollout_reads_the_class_token_row_on_the_grid():
    n = 5  # class token + 2 x 2 grid; the class token looks only at patch (1, 0), token 3
    a = torch.eye(n)
    a[0] = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0])
    out = M.rollout([a[None, None]], residual=False)
    torch.testing.assert_close(out, torch.tensor([[[0.0, 0.0], [1.0, 0.0]]]))
    out = M.rollout([a[None, None]], residual=True)  # (A + I) / 2: half stays on the class token
    torch.testing.assert_close(out, torch.tensor([[[0.0, 0.0], [0.5, 0.0]]]))


def test_rollout_takes_the_trailing_layers_that_share_the_last_n_and_checks_the_grid():
    first = torch.softmax(torch.randn(1, 2, 17, 17), dim=-1)  # a first stage of 17 tokens
    last = torch.softmax(torch.randn(1, 2, 5, 5), dim=-1)
    torch.testing.assert_close(M.rollout([first, last, last]), M.rollout([last, last]))
    assert M.centre_query([first, last]).shape == (1, 1, 2, 2)
    with pytest.raises(ValueError, match="square grid"):
        M.rollout([uniform(7)], start="mean")
    with pytest.raises(ValueError, match="square grid"):
        M.rollout([uniform(7)], start="cls")
    with pytest.raises(ValueError, match="start"):
        M.rollout([uniform(5)], start="first")


# ---------------------------------------------------------------- measures


def test_uniform_maps_have_entropy_one_and_prominence_one():
    maps = {"a": uniform(17, b=2, h=3), "b": uniform(17, b=2, h=3)}
    torch.testing.assert_close(M.row_entropy(maps), torch.ones(2, 3))
    torch.testing.assert_close(M.diagonal_prominence(maps), torch.ones(2, 3))
    torch.testing.assert_close(M.row_entropy([identity(17)]), torch.zeros(1, 2))
    torch.testing.assert_close(M.diagonal_prominence([identity(17)]), torch.full((1, 2), 17.0))
    # rows are made distributions by absolute value: a negative entry counts as its magnitude
    signed = uniform(4).clone()
    signed[..., 0] *= -1
    torch.testing.assert_close(M.row_entropy([signed]), torch.ones(1, 2))


def test_attention_distance_by_hand():
    # 2 x 2 grid over a 4-pixel image: patch centres (1, 1), (1, 3), (3, 1), (3, 3), 2 pixels apart
    torch.testing.assert_close(M.attention_distance([identity(4)], image_size=4), torch.zeros(1, 2))
    uniform_distance = (0 + 2 + 2 + 2 * math.sqrt(2)) / 4
    torch.testing.assert_close(M.attention_distance([uniform(4)], image_size=4), torch.full((1, 2), uniform_distance))
    # each patch looks at its horizontal neighbour: 2 pixels, whatever the class token does
    a = torch.zeros(5, 5)
    a[0, 0] = 1.0
    for i, j in [(1, 2), (2, 1), (3, 4), (4, 3)]:
        a[i, 0], a[i, j] = 0.5, 0.5  # half on the class token: dropped, the row renormalised
    torch.testing.assert_close(M.attention_distance([a[None, None]], image_size=4), torch.full((1, 1), 2.0))
    torch.testing.assert_close(M.attention_distance([a[None, None]], image_size=4, cls_tokens=1),
                               torch.full((1, 1), 2.0))
    # a grid of 32 px over 8 x 8 patches: uniform attention averages to the mean distance of the grid's centres
    d = M.attention_distance([uniform(64)], image_size=32)
    assert 15 < d[0, 0] < 18


def test_centre_query_is_the_centre_patch_row():
    maps = [identity(17), uniform(17)]  # class token + 4 x 4 grid; the centre cell is (2, 2)
    out = M.centre_query(maps)
    assert out.shape == (1, 2, 4, 4)
    expected = torch.zeros(4, 4)
    expected[2, 2] = 1.0
    torch.testing.assert_close(out[0, 0], expected)
    torch.testing.assert_close(out[0, 1], torch.full((4, 4), 1 / 17))
    assert M.centre_query([identity(16)])[0, 0, 2, 2] == 1.0  # no class token


def test_map_distance():
    a = torch.softmax(torch.randn(2, 3, 10, 10), dim=-1)
    assert M.map_distance(a, a) == {"tv": 0.0, "frobenius": 0.0}
    one_hot = torch.eye(4)[None, None]
    d = M.map_distance(uniform(4, h=1), one_hot)  # each row: 0.5 (3/4 + 3 x 1/4) = 3/4
    assert d["tv"] == pytest.approx(0.75)
    assert d["frobenius"] == pytest.approx(math.sqrt(4 * (0.75**2 + 3 * 0.25**2)) / 2)


# ---------------------------------------------------------------- exact softmax and approximations


def test_exact_softmax_map_of_softmax_attention_is_its_attention_map():
    m = A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH)
    x = x_input()
    torch.testing.assert_close(M.exact_softmax_map(m, x), m.attention_map(x))
    shaped = A.build("shaped", dim=DIM, heads=HEADS, dim_head=DH)
    torch.testing.assert_close(M.exact_softmax_map(shaped, x), shaped.softmax_map(x))


def test_exact_softmax_map_of_the_approximations_uses_their_own_queries_and_keys():
    x = x_input()
    soft = A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH)
    reference = soft.attention_map(x)
    nys = A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=16)  # 65 tokens: padded to 80
    nys.load_state_dict(soft.state_dict(), strict=False)  # same to_qkv
    torch.testing.assert_close(M.exact_softmax_map(nys, x), reference)
    lin = A.build("linformer", dim=DIM, heads=HEADS, dim_head=DH, seq_len=N, k=16, one_kv_head=False)
    q, k, _ = soft.to_qkv.weight.chunk(3)
    lin.to_q.weight.data.copy_(q)
    lin.to_k.weight.data.copy_(k)
    torch.testing.assert_close(M.exact_softmax_map(lin, x), reference)
    perf = A.build("performer", dim=DIM, heads=HEADS, dim_head=DH, qkv_bias=False)
    perf.to_q.weight.data.copy_(q)
    perf.to_k.weight.data.copy_(k)
    torch.testing.assert_close(M.exact_softmax_map(perf, x), reference)
    with pytest.raises(TypeError, match="no queries and keys"):
        M.exact_softmax_map(A.build("fnet", dim=DIM, heads=HEADS, dim_head=DH), x)


def test_nystrom_map_with_a_landmark_per_token_is_the_exact_softmax():
    q, k = torch.randn(2, 3, 48, 16) * 2, torch.randn(2, 3, 48, 16) * 2
    exact = torch.softmax(q @ k.transpose(-1, -2) / 4, dim=-1)
    d = M.map_distance(M.nystrom_map(q, k, 48, pinv_iterations=20), exact)
    assert d["tv"] < 1e-4 and d["frobenius"] < 1e-4, d
    torch.testing.assert_close(M.nystrom_map(q, k, 48, pinv_iterations=20), exact, atol=1e-4, rtol=0)


def test_nystrom_map_is_the_mixers_map():
    nys = A.build("nystrom", dim=DIM, heads=HEADS, dim_head=DH, num_landmarks=16)  # 65 tokens, front-padded to 80
    x = x_input()
    q, k, _ = A.split_heads(*nys.to_qkv(x).chunk(3, dim=-1), heads=HEADS)
    torch.testing.assert_close(M.nystrom_map(q, k, 16), nys.attention_map(x))


def test_performer_map_is_fast_attentions_map_and_leaves_the_global_rng_alone():
    q, k = torch.randn(1, 8, 64, 16) * 0.7, torch.randn(1, 8, 64, 16) * 0.7
    state = torch.get_rng_state()
    got = M.performer_map(q, k, 32, seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    torch.testing.assert_close(M.performer_map(q, k, 32, seed=3), got)  # the seed fixes the features
    fast = FastAttention(dim_head=16, nb_features=32)
    fast.projection.copy_(orthogonal_gaussian(32, 16, generator=torch.Generator().manual_seed(3)))
    torch.testing.assert_close(got, fast.attention_map(q, k))
    exact = torch.softmax(q @ k.transpose(-1, -2) / 4, dim=-1)
    few, many = (M.map_distance(M.performer_map(q, k, m, seed=0), exact) for m in (16, 256))
    assert many["tv"] < few["tv"] and many["frobenius"] < few["frobenius"], (few, many)


def test_approximation_errors_of_a_model():
    model = tiny_vit(depth=2)  # 65 tokens
    out = M.approximation_errors(model, torch.randn(2, 3, 8, 8), features=(16, 256), landmarks=(16, 65, 128))
    assert out["layers"] == 2 and out["tokens"] == [65, 65]
    assert set(out["performer"]) == {16, 256} and set(out["nystrom"]) == {16, 65}
    assert out["omitted"] == {"nystrom": [128]}
    assert out["performer"][256]["tv"] < out["performer"][16]["tv"]
    assert all(0 <= v["tv"] <= 1 for v in (*out["performer"].values(), *out["nystrom"].values()))
    with pytest.raises(ValueError, match="no SoftmaxAttention"):
        M.approximation_errors(tiny_vit(depth=1, mixer="performer"), torch.randn(1, 3, 8, 8))


# ---------------------------------------------------------------- every family

# name, overrides, whether its rows sum to 1 (and how closely), where its rollout starts
FAMILIES = [
    ("vit", {}, 1e-5, "cls"),
    ("hybrid_vit", {}, 1e-5, "cls"),
    ("vip", {}, 1e-4, "cls"),
    ("vil", {}, None, "cls"),  # the lifted n x k map: rows need not sum to 1
    ("vin", {}, None, "cls"),  # 1025 tokens front-padded to 1088: rows sum to less than 1
    ("levit", {}, 1e-5, "mean"),
    ("cct", {}, 1e-5, "mean"),
    ("cvt", {}, 1e-5, "mean"),
    ("pit", {}, 1e-5, "cls"),
    ("cnv_5_4", {}, 1e-2, "mean"),  # 1024 tokens, no padding; 6 pseudo-inverse iterations
    ("cpv_5_4", {}, 1e-4, "mean"),
    ("cltv_5_4", {}, 1e-4, "mean"),
    ("vit_small_vanilla", {}, 1e-5, "cls"),
    ("vit_small_simplified", {}, 1e-5, "cls"),  # alpha + beta = 1 at the uniform init
]


@pytest.mark.parametrize("name,overrides,rows,start", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_attention_maps_of_every_family(name, overrides, rows, start):
    model = vixnb.create_model(name, depth=1, **overrides)
    described = M.map_description(model)
    assert described.startswith(f"{name}: ") and not described.startswith("no attention map")
    maps = M.attention_maps(model, torch.randn(1, 3, 32, 32))
    modules = dict(model.named_modules())
    assert maps and all(key in modules for key in maps)
    for key, a in maps.items():
        assert a.dim() == 4 and a.shape[0] == 1 and a.shape[-1] == a.shape[-2]
        mechanism, declared = maps_module.mechanism(modules[key])
        assert f"of {mechanism} ({declared})" in described  # the mixer's own map_description
        if rows is not None:
            torch.testing.assert_close(a.sum(dim=-1), torch.ones(a.shape[:-1]), atol=rows, rtol=0)
    side = math.isqrt(list(maps.values())[-1].shape[-1])
    assert M.rollout(maps, start=start, residual=M.has_skip(model)).shape == (1, side, side)
    assert M.row_entropy(maps).shape == M.attention_distance(maps, image_size=32).shape == (len(maps), a.shape[1])


@pytest.mark.parametrize("name,why", [("fnet", "Fourier"), ("mlp_mixer", "token MLP"),
                                      ("resnet18_cifar", "convolution"), ("convmixer_16", "convolution")])
def test_models_without_a_map_say_why(name, why):
    model = vixnb.create_model(name, depth=1)
    described = M.map_description(model)
    assert described.startswith("no attention map") and why in described
    with pytest.raises(ValueError) as error:
        M.attention_maps(model, torch.randn(1, 3, 32, 32))
    assert str(error.value) == described
    assert model.training


def test_map_description_never_raises():
    assert "could not be described" in M.map_description(object())


def test_attention_maps_keys_repeated_calls_and_restores_the_mode():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH)
            self.other = A.build("linear", dim=DIM, heads=HEADS, dim_head=DH)

        def forward(self, x):
            x = self.mix(x) + x
            return self.mix(self.other(x) + x)

    model = Twice()
    x = x_input()
    maps = M.attention_maps(model, x)
    assert list(maps) == ["mix", "other", "mix#2"]
    torch.testing.assert_close(maps["mix"], model.mix.attention_map(x))
    assert model.training
    assert "2 layers of" not in M.map_description(model) and "SoftmaxAttention" in M.map_description(model)


def test_has_skip():
    assert not M.has_skip(vixnb.create_model("vit_small_simplified", depth=1))
    assert M.has_skip(vixnb.create_model("vit", depth=1))
    assert M.has_skip(vixnb.create_model("vit_small_vanilla", depth=1))


@pytest.fixture(scope="module")
def registered():
    """Every registered model, built on the meta device (the caller's RNG untouched)."""
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        return {name: vixnb.create_model(name) for name in vixnb.list_models()}


def test_every_mixer_class_declares_its_map(registered):
    """Every class with an ``attention_map`` in a registered model or among ``layers.MIXERS`` says on itself what
    its map is (``map_description``, not inherited), or is a wrapper (a Sequential) of one mixer that does."""
    found = {}
    with torch.device("meta"):
        built = [A.build(mixer, dim=DIM, heads=HEADS, dim_head=DH, seq_len=N) for mixer in A.list_mixers()]
    for model in [*registered.values(), *built]:
        for module in model.modules():
            if declared_maps.has_attention_map(module):
                found.setdefault(type(module), module)
    assert {"SoftmaxAttention", "CCTAttention", "OneMapAttention", "LeViTAttention", "ConvAttention",
            "PerformerAttention", "FastAttention", "LinformerAttention", "NystromAttention", "LinearAttention",
            "ImageLinearAttention", "ShapedAttention", "FourierMixer", "TokenMLP", "TokenMixer2d"} <= {
        c.__name__ for c in found}
    for cls, module in found.items():
        if "map_description" in vars(cls):
            assert isinstance(module.map_description, str) and module.map_description, cls.__name__
            # the declaration code reads and the words a reader reads agree (``draws_map``, ``maps.NO_MAP``)
            assert declared_maps.draws_map(module) != module.map_description.startswith(declared_maps.NO_MAP), \
                cls.__name__
        else:  # a wrapper: its map is its one mixer's
            assert isinstance(module, nn.Sequential), f"{cls.__name__} does not declare map_description"
            inner = [m for m in module if declared_maps.has_attention_map(m)]
            assert len(inner) == 1 and "map_description" in vars(type(inner[0])), cls.__name__


def test_map_description_of_every_registered_model_is_its_mixers_declarations(registered):
    for name, model in registered.items():
        described = M.map_description(model)
        mappers = declared_maps.outermost_mappers(model)
        declared = [maps_module.mechanism(m)[1] for _, m in mappers]
        assert all(declared), name
        if not mappers:
            assert described.startswith(f"no attention map: {name} has no attention layer (it mixes by "), described
        elif all(d.startswith("no attention map") for d in declared):
            assert described == f"{declared[0]} ({name})"
        else:
            assert described.startswith(f"{name}: ") and all(d in described for d in declared), described
    assert "wavelet" in M.map_description(registered["wavemix_5"])


def test_attention_maps_and_map_description_use_what_a_new_mixer_declares():
    """A mixer unknown to ``analysis`` is described by its own ``map_description``; one declaring no map has none."""

    class Keep(nn.Module):
        map_description = "each token keeps itself (the identity)"

        def attention_map(self, x):
            return torch.eye(x.shape[1]).expand(x.shape[0], 1, -1, -1)

        def forward(self, x):
            return x

    class Opaque(nn.Module):
        draws_map = False
        map_description = "no attention map: an opaque operator"

        def attention_map(self, x):
            raise NotImplementedError(self.map_description)

        def forward(self, x):
            return x

    class Stack(nn.Module):
        def __init__(self, mixer):
            super().__init__()
            self.mixers = nn.ModuleList([mixer(), mixer()])

        def forward(self, x):
            for m in self.mixers:
                x = m(x) + x
            return x

    x = x_input()
    model = Stack(Keep)
    assert M.map_description(model) == "Stack: 2 layers of Keep (each token keeps itself (the identity))"
    maps = M.attention_maps(model, x)
    assert list(maps) == ["mixers.0", "mixers.1"] and torch.equal(maps["mixers.1"], Keep().attention_map(x))
    opaque = Stack(Opaque)
    assert M.map_description(opaque) == "no attention map: an opaque operator (Stack)"
    with pytest.raises(ValueError, match="an opaque operator"):
        M.attention_maps(opaque, x)


def test_performer_map_description_names_its_kernel():
    for kernel, phi in FEATURES.items():
        described = M.map_description(tiny_vit(depth=1, mixer="performer", kernel=kernel))
        assert f"PerformerAttention (Performer's phi(Q) phi(K)^T with rows normalised to sum 1 ({phi});" in described


# ---------------------------------------------------------------- collecting maps


def test_collect_attention_maps_from_a_vix_model():
    from vixnb.models import ViX

    model = ViX(image_size=8, num_classes=10, mixer="softmax", dim=DIM, depth=3, heads=HEADS, dim_head=DH, mlp_dim=64)
    images = torch.randn(2, 3, 8, 8)
    maps = M.collect_attention_maps(model, images)
    assert len(maps) == 3 and all(m.shape == (2, HEADS, 65, 65) for m in maps)
    with torch.no_grad():
        first = model.transformer.layers[0][0]
        expected = first.fn.attention_map(first.norm(model.tokens(images)))
    torch.testing.assert_close(maps[0], expected)
    rollout = M.attention_rollout(maps)
    torch.testing.assert_close(rollout.sum(-1), torch.ones(2, 65))
    assert M.class_token_map(rollout).shape == (2, 8, 8)
    assert model.training  # mode restored
    lin = ViX(image_size=8, num_classes=10, mixer="linformer", mixer_options={"k": 16}, dim=DIM, depth=2, heads=HEADS,
              dim_head=DH, mlp_dim=64)
    assert [m.shape for m in M.collect_attention_maps(lin, images)] == [(2, HEADS, 65, 65)] * 2


def test_collect_attention_maps_finds_mixers_by_type_in_call_order():
    """No layout assumed: mixers in a ModuleDict, registered in one order and called in the other."""

    class TwoMixers(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleDict({
                "second": A.build("softmax", dim=DIM, heads=HEADS, dim_head=DH),
                "first": A.build("linformer", dim=DIM, heads=HEADS, dim_head=DH, seq_len=N, k=16),
            })

        def forward(self, x):
            x = self.blocks["first"](x) + x
            return self.blocks["second"](x) + x

    model = TwoMixers()
    x = x_input()
    maps = M.collect_attention_maps(model, x)
    with torch.no_grad():
        first = model.blocks["first"]
        expected = [first.attention_map(x), model.blocks["second"].attention_map(first(x) + x)]
    assert len(maps) == 2
    for got, want in zip(maps, expected):
        torch.testing.assert_close(got, want)
    assert list(M.attention_maps(model, x)) == ["blocks.first", "blocks.second"]
    only = M.collect_attention_maps(model, x, types=A.SoftmaxAttention)
    torch.testing.assert_close(only[0], expected[1])
    with pytest.raises(ValueError, match="no module of type"):
        M.collect_attention_maps(nn.Linear(DIM, DIM), x)


@pytest.mark.parametrize("mixer,options,hybrid", [
    ("performer", {}, False), ("nystrom", {"num_landmarks": 16}, True), ("shaped", {}, False), ("linear", {}, True)])
def test_collect_attention_maps_from_every_family(mixer, options, hybrid):
    from vixnb.models import ViX

    model = ViX(image_size=8, num_classes=10, mixer=mixer, mixer_options=options, hybrid=hybrid, dim=DIM, depth=2,
                heads=HEADS, dim_head=DH, mlp_dim=64)
    maps = M.collect_attention_maps(model, torch.randn(2, 3, 8, 8))
    assert [m.shape for m in maps] == [(2, HEADS, 65, 65)] * 2
    assert M.class_token_map(M.attention_rollout(maps)).shape == (2, 8, 8)


def test_collect_attention_maps_from_mixers_without_a_map_says_so():
    from vixnb.models import MLPMixer, ViX

    fnet = ViX(image_size=8, num_classes=10, mixer="fnet", dim=DIM, depth=1, heads=HEADS, dim_head=DH, mlp_dim=64)
    mixer = MLPMixer(image_size=8, num_classes=10, dim=DIM, depth=1)
    for model in (fnet, mixer):
        with pytest.raises(NotImplementedError, match="no attention map"):
            M.collect_attention_maps(model, torch.randn(2, 3, 8, 8))
        assert model.training  # mode restored on the error too


# ---------------------------------------------------------------- randomisation check


def test_the_simplified_blocks_check_on_its_learned_part():
    """Shaped attention's map alpha I + beta A: the check runs on the whole map and on beta A alone (``softmax_map``).
    At initialisation the last layer's softmax is nearly uniform (row entropy above 98 % of log n), before and after
    its weights are re-drawn, so re-drawing that layer alone leaves the learned part's rollout ranked as before: the
    ranking comes from the layers kept, not from the identity share. Re-drawing every layer changes it."""
    torch.manual_seed(0)
    model = vixnb.create_model("vit_small_simplified", width=128, depth=2, heads=4, patch=4)
    x = torch.randn(4, 3, 32, 32)
    last = M.collect_attention_maps(model, x, method="softmax_map")[-1]
    entropy = -(last * last.clamp_min(1e-30).log()).sum(-1).mean() / math.log(last.shape[-1])
    assert entropy > 0.98
    learned_last = M.randomisation_check(model, x, layers=1, method="softmax_map")
    learned_all = M.randomisation_check(model, x, layers=2, method="softmax_map")
    assert not learned_last["changed"] and learned_all["changed"]
    assert learned_last != M.randomisation_check(model, x, layers=1)  # the whole map is another check
    assert M.randomisation_check(model, x, layers=2)["changed"]
    images = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
    measured = records.run_maps(model, images, shown=1, centre=False)
    assert set(measured["randomisation_learned"]) == {"rank_correlation", "changed"}
    assert "randomisation_learned" not in records.run_maps(tiny_vit(depth=2), torch.randint(
        0, 256, (2, 3, 8, 8), dtype=torch.uint8), shown=1, centre=False)  # no learned part apart from the map


def test_randomisation_check_sees_the_map_change():
    model = tiny_vit(depth=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(4, 3, 8, 8)
    state = torch.get_rng_state()
    out = M.randomisation_check(model, x, layers=1, seed=0)
    assert set(out) == {"rank_correlation", "changed"}
    assert out["changed"] and out["rank_correlation"] < 0.9
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # the copy was changed, not it
    assert M.randomisation_check(model, x, layers=1, seed=0) == out  # the seed fixes the draws
    with pytest.raises(ValueError, match="layers"):
        M.randomisation_check(model, x, layers=0)


def test_spearman_helper():
    a = torch.randn(3, 20)
    torch.testing.assert_close(sanity_checks.spearman(a, a), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(sanity_checks.spearman(a, -a), -torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(sanity_checks.spearman(a, a.exp()), torch.ones(3, dtype=torch.float64))  # ranks only


def test_a_maps_record_without_its_panel_images_is_stale_and_made_again():
    """A page shows the panel's images beside the maps (Fig. 8) where the data set is not: a record made before records
    kept them says so, and the plan makes it again on the CPU (its maps from the same stored weights)."""
    from vixnb.analysis.records import maps_record_stale, record_stale
    from vixnb.record_kinds import KINDS
    from vixnb.results import ResultsStore

    store = ResultsStore()
    assert "keeps no panel images" in maps_record_stale({"panel": [0, 1], "runs": {}}, store)
    assert maps_record_stale({"panel": [0, 1], "images": [[[[0, 0, 0]]]] * 2, "runs": {}}, store) is None
    # only the maps record keeps them: a prediction record or a maps-study record is not stale without them
    assert record_stale({"panel": [0, 1], "runs": {}}, store) is None
    assert KINDS["attention_maps"].stale.__name__ == "maps_record_stale"
    assert KINDS["predictions"].stale is record_stale
