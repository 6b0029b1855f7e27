"""The claims ledger's figures of ours: what the claims of a paper need from our results, read from the
results store (``ours_from_store``), and every paper's claims evaluated (``ledger``, ``claim_list``)."""
from __future__ import annotations

import json
import numbers
from html import escape

import pandas as pd
from IPython.display import HTML, Markdown, display

from ... import papers
from ...measure import flops
from ...record_kinds import KINDS, stored_figures
from ...models import create_model, list_models, model_cfg
from ...runs.asked import row_runs, run_of
from ...results import ResultsStore
from ...runs.policy import check_compute, unusable
from .schema import in_sections, paper_claims, parse_claim
from .parts import AUTHORS
from .verdicts import (FAILS, HOLDS, NOT_RUN, NOT_TESTABLE, PAPER_NO, PAPER_YES, UNDECIDED, claims, claims_page,
                       claims_readings, claims_summary)
from ..records.collect import collect_runs, current_counts
from ..records.metrics import COUNTED_METRICS, RUN_STATISTICS, SEED_METRICS, number_or_none as _number_or_none
from ..records.provenance import provenance_line
from . import rules
from ...data import dataset_spec


def _paper_keys():
    """The papers with a paper file, in the order of ``papers.DOCUMENTS``."""
    have = set(papers.list_papers())
    return [key for key in papers.DOCUMENTS if key in have]


def claim_list():
    """Every claim of every paper with a paper file (``papers.list_papers``), unevaluated: a DataFrame with
    the paper key, claim id, section, paraphrase, claimed figure and whether this study can test it."""
    rows = []
    for key in _paper_keys():
        for claim in paper_claims(key):
            parsed = parse_claim(key, claim)
            rows.append({"paper": key, "id": parsed["id"], "section": parsed["section"], "claim": parsed["text"],
                         "claimed": parsed["claimed"], "testable here": "yes" if parsed["testable"] else "no"})
    return pd.DataFrame(rows, columns=["paper", "id", "section", "claim", "claimed", "testable here"])


# --------------------------------------------------------------------------------------------------
# our figures from the results store


def _needs(paper_key, sections=None):
    """{dataset: {"models": [...], "metrics": set, "runs": {name: (model, settings)}, "authors": {twin: (model,
    settings)}}} that the testable claims of a paper (in ``sections``, or all) need from our results; the models are
    every row of each table the claims read (in printed order), plus those they name; ``runs`` gives each its model
    and settings (``papers.row_run``: a row name is the model itself unless the paper file says otherwise);
    ``authors`` the authors' build of a model a claim's ``authors_build`` names (``verdicts.AUTHORS``), counted only."""
    needs = {}
    for claim in paper_claims(paper_key):
        if not in_sections(claim, sections):
            continue
        claim = parse_claim(paper_key, claim)
        if not claim["testable"]:
            continue
        need = needs.setdefault(claim["dataset"], {"models": [], "metrics": set(), "runs": {}, "authors": {}})
        named = claim["models"] or [m for pair in claim["pair_list"] for m in pair if m is not None]
        tables = ([claim["table"]] if isinstance(claim["table"], str) else claim["table"]) if claim.get("table") else []
        for name in tables:
            for row, model, settings in papers.table_runs(paper_key, name):
                need["runs"].setdefault(row, (model, settings))
        for model in [*(row for name in tables for row in papers.table_models(paper_key, name)), *named]:
            if model not in need["models"]:
                need["models"].append(model)
            need["runs"].setdefault(model, papers.paper_runs(paper_key).get(model, (model, {})))
        metrics = {claim["x"], claim["y"]} if claim["method"] == "correlation" else \
            {claim["metric"], claim.get("metric_b", claim["metric"])}
        need["metrics"] |= metrics
        for model, settings in ((claim.get("authors_build") or {}).get("settings") or {}).items():
            name, base = need["runs"].get(model, (model, {}))
            need["authors"][f"{model}{AUTHORS}"] = (name, {**base, **settings})
    return needs


def _stored_seeds(stored, config):
    """The seeds of the stored results whose configuration is ``config`` but for the seed."""
    def same(other):
        return isinstance(other, dict) and {k: v for k, v in other.items() if k != "seed"} == \
            {k: v for k, v in config.items() if k != "seed"}
    return sorted({r["config"]["seed"] for r in stored if same(r.get("config"))})


def _fp32_runs(stored, config):
    """The done stored runs of ``config`` in fp32 (any seed), where ``config`` trains in another precision: whether a
    stall survives fp32 (``rules.run_facts``)."""
    if config.get("precision") == "fp32":
        return []
    strip = lambda c: {k: v for k, v in c.items() if k not in ("seed", "precision")}
    return [r for r in stored if isinstance(r.get("config"), dict) and r["config"].get("precision") == "fp32"
            and strip(r["config"]) == strip(config) and r.get("status") == "done"]


def _done_runs(runs, *, dataset, profile, compute, store, stored):
    """``({name: [done runs]}, records)``: for each run ``{name: (model, settings)}``, its stored seeds (seed 0
    where none is stored), every seed done with a top-1, and every record looked at."""
    done_runs, records = {}, []
    for name, (model, settings) in runs.items():
        if model not in list_models():
            records.append({"status": "not yet run", "reason": f"{model!r} is not a vixnb model"})
            continue
        seeds = _stored_seeds(stored, run_of(model, settings, dataset=dataset, profile=profile).config) or [0]
        found = collect_runs([model], dataset=dataset, profile=profile, seeds=seeds, compute=compute, progress=False,
                             store=store, **settings)
        records.extend(found)
        done = [r for r in found if r.get("status") == "done" and isinstance(r.get("top1"), numbers.Real)]
        if done:
            done_runs[name] = done
    return done_runs, records


def ours_from_store(paper_key, profile, *, compute="never", store=None, count_flops=True, sections=None):
    """Our figures for the claims of ``paper_key`` in ``profile``, from the results store: ``(ours, records)``.

    ``ours`` is ``{dataset: {model: {metric: value}}}`` for every dataset the claims read (``metrics.METRICS``
    says where each comes from): for every model of the tables the claims read, the stored training runs on that
    table's dataset (``runs.make.run`` under ``compute``; default "never": only read the store) and the best top-1 over
    the stored seeds, with top-5 of that run; parameters and Size (MB) of the models as built today (no run needed);
    the figures each record kind declares (``RecordKind.metrics``) from its stored records on the dataset, those of
    the paper the models belong to first (``record_kinds.stored_figures``: the GPU-memory measurements at the paper's
    GPU batch, whose "GPU GB reserved, authors (fp32)" column is ``gpu_gb``, the paper-comparable figure; the
    efficiency measurement for times and GFLOPs; the attention-map record of kept weights, with the training run it
    measured); and GFLOPs counted from the model definition (``count_flops``;
    only where a stored measurement gives them a partner metric). Measurements are only
    read, never made. ``records`` are the runs and measurements used, for ``report.records.provenance_line``.
    ``sections``: only what the claims of these sections need (a chapter's own, as ``claims(sections=)``).
    ``ours`` is a ``rules.Figures``: its ``facts`` say what each figure rests on (seeds, epochs, devices,
    precisions, a failed run), for the verdict rules."""
    check_compute(compute)
    store = store if store is not None else ResultsStore()
    stored = store.results(profile, unusable=unusable) if (store.root / profile).is_dir() else []
    ours, records, seen = rules.Figures(), [], set()

    def keep(record):
        config = record.get("config")
        ident = json.dumps(config, sort_keys=True) if isinstance(config, dict) else id(record)
        if ident not in seen:
            seen.add(ident)
            records.append(record)

    for dataset, need in _needs(paper_key, sections).items():
        figures = ours.setdefault(dataset, {m: {} for m in need["models"]})
        facts = ours.facts.setdefault(dataset, {m: {} for m in need["models"]})
        metrics, models = need["metrics"], need["models"]
        if metrics & set(SEED_METRICS):
            # the runs as the paper's chapters make them in this profile (the smoke profile's smaller models)
            resolved = row_runs(paper_key, profile)
            made = {name: resolved.get(name, run) for name, run in need["runs"].items()}
            done, runs = _done_runs(made, dataset=dataset, profile=profile, compute=compute, store=store,
                                    stored=stored)
            for record in runs:
                keep(record)
            # top-1 and top-5 of the best run always, with every other seed metric the claims read
            wanted = [m for m in SEED_METRICS if m in metrics or m in ("top1", "top5")]
            classes = dataset_spec(dataset).num_classes
            for model, seed_runs in done.items():
                figures[model].update({m: _number_or_none(RUN_STATISTICS[m](seed_runs)) for m in wanted})
                facts[model]["runs"] = rules.run_facts(seed_runs, classes, name=model,
                                                       fp32_records=_fp32_runs(stored, seed_runs[0]["config"]))
        if metrics & set(COUNTED_METRICS):
            convention = papers.params_convention(paper_key)
            for model in models:
                name, settings = need["runs"].get(model, (model, {}))
                if name in list_models():
                    counts = current_counts(name, dataset, **settings)
                    figures[model].update({m: float(counts[k if m != "params" else f"params_{convention}"])
                                           for m, k in COUNTED_METRICS.items()})
            for twin, (name, settings) in need["authors"].items():  # the authors' build, counted, never trained
                counts = current_counts(name, dataset, **settings)
                figures[twin] = {m: float(counts[k if m != "params" else f"params_{convention}"])
                                 for m, k in COUNTED_METRICS.items()}
        measured = False
        # the measurements are stored under the paper the models belong to (``vixnb.models.model_cfg``)
        owner = next((model_cfg(m)["paper"] for m in models if m in list_models()), paper_key)
        for name, kind in KINDS.items():
            if not metrics & set(kind.metrics):
                continue
            found, used = stored_figures(name, dataset, models, owner=owner, profile=profile, store=store)
            for record in used:
                keep(record)
            measured |= bool(found)
            for model, (values, provenance, precision, *trained) in found.items():
                config = trained[0] if trained else None  # the training run whose weights it measured
                facts[model][name] = rules.record_facts(
                    provenance, precision, name=model, config=config, run=store.get(config) if config else None,
                    num_classes=dataset_spec(dataset).num_classes)
                figures[model].update({metric: _number_or_none(values.get(m.column))
                                       for metric, m in kind.metrics.items()})
        if "gflops" in metrics and count_flops and measured:
            for model in models:
                if figures[model].get("gflops") is None and model in list_models():
                    figures[model]["gflops"] = flops(create_model(model, dataset=dataset), path="fused")["favor_gflops"]
    return ours, records


def ledger(profile, *, compute="never", store=None, count_flops=True):
    """Every paper with a paper file and claims: ``{paper key: {"frame": claims(...), "records": [...], "questions":
    claims(..., questions=True)}}``, our figures from the results store (``ours_from_store``); the questions of ours
    a paper file sets beside its claims are apart, in no count of the paper's."""
    out = {}
    for key in _paper_keys():
        if not papers.claims(key):
            continue
        ours, records = ours_from_store(key, profile, compute=compute, store=store, count_flops=count_flops)
        out[key] = {"frame": claims(key, ours, profile=profile), "records": records,
                    "questions": claims(key, ours, profile=profile, questions=True)}
    return out


def claims_section(paper_key, profile, *, sections=None, compute="never"):
    """A chapter's claims block, the one page piece every chapter shows: the claims of ``paper_key`` (those made in
    ``sections``, or all) evaluated on the stored figures of ``profile`` (``ours_from_store``; a profile that cannot
    decide a claim says so: ``verdicts.undecided_reason``), as the compact table, the count of verdicts, the
    provenance of the figures and how each claim was read. Displays them; returns the ``claims`` frame."""
    ours, records = ours_from_store(paper_key, profile, compute=compute, sections=sections)
    verdicts = claims(paper_key, ours, sections=sections, profile=profile)
    display(claims_page(verdicts))
    display(Markdown(claims_summary(verdicts)))
    if records:
        display(Markdown(provenance_line(records, profile=profile)))
    display(Markdown("How each claim was read:\n\n" + claims_readings(verdicts)))
    questions_section(claims(paper_key, ours, sections=sections, profile=profile, questions=True))
    return verdicts


def questions_section(frame):
    """The questions of ours a paper file sets beside its claims (``claims(questions=True)``), apart from them: a
    heading-less block with their table and readings; nothing where there are none."""
    if frame is None or not len(frame):
        return
    display(Markdown(f"Our own question{'s' if len(frame) > 1 else ''} beside the paper's claims (not claims of the "
                     "paper; answered yes or no, and in no count of its claims):"))
    display(claims_page(frame))
    display(Markdown(claims_readings(frame)))


def claims_overview(pages):
    """The ledger's summary, one row per paper of ``pages`` (``ledger``): its claims, how many the paper's own
    tables bear out / do not, and our verdicts: hold, do not hold, not decided (``rules.NOT_DECIDED`` and
    undecided), not yet run or not testable here."""
    rows = {}
    for key, entry in pages.items():
        frame = entry["frame"]
        paper, ours = frame["paper bears it out"].value_counts(), frame["our verdict"].value_counts()
        rows[papers.load(key).get("title", key)] = {
            "claims": len(frame),
            "paper's tables: bear out / do not": f"{paper.get(PAPER_YES, 0)} / {paper.get(PAPER_NO, 0)}",
            "ours: hold": int(ours.get(HOLDS, 0)), "do not hold": int(ours.get(FAILS, 0)),
            "not decided": sum(int(ours.get(v, 0)) for v in (*rules.NOT_DECIDED, UNDECIDED)),
            "not yet run / not testable": f"{ours.get(NOT_RUN, 0)} / {ours.get(NOT_TESTABLE, 0)}"}
    return pd.DataFrame.from_dict(rows, orient="index")


def collapsible(summary, html):
    """``html`` in a ``<details>`` block, closed, under the one-line ``summary`` (plain text): a long table a reader
    opens when they want it."""
    return HTML(f"<details><summary>{escape(summary)}</summary>\n{html}\n</details>")
