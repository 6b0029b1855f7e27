"""The `cxv` paper's section 5.1 ablations as ``create_model("cnv_5_4", **override)`` overrides (the settings of the
paper file's ``table2`` and ``ablations`` rows):
the defaults leave every CXV model as it was, each override changes only what it names (a module diff against
the default CNV-5/4), and every ablated CNV trains a CPU step."""
import inspect
from functools import cache

import pytest
import torch

import vixnb
from vixnb.models import architecture_signature
from vixnb import papers
from vixnb.models.cxv import CXV
from conftest import seeded_model

# each ablation's short key here -> its run (row) in the paper file
ROWS = {"embed_layers_1": "cnv_embed_1", "embed_layers_3": "cnv_embed_3", "no_embed_padding": "cnv_no_pad",
        "embed_gelu": "cnv_embed_gelu", "conv_gelu": "cnv_conv_gelu", "embed_pool": "cnv_embed_pool",
        "conv_every_2": "cnv_conv_every_2", "residual_conv": "cnv_residual_conv",
        "residual_conv_norm": "cnv_residual_conv_norm", "pos_learned": "cnv_pos_learned", "pos_rope": "cnv_pos_rope",
        "batch_norm": "cnv_batch_norm", "norm_every_2": "cnv_norm_every_2", "prenorm": "cnv_prenorm"}
RUNS = {row: (model, settings, papers.table("cxv", table)["rows"][row]["label"])
        for table in ("table2", "ablations") for row, model, settings in papers.table_runs("cxv", table)}
#: key -> (override, description): the paper file's settings and label of the row
ABLATIONS = {key: (RUNS[row][1], RUNS[row][2]) for key, row in ROWS.items()}

# architecture_signature of each model (CIFAR-10, Tiny ImageNet, CIFAR-10 at depth 2) built by the code before the
# ablation options existed: the defaults must keep every model exactly as it was (values of the torch-release-
# independent signature; the extra_repr-based one they replace gave the same structure on the same code)
SIGNATURES = {
    "cnv_5_4": ("a952f96007281adf", "93a06e62df2b0469", "3ce0dfae89aae43f"),
    "cpv_5_4": ("f113a51730b33b0f", "9ae7a2720c874bc1", "63efa9ba077d2254"),
    "cltv_5_4": ("8932e31e7d25d662", "320ff7922463f3c3", "2e07422d96087bd5"),
    "cltv_repo": ("bec823e4fd941840", "f487e0a4cd910bea", "151e2fcab347d25d"),
}
PAPER_COUNTS = {"cnv_5_4": 1_343_454, "cpv_5_4": 1_344_714, "cltv_5_4": 1_344_714, "cltv_repo": 3_966_154}
LAYERS = range(5)  # CNV-5/4's layers: layers.0 .. layers.4


def fresh(name="cnv_5_4", dataset="cifar10", **overrides):
    return seeded_model(name, dataset, **overrides)


@cache
def cnv(key=None):
    """CNV-5/4 on CIFAR-10, default or with ablation ``key``."""
    return fresh(**(ABLATIONS[key][0] if key else {}))


def structure(model):
    """{module path: its class (a leaf with its repr)} and {parameter name: shape}, in one dict."""
    found = {n: repr(m) if not any(m.children()) else type(m).__name__ for n, m in model.named_modules()}
    found.update({n: tuple(p.shape) for n, p in model.named_parameters()})
    return found


def diff(default, ablated):
    """(added, removed, changed): the entries of ``structure`` only in ``ablated``, only in ``default``, and
    in both but different ({key: (default's, ablated's)})."""
    a, b = structure(default), structure(ablated)
    return ({k: b[k] for k in b.keys() - a.keys()}, {k: a[k] for k in a.keys() - b.keys()},
            {k: (a[k], b[k]) for k in a.keys() & b.keys() if a[k] != b[k]})


def ablation_diff(key):
    return diff(cnv(), cnv(key))


def modules_of(entries):
    return {k: v for k, v in entries.items() if isinstance(v, str)}


def params_of(entries):
    return {k: v for k, v in entries.items() if isinstance(v, tuple) and all(isinstance(d, int) for d in v)}


# ---- defaults keep the models

@pytest.mark.parametrize("name", SIGNATURES)
def test_defaults_keep_every_model_exactly(name):
    built = [fresh(name), fresh(name, dataset="tiny-imagenet"), fresh(name, depth=2)]
    assert tuple(architecture_signature(m) for m in built) == SIGNATURES[name]
    assert vixnb.count_params(built[0], "paper") == PAPER_COUNTS[name]


def test_every_ablation_of_the_paper_file_is_one_cnv_override():
    assert {row for row, (model, settings, _) in RUNS.items() if settings} == set(ROWS.values())
    assert {model for model, _, _ in RUNS.values()} == {"cnv_5_4"}
    defaults = {k: p.default for k, p in inspect.signature(CXV).parameters.items()}
    for key, (override, description) in ABLATIONS.items():
        assert len(override) == 1 and isinstance(description, str) and "\n" not in description, key
        (arg, value), = override.items()
        assert arg in defaults and value != defaults[arg], key


# ---- each ablation changes only what it names

def test_embed_layers_1_changes_only_the_stem():
    added, removed, changed = ablation_diff("embed_layers_1")
    assert added == {}
    assert removed == {"stem.1": repr(cnv().stem[1]), "stem.1.weight": (64, 32, 3, 3), "stem.1.bias": (64,)}
    assert set(changed) == {"stem.0", "stem.0.weight", "stem.0.bias"}
    assert changed["stem.0.weight"] == ((32, 3, 3, 3), (64, 3, 3, 3))
    assert [c.out_channels for c in cnv("embed_layers_1").stem] == [64]


def test_embed_layers_3_changes_only_the_stem():
    added, removed, changed = ablation_diff("embed_layers_3")
    assert removed == {}
    assert added == {"stem.2": repr(torch.nn.Conv2d(32, 64, 3, padding=1)), "stem.2.weight": (64, 32, 3, 3),
                     "stem.2.bias": (64,)}
    assert set(changed) == {f"stem.{j}{p}" for j in (0, 1) for p in ("", ".weight", ".bias")}
    assert [(c.in_channels, c.out_channels) for c in cnv("embed_layers_3").stem] == [(3, 16), (16, 32), (32, 64)]


def test_no_embed_padding_shrinks_the_map_and_builds_the_attention_for_it():
    added, removed, changed = ablation_diff("no_embed_padding")
    assert added == removed == {}
    assert set(changed) == {"stem.0", "stem.1", *(f"layers.{i}.2.layers.0.0.2" for i in LAYERS)}
    assert all(new.endswith("h=28)") for old, new in changed.values() if "Rearrange" in old)
    assert all(c.padding == (0, 0) for c in cnv("no_embed_padding").stem)
    model, seen = fresh(depth=1, embed_padding=False), []
    model.layers[0][2].layers[0][0][1].register_forward_hook(lambda m, i, o: seen.append(i[0].shape))
    with torch.no_grad():
        assert model.stem(torch.randn(2, 3, 32, 32)).shape == (2, 64, 28, 28)
        model(torch.randn(2, 3, 32, 32))
    assert seen == [(2, 28 * 28, 128)]


@pytest.mark.parametrize("key, kind, paths", [
    ("embed_gelu", "GELU", ["stem.gelu0"]),
    ("conv_gelu", "GELU", [f"layers.{i}.gelu" for i in LAYERS]),
    ("embed_pool", "MaxPool2d", ["stem.pool0", "stem.pool1"]),
])
def test_parameter_free_modules_added(key, kind, paths):
    added, removed, changed = ablation_diff(key)
    assert removed == changed == {}
    assert set(added) == set(paths) and all(v.startswith(kind + "(") for v in added.values())
    if key == "embed_pool":
        pool = cnv(key).stem.pool0
        assert (pool.kernel_size, pool.stride, pool.padding) == (3, 1, 1)
        assert list(dict(cnv(key).stem.named_children())) == ["0", "pool0", "1", "pool1"]  # after each conv
    if key == "conv_gelu":
        assert all(list(dict(b.named_children())) == ["0", "gelu", "1", "2"] for b in cnv(key).layers)


@pytest.mark.parametrize("key, sub", [("conv_every_2", "0"), ("norm_every_2", "1")])
def test_every_other_layer_drops_the_sub_layer_in_layers_2_and_4(key, sub):
    added, removed, changed = ablation_diff(key)
    assert added == changed == {}
    assert set(modules_of(removed)) == {f"layers.1.{sub}", f"layers.3.{sub}"}
    assert all(k.startswith(("layers.1.", "layers.3.")) for k in params_of(removed))
    assert params_of(removed)  # the conv's weight and bias / the norm's g and b


def test_batch_norm_replaces_exactly_the_five_channel_norms():
    added, removed, changed = ablation_diff("batch_norm")
    assert set(changed) == {f"layers.{i}.1" for i in LAYERS}
    assert all(old == "ChannelNorm()" and new.startswith("BatchNorm2d(128") for old, new in changed.values())
    assert removed == {f"layers.{i}.1.{p}": (1, 128, 1, 1) for i in LAYERS for p in "gb"}
    assert added == {f"layers.{i}.1.{p}": (128,) for i in LAYERS for p in ("weight", "bias")}


def test_prenorm_adds_two_channel_norms_in_each_transformer():
    added, removed, changed = ablation_diff("prenorm")
    assert removed == changed == {}
    assert modules_of(added) == {
        **{f"layers.{i}.2.prenorm": "ModuleList" for i in LAYERS},
        **{f"layers.{i}.2.prenorm.{j}": "ChannelNorm()" for i in LAYERS for j in (0, 1)}}
    assert params_of(added) == {f"layers.{i}.2.prenorm.{j}.{p}": (1, 128, 1, 1) for i in LAYERS for j in (0, 1)
                                for p in "gb"}


def test_pos_learned_adds_one_parameter():
    added, removed, changed = ablation_diff("pos_learned")
    assert removed == changed == {}
    assert added == {"pos_embedding": (1, 32 * 32, 64)}
    assert vixnb.count_params(cnv("pos_learned"), "paper") == PAPER_COUNTS["cnv_5_4"]  # a plain parameter


def test_pos_rope_adds_one_shared_rotary_table_and_no_parameter():
    added, removed, changed = ablation_diff("pos_rope")
    assert removed == changed == {} and not params_of(added)
    assert len(added) == 1 and next(iter(added.values())).startswith("Rotary(dim_head=32, seq_len=1024")
    ropes = {id(b[2].layers[0][0][1].rope) for b in cnv("pos_rope").layers}
    assert len(ropes) == 1 and all(b[2].layers[0][0][1].rope is None for b in cnv().layers)


def test_pos_rope_on_the_shrunk_grid_and_on_cpv():
    model = fresh(depth=1, pos_embedding="rope", embed_padding=False)
    assert model.layers[0][2].layers[0][0][1].rope.cos.shape[0] == 28 * 28
    with torch.no_grad():
        assert model(torch.randn(1, 3, 32, 32)).shape == (1, 10)
        assert fresh("cpv_5_4", depth=1, pos_embedding="rope")(torch.randn(1, 3, 32, 32)).shape == (1, 10)


@pytest.mark.parametrize("key, span", [("residual_conv", 1), ("residual_conv_norm", 2)])
def test_extra_residual_adds_no_module_and_changes_the_function(key, span):
    assert ablation_diff(key) == ({}, {}, {})
    assert cnv().residual_spans == [0] * 5 and cnv(key).residual_spans == [0] + [span] * 4
    default, ablated, reference = fresh(depth=2), fresh(depth=2, **ABLATIONS[key][0]), fresh(depth=2)
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        ablated.load_state_dict(default.state_dict())
        assert not torch.allclose(default.eval()(x), ablated.eval()(x))
        # with the spanned branch zeroed in layer 2 (conv weights and bias, the norm's shift b: a channel
        # LayerNorm of a zero map is b), x passes it unchanged: the model is the default one whose spanned
        # sub-layers are identities
        for block, ref in zip(ablated.layers[1:], reference.layers[1:]):
            for t in (*getattr(block, "0").parameters(), getattr(block, "1").b, getattr(ref, "1").b):
                t.zero_()
            for sub in ("0", "1")[:span]:
                setattr(ref, sub, torch.nn.Identity())
        assert torch.allclose(ablated.eval()(x), reference.eval()(x), atol=1e-5)


def test_layer_norm_of_the_first_layer_is_never_spanned():
    model = fresh(depth=3, extra_residual="conv_norm", conv_every=2, norm_every=2, conv_gelu=True)
    # layer 1: no extra residual (channels change); layer 2: no conv, no residual; layer 3: conv, GELU and norm
    assert model.residual_spans == [0, 0, 3]
    with torch.no_grad():
        assert model(torch.randn(1, 3, 32, 32)).shape == (1, 10)


# ---- bad values, CLTV's RoPE

@pytest.mark.parametrize("arg, value", [
    ("embed_layers", 0), ("embed_layers", True), ("embed_padding", 1), ("embed_gelu", "yes"), ("conv_gelu", None),
    ("embed_pool", 0), ("conv_every", 0), ("conv_every", 1.0), ("extra_residual", "norm"),
    ("extra_residual", True), ("pos_embedding", "sinusoidal"), ("norm", "group"), ("norm", None),
    ("norm_every", -1), ("prenorm", 1)])
def test_bad_values_name_the_parameter(arg, value):
    # the model's own check ("embed_layers must be ..., got ...") or create_model's, before any build
    # ("embed_layers=0: model 'cnv_5_4' takes a whole number >= 1 (default 2) for embed_layers")
    with pytest.raises(ValueError, match=rf"^{arg}( must be [^\n]+, got|=[^\n]+ takes [^\n]+ for {arg})") as err:
        fresh(depth=1, **{arg: value})
    assert "\n" not in str(err.value)


def test_rope_on_cltv_says_what_to_use():
    with pytest.raises(ValueError, match=r"^pos_embedding='rope' [^\n]*pos_embedding='learned'"):
        fresh("cltv_5_4", depth=1, pos_embedding="rope")


@pytest.mark.parametrize("name", ["cpv_5_4", "cltv_5_4"])
def test_every_ablation_builds_the_other_models(name):
    for key, (override, _) in ABLATIONS.items():
        if name.startswith("cltv") and key == "pos_rope":
            continue
        with torch.no_grad():
            assert fresh(name, depth=1, **override)(torch.randn(1, 3, 32, 32)).shape == (1, 10), key


# ---- every ablation trains

@pytest.mark.parametrize("key", ABLATIONS)
def test_ablation_trains_one_cpu_step(key):
    model = fresh(depth=2, **ABLATIONS[key][0])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([1, 7])
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    optimizer.step()
    assert all(not torch.equal(before[n], p) for n, p in model.named_parameters())
