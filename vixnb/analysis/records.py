"""Analysis of trained models: a fixed panel of test images, and the attention measures the chapters show.

``panel(dataset, per_class=2)`` is the documented, fixed set of test images every page uses: the first
``per_class`` test images of each class, taken class by class in turns (the first image of classes 0, 1, ..., 9,
then the second of each), so that its first five are five different classes (the `shaped` paper's Fig. 8 uses
those five). The smoke profile's synthetic set gives its own panel the same way.

``attention_record(runs, ...)`` is the stored measurement behind the `shaped` chapter's Fig. 8 and Fig. 11: for
each trained model (weights kept by ``train.run(keep_weights=True)``), the class token's attention over the
patches in every layer for the panel's first images, and the diagonal prominence (``diagonal_prominence``)
per layer and head over the first test images, of the map each mixer applies (rows normalised to sum 1: shaped
attention's alpha I + beta A divided by alpha + beta) and of its softmax part alone.
"""
from __future__ import annotations

import torch

from .. import layers
from .maps import class_token_map, collect_attention_maps, diagonal_prominence


def panel(dataset="cifar10", per_class=2, *, labels=None):
    """Test-set indices of the panel (see the module's docstring); ``labels``: the test labels, when loaded."""
    from ..data import load_split

    if labels is None:
        _, labels = load_split(dataset, "test")
    labels = [int(v) for v in labels]
    by_class = {}
    for i, label in enumerate(labels):
        if len(by_class.setdefault(label, [])) < per_class:
            by_class[label].append(i)
    return [by_class[c][k] for k in range(per_class) for c in sorted(by_class) if k < len(by_class[c])]


def _rounded(t, digits=5):
    return [round(float(v), digits) for v in t.flatten()] if t.dim() <= 1 else [_rounded(row, digits) for row in t]


@torch.no_grad()
def model_maps(model, images, *, prominence_images=None):
    """One model's measures on uint8 ``images`` (b, c, h, w): ``class_token`` (image, layer, patch) attention of
    the class token over the patches (heads averaged; the softmax part for shaped attention), ``prominence``
    (layer, head) of the normalised applied map, ``prominence_softmax`` (layer, head) of its softmax part, over
    ``prominence_images`` (default: ``images``), and ``identity_share`` (alpha / (alpha + beta) per shaped layer)."""
    from ..data import normalize

    x = normalize(images)
    softmax = collect_attention_maps(model, x, method="softmax_map")
    cls = torch.stack([class_token_map(m).flatten(1) for m in softmax], dim=1)  # (b, layers, patches)
    rest = normalize(prominence_images) if prominence_images is not None else x
    prominence, prominence_softmax = [], []
    for chunk in rest.split(250):
        applied = collect_attention_maps(model, chunk)
        applied = [m / m.sum(dim=-1, keepdim=True) for m in applied]
        prominence.append(diagonal_prominence(applied) * len(chunk))
        prominence_softmax.append(diagonal_prominence(
            collect_attention_maps(model, chunk, method="softmax_map")) * len(chunk))
    n = len(rest)
    return {"class_token": _rounded(cls), "prominence": _rounded(sum(prominence) / n),
            "prominence_softmax": _rounded(sum(prominence_softmax) / n),
            "identity_share": [round(v, 5) for v in layers.shaped_ratios(model)]}


def attention_record(runs, *, dataset, profile, compute="never", store=None, images=5, prominence_images=1000):
    """The measurement record of ``runs`` ``{name: (model, settings, seed)}``: for each, its trained model's
    ``model_maps`` on the panel's first ``images`` images and the first ``prominence_images`` test images, the
    training run it comes from, and where it was measured. A run whose weights are not stored (and cannot be
    trained under ``compute``) gets ``{"status": "not yet run", "reason": ...}``."""
    from ..data import load_split
    from ..profiles import get_profile
    from ..results import provenance
    from ..train import trained_model

    used = get_profile(profile).get("dataset_override") or dataset  # the smoke profile's synthetic set
    test_x, test_y = load_split(used, "test")
    shown = panel(used, labels=test_y)[:images]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = {}
    for name, (model, settings, seed) in runs.items():
        # measuring again never trains again: "always" reuses the stored weights
        module, result = trained_model(model, dataset=dataset, profile=profile, seed=seed,
                                       compute="missing" if compute == "always" else compute, store=store, **settings)
        if module is None:
            out[name] = {"status": "not yet run", "reason": result.get("reason", "no stored weights")}
            continue
        module = module.to(device)
        maps = model_maps(module, test_x[shown].to(device), prominence_images=test_x[:prominence_images].to(device))
        prov = result["provenance"]
        out[name] = {"status": "done", "model": model, "settings": settings, "seed": seed, **maps,
                     "config": result["config"], "weights_sha256": result["weights"]["sha256"],
                     "training": {k: prov.get(k) for k in ("commit", "device", "finished", "profile", "seed")}}
    return {"dataset": used, "panel": shown, "prominence_images": min(prominence_images, len(test_x)),
            "runs": out, "provenance": provenance(device, stamp="measured", profile=profile, dataset=dataset)}


def record_stale(record, store):
    """Why a stored attention record no longer answers (a run's weights are not the ones it was measured from:
    retrained, or gone), or None."""
    for name, run in (record.get("runs") or {}).items():
        if "config" not in run:
            continue
        stored = store.get(run["config"])
        sha = ((stored or {}).get("weights") or {}).get("sha256")
        if sha != run.get("weights_sha256"):
            return f"{name}'s weights changed since it was measured ({'retrained' if sha else 'no weights stored now'})"
    return None
