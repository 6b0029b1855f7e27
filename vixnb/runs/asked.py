"""Which runs the book asks for, and what each keeps: the one home of that answer, for the plan, the pages and the
maps study.

- A chapter's tables (``table_runs``: every row, on the table's dataset, with the profile's seeds and the chapter's
  profile settings), and a row as the first chapter that trains it makes it (``row_runs``).
- The maps study's runs (``vixnb/analysis/study.yaml``, ``study_run``): a paper table's row, as that paper's
  chapter trains it, or any registered model by name (``{model: NAME, settings: {...}}``), trained for the study
  on its dataset.
- What a run keeps of its trained weights (``table_specs``, ``study_own_specs``: ``RunSpec`` s with their
  ``keep``): the first seed of a chapter's ``keep_weights`` tables and of the study's runs that draw a map or are
  attributed, in the store where they fit its cap, else on this machine (``make.keep_where``); the rest keep none.
  Whether a model draws a map is its layers' declaration (``layers.maps.model_draws_map``), never a sentence.
- Where every such run is made (``run_of``, ``runs_of``), and a run named by hand too: a command line, a notebook's
  list of models, a benchmark's paper configuration.
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
from .spec import Keep, RunSpec, row_source, settings_of_model

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
    """The ``RunSpec`` of the study's run ``label``: its paper's table row as that paper's chapter trains it in
    ``profile`` (``row_specs``; the first seed), or a registered model the study names itself (``{model: NAME,
    settings: {...}}``), on the study's dataset with the profile's first seed. It keeps no weights here (what a run
    keeps is ``table_specs``' and ``study_own_specs``')."""
    runs = study()["runs"]
    if label not in runs:
        raise ValueError(f"{label!r} is not a run of vixnb/analysis/study.yaml; its runs: {', '.join(runs)}")
    spec = runs[label]
    if "model" in spec:  # a model of our own choosing, no paper's row: the study trains it
        if spec["model"] not in list_models():
            raise ValueError(f"vixnb/analysis/study.yaml: run {label!r} names model {spec['model']!r}, which is not "
                             "registered; give a registered model's name (`vixnb models` lists them)")
        seed = (get_profile(profile).get("seeds") or [0])[0]
        return run_of(spec["model"], spec.get("settings") or {}, dataset=study()["dataset"], profile=profile,
                      seed=seed)
    chapter = papers.training_chapter(spec["paper"], spec["table"])
    for row, specs in row_specs(spec["paper"], chapter, spec["table"], profile):
        if row == spec["row"]:
            return specs[0]
    raise ValueError(f"vixnb/analysis/study.yaml: run {label!r} names row {spec['row']!r}, which table "
                     f"{spec['table']!r} of vixnb/papers/{spec['paper']}.yaml does not have")


def study_kept_rows(key, table, profile):
    """The rows of paper ``key``'s ``table`` whose first-seed run keeps its weights for the maps study: the study's
    runs that have an attention map or are attributed, where the weights fit the cap."""
    s = study()
    rows = set()
    for label, spec in s["runs"].items():
        if (spec.get("paper"), spec.get("table")) != (key, table):
            continue
        if study_keeps(label, study_run(label, profile), profile):
            rows.add(spec["row"])
    return rows


def study_keeps(label, run, profile):
    """Whether the maps study keeps the weights of its run ``label`` (``run``, its ``RunSpec``): it draws a map or is
    attributed, and its weights fit the store's cap (``make.weights_too_large``)."""
    mapped = model_fact(model_draws_map, run.model, run.dataset, study_model_json(run.settings, profile))
    return bool(mapped or label in study()["attribution"]) and not weights_too_large(run.config)


def table_specs(key, chapter, table, profile, seeds=None):
    """``[(row, [RunSpec per seed])]``: the runs ``chapter`` (its entry in paper ``key``'s ``book`` list) makes of
    ``table`` in ``profile`` (``asked.table_runs``, on the table's dataset), each with what it keeps of its trained
    weights. The one keep decision, which the plan and the pages both ask: the first seed of every row of the chapter's
    ``keep_weights`` tables, and of the runs the maps study measures (``study_kept_rows``), keeps them, in the store
    where they fit its cap, else on this machine (``runs.make.keep_where``: a ViT-B/16's stay on the GPU machine); the
    rest keep none."""
    if table in (chapter.get("keep_weights") or []):
        kept = {row for row, *_ in papers.table_runs(key, table)}
    else:
        kept = study_kept_rows(key, table, profile)
    out = []
    for row, specs in row_specs(key, chapter, table, profile, seeds):
        if row in kept and specs:
            specs[0] = replace(specs[0], keep=keep_where(specs[0].config))
        out.append((row, specs))
    return out


def row_specs(key, chapter, table, profile, seeds=None):
    """``[(row, [RunSpec per seed])]``: ``table_runs`` as runs, on the table's dataset, keeping no weights (what they
    keep: ``table_specs``)."""
    dataset = papers.table(key, table)["dataset"]
    return [(row, runs_of(model, settings, dataset=dataset, profile=profile, seeds=run_seeds))
            for row, model, settings, run_seeds in table_runs(key, chapter, table, profile, seeds)]


def book_rows(profile):
    """``[(paper, chapter, table, row, [RunSpec per seed])]``: every row of every table the chapters of every paper
    file train (their ``train`` lists, in the files' order; ``row_specs``), the one walk over them that the glance page,
    the run palette and their tests share."""
    return [(key, chapter, table, row, specs) for key in papers.DOCUMENTS if key in papers.list_papers()
            for chapter in papers.book_chapters(key) for table in chapter.get("train") or []
            for row, specs in row_specs(key, chapter, table, profile)]


def kept_specs(key, notebook, profile):
    """``{row: RunSpec}``: the runs whose weights chapter ``notebook`` of paper ``key`` keeps (the first seed of each
    row of its ``keep_weights`` tables, as ``table_specs`` keeps them), which its measurements of trained weights
    read."""
    chapter = papers.book_chapter(key, notebook)
    return {row: specs[0] for table in chapter.get("keep_weights") or []
            for row, specs in table_specs(key, chapter, table, profile) if specs}


def study_own_specs(profile):
    """``[(label, RunSpec)]``: the maps study's runs that are no paper's table row (a model ``study.yaml`` names), which
    the study asks for itself (the plan lists them under the maps chapter). Each keeps its weights by the rule of the
    study's table rows (``study_keeps``): in the store where it draws a map or is attributed and its weights fit the
    cap; else none (a run over the cap is "not kept" in the study's records, which never wait for it)."""
    out = []
    for label, spec in study()["runs"].items():
        if "model" in spec:
            run = study_run(label, profile)
            out.append((label, replace(run, keep=Keep.STORE) if study_keeps(label, run, profile) else run))
    return out


def study_model_json(settings, profile):
    """The ``create_model`` settings of a study run (its ``settings`` less the run's options such as ``batch_size``,
    over the profile's ``model_overrides``) as the sorted JSON ``models.model_fact`` takes."""
    return json.dumps({**profile_model_overrides(profile), **settings_of_model(settings)}, sort_keys=True)


def profile_model_overrides(profile):
    """The profile's ``model_overrides`` (the smoke profile's smaller models), which a study run of a model takes."""
    return dict(get_profile(profile).get("model_overrides") or {})


# ----- a chapter's questions of our own -------------------------------------------------------------------------

def question_specs(key, question, profile, seeds=None):
    """``{name: [RunSpec per seed]}``: the runs a chapter's ``question`` (its entry under ``questions`` in paper
    ``key``'s file) asks for in ``profile``, on its table's dataset with the profile's seeds (``seeds``: those
    instead): each of its ``models`` in the question's ``settings`` (named by the model), and the run of each of its
    ``rows`` (as the first chapter that trains the row makes it: ``row_runs``) with each of its ``gpu_arms`` (named
    ``row`` and ``row: arm``; an arm changes the row's settings, its seed aside)."""
    dataset = papers.table(key, question["table"])["dataset"]
    seeds = list(seeds if seeds is not None else get_profile(profile).get("seeds") or [0])
    asked = {model: (model, dict(question.get("settings") or {})) for model in question.get("models") or []}
    for row in question.get("rows") or []:
        model, settings = row_runs(key, profile)[row]
        for arm in [None, *(question.get("gpu_arms") or [])]:
            change = {k: v for k, v in question["arms"][arm].items() if k != "seed"} if arm else {}
            asked[f"{row}: {arm}" if arm else row] = (model, {**settings, **change})
    return {name: runs_of(model, settings, dataset=dataset, profile=profile, seeds=seeds)
            for name, (model, settings) in asked.items()}


def question_arms(key, question, profile, seed=0):
    """``{arm: RunSpec}`` of a question with ``arms`` (paper ``key``'s ``book: questions:``): ``base`` (each of its
    ``rows``' run; ``row``, the row's name, where it names several), then each arm, the row's run with the arm's
    settings, on the question's table's dataset."""
    spec = question_spec(key, question)
    dataset = papers.table(key, spec["table"])["dataset"]
    runs, out = row_runs(key, profile), {}
    for row in spec["rows"]:
        model, settings = runs[row]
        name = "base" if len(spec["rows"]) == 1 else row
        out[name] = run_of(model, settings, dataset=dataset, profile=profile, seed=seed)
        for arm, change in (spec.get("arms") or {}).items():
            change = dict(change)
            arm_seed = change.pop("seed", seed)
            label = arm if len(spec["rows"]) == 1 else f"{row}: {arm}"
            out[label] = run_of(model, {**settings, **change}, dataset=dataset, profile=profile, seed=arm_seed)
    return out


def question_spec(key, question):
    """The paper file's entry of ``question`` (a chapter's ``book: questions:``), or a one-line error naming the
    file."""
    for chapter in papers.book_chapters(key):
        if question in (chapter.get("questions") or {}):
            return chapter["questions"][question]
    raise ValueError(f"question={question!r}: no chapter of vixnb/papers/{key}.yaml has it under `questions`")


def run_of(model, settings=None, *, dataset="cifar10", profile="smoke", seed=0, keep=Keep.NONE):
    """The ``RunSpec`` of ``model`` in ``settings`` (a row's, a question's, a study run's, or a run named by hand: a
    command line, a notebook's list, a benchmark's paper configuration): where every run a page, the plan or the
    command line asks for is made."""
    return RunSpec.of(model, dataset=dataset, profile=profile, seed=seed, keep=keep, **(settings or {}))


def runs_of(model, settings=None, *, seeds, **where):
    """``[RunSpec per seed]`` of ``model`` in ``settings`` (``run_of``; ``where``: its dataset, profile and keep)."""
    return [run_of(model, settings, seed=seed, **where) for seed in seeds]
