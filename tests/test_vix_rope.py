"""The RoPE forms of the eight ViX and Hybrid ViX models (the `vix` paper's Table 6): registered, counted as
their base models, RoPE in every layer, the authors' RoPE protocol, and Table 6 transcribed as printed."""
import pytest
import torch

import vixnb
from vixnb import layers, papers
from vixnb.runs.spec import run_config

ROPE = ["vit_rope", "vip_rope", "vil_rope", "vin_rope", "hybrid_vit_rope", "hybrid_vip_rope", "hybrid_vil_rope",
        "hybrid_vin_rope"]


def test_table6_rows_are_the_registered_rope_models():
    assert papers.table_models("vix", "table6") == ROPE
    assert set(ROPE) <= set(vixnb.list_models("*_rope"))


@pytest.mark.parametrize("name,dataset", [*((m, "cifar10") for m in ROPE), ("hybrid_vil_rope", "tiny-imagenet")])
def test_rope_models_count_as_their_base_models(name, dataset):
    rope, base = (vixnb.create_model(name, dataset=dataset),
                  vixnb.create_model(name.removesuffix("_rope"), dataset=dataset))
    assert vixnb.count_params(rope, "paper") == vixnb.count_params(base, "paper")
    # no learned position embedding is built (the authors' ViT/ViL-RoPE keep it unused; torchsummary never counts it)
    assert rope.pos_embedding is None
    assert vixnb.count_params(base, "true") - vixnb.count_params(rope, "true") == base.pos_embedding.numel()


def test_rope_is_in_every_layer_with_the_class_token_at_zero():
    model = vixnb.create_model("vin_rope")
    ropes = [block[0].fn.rope for block in model.transformer.layers]
    assert len(ropes) == 4 and all(r is ropes[0] for r in ropes) and ropes[0].interleaved
    mixer = model.transformer.layers[0][0].fn
    assert mixer.rope_over_padding is False  # real tokens (class token first) keep positions 0..n-1
    authors = vixnb.create_model("vin_rope", mixer_options={"rope_over_padding": True})
    assert authors.transformer.layers[0][0].fn.rope_over_padding is True
    # the tokens enter the transformer without a position embedding added
    x = torch.randn(2, 3, 32, 32)
    tokens = model.tokens(x)
    torch.testing.assert_close(tokens[:, 0], model.cls_token[0, 0].expand(2, -1))
    torch.testing.assert_close(tokens[:, 1:], model.to_patch_embedding(x))


@pytest.mark.parametrize("dataset,shape,classes", [("cifar10", (2, 3, 32, 32), 10),
                                                   ("tiny-imagenet", (2, 3, 64, 64), 200)])
@pytest.mark.parametrize("name", ROPE)
def test_rope_models_forward_and_backward(name, dataset, shape, classes):
    model = vixnb.create_model(name, dataset=dataset, depth=1)  # one layer: the shapes, at CPU speed
    out = model(torch.randn(shape))
    assert out.shape == (2, classes)
    out.sum().backward()
    assert model.to_patch_embedding[-1 if not name.startswith("hybrid") else 0].weight.grad is not None


def test_rope_protocol_is_the_authors_rope_scripts():
    batch = {m: run_config(m, profile="paper")["batch_size"] for m in ROPE}
    assert batch == {"vit_rope": 64, "vip_rope": 192, "vil_rope": 320, "vin_rope": 192, "hybrid_vit_rope": 64,
                     "hybrid_vip_rope": 192, "hybrid_vil_rope": 256, "hybrid_vin_rope": 192}
    # ViN-RoPE classes default emb_dropout to 0.5; the RoPE scripts pass dropout 0 (no ViT 0.25)
    assert run_config("vin_rope", profile="paper")["model_overrides"] == {"emb_dropout": 0.5}
    assert run_config("vit_rope", profile="paper")["model_overrides"] == {}
    assert run_config("hybrid_vin_rope", profile="paper")["model_overrides"] == {"emb_dropout": 0.5, "dropout": 0.5}
    assert vixnb.create_model("vin_rope", emb_dropout=0.5).dropout.p == 0.5


def test_table6_is_transcribed_as_printed(paper_text):
    text = paper_text("vix")
    end = text.index("Table 6. Performance")
    block = text[text.rindex("Model\tTop-1", 0, end):end]
    printed = [line.split("\t") for line in block.splitlines()[1:] if line.strip()]
    rows = papers.table("vix", "table6")["rows"]
    assert [r["label"] for r in rows.values()] == [p[0] for p in printed]
    for row, (label, top1, top5, gpu) in zip(rows.values(), printed):
        assert (row["top1"], row["top5"], row["gpu_gb"]) == (float(top1), float(top5), float(gpu)), label


def test_rotary_tables_cover_the_padded_sequence():
    model = vixnb.create_model("vin_rope", mixer_options={"rope_over_padding": True})
    rope = model.transformer.layers[0][0].fn.rope
    assert isinstance(rope, layers.Rotary) and rope.cos.shape[0] >= 1088  # 1,025 tokens padded to 17 x 64
    assert model(torch.randn(1, 3, 32, 32)).shape == (1, 10)


def test_the_authors_vil_rope_scripts_use_four_key_heads():
    """ViLRoPE.py and HybridViLRoPE.py set one_kv_head=False ("use False for RoPE"): +49,152 parameters, so for their
    code RoPE does change the count; ours keeps ViL's one key/value head, as the paper's text has it."""
    authors = {"one_kv_head": False}
    assert vixnb.count_params(vixnb.create_model("vil_rope", mixer_options=authors)) == 415754 + 49152
    assert vixnb.count_params(vixnb.create_model("hybrid_vil_rope", mixer_options=authors)) == 508490 + 49152
