"""Attributions of any family through captum: Integrated Gradients, Occlusion and Grad-CAM, how well they agree,
and deletion/insertion curves.

``attribute(model, x, method, target=None, **options)`` wraps captum's ``IntegratedGradients`` (its convergence
delta reported), ``Occlusion`` (window and stride in pixels) and ``LayerGradCam``, optionally inside a
``NoiseTunnel``. Grad-CAM reads the layer ``gradcam_layer`` finds: the last convolution of a convolutional stem
(Hybrid ViX, CXV, CCT's tokenizer, LeViT's stem), ResNet's ``layer4``, or for a model whose stem only cuts patches
(ViT and its linear-attention variants, the `shaped` paper's blocks) the tokens going into its last attention
mixer (after the block's norm), laid on their grid by a ``TokensToGrid`` tap (class token dropped). Not the
transformer's output: a head that reads the class token alone passes no gradient to the other output tokens,
so Grad-CAM there is zero; the last attention is where the patches still reach the class token. The map is
upsampled to the image with captum's ``LayerAttribution.interpolate``.

The pixel methods' maps are absolute attributions summed over the colour channels: a pixel counts by how much it
moves the score, either way. ``rank_agreement`` compares the methods' maps by Spearman's rank correlation;
``deletion_insertion`` follows the target class's probability as the most-attributed pixels are removed from the
image (replaced by a baseline) or added to the baseline.

Inputs are normalised images (``vixnb.data.normalize``, mean 0.5 and deviation 0.5 per channel). The "grey"
baseline is the zero image, mid-grey (0.5 in every channel). It stands in for the dataset mean, which it is not:
CIFAR-10's channel means, (0.491, 0.482, 0.447), are within 0.055 of it. "black" is the normalised all-zero image;
any tensor may be given instead.
"""
from __future__ import annotations

import math
from contextlib import contextmanager

import torch
from captum.attr import IntegratedGradients, LayerAttribution, LayerGradCam, NoiseTunnel, Occlusion
from torch import nn

from ..data import normalize
from .map_measures import rounded
from ..layers.maps import mappers
from .sanity_checks import spearman
from ..validate import checked

METHODS = ("integrated_gradients", "occlusion", "grad_cam")
BASELINES = ("grey", "black")
STEM_NAMES = ("stem", "tokenizer", "conv_embedding", "to_patch_embedding")


class TokensToGrid(nn.Module):
    """Tokens (b, n, d) to a grid (b, d, side, side): the first ``cls_tokens`` tokens dropped (kept for ``tokens``,
    which goes back), the rest laid row-major on the square grid; a (b, c, h, w) input (a stage that already
    outputs a grid) passes through. An identity on the values: the layer Grad-CAM reads on a token model."""

    def __init__(self, cls_tokens=1):
        super().__init__()
        self.cls_tokens, self._kept = cls_tokens, None

    def forward(self, tokens):
        if tokens.dim() == 4:  # already a grid (a CvT stage's output): passed through
            self._kept = "grid"
            return tokens
        patches = tokens.shape[1] - self.cls_tokens
        side = math.isqrt(max(patches, 0))
        if patches <= 0 or side * side != patches:
            raise ValueError(f"TokensToGrid: {tokens.shape[1]} tokens less {self.cls_tokens} class token(s) do not "
                             "form a square grid; set cls_tokens")
        self._kept = tokens[:, :self.cls_tokens]
        return tokens[:, self.cls_tokens:].transpose(1, 2).reshape(tokens.shape[0], -1, side, side)

    def tokens(self, grid, kept=None):
        """The tokens (b, n, d) again: ``kept`` (default: the class tokens the last call dropped) then the grid."""
        kept = self._kept if kept is None else kept
        if isinstance(kept, str):  # the input was a grid
            return grid
        patches = grid.flatten(2).transpose(1, 2)
        return torch.cat((kept, patches), dim=1) if kept is not None and kept.shape[1] else patches


def _last_mixer(model):
    """The name of ``model``'s last attention mixer (ViX: ``transformer.layers.<last>.0.fn``; the `shaped` paper's:
    ``blocks.<last>.mixer``), or None."""
    mixers = [name for name, _ in mappers(model)]
    return mixers[-1] if mixers else None


def gradcam_layer(model):
    """``(name, how)``: the layer Grad-CAM reads (see the module's docstring); ``how`` is ``"conv"`` (its output is
    a (b, c, h, w) map) or ``"tokens"`` (its *input* is tokens, read through ``tokens_to_grid``). A one-line
    ``ValueError`` naming the model where there is none."""
    modules = dict(model.named_modules())
    if isinstance(modules.get("layer4"), nn.Module):
        return "layer4", "conv"
    for child in STEM_NAMES:
        convs = [n for n, m in modules.items() if n.startswith(child + ".") and isinstance(m, nn.Conv2d)]
        if child in modules and (len(convs) > 1 or (convs and child != "to_patch_embedding")):
            return convs[-1], "conv"
    mixer = _last_mixer(model)
    if mixer is None:
        raise ValueError(f"{type(model).__name__}: no convolutional stem, layer4 or attention mixer for Grad-CAM")
    return mixer, "tokens"


@contextmanager
def tokens_to_grid(model, name, *, cls_tokens=None):
    """Route the (b, n, d) input of ``model``'s module ``name`` through a ``TokensToGrid`` and back before the
    module runs (a forward pre-hook; removed afterwards), so that the tap's output is a grid captum's layer methods
    can read. Yields the tap. ``cls_tokens``: default 1 where the token count is a square plus one, else 0."""
    tap = TokensToGrid(cls_tokens if cls_tokens is not None else 1)

    def hook(module, args):
        tokens = args[0]
        if cls_tokens is None and tokens.dim() == 3:
            tap.cls_tokens = 0 if math.isqrt(tokens.shape[1]) ** 2 == tokens.shape[1] else 1
        return (tap.tokens(tap(tokens)), *args[1:])

    handle = dict(model.named_modules())[name].register_forward_pre_hook(hook)
    try:
        yield tap
    finally:
        handle.remove()


def _baseline(x, baseline):
    if isinstance(baseline, torch.Tensor):
        return baseline.to(x)
    if baseline == "grey":  # zero after normalisation
        return torch.zeros_like(x)
    if baseline == "black":
        return normalize(torch.zeros_like(x, dtype=torch.uint8)).to(x).expand_as(x)
    raise ValueError(f"baseline must be one of {BASELINES} or a tensor, got {baseline!r}")


@contextmanager
def _evaluating(model):
    was = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was)


@checked("n_steps", "window", "stride", "seed")
def attribute(model, x, method, target=None, *, baseline="grey", n_steps=50, internal_batch_size=None, window=4,
              stride=4, noise_tunnel=None, seed=0):
    """Attributions of ``target`` (default: each image's predicted class) for normalised images ``x`` (b, c, h, w).

    ``method``: ``integrated_gradients`` (``baseline`` "grey" | "black" | a tensor, ``n_steps``,
    ``internal_batch_size``), ``occlusion`` (a ``window`` x ``window`` patch of the baseline slid by ``stride``
    pixels), ``grad_cam`` (``LayerGradCam`` on ``gradcam_layer``, ReLU'd, upsampled bilinearly).
    ``noise_tunnel``: ``{"nt_samples", "stdevs", "nt_type"}`` wraps IG or Occlusion in captum's ``NoiseTunnel``
    (its noise drawn from a generator seeded by ``seed``; the caller's RNG is untouched).

    Returns ``{"map": (b, h, w), "delta": (b,) IG's convergence delta or None, "method", "target": (b,),
    "settings": what was used}``. The model runs in eval mode (restored after), with gradients on."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    with _evaluating(model), torch.enable_grad():
        if target is None:
            with torch.no_grad():
                target = model(x).argmax(dim=-1)
        base = _baseline(x, baseline)
        delta, settings = None, {}
        if method == "grad_cam":
            name, how = gradcam_layer(model)
            settings = {"layer": name, "read": how}
            if how == "tokens":
                with tokens_to_grid(model, name) as tap:
                    attr = LayerGradCam(model, tap).attribute(x, target=target, relu_attributions=True)
            else:
                attr = LayerGradCam(model, dict(model.named_modules())[name]).attribute(
                    x, target=target, relu_attributions=True)
            attr = LayerAttribution.interpolate(attr, tuple(x.shape[-2:]), interpolate_mode="bilinear")
            return {"map": attr.sum(dim=1).detach(), "delta": None, "method": method, "target": target,
                    "settings": settings}
        if method == "integrated_gradients":
            explainer = IntegratedGradients(model)
            options = {"baselines": base, "n_steps": n_steps, "internal_batch_size": internal_batch_size}
            settings = {"baseline": baseline if isinstance(baseline, str) else "tensor", "n_steps": n_steps}
        else:
            explainer = Occlusion(model)
            c = x.shape[1]
            options = {"sliding_window_shapes": (c, window, window), "strides": (c, stride, stride),
                       "baselines": base, "perturbations_per_eval": 16}
            settings = {"baseline": baseline if isinstance(baseline, str) else "tensor", "window": window,
                        "stride": stride}
        if noise_tunnel:
            with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
                torch.manual_seed(seed)
                attr = NoiseTunnel(explainer).attribute(x, target=target, **noise_tunnel, **options)
            settings["noise_tunnel"] = dict(noise_tunnel)
        elif method == "integrated_gradients":
            attr, delta = explainer.attribute(x, target=target, return_convergence_delta=True, **options)
            delta = delta.detach()
        else:
            attr = explainer.attribute(x, target=target, **options)
    return {"map": attr.detach().abs().sum(dim=1), "delta": delta, "method": method, "target": target,
            "settings": settings}


def rank_agreement(maps):
    """``{"methods": [...], "matrix": M x M}``: Spearman's rank correlation between each pair of methods' maps
    (``{method: (b, h, w)}``) of the same image, averaged over the images (ranks by sorting: ties, rare in real
    attributions, broken by position)."""
    names = list(maps)
    matrix = [[float(spearman(maps[a].double(), maps[b].double()).mean()) for b in names] for a in names]
    return {"methods": names, "matrix": matrix}


#: the most images one forward of ``deletion_insertion`` takes
CURVE_BATCH = 256


@checked("steps")
@torch.no_grad()
def deletion_insertion(model, x, attribution, *, target=None, steps=16, baseline=None):
    """The ``target`` class's softmax probability (default: the predicted class) as the most-attributed pixels of
    ``attribution`` (b, h, w) are replaced by ``baseline`` (default: mid-grey, zero) in ``steps`` equal
    chunks (deletion), and as they are put into the baseline image (insertion).

    Returns ``{"fractions": (steps + 1,), "deletion": (b, steps + 1), "insertion": (b, steps + 1),
    "deletion_auc": (b,), "insertion_auc": (b,)}``, areas by the trapezoid rule over the fraction of pixels."""
    with _evaluating(model):
        b, _, h, w = x.shape
        if target is None:
            target = model(x).argmax(dim=-1)
        base = torch.zeros_like(x) if baseline is None else _baseline(x, baseline)
        order = attribution.reshape(b, -1).argsort(dim=-1, descending=True)
        fractions = torch.linspace(0, 1, steps + 1)
        ranks = torch.empty_like(order).scatter_(1, order, torch.arange(h * w, device=order.device).expand(b, -1))
        images = []  # per fraction: the deleted images, then the inserted ones
        for f in fractions:
            mask = (ranks < round(float(f) * h * w)).view(b, 1, h, w)
            images += [torch.where(mask, base, x), torch.where(mask, x, base)]
        # every curve point in forwards of up to CURVE_BATCH images (the model is in eval mode: a batch's images do
        # not interact), not two forwards per point
        probs = torch.cat([model(chunk).softmax(dim=-1) for chunk in torch.cat(images).split(CURVE_BATCH)])
        picked = probs.gather(1, target.repeat(2 * (steps + 1)).view(-1, 1)).float().cpu().view(steps + 1, 2, b)
        out = {"fractions": fractions}
        for i, name in enumerate(("deletion", "insertion")):
            out[name] = picked[:, i].T.contiguous()
            out[f"{name}_auc"] = torch.trapezoid(out[name], fractions, dim=1)
    return out


@checked("ig_steps", "window", "stride", "steps")
def attribution_measures(model, x, *, methods=METHODS, ig_steps=50, internal_batch_size=None, baseline="grey",
                         window=4, stride=4, steps=16, show=None):
    """One model's attributions of its predicted classes on normalised images ``x``, JSON-ready: for each of
    ``methods`` the maps of the first ``show`` images (each divided by its maximum, 4 decimals), IG's convergence
    delta, the deletion and insertion curves and their areas per image, and the methods' ``rank_agreement``."""
    with _evaluating(model), torch.no_grad():
        target = model(x).argmax(dim=-1)
    maps, out = {}, {"target": target.tolist(), "methods": {}}
    for method in methods:
        result = attribute(model, x, method, target=target, baseline=baseline, n_steps=ig_steps,
                           internal_batch_size=internal_batch_size, window=window, stride=stride)
        maps[method] = result["map"]
        curves = deletion_insertion(model, x, result["map"], target=target, steps=steps)
        shown = result["map"][:show] if show is not None else result["map"]
        scale = shown.flatten(1).amax(dim=1).clamp_min(1e-12).view(-1, 1, 1)
        out["methods"][method] = {
            "maps": rounded(shown / scale, 4), "settings": result["settings"],
            "delta": rounded(result["delta"], 6) if result["delta"] is not None else None,
            **{k: rounded(v, 4) for k, v in curves.items()}}
    out["agreement"] = rank_agreement(maps)
    return out
