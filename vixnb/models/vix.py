"""ViT and the Vision X-formers (ViP, ViL, ViN), FNet, their Hybrid (convolutional-embedding) forms, and the
RoPE forms of the eight ViX and Hybrid ViX models (Table 6), as the `vix` paper configures them; and four of the
`cxv` paper's Table 1 baselines, the same models resized to about 1.3 M parameters (ViT-10/4, FNet-10,
Hybrid ViN-6/8, Hybrid ViP-6/8; ``resized_model``).

``ViX`` is the one class: pixels or patches (or the 3-conv stem) -> tokens, class token, learnable 1-D
position embedding (or RoPE inside the mixer), the shared ``Transformer`` with an injected token mixer, and a
LayerNorm + Linear head on the class token. Its defaults are the paper's (dim 128, depth 4, 4 heads of 32,
MLP 256).

RoPE (``pos_embedding="rope"``): 1-D rotary embedding over the token index (class token at 0, base 10000,
interleaved pairs) applied to q and k in every layer, and no learned position embedding added. The authors'
ViT/ViL-RoPE scripts keep the unused learned embedding as a parameter, their ViN/ViP-RoPE scripts comment it
out; we build none (torchsummary never counted it, so the paper's counts are the base models').

Each registered model is one function below, whose body names its token mixer and the mixer options that
reproduce the paper's parameter counts (the authors' scripts). ``vix_model`` applies the overrides given to
``create_model``: ``mixer_options`` is merged into the model's own mixer options; every other key replaces
an argument (``depth=1``, ``dropout=0.25``, ``pos_embedding="rope"``; ``mixer="shaped"`` swaps the mixer,
which then starts from no options of the model's). Adding a model is adding one function here.

The Performer models of the `vix` and `cxv` papers (ViP, Hybrid ViP, their RoPE forms, Hybrid ViP-6/8, and through
``paper_mixer("vip", key_max=...)`` PiP, CvP, LeViP, CCP and CPV) take ``key_max``, the keys' stabiliser
(``layers.performer.KEY_MAX``): ``"global"`` (default), the authors' code, or ``"per_head"``, performer-pytorch's and
our earlier reading. Runs stored before the default changed keep their keys and mean ``per_head``
(``register_model(changed_defaults=PER_HEAD_BEFORE)``).
"""
import inspect
from functools import partial

import torch
import torch.nn.functional as F
from einops import repeat
from torch import nn

from .. import layers, papers
from ..layers.blocks import Transformer
from ..layers.stems import GRID_SIDE, embedding, stem_geometry
from .registry import list_models, mixer_overrides, model_entrypoint, register_model

#: the Performer's keys' stabiliser before ``key_max="global"`` (the authors' code) became the default of the `vix` and
#: `cxv` Performer models: a run stored without ``key_max`` was made with performer-pytorch's ``per_head``
PER_HEAD_BEFORE = {"key_max": "per_head"}
#: ViP's mixer options in the authors' script (softmax-kernel FAVOR+, biased q/k/v), less the keys' stabiliser
VIP_OPTIONS = dict(kernel="softmax", qkv_bias=True)


class ViX(nn.Module):
    def __init__(self, *, image_size, num_classes, mixer, mixer_options=None, patch_size=1, hybrid=False,
                 stem_stride=1, dim=128, depth=4, heads=4, dim_head=32, mlp_dim=256, channels=3, dropout=0.0,
                 emb_dropout=0.0, pos_embedding="learned", patch_conv=False, resize_input=False):
        super().__init__()
        if image_size % patch_size or image_size % stem_stride:
            raise ValueError(f"image_size {image_size} must be divisible by patch_size {patch_size} and stem_stride "
                             f"{stem_stride}")
        if pos_embedding not in ("learned", "rope"):
            raise ValueError(f"pos_embedding must be 'learned' or 'rope', got {pos_embedding!r}")
        side = image_size // (stem_stride if hybrid else patch_size)
        num_patches = side * side
        self.mixer_name, self.mixer_options, self.hybrid = mixer, dict(mixer_options or {}), hybrid
        self.pos_scheme = pos_embedding  # "learned" or "rope"
        self.to_patch_embedding = embedding(channels, dim, hybrid=hybrid, patch_size=patch_size,
                                            stem_stride=stem_stride, patch_conv=patch_conv)
        # images of another size are resized (bilinear) to image_size on their device, inside the model
        self.resize_to = image_size if resize_input else None
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, dim)) if pos_embedding == "learned" else None
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.dropout = nn.Dropout(emb_dropout)
        options = dict(self.mixer_options)
        if pos_embedding == "rope":
            # room for a mixer that pads the sequence (Nystrom: up to a multiple of its landmarks)
            options["rope"] = layers.Rotary(dim_head, 2 * (num_patches + 1))
        self.transformer = Transformer(
            dim=dim, depth=depth, mlp_dim=mlp_dim, dropout=dropout,
            make_mixer=partial(layers.build, mixer, dim=dim, heads=heads, dim_head=dim_head, seq_len=num_patches + 1,
                               **options),
        )
        self.to_latent = nn.Identity()
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes))

    def tokens(self, img):
        """Embedded token sequence (class token first) fed to the transformer."""
        if self.resize_to is not None and tuple(img.shape[-2:]) != (self.resize_to, self.resize_to):
            img = F.interpolate(img, size=(self.resize_to, self.resize_to), mode="bilinear", align_corners=False)
        x = self.to_patch_embedding(img)
        x = torch.cat((repeat(self.cls_token, "1 n d -> b n d", b=x.shape[0]), x), dim=1)
        if self.pos_embedding is not None:
            x = x + self.pos_embedding[:, : x.shape[1]]
        return self.dropout(x)

    def forward(self, img):
        x = self.transformer(self.tokens(img))
        return self.mlp_head(self.to_latent(x[:, 0]))


def vix_model(image_size, num_classes, channels, config, *, mixer, mixer_options=None, hybrid=False):
    """A ``ViX`` with token mixer ``mixer`` (options ``mixer_options``), the patch embedding or (``hybrid``) the
    conv stem at the paper's geometry for ``image_size`` (``stem_geometry``), and the ``create_model``
    overrides ``config`` applied (see the module doc)."""
    mixer, options, config = mixer_overrides(config, mixer, mixer_options)
    arguments = {"hybrid": hybrid, **stem_geometry(image_size, hybrid=hybrid), **config}
    return ViX(image_size=image_size, num_classes=num_classes, channels=channels, mixer=mixer, mixer_options=options,
               **arguments)


@register_model(paper="vix", label="ViT")
def vit(*, image_size, num_classes, channels, **config):
    """Vision Transformer: exact softmax attention."""
    return vix_model(image_size, num_classes, channels, config, mixer="softmax")


@register_model(paper="vix", label="ViP", changed_defaults=PER_HEAD_BEFORE)
def vip(*, image_size, num_classes, channels, key_max="global", **config):
    """Vision Performer: FAVOR+ with the softmax kernel, biased q/k/v projections, the keys' stabiliser ``key_max``
    (``"global"``: the authors' one max over the batch; ``"per_head"``: performer-pytorch's)."""
    return vix_model(image_size, num_classes, channels, config,
                     mixer="performer", mixer_options=dict(VIP_OPTIONS, key_max=key_max))


#: the ViX text's Performer (section 4): "a local window size of 256" and a ReLU kernel. The text names no number of
#: local heads; we take half of them (2 of 4), as performer-pytorch's own example does (4 local of 8 heads, window 256)
TEXT_PERFORMER = dict(kernel="relu", local_heads=2, local_window=256)


@register_model(paper="vix", label="ViP (text: ReLU, local 256)")
def vip_relu_local(*, image_size, num_classes, channels, **config):
    """ViP as the paper's text describes it: generalized attention with a ReLU kernel (ReLU of an orthogonal random
    projection, a buffer) in two heads and exact softmax over windows of 256 tokens (and their neighbours) in the
    other two. The authors' script runs neither (``vip``: softmax-kernel FAVOR+, no local heads). The same parameters
    as ``vip`` (531,978 in the paper's convention): the local heads and the kernel add none."""
    return vix_model(image_size, num_classes, channels, config,
                     mixer="performer", mixer_options=dict(qkv_bias=True, **TEXT_PERFORMER))


@register_model(paper="vix", label="ViL")
def vil(*, image_size, num_classes, channels, **config):
    """Vision Linformer: keys and values projected to 64 tokens, one shared projection and key/value head."""
    return vix_model(image_size, num_classes, channels, config,
                     mixer="linformer", mixer_options=dict(k=64, share_kv=True, one_kv_head=True))


@register_model(paper="vix", label="ViN")
def vin(*, image_size, num_classes, channels, **config):
    """Vision Nystromformer: 64 landmarks, 6 pseudo-inverse iterations, residual conv of kernel 33."""
    return vix_model(image_size, num_classes, channels, config,
                     mixer="nystrom", mixer_options=dict(num_landmarks=64, pinv_iterations=6, residual_conv_kernel=33))


@register_model(paper="vix", label="FNet")
def fnet(*, image_size, num_classes, channels, **config):
    """FNet: the real part of a 2-D FFT mixes the tokens (no parameters)."""
    return vix_model(image_size, num_classes, channels, config, mixer="fnet")


@register_model(paper="vix", label="Hybrid ViT")
def hybrid_vit(*, image_size, num_classes, channels, **config):
    """ViT with the 3-conv stem."""
    return vix_model(image_size, num_classes, channels, config, hybrid=True, mixer="softmax")


@register_model(paper="vix", label="Hybrid ViP", changed_defaults=PER_HEAD_BEFORE)
def hybrid_vip(*, image_size, num_classes, channels, key_max="global", **config):
    """ViP with the 3-conv stem (``key_max`` as ``vip``)."""
    return vix_model(image_size, num_classes, channels, config, hybrid=True,
                     mixer="performer", mixer_options=dict(VIP_OPTIONS, key_max=key_max))


@register_model(paper="vix", label="Hybrid ViL")
def hybrid_vil(*, image_size, num_classes, channels, **config):
    """ViL with the 3-conv stem (the paper's count; the authors' HybridViL.py sets one_kv_head=False)."""
    return vix_model(image_size, num_classes, channels, config, hybrid=True,
                     mixer="linformer", mixer_options=dict(k=64, share_kv=True, one_kv_head=True))


@register_model(paper="vix", label="Hybrid ViN")
def hybrid_vin(*, image_size, num_classes, channels, **config):
    """ViN with the 3-conv stem."""
    return vix_model(image_size, num_classes, channels, config, hybrid=True,
                     mixer="nystrom", mixer_options=dict(num_landmarks=64, pinv_iterations=6, residual_conv_kernel=33))


@register_model(paper="vix", label="Hybrid FNet")
def hybrid_fnet(*, image_size, num_classes, channels, **config):
    """FNet with the 3-conv stem."""
    return vix_model(image_size, num_classes, channels, config, hybrid=True, mixer="fnet")


# ---- Table 6: the RoPE forms. The mixer settings are the base models' (the authors' RoPE scripts change only the
# position embedding); their protocol (batch size, dropout) is the paper file's.
def rope_model(base, image_size, num_classes, channels, config):
    """Model ``base`` of this file with RoPE in place of the learned position embedding."""
    return model_entrypoint(base)(image_size=image_size, num_classes=num_classes, channels=channels,
                                  **{"pos_embedding": "rope", **config})


@register_model(paper="vix", label="ViT-RoPE")
def vit_rope(*, image_size, num_classes, channels, **config):
    """ViT with RoPE."""
    return rope_model("vit", image_size, num_classes, channels, config)


@register_model(paper="vix", label="ViP-RoPE", changed_defaults=PER_HEAD_BEFORE)
def vip_rope(*, image_size, num_classes, channels, key_max="global", **config):
    """ViP with RoPE (on the queries and keys before the random-feature map; ``key_max`` as ``vip``)."""
    return rope_model("vip", image_size, num_classes, channels, dict(config, key_max=key_max))


@register_model(paper="vix", label="ViL-RoPE")
def vil_rope(*, image_size, num_classes, channels, **config):
    """ViL with RoPE (on the queries and keys before the keys' sequence projection), ViL's one key/value head, so
    the count is ViL's as the paper says; the authors' ViL-RoPE script sets ``one_kv_head=False`` ("use False for
    RoPE": +49,152), which ``mixer_options={"one_kv_head": False}`` builds."""
    return rope_model("vil", image_size, num_classes, channels, config)


@register_model(paper="vix", label="ViN-RoPE")
def vin_rope(*, image_size, num_classes, channels, **config):
    """ViN with RoPE on the real tokens (class token at 0); ``mixer_options={"rope_over_padding": True}`` rotates
    the front-padded sequence from its first row, as the authors' ViN-RoPE script does."""
    return rope_model("vin", image_size, num_classes, channels, config)


@register_model(paper="vix", label="Hybrid ViT-RoPE")
def hybrid_vit_rope(*, image_size, num_classes, channels, **config):
    """Hybrid ViT with RoPE."""
    return rope_model("hybrid_vit", image_size, num_classes, channels, config)


@register_model(paper="vix", label="Hybrid ViP-RoPE", changed_defaults=PER_HEAD_BEFORE)
def hybrid_vip_rope(*, image_size, num_classes, channels, key_max="global", **config):
    """Hybrid ViP with RoPE (``key_max`` as ``vip``)."""
    return rope_model("hybrid_vip", image_size, num_classes, channels, dict(config, key_max=key_max))


@register_model(paper="vix", label="Hybrid ViL-RoPE")
def hybrid_vil_rope(*, image_size, num_classes, channels, **config):
    """Hybrid ViL with RoPE (one key/value head; the authors' script: ``mixer_options={"one_kv_head": False}``)."""
    return rope_model("hybrid_vil", image_size, num_classes, channels, config)


@register_model(paper="vix", label="Hybrid ViN-RoPE")
def hybrid_vin_rope(*, image_size, num_classes, channels, **config):
    """Hybrid ViN with RoPE (class token at 0; see ``vin_rope``)."""
    return rope_model("hybrid_vin", image_size, num_classes, channels, config)


# ---- the `cxv` paper's transformer baselines (its Table 1, section 4.1): models of this file resized to about 1.3 M
# parameters, named Model-layers/heads; their protocol (batch size 32, DualOpT) is the cxv paper file's.
CXV_DROPOUT = 0.5  # cxv section 4.1: "A dropout of 0.5 was used across all models"


def resized_model(base, image_size, num_classes, channels, config, **size):
    """Model ``base`` of this file at the size ``size`` (``depth``, ``heads``, ``dim_head``, ``mlp_dim``) with the `cxv`
    paper's dropout of 0.5, in the feed-forward and (as vit-pytorch's one ``dropout`` does) after the mixer's output
    projection, where the mixer has one. ``dropout=`` sets both; ``mixer_options`` merges into ``base``'s own."""
    config = {**size, "dropout": CXV_DROPOUT, **config}
    mixer = layers.MIXERS.get(config.get("mixer") or paper_mixer(base)[0])
    if mixer is not None and "dropout" in inspect.signature(mixer).parameters:
        config["mixer_options"] = {"dropout": config["dropout"], **(config.get("mixer_options") or {})}
    return model_entrypoint(base)(image_size=image_size, num_classes=num_classes, channels=channels, **config)


@register_model(paper="cxv", label="ViT-10/4")
def vit_10_4(*, image_size, num_classes, channels, **config):
    """ViT with 10 layers, 4 heads of 32, MLP 256 (2 x dim): 1,323,018 parameters (paper convention), 1.34 G paper
    MACs, as the cxv paper's Table 1 (1.3 M, 1.34 G); patches of 2 on Tiny ImageNet."""
    return resized_model("vit", image_size, num_classes, channels, config, depth=10, heads=4, dim_head=32, mlp_dim=256)


@register_model(paper="cxv", label="FNet-10")
def fnet_10(*, image_size, num_classes, channels, **config):
    """FNet with 10 layers and MLP 512: 1,324,298 parameters, 1.34 G paper MACs (Table 1: 1.3 M, 1.34 G). The paper
    says every MLP is 2 x dim (256), but FNet-10 at MLP 256 counts 666,378 and 0.67 G MACs: only MLP 512 fits both
    printed figures, so it is the one built here (``mlp_dim=256`` builds the other)."""
    return resized_model("fnet", image_size, num_classes, channels, config, depth=10, mlp_dim=512)


@register_model(paper="cxv", label="Hybrid ViN-6/8")
def hybrid_vin_6_8(*, image_size, num_classes, channels, **config):
    """Hybrid ViN with 6 layers, 8 heads of 32, MLP 256: 1,282,170 parameters, 1.41 G paper MACs (Table 1: 1.3 M,
    1.41 G; the MACs include the Nystrom projections over the sequence front-padded to 1088 tokens and the residual
    conv over the values)."""
    return resized_model("hybrid_vin", image_size, num_classes, channels, config, depth=6, heads=8, dim_head=32,
                         mlp_dim=256)


@register_model(paper="cxv", label="Hybrid ViP-6/8", changed_defaults=PER_HEAD_BEFORE)
def hybrid_vip_6_8(*, image_size, num_classes, channels, key_max="global", **config):
    """Hybrid ViP with 6 layers, 8 heads of 32, MLP 256: 1,285,194 parameters, 1.30 G paper MACs (Table 1: 1.3 M,
    1.31 G); ``key_max`` as ``vip``."""
    return resized_model("hybrid_vip", image_size, num_classes, channels, dict(config, key_max=key_max), depth=6,
                         heads=8, dim_head=32, mlp_dim=256)



# ---- the `linattn` paper (an IEOR 4540 course project): ViT-B/16 and its Linformer and Performer forms at 224 px
# (its Table 1: patch 16, 12 layers, 12 heads, dim 768, dropout 0). Table 1's "query-key dimension per head 128"
# cannot be 768 / 12 = 64: we build dim_head 64 and read 128 as Linformer's k and the Performer's feature count
# (both settable); ``dim_head=128`` builds the other reading, 12 heads of width 128 (114,145,546 parameters). The
# report's Linformer block equation puts the LayerNorm after the attention; every block here is
# the standard pre-norm one. CIFAR-10's 32 px images are resized to 224 inside the model (bilinear, on the device).
B16 = dict(input_size=224, patch_size=16, depth=12, heads=12, dim=768, dim_head=64, mlp_dim=3072)
#: the report's Performer variants -> our FAVOR+ kernels: positive orthogonal random features ("ViP-a"), and the
#: deterministic ReLU and EXP maps on the scaled queries and keys
B16_KERNELS = {"favor+": "softmax", "relu": "relu-deterministic", "exp": "exp-deterministic"}


def b16_model(image_size, num_classes, channels, config, *, mixer, mixer_options):
    """A ViT-B/16-shaped ``ViX`` (``B16``, overridable: the smoke profile's tiny config) with the convolutional patch
    embedding and biased q/k/v projections, taking images of ``image_size`` resized to ``input_size``."""
    config = {**B16, **config}
    size = config.pop("input_size")
    config = {"patch_conv": True, "resize_input": size != image_size, **config}
    mixer, options, config = mixer_overrides(config, mixer, {"qkv_bias": True, **mixer_options})
    return ViX(image_size=size, num_classes=num_classes, channels=channels, mixer=mixer, mixer_options=options,
               **config)


@register_model(paper="linattn", label="ViT-B/16")
def vit_b16_224(*, image_size, num_classes, channels, **config):
    """ViT-B/16 at 224 px: 85,806,346 parameters (true count) with 10 classes."""
    return b16_model(image_size, num_classes, channels, config, mixer="softmax", mixer_options={})


@register_model(paper="linattn", label="ViL-B/16")
def vil_b16_224(*, image_size, num_classes, channels, linformer_k=128, **config):
    """ViT-B/16 with Linformer attention: per-head keys and values (ViT's own maps, so its weights transfer), each
    projected along the sequence to ``linformer_k`` tokens by its own E and F (197 x 128 each per layer)."""
    return b16_model(image_size, num_classes, channels, config, mixer="linformer",
                     mixer_options=dict(k=linformer_k, share_kv=False, one_kv_head=False))


@register_model(paper="linattn", label="ViP-B/16")
def vip_b16_224(*, image_size, num_classes, channels, kernel="favor+", nb_features=128, **config):
    """ViT-B/16 with Performer attention; ``kernel``: ``favor+`` (positive orthogonal random features, ``nb_features``
    of them: the report's "ViP-a"), ``relu`` or ``exp`` (deterministic feature maps on q and k; FastAttention still
    draws its projection buffer, which they never read)."""
    if kernel not in B16_KERNELS:
        raise ValueError(f"kernel={kernel!r}: choose one of {', '.join(B16_KERNELS)}")
    return b16_model(image_size, num_classes, channels, config, mixer="performer",
                     mixer_options=dict(kernel=B16_KERNELS[kernel], nb_features=nb_features))


def _configured(name, **settings):
    """Model ``name`` of this file as its function configures it (with ``settings``), built at depth 0 on the meta
    device (no weights, no random numbers drawn), so the functions above stay the one place that states their
    mixers."""
    with torch.device("meta"):
        return model_entrypoint(name)(image_size=GRID_SIDE, num_classes=1, channels=3, depth=0, **settings)


def paper_mixer(name, **settings):
    """(mixer, mixer options) of ViX model ``name`` ("vit", "vip", "vil", "vin", ...), as its function configures
    them with its ``settings`` (``key_max=`` of ``vip``): what the other families' X variants take (LeViP = LeViT's
    skeleton + ``paper_mixer("vip", key_max=key_max)``)."""
    model = _configured(name, **settings)
    return model.mixer_name, dict(model.mixer_options)


def paper_mixers():
    """{model name: (mixer, mixer options)} of the plain `vix` models of this file (not hybrid, learned position
    embedding: the Table 1 models ViT, ViP, ViL, ViN, FNet; not the `cxv` paper's resized ones), as their functions
    configure them."""
    found, table1 = {}, papers.table_models("vix", "table1")
    for name in list_models():
        if model_entrypoint(name).__module__ != __name__ or name not in table1:
            continue
        model = _configured(name)
        if not model.hybrid and model.pos_scheme == "learned":
            found[name] = (model.mixer_name, dict(model.mixer_options))
    return found
