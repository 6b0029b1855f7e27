"""Analysis of trained models: a fixed panel of test images, and the attention measures the chapters show.

``panel(dataset, per_class=2)`` is the documented, fixed set of test images every page uses: the first
``per_class`` test images of each class, taken class by class in turns (the first image of classes 0, 1, ..., 9,
then the second of each), so that its first five are five different classes (the `shaped` paper's Fig. 8 uses
those five). The smoke profile's synthetic set gives its own panel the same way.

``attention_record(runs, ...)`` is the stored measurement behind the `shaped` chapter's Fig. 8 and Fig. 11: for
each trained model (weights kept where its ``RunSpec.keep`` says), the class token's attention over the
patches in every layer for the panel's first images, and the diagonal prominence (``diagonal_prominence``)
per layer and head over the first test images, of the map each mixer applies (rows normalised to sum 1: shaped
attention's alpha I + beta A divided by alpha + beta) and of its softmax part alone.

``prediction_record(runs, ...)``, behind the `linattn` chapter's prediction panels: each trained model's predicted
label of the first ten test images (the report's selection, "the first 10 images"; ``panel`` and ``predicted``) and
of the book's panel, one image of each class (``per_class``).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .. import layers
from ..data import DatasetNotFoundError, dataset_spec, load_split, normalize
from ..models import meta_model, model_fact
from ..runs.profiles import get_profile, small_sizes
from ..results import provenance
from ..runs.policy import training_policy, weights_changed
from ..runs.asked import study, study_model_json, study_run
from ..runs.make import trained_model, weights_too_large
from .approximations import approximation_errors
from .attribution import attribution_measures
from .map_measures import (attention_distance, centre_query, class_token_map, diagonal_prominence, rollout, rounded,
                           row_entropy)
from ..layers.maps import model_draws_map
from .maps import attention_maps, collect_attention_maps, has_skip, map_description
from .sanity_checks import randomisation_check
from ..validate import checked


@checked("per_class")
def panel(dataset="cifar10", per_class=2, *, labels=None):
    """Test-set indices of the panel (see the module's docstring); ``labels``: the test labels, when loaded."""
    if labels is None:
        _, labels = load_split(dataset, "test")
    labels = [int(v) for v in labels]
    by_class = {}
    for i, label in enumerate(labels):
        if len(by_class.setdefault(label, [])) < per_class:
            by_class[label].append(i)
    return [by_class[c][k] for k in range(per_class) for c in sorted(by_class) if k < len(by_class[c])]


@torch.no_grad()
def model_maps(model, images, *, prominence_images=None):
    """One model's measures on uint8 ``images`` (b, c, h, w): ``class_token`` (image, layer, patch) attention of
    the class token over the patches (heads averaged; the softmax part for shaped attention), ``prominence``
    (layer, head) of the normalised applied map, ``prominence_softmax`` (layer, head) of its softmax part, over
    ``prominence_images`` (default: ``images``), and ``identity_share`` (alpha / (alpha + beta) per shaped layer)."""
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
    return {"class_token": rounded(cls), "prominence": rounded(sum(prominence) / n),
            "prominence_softmax": rounded(sum(prominence_softmax) / n),
            "identity_share": [round(v, 5) for v in layers.shaped_ratios(model)]}


@checked("images", "prominence_images")
def attention_record(runs, *, dataset, profile, compute="never", store=None, images=5, prominence_images=1000):
    """The measurement record of ``runs`` ``{name: RunSpec}``: for each, its trained model's
    ``model_maps`` on the panel's first ``images`` images and the first ``prominence_images`` test images, the
    training run it comes from, and where it was measured; the panel's images themselves (``images``: (h, w, 3)
    uint8 as lists, a few kB each at 32 x 32) and their ``labels``, so that a page shows them where the data set is
    not. A run whose weights are not stored (and cannot be
    trained under ``compute``) gets ``{"status": "not yet run", "reason": ...}``."""
    used, test_x, test_y, shown = _panel_split(dataset, profile, images)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = {}
    for name, module, out[name] in _trained_runs(runs, compute=compute, store=store,
                                                 device=device):  # out[name]: the run's entry
        if module is not None:
            out[name].update(model_maps(module, test_x[shown].to(device),
                                        prominence_images=test_x[:prominence_images].to(device)))
    return {"dataset": used, "panel": shown, "prominence_images": min(prominence_images, len(test_x)),
            "images": test_x[shown].permute(0, 2, 3, 1).tolist(), "labels": [int(test_y[i]) for i in shown],
            "runs": out, "provenance": provenance(device, stamp="measured", profile=profile, dataset=dataset)}


@checked("images")
def prediction_record(runs, *, dataset, profile, compute="never", store=None, images=10):
    """The measurement record of the predicted labels of ``runs`` ``{name: RunSpec}`` (paper
    `linattn`'s panels of test images with each model's predicted label), in two selections of ``images`` test
    images: the report's, the first ones of the test set (``panel``, ``labels``, and each run's ``predicted``, in
    order), and the book's panel, one of each class (``per_class``:
    ``{"panel", "labels", "predicted": {name: [...]}}``); with the training run each comes from and where it was
    measured. A run whose weights are not here (and cannot be trained under ``compute``) gets
    ``{"status": "not yet run", "reason": ...}``."""
    used, test_x, test_y, per_class = _panel_split(dataset, profile, images)
    first = list(range(min(images, len(test_y))))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out, of_class = {}, {}
    for name, module, out[name] in _trained_runs(runs, compute=compute, store=store,
                                                 device=device):  # out[name]: the run's entry
        if module is not None:
            with torch.no_grad():  # the forward only: trained_model may train the run first
                logits = module(normalize(test_x[first + per_class].to(device)))
            labels = [int(v) for v in logits.argmax(dim=-1).cpu()]
            out[name]["predicted"], of_class[name] = labels[:len(first)], labels[len(first):]
    return {"dataset": used, "panel": first, "labels": [int(test_y[i]) for i in first], "runs": out,
            "per_class": {"panel": per_class, "labels": [int(test_y[i]) for i in per_class], "predicted": of_class},
            "provenance": provenance(device, stamp="measured", profile=profile, dataset=dataset)}


def _panel_split(dataset, profile, images):
    """``(data set used, test images, test labels, the panel's first images indices)``: the smoke profile reads its
    synthetic set in place of ``dataset``."""
    used = get_profile(profile).get("dataset_override") or dataset
    test_x, test_y = load_split(used, "test")
    return used, test_x, test_y, panel(used, labels=test_y)[:images]


def _trained_runs(runs, *, compute, store, device):
    """``(name, module on device or None, record entry)`` of each run of ``runs`` ``{name: RunSpec}``
    (``_trained_run``), one after another."""
    for name, spec in runs.items():
        module, entry = _trained_run(spec, compute=compute, store=store)
        yield name, (module.to(device) if module is not None else None), entry


def _trained_run(spec, *, compute, store):
    """``(module, entry)``: the trained model of run ``spec`` (``runs.make.trained_model``; measuring again never trains
    again: "always" reuses the stored weights) and its record entry (the run, its config and weights' SHA-256, where
    it was trained), or ``(None, {"status": "not yet run", "reason": ...})``."""
    module, result = trained_model(spec, compute=training_policy(compute), store=store)
    if module is None:
        return None, {"status": "not yet run", "reason": result.get("reason", "no stored weights")}
    prov = result["provenance"]
    return module, {"status": "done", "model": spec.model, "settings": dict(spec.settings), "seed": spec.seed,
                    "config": result["config"], "weights_sha256": result["weights"]["sha256"],
                    "training": {k: prov.get(k) for k in ("commit", "device", "finished", "profile", "seed")}}


def maps_record_stale(record, store):
    """``record_stale`` of an ``attention_record``, which is also stale kept without its panel's images (a page shows
    them beside the maps where the data set is not), or None."""
    if record.get("panel") and not record.get("images"):
        return "it keeps no panel images (made before records kept them: a page shows them beside the maps)"
    return record_stale(record, store)


def record_stale(record, store):
    """Why a stored attention record no longer answers (a run's weights are not the ones it was measured from:
    retrained, or gone; for a maps-study record, also its runs or its profile's sizes in study.yaml changed), or
    None."""
    measurement = record.get("study")
    if measurement in STUDY_RECORDS:
        profile = (record.get("provenance") or {}).get("profile")
        if set(record.get("runs") or {}) != set(study_labels(measurement, profile)):
            return f"the study's {measurement} runs changed since it was measured (vixnb/analysis/study.yaml)"
        if profile in study()["profiles"] and record.get("settings") != study_settings(profile):
            return f"the study's {profile} settings changed since it was measured (vixnb/analysis/study.yaml)"

    return weights_changed(record, store)


# ----- the maps study (study.yaml): attention maps and attributions of trained runs of every paper ------------

STUDY_RECORDS = ("attention", "attribution")


def study_settings(profile):
    """The maps study's sizes in ``profile`` (images, shown maps, IG steps, occlusion window and stride, curve
    steps)."""
    settings = study()["profiles"]
    if get_profile(profile).get("rehearsal"):
        return settings["smoke"]  # a dress rehearsal measures at the pipeline check's sizes
    if profile not in settings:
        raise ValueError(f"profile {profile!r}: vixnb/analysis/study.yaml has no `profiles.{profile}` entry; add one "
                         f"like those it has ({', '.join(settings)})")
    return settings[profile]


def study_record_name(measurement, dataset=None):
    """The name of a stored measurement of the maps study: ``maps-attention-<dataset>`` or ``maps-attribution-...``."""
    if measurement not in STUDY_RECORDS:
        raise ValueError(f"measurement must be one of {STUDY_RECORDS}, got {measurement!r}")
    return f"maps-{measurement}-{dataset or study()['dataset']}"


def study_maps(profile):
    """``{label: {"model", "source", "map", "draws"}}`` of the study's runs: the model, the paper table row it is, what
    its attention map is (``maps.map_description``) and whether one can be made (``layers.maps.model_draws_map``), from
    the models built on the meta device (nothing trained or measured)."""
    out = {}
    for label, spec in study()["runs"].items():
        run = study_run(label, profile)
        model, settings_json = run.model, study_model_json(run.settings, profile)
        described = model_fact(map_description, model, run.dataset, settings_json)
        source = f"{spec['paper']} {spec['table']}, row {spec['row']}" if "row" in spec else "the study's own run"
        out[label] = {"model": model, "source": source,
                      "map": described.removeprefix(f"{model}: "),
                      "draws": bool(model_fact(model_draws_map, model, run.dataset, settings_json))}
    return out


def study_runs(record):
    """A study record's runs in ``study.yaml``'s order (a stored record's are sorted by name); ``{}`` for None."""
    stored = record["runs"] if record else {}
    return {label: stored[label] for label in study()["runs"] if label in stored}


def panel_images(record, count=None):
    """The first ``count`` panel images of a measurement record as (h, w, 3) uint8 arrays: those it keeps
    (``images``), else read from its data set (``record["dataset"]``, ``record["panel"]``), or None where it keeps
    none and that data set is not on this machine."""
    if record.get("images"):
        return [np.asarray(image, dtype=np.uint8) for image in record["images"][:count]]
    try:
        test_x, _ = load_split(record["dataset"], "test")
    except DatasetNotFoundError:
        return None
    return [test_x[i].permute(1, 2, 0).numpy() for i in record["panel"][:count]]


def panel_labels(record, count=None):
    """The class of each of the first ``count`` panel images of a measurement record: its ``labels`` where it keeps
    them, else by the panel's own order (``panel``: the first image of every class in class order, then the second of
    every class, ...); class indices."""
    if record.get("labels"):
        return list(record["labels"][:count])
    classes = dataset_spec(record["dataset"]).num_classes
    return [k % classes for k in range(len(record["panel"][:count]))]


def trained(label, profile, compute, store):
    """``(module, result, run)`` of a study run: its trained model (``runs.make.trained_model``; measuring again never
    trains again) or ``(None, {"status", "reason"}, run)``."""
    spec = study_run(label, profile)
    run = {"model": spec.model, "settings": dict(spec.settings), "seed": spec.seed}
    over = weights_too_large(spec.config)
    if over:
        return None, {"status": "not kept", "reason": over}, run
    module, entry = _trained_run(spec, compute=compute, store=store)
    return module, entry, run


def _panel_images(profile):
    used = get_profile(profile).get("dataset_override") or study()["dataset"]
    test_x, test_y = load_split(used, "test")
    shown = panel(used, labels=test_y)[:study_settings(profile)["images"]]
    return used, shown, test_x[shown], test_y[shown]


@torch.no_grad()
def run_maps(model, images, *, shown, centre=True, approximation=None):
    """One trained model's attention measures on uint8 ``images`` (b, c, h, w): what its map is (``map_description``),
    the rollout (class token's row, or the mean row without a class token; the residual identity added unless the
    blocks have no skip), with ``centre`` the image-centre patch's row in every layer (first image), per layer and
    head the row entropy,
    diagonal prominence and mean attention distance in pixels, and the randomisation check (the last half of the
    layers re-drawn: ``sanity_checks.randomisation_check``; one layer barely moves a mean-row rollout; for shaped
    attention also on its learned part beta A alone, ``randomisation_learned``); maps for the first
    ``shown`` images only. ``approximation``: ``{"features": [...], "landmarks": [...]}`` adds the Performer and
    Nystrom approximations' distance to the model's own exact softmax maps."""
    x = normalize(images)
    layer_maps = attention_maps(model, x)
    listed = list(layer_maps.values())
    n = listed[-1].shape[-1]
    cls = 0 if math.isqrt(n) ** 2 == n else 1
    start, residual = ("cls" if cls else "mean"), has_skip(model)
    out = {"kind": map_description(model), "start": start, "residual": residual, "layers": list(layer_maps),
           "tokens": [m.shape[-1] for m in listed],
           "rollout": rounded(rollout(layer_maps, start=start, residual=residual)[:shown]),
           **({"centre_query": rounded(centre_query(layer_maps, cls_tokens=cls)[:1])} if centre else {}),
           "entropy": rounded(row_entropy(listed)), "prominence": rounded(diagonal_prominence(listed)),
           "distance_px": rounded(attention_distance(listed, image_size=images.shape[-1], cls_tokens=cls)),
           "randomised_layers": max(1, len(listed) // 2),
           "randomisation": randomisation_check(model, x, layers=max(1, len(listed) // 2))}
    if any(hasattr(m, "softmax_map") for m in model.modules()):  # shaped attention: its learned part alone too
        out["randomisation_learned"] = randomisation_check(model, x, layers=out["randomised_layers"],
                                                           method="softmax_map")
    if approximation:
        out["approximation"] = approximation_errors(model, x, features=approximation["features"],
                                                      landmarks=approximation["landmarks"])
    return out


def study_record(measurement, profile, *, compute="never", train=None, store=None):
    """A measurement record of the maps study (``measurement``: ``attention`` or ``attribution``) in ``profile``: for
    each of its runs (``attention``: all; ``attribution``: the attributed ones) the measures of its trained model
    (``run_maps``; ``attribution.attribution_measures``), the training run it comes from and where it was measured.
    A run without a map gets ``{"status": "no attention map", "kind": ...}``; one whose weights are not stored (and
    cannot be trained under ``train``, the compute policy for training, default ``compute``; the batch passes
    "never": its plan trains first) ``{"status": "not yet run", "reason": ...}``; one whose weights are over the
    cap ``{"status": "not kept", ...}``."""
    s, conf = study(), study_settings(profile)
    used, indices, images, labels = _panel_images(profile)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    images = images.to(device)
    out = {}
    for label in study_labels(measurement, profile):
        spec = study_run(label, profile)
        if measurement == "attention":
            meta = meta_model(spec.model, spec.dataset, study_model_json(spec.settings, profile))
            if not model_draws_map(meta):
                out[label] = {"status": "no attention map", "model": spec.model, "kind": map_description(meta)}
                continue
        module, run, _ = trained(label, profile, compute if train is None else train, store)
        if module is None:
            out[label] = {**run, "model": spec.model}
            continue
        module = module.to(device)
        if measurement == "attention":
            approx = ({"features": s["approximation_features"], "landmarks": s["approximation_landmarks"]}
                      if label == s["approximation"] else None)
            measures = run_maps(module, images, shown=conf["shown"], centre=label in s["linear"], approximation=approx)
        else:
            measures = attribution_measures(
                module, normalize(images), methods=tuple(s["attribution_methods"]), ig_steps=conf["ig_steps"],
                internal_batch_size=conf["ig_batch"], window=conf["occlusion_window"],
                stride=conf["occlusion_stride"], steps=conf["curve_steps"], show=conf["shown"])
        out[label] = {**run, **measures}
    return {"study": measurement, "dataset": used, "panel": indices, "labels": [int(v) for v in labels],
            "settings": conf, "runs": out,
            "provenance": provenance(device, stamp="measured", profile=profile, dataset=s["dataset"])}


def study_labels(measurement, profile=None):
    """The runs a study record of ``measurement`` measures: all for ``attention``, the attributed ones for
    ``attribution``; in a profile that measures at a CPU's small sizes (the smoke pipeline check, a dress rehearsal)
    only those of ``pipeline_check`` (one run per mechanism and family: every map's code path, in minutes)."""
    labels = list(study()["runs"] if measurement == "attention" else study()["attribution"])
    if profile is not None and small_sizes(profile):
        check = set(study()["pipeline_check"])
        labels = [label for label in labels if label in check]
    return labels
