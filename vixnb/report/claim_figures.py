"""The claims ledger's figures of ours: what the claims of a paper need from our results, read from the
results store (``ours_from_store``), and every paper's claims evaluated (``ledger``, ``claim_list``)."""
from __future__ import annotations

import numbers

import pandas as pd

from .. import papers
from .claim_schema import (EFFICIENCY_COLUMNS, EFFICIENCY_RECORD, GPU_MEMORY_COLUMNS,
                           COUNTED_METRICS, RUN_METRICS, claim_table, in_sections, paper_claims,
                           parse_claim)
from .claim_verdicts import claims
from ..models import list_models, model_cfg
from .collect import collect_runs, current_counts, gpu_memory_rows


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
    """{dataset: {"models": [...], "metrics": set}} that the testable claims of a paper (in ``sections``, or all)
    need from our results; the models are every model of each table the claims read (in printed order), plus
    those they name."""
    needs = {}
    for claim in paper_claims(paper_key):
        if not in_sections(claim, sections):
            continue
        claim = parse_claim(paper_key, claim)
        if not claim["testable"]:
            continue
        need = needs.setdefault(claim["dataset"], {"models": [], "metrics": set()})
        named = claim["models"] or [m for pair in claim["pair_list"] for m in pair if m is not None]
        tabled = list(claim_table(paper_key, claim)["rows"]) if claim.get("table") else []
        for model in [*tabled, *named]:
            if model not in need["models"]:
                need["models"].append(model)
        metrics = {claim["x"], claim["y"]} if claim["method"] == "correlation" else {claim["metric"]}
        need["metrics"] |= metrics
    return needs


def _best_runs(models, *, dataset, profile, compute, store, stored):
    """{model: best run} over the stored seeds (seed 0 where none is stored), and every record looked at."""
    from ..profiles import run_config

    best, records = {}, []
    for model in models:
        if model not in list_models():
            records.append({"status": "not yet run", "reason": f"{model!r} is not a vixnb model"})
            continue
        used = run_config(model, dataset=dataset, profile=profile)["dataset"]
        seeds = sorted({r["config"]["seed"] for r in stored if isinstance(r.get("config"), dict)
                        and r["config"].get("model") == model and r["config"].get("dataset") == used}) or [0]
        runs = collect_runs([model], dataset=dataset, profile=profile, seeds=seeds, compute=compute, progress=False,
                            store=store)
        records.extend(runs)
        done = [r for r in runs if r.get("status") == "done" and isinstance(r.get("top1"), numbers.Real)]
        if done:
            best[model] = max(done, key=lambda r: r["top1"])
    return best, records


def _number_or_none(value):
    return float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else None


def ours_from_store(paper_key, profile, *, compute="never", store=None, count_flops=True, sections=None):
    """Our figures for the claims of ``paper_key`` in ``profile``, from the results store: ``(ours, records)``.

    ``ours`` is ``{dataset: {model: {metric: value}}}`` for every dataset the claims read (see ``METRICS``):
    for every model of the tables the claims read, the stored training runs on that table's dataset
    (``train.run`` under ``compute``; default "never": only read the store) and the best top-1 over the stored
    seeds, with top-5 of that run; parameters and Size (MB) of the models as built today (no run needed); the
    stored batch-64 GPU-memory measurements of the paper's chapters (``collect.gpu_memory_rows``:
    ``vix-gpu-memory-<dataset>-b64`` and its later parts), whose "GPU GB reserved, authors (fp32)" column is ``gpu_gb`` (the
    paper-comparable figure: the authors' execution path, reserved memory being what nvidia-smi shows); the
    stored efficiency measurement (``efficiency``) for times; and GFLOPs counted from the model definition
    (``count_flops``; only where a stored measurement gives them a partner metric). Measurements are only
    read, never made. ``records`` are the runs and measurements used, for ``report.provenance_line``.
    ``sections``: only what the claims of these sections need (a chapter's own, as ``claims(sections=)``)."""
    from ..results import ResultsStore, check_compute

    check_compute(compute)
    store = store if store is not None else ResultsStore()
    stored = store.results(profile) if (store.root / profile).is_dir() else []
    ours, records, seen = {}, [], set()

    def keep(record):
        config = record.get("config")
        ident = (config.get("model"), config.get("dataset"), config.get("seed")) if isinstance(config, dict) else id(record)
        if ident not in seen:
            seen.add(ident)
            records.append(record)

    for dataset, need in _needs(paper_key, sections).items():
        figures = ours.setdefault(dataset, {m: {} for m in need["models"]})
        metrics, models = need["metrics"], need["models"]
        if metrics & set(RUN_METRICS):
            best, runs = _best_runs(models, dataset=dataset, profile=profile, compute=compute, store=store,
                                    stored=stored)
            for record in runs:
                keep(record)
            for model, record in best.items():
                figures[model].update(top1=_number_or_none(record.get("top1")), top5=_number_or_none(record.get("top5")))
        if metrics & set(COUNTED_METRICS):
            for model in models:
                if model in list_models():
                    counts = current_counts(model, dataset)
                    figures[model].update({m: float(counts[k]) for m, k in COUNTED_METRICS.items()})
        measured = False
        if metrics & (set(GPU_MEMORY_COLUMNS) | {"gflops"}):
            # the measurement is stored under the paper the models belong to (``vixnb.models.model_cfg``)
            owner = next((model_cfg(m)["paper"] for m in models if m in list_models()), paper_key)
            rows, used = gpu_memory_rows(owner, dataset, profile=profile, store=store)
            used = [r for r in used if set(r.get("rows") or {}) & set(models)]  # another chapter's models only
            for record in used:
                keep(record)
            if used:
                measured = True
                for model in models:
                    row = rows.get(model) or {}
                    for metric, column in GPU_MEMORY_COLUMNS.items():
                        figures[model][metric] = _number_or_none(row.get(column))
        if metrics & (set(EFFICIENCY_COLUMNS) | {"gflops"}):
            record = store.load_record("measure", EFFICIENCY_RECORD, profile=profile)
            used = [r for r in (record or {}).get("records", []) if r.get("dataset", "cifar10") == dataset
                    and r.get("model") in models and "flops" in r]
            if used:
                from ..measure import FAVOR_GFLOPS_COLUMN, records_frame

                frame = records_frame(used)
                measured = True
                for model in frame.index:
                    for metric, column in EFFICIENCY_COLUMNS.items():
                        if column in frame:
                            figures[model][metric] = _number_or_none(pd.to_numeric(frame.loc[model, column], errors="coerce"))
                    figures[model]["gflops"] = _number_or_none(frame.loc[model, FAVOR_GFLOPS_COLUMN])
                    keep({"provenance": next(r for r in used if r["model"] == model)["provenance"]})
        if "gflops" in metrics and count_flops and measured:
            from ..measure import flops
            from ..models import create_model

            for model in models:
                if figures[model].get("gflops") is None and model in list_models():
                    figures[model]["gflops"] = flops(create_model(model, dataset=dataset), path="fused")["favor_gflops"]
    return ours, records


def ledger(profile, *, compute="never", store=None, count_flops=True):
    """Every paper with a paper file and claims: ``{paper key: {"frame": claims(...), "records": [...]}}``,
    our figures from the results store (``ours_from_store``)."""
    out = {}
    for key in _paper_keys():
        if not papers.claims(key):
            continue
        ours, records = ours_from_store(key, profile, compute=compute, store=store, count_flops=count_flops)
        out[key] = {"frame": claims(key, ours), "records": records}
    return out
