"""The `shaped` paper's small ViTs (vixnb/models/vit_small.py): the blog's six parameter counts under
layout="blog", the shaped mixer's limits, the alpha/beta schemes through create_model, and the bug flag."""
import pytest
import torch

import vixnb
from vixnb import analysis, layers, papers
from vixnb.models import architecture_signature
from vixnb.models.vit_small import OneMapAttention

TABLES = ("table2", "table4", "table5")


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("kind", ["vanilla", "simplified"])
def test_the_blogs_six_counts(kind, table):
    """The blog counts every parameter (position embedding included): our true count, of the run its row names."""
    row = next(r for r in papers.table_models("shaped", table) if r.endswith(kind))
    name, settings = papers.row_run("shaped", table, row)
    assert name == f"vit_small_{kind}" and set(settings) == {"width", "depth", "heads", "patch"}
    model = vixnb.create_model(name, **settings)
    assert vixnb.count_params(model, "true") == papers.table("shaped", table)["rows"][row]["params"]


def test_the_blogs_relative_reductions():
    """Printed: -41.59 %, -41.99 %, -42.72 % (the last is -42.73 % computed from its own counts)."""
    got = []
    for table in TABLES:
        vanilla, simplified = papers.table("shaped", table)["rows"].values()
        got.append(round((simplified["params"] / vanilla["params"] - 1) * 100, 2))
    assert got == [-41.59, -41.99, -42.73]


def _mixers(model):
    return [block.mixer for block in model.blocks]


def test_identity_init_is_an_identity_mixer_and_attention_init_is_vanilla_without_skip():
    torch.manual_seed(0)
    x = torch.randn(2, 65, 96)
    identity = _mixers(vixnb.create_model("vit_small_simplified", alpha_beta="identity"))[0]
    torch.testing.assert_close(identity(x), x)
    shaped = _mixers(vixnb.create_model("vit_small_simplified", alpha_beta="attention"))[0]
    vanilla = OneMapAttention(dim=96, dim_head=24)
    vanilla.to_q.load_state_dict(shaped.to_q.state_dict())
    vanilla.to_k.load_state_dict(shaped.to_k.state_dict())
    with torch.no_grad():
        for linear in (vanilla.to_v, vanilla.to_out):  # identity V and O
            linear.weight.copy_(torch.eye(96))
            linear.bias.zero_()
    torch.testing.assert_close(shaped(x), vanilla(x), atol=1e-5, rtol=1e-5)
    with layers.fused_attn(shaped, False), layers.fused_attn(vanilla, False):
        torch.testing.assert_close(shaped(x), vanilla(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("scheme,expected", [("dynamic", lambda i: (1 / i, 1 - 1 / i)),
                                             ("inverse-dynamic", lambda i: (1 - 1 / i, 1 / i)),
                                             ("uniform", lambda i: (0.5, 0.5))])
def test_alpha_beta_schemes_reach_each_layer_through_create_model(scheme, expected):
    model = vixnb.create_model("vit_small_simplified", depth=8, alpha_beta=scheme)
    got = [v for m in _mixers(model) for v in (m.alpha.item(), m.beta.item())]
    assert got == pytest.approx([v for i in range(1, 9) for v in expected(i)])


@pytest.mark.parametrize("name", ["vit_small_vanilla", "vit_small_simplified"])
def test_the_blog_scale_flag_changes_only_the_scale(name):
    torch.manual_seed(0)
    plain = vixnb.create_model(name, depth=2)
    torch.manual_seed(0)
    buggy = vixnb.create_model(name, depth=2, blog_scale=True)
    assert all(torch.equal(a, b) for a, b in zip(plain.state_dict().values(), buggy.state_dict().values()))
    assert [m.scale for m in _mixers(plain)] == pytest.approx([24**-0.5] * 2)
    assert [m.scale for m in _mixers(buggy)] == pytest.approx([24**0.5] * 2)
    x = torch.randn(2, 3, 32, 32)
    assert not torch.allclose(plain(x), buggy(x))


@pytest.mark.parametrize("layout", ["blog", "standard"])
@pytest.mark.parametrize("name", ["vit_small_vanilla", "vit_small_simplified"])
def test_forward_backward_and_layouts(name, layout):
    model = vixnb.create_model(name, depth=2, layout=layout)
    out = model(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 10)
    out.sum().backward()
    heads = {m.heads for m in _mixers(model) if hasattr(m, "heads")}
    assert heads <= ({1} if layout == "blog" else {4})


def test_vanilla_without_skips_and_bad_arguments():
    model = vixnb.create_model("vit_small_vanilla", depth=2, skips=False)
    assert not any(block.skips for block in model.blocks)
    with pytest.raises(ValueError, match="layout='wide': use one of blog, one-norm, standard"):
        vixnb.create_model("vit_small_vanilla", layout="wide")
    with pytest.raises(ValueError, match="skips=True: the simplified block has none"):
        vixnb.create_model("vit_small_simplified", skips=True)


def test_diagonal_prominence_and_the_shaped_ratio():
    """Uniform attention scores 1, attention only to oneself scores n; the simplified model's maps at the identity
    initialisation are the identity (prominence n = 65) and its alpha / (alpha + beta) is 1 in every layer."""
    n = 65
    uniform, own = torch.full((2, 4, n, n), 1 / n), torch.eye(n).expand(2, 4, n, n)
    torch.testing.assert_close(analysis.diagonal_prominence([uniform, own]),
                               torch.tensor([[1.0] * 4, [float(n)] * 4]))
    model = vixnb.create_model("vit_small_simplified", depth=3, alpha_beta="identity")
    maps = analysis.collect_attention_maps(model, torch.randn(2, 3, 32, 32))
    assert analysis.diagonal_prominence(maps).shape == (3, 1)
    torch.testing.assert_close(analysis.diagonal_prominence(maps), torch.full((3, 1), float(n)))
    assert layers.shaped_ratios(model) == [1.0, 1.0, 1.0]
    dynamic = vixnb.create_model("vit_small_simplified", depth=4, alpha_beta="dynamic")
    assert layers.shaped_ratios(dynamic) == pytest.approx([1.0, 0.5, 1 / 3, 0.25])


@pytest.mark.parametrize("name", ["vit_small_vanilla", "levit", "cvt", "cct"])
def test_maps_are_collected_from_the_families_own_attentions(name):
    """collect_attention_maps finds every class that defines attention_map, not only layers.MIXERS: the blog's
    one-map attention, LeViT's and CvT's conv attentions, CCT's."""
    model = vixnb.create_model(name, depth=1)
    maps = analysis.collect_attention_maps(model, torch.randn(1, 3, 32, 32))
    assert len(maps) >= 1 and all(m.dim() == 4 for m in maps)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones_like(maps[0].sum(-1)), atol=1e-4, rtol=1e-4)


def test_the_parallel_block_is_sas_p_with_the_same_parameters():
    torch.manual_seed(0)
    seq = vixnb.create_model("vit_small_simplified", depth=2, block="sequential")  # our earlier reading
    par = vixnb.create_model("vit_small_simplified", depth=2)  # SAS-P, the default
    par.load_state_dict(seq.state_dict())  # the same parameters, name for name
    assert vixnb.count_params(par, "true") == vixnb.count_params(seq, "true")
    block, x = par.blocks[0], torch.randn(2, 65, 96)
    with torch.no_grad():
        y = block.norm(x)
        assert torch.allclose(block(x), block.mixer(y) + block.mlp(y))
        assert torch.allclose(seq.blocks[0](x), seq.blocks[0].mlp(seq.blocks[0].mixer(y)))
    # the signature tells the blocks apart; the parameter counts cannot
    assert architecture_signature(par) != architecture_signature(seq)
    with pytest.raises(ValueError, match="block='parallel' is the simplified ViT's SAS-P block"):
        vixnb.create_model("vit_small_vanilla", block="parallel")
    with pytest.raises(ValueError, match="block='side': use one of sequential, parallel"):
        vixnb.create_model("vit_small_simplified", block="side")


def test_the_signature_does_not_read_torchs_reprs(monkeypatch):
    # torch 2.11's LayerNorm repr lacks 2.14's "bias=True": the same model must keep its signature
    model = vixnb.create_model("vit_small_vanilla", depth=2)
    before = architecture_signature(model)
    monkeypatch.setattr(torch.nn.LayerNorm, "extra_repr", lambda self: "changed by a torch release")
    assert architecture_signature(model) == before
    model.norm.eps = 1e-6  # a setting of a torch layer still counts
    assert architecture_signature(model) != before
