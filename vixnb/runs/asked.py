"""Which runs the book asks for, and what each keeps: the one home of that answer, for the plan, the pages and the
maps study.

- A chapter's tables (``table_runs``: every row, on the table's dataset, with the profile's seeds and the chapter's
  profile settings), and a row as the first chapter that trains it makes it (``row_runs``).
- The maps study's runs (``vixnb/analysis/study.yaml``, ``study_run``): a paper table's row, as that paper's
  chapter trains it, or any registered model by name (``{model: NAME, settings: {...}}``), trained for the study
  on its dataset.
- What a run keeps of its trained weights (``table_specs``, ``study_specs``: ``RunSpec`` s with their ``keep``): the
  first seed of a chapter's ``keep_weights`` tables and of the study's runs that draw a map or are attributed, in the
  store where they fit its cap, else on this machine (``make.keep_where``); the rest keep none. Whether a model draws
  a map is its layers' declaration (``layers.maps.model_draws_map``), never a sentence.
"""
from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path

import yaml

from .. import papers
from ..layers.maps import model_draws_map
from ..models import list_models, model_fact
from ..validate import checked
from .make import keep_where, weights_too_large
from .profiles import get_profile
from .spec import RunSpec, row_source, settings_of_model

#: the maps study's file: its runs, figures' runs and per-profile sizes
STUDY_FILE = Path(__file__).resolve().parents[1] / "analysis" / "study.yaml"


@checked("seeds")
def table_runs(key, chapter, table, profile, seeds=None):
    """``[(row, model, settings, seeds)]``: the runs a chapter (``chapter``, one chapter of paper ``key``'s ``book``
    section) makes of ``table`` in ``profile``. Settings are the table's (``papers.row_run``), then the chapter's
    ``profile_settings`` of the profile (the smoke profile's smaller models). Seeds are the profile's, or as many
    as the table's ``runs`` where the paper made more runs (GPU profiles only); a table with ``first_seed_only``
    (runs kept as they were made, not asked for again) takes only the first."""
    prof = get_profile(profile)
    seeds = list(seeds if seeds is not None else prof.get("seeds") or [0])
    if papers.table(key, table).get("first_seed_only"):
        seeds = seeds[:1]
    runs = papers.table(key, table).get("runs", 0)
    if prof["device"] == "cuda" and runs > len(seeds):
        seeds += [max(seeds) + 1 + i for i in range(runs - len(seeds))]
    shrink = (chapter.get("profile_settings") or {}).get(profile) or {}
    runs = papers.table_runs(key, table)
    if unknown := [(row, model) for row, model, _ in runs if model not in list_models()]:
        row, model = unknown[0]
        raise papers.PaperFileError(f"vixnb/papers/{key}.yaml: table {table!r}, row {row!r} names unknown model "
                                    f"{model!r}; give the row a registered model's name (or a `model:` one; `vixnb "
                                    "models` lists them)")
    return [(row, model, chapter_settings(key, settings, shrink), seeds) for row, model, settings in runs]


def row_runs(key, profile):
    """``{row: (model, settings)}``: every row of paper ``key``'s tables as the first chapter that trains its table
    makes it in ``profile`` (``table_runs``: the chapter's profile settings, a warm start resolved); a row no chapter
    trains, as its table gives it (``papers.row_run``). The one answer to "which run is this row" for the plan, the
    claims and the pages."""
    found = {}
    for chapter in papers.book_chapters(key):
        for table in chapter.get("train") or []:
            for row, model, settings, _ in table_runs(key, chapter, table, profile):
                found.setdefault(row, (model, settings))
    for row, run in papers.paper_runs(key).items():
        found.setdefault(row, run)
    return found


def chapter_settings(key, settings, shrink):
    """A run's ``settings`` (a row of paper ``key``) as a chapter makes it: with the chapter's profile settings
    ``shrink``, and a warm start from a row (``init_from: vit_scratch``) naming that row's run as the chapter makes
    it too (``{"run", "model", "settings"}``, the same ``shrink`` applied)."""
    settings = {**settings, **shrink}
    source = settings.get("init_from")
    runs = papers.paper_runs(key) if isinstance(source, str) else {}
    if source in runs:
        settings["init_from"] = row_source(runs, source, shrink)
    return settings


# ----- the maps study's runs ---------------------------------------------------------------------------------

@cache
def study():
    """The maps study's settings (``vixnb/analysis/study.yaml``): its runs, figures' runs and per-profile sizes."""
    return yaml.safe_load(STUDY_FILE.read_text())


def study_run(label, profile):
    """``(model, settings, seed, dataset)`` of the study's run ``label``: its paper's table row as that paper's
    chapter trains it in ``profile`` (``table_runs``; the first seed), or a registered model the study names itself
    (``{model: NAME, settings: {...}}``), on the study's dataset with the profile's first seed."""
    runs = study()["runs"]
    if label not in runs:
        raise ValueError(f"{label!r} is not a run of vixnb/analysis/study.yaml; its runs: {', '.join(runs)}")
    spec = runs[label]
    if "model" in spec:  # a model of our own choosing, no paper's row: the study trains it
        if spec["model"] not in list_models():
            raise ValueError(f"vixnb/analysis/study.yaml: run {label!r} names model {spec['model']!r}, which is not "
                             "registered; give a registered model's name (`vixnb models` lists them)")
        settings = {**profile_model_overrides(profile), **(spec.get("settings") or {})}
        return spec["model"], settings, (get_profile(profile).get("seeds") or [0])[0], study()["dataset"]
    chapter = papers.training_chapter(spec["paper"], spec["table"])
    for row, model, settings, seeds in table_runs(spec["paper"], chapter, spec["table"], profile):
        if row == spec["row"]:
            return model, settings, seeds[0], papers.table(spec["paper"], spec["table"])["dataset"]
    raise ValueError(f"vixnb/analysis/study.yaml: run {label!r} names row {spec['row']!r}, which table "
                     f"{spec['table']!r} of vixnb/papers/{spec['paper']}.yaml does not have")


def weights_over_cap(model, settings, seed, dataset, profile):
    """Why the run's weights cannot be kept in the store (``runs.weights_too_large``), or None."""
    return weights_too_large(RunSpec.of(model, dataset=dataset, profile=profile, seed=seed, **settings).config)


def study_kept_rows(key, table, profile):
    """The rows of paper ``key``'s ``table`` whose first-seed run keeps its weights for the maps study: the study's
    runs that have an attention map or are attributed, where the weights fit the cap."""
    s = study()
    rows = set()
    for label, spec in s["runs"].items():
        if (spec.get("paper"), spec.get("table")) != (key, table):
            continue
        model, settings, seed, dataset = study_run(label, profile)
        mapped = model_fact(model_draws_map, model, dataset, study_model_json(settings, profile))
        if (mapped or label in s["attribution"]) and not weights_over_cap(model, settings, seed, dataset, profile):
            rows.add(spec["row"])
    return rows


def table_specs(key, chapter, table, profile, seeds=None):
    """``[(row, [RunSpec per seed])]``: the runs ``chapter`` (its entry in paper ``key``'s ``book`` list) makes of
    ``table`` in ``profile`` (``asked.table_runs``, on the table's dataset), each with what it keeps of its trained
    weights. The one keep
    decision, which the plan and the pages both ask: the first seed of every row of the chapter's ``keep_weights``
    tables, and of the runs the maps study measures (``study_kept_rows``), keeps them, in the store where they fit
    its cap, else on this machine (``runs.keep_where``: a ViT-B/16's stay on the GPU machine); the rest keep none."""
    dataset = papers.table(key, table)["dataset"]
    if table in (chapter.get("keep_weights") or []):
        kept = {row for row, *_ in papers.table_runs(key, table)}
    else:
        kept = study_kept_rows(key, table, profile)
    out = []
    for row, model, settings, run_seeds in table_runs(key, chapter, table, profile, seeds):
        specs = [RunSpec.of(model, dataset=dataset, profile=profile, seed=seed, **settings) for seed in run_seeds]
        if row in kept and specs:
            specs[0] = replace(specs[0], keep=keep_where(specs[0].config))
        out.append((row, specs))
    return out


def study_own_specs(profile):
    """``[(label, RunSpec)]``: the maps study's runs that are no paper's table row (a model ``study.yaml`` names), which
    the study asks for itself (the plan lists them under the maps chapter), each keeping its first seed's weights (in
    the store where they fit its cap, else on this machine: ``make.keep_where``)."""
    out = []
    for label, spec in study()["runs"].items():
        if "model" in spec:
            model, settings, seed, dataset = study_run(label, profile)
            run = RunSpec.of(model, dataset=dataset, profile=profile, seed=seed, **settings)
            out.append((label, replace(run, keep=keep_where(run.config))))
    return out


def study_model_json(settings, profile):
    """The ``create_model`` settings of a study run (its ``settings`` less the run's options such as ``batch_size``,
    over the profile's ``model_overrides``) as the sorted JSON ``models.model_fact`` takes."""
    return json.dumps({**profile_model_overrides(profile), **settings_of_model(settings)}, sort_keys=True)


def profile_model_overrides(profile):
    """The profile's ``model_overrides`` (the smoke profile's smaller models), which a study run of a model takes."""
    return dict(get_profile(profile).get("model_overrides") or {})
