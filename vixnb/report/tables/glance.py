"""Our trained numbers beside the paper's, one row per published table row with a stored run: the "Results at a
glance" page (``glance_frame``) and the same columns for each stored run in ``results.csv`` (``runs_table``), each
number with the record behind it (served with the book: ``record_href``) and the ``vixnb`` command that remakes it.
Numbers stay numbers, rounded as the page rounds them (``DECIMALS``)."""
from __future__ import annotations

import json
import statistics

import pandas as pd

from ... import papers
from ...data import dataset_spec
from ...results import ResultsStore
from ...runs.asked import row_specs
from ...runs.spec import run_command
from ..records.collect import results_of
from ..records.learning import failed_reason, not_learned_reason
from ...escape import html_text
from .pages import page_table

#: where the book serves the stored records, under its HTML root (``book.build`` copies the store's JSON there)
RECORDS_DIR = "records"
#: how deep a published chapter sits under the HTML root: ``book/executed/<profile>/<stem>.html``
PAGE_DEPTH = 3
#: the decimals of a figure on the page and in the CSVs
DECIMALS = 2
#: the columns of ``glance_frame`` (numbers: ``NUMERIC``), in order
COLUMNS = ["paper", "table", "row", "reading", "paper prints", "paper top-1", "ours top-1", "ours top-1 SD", "seeds",
           "epochs", "paper's epochs", "paper training accuracy", "ours training accuracy", "status", "records",
           "command"]
PAPER_EPOCHS = "paper's epochs"
NUMERIC = ["paper top-1", "ours top-1", "ours top-1 SD", "seeds", "epochs", PAPER_EPOCHS, "paper training accuracy",
           "ours training accuracy"]


def record_href(path):
    """The link, from a published chapter, to a stored record served with the book: ``path`` relative to the store's
    root ("budget/vit-cifar10-seed0-27b8a84290e9916d.json", "bench/mixers-bf16.json")."""
    return "../" * PAGE_DEPTH + f"{RECORDS_DIR}/{path}"


def _number(value):
    return round(float(value), DECIMALS) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _plots_training_accuracy(key, dataset):
    """Whether paper ``key`` shows training accuracy on ``dataset`` (its claims read ``train_acc_final``: the blog's
    curves, the course report's printed column)."""
    return any(c.get("metric") == "train_acc_final" and (c.get("dataset") in (None, dataset))
               for c in papers.claims(key) or [])


def _reading(config, table):
    """What a run is beyond its table's ``model_config``: its own model settings ("layout=blog, block=parallel"),
    its precision, and any run option the profile does not set (a warm-up)."""
    base = papers.table(*table).get("model_config") or {}
    settings = {k: v for k, v in (config.get("model_overrides") or {}).items() if base.get(k) != v}
    words = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in sorted(settings.items())]
    words += [f"{k}={config[k]}" for k in ("warmup_steps", "loss_fp32") if config.get(k)]
    return ", ".join([*words, str(config.get("precision", "fp32"))])


def _printed(row):
    """What a paper's table prints for a row, as text ("top1 56.81; top5 95.3; params 530,442"), or "no number (a
    curve)" where it prints none (the blog's figures)."""
    shown = [f"{k} {v:,}" if isinstance(v, int) else f"{k} {v:g}" for k, v in row.items()
             if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return "; ".join(shown) or "no number (a curve, or nothing)"


def _status(done, classes):
    """The status of a row's stored seeds: stale (why), at chance or did not learn (how many seeds), or learned."""
    stale = [r["stale"] for r in done if r.get("stale")]
    if stale:
        return f"stale: {stale[0]}"
    failed = sum(bool(failed_reason(r, classes)) for r in done)
    stalled = sum(bool(not_learned_reason(r)) for r in done)
    seeds = f"of {len(done)} seed{'s' if len(done) != 1 else ''}"
    if failed:
        return f"at chance ({failed} {seeds})"
    if stalled:
        return f"did not learn ({stalled} {seeds})"
    return "learned"


def glance_rows(profile, *, store=None):
    """One dict per published table row of every chapter (its ``train`` tables) with a stored run in ``profile``:
    ``COLUMNS`` (numbers as numbers, ``DECIMALS``; ``records``: the store paths of its seeds' results) and
    ``files``, the same paths as a list."""
    store = store if store is not None else ResultsStore()
    rows = []
    for key in papers.DOCUMENTS:
        if key not in papers.list_papers():
            continue
        protocol = (papers.load(key).get("protocol") or {}).get("epochs")
        for chapter in papers.book_chapters(key):
            for table in chapter.get("train") or []:
                entry = papers.table(key, table)
                classes = dataset_spec(entry["dataset"]).num_classes
                shows_training = _plots_training_accuracy(key, entry["dataset"])
                for row, specs in row_specs(key, chapter, table, profile):
                    found = results_of(specs, compute="never", progress=False, store=store)
                    done = [(s, r) for s, r in zip(specs, found) if r.get("status") == "done"]
                    if not done:
                        continue
                    records = [r for _, r in done]
                    printed = entry["rows"].get(row) if isinstance(entry["rows"].get(row), dict) else {}
                    tops = [r["top1"] for r in records]
                    train = [r["history"][-1]["train_acc"] for r in records if r.get("history")]
                    files = [store.path(s.config).relative_to(store.root).as_posix() for s, _ in done]
                    config = records[0]["config"]
                    rows.append({
                        "paper": key, "table": str(entry.get("caption", table)).split(":")[0],
                        "row": printed.get("label") or row, "reading": _reading(config, (key, table)),
                        "paper prints": _printed(printed), "paper top-1": _number(printed.get("top1")),
                        "ours top-1": _number(statistics.fmean(tops)),
                        "ours top-1 SD": _number(statistics.stdev(tops)) if len(tops) > 1 else None,
                        "seeds": len(records), "epochs": config["epochs"],
                        "paper's epochs": papers.per_model(protocol, specs[0].model) if protocol else None,
                        "paper training accuracy": _number(printed.get("train_acc_final")),
                        "ours training accuracy": _number(statistics.fmean(train)) if shows_training and train
                        else None,
                        "status": _status(records, classes), "records": " ".join(files),
                        "command": run_command(done[0][0]), "files": files,
                        "runs": {f: {"top1": _number(r["top1"]), "command": run_command(spec), "status":
                                     _status([r], classes), "training accuracy": _number(r["history"][-1]["train_acc"])
                                     if shows_training and r.get("history") else None}
                                 for f, (spec, r) in zip(files, done)}})
    return rows


#: the columns ``run_columns`` adds to each stored run of ``results.csv``
RUN_COLUMNS = ["paper", "table", "row", "reading", "paper prints", "paper top-1", "training accuracy", "status",
               "command"]


def run_columns(profile, *, store=None):
    """``{result file: {RUN_COLUMNS}}`` of every stored run a published table row names (``glance_rows``; a run in
    several tables, e.g. the blog's Experiment 1 in Table 2 and Figure 14: its first, the others after ";"): what
    ``results.csv`` gives beside each run."""
    out = {}
    for row in glance_rows(profile, store=store):
        for file, run in row["runs"].items():
            if file in out:
                out[file]["table"] += f"; {row['table']}"
                continue
            out[file] = {"paper": row["paper"], "table": row["table"], "row": row["row"], "reading": row["reading"],
                         "paper prints": row["paper prints"], "paper top-1": row["paper top-1"],
                         "training accuracy": run["training accuracy"], "status": run["status"],
                         "command": run["command"]}
    return out


def glance_frame(profile, *, store=None):
    """``glance_rows`` as a DataFrame of ``COLUMNS``: the page's table, and its CSV (numbers as numbers)."""
    frame = pd.DataFrame(glance_rows(profile, store=store), columns=COLUMNS)
    frame[NUMERIC] = frame[NUMERIC].apply(pd.to_numeric)
    return frame


def _given(value):
    return value is not None and value == value


def _mean_sd(row):
    """"63.56 ± 0.48 (3 seeds)": our top-1 over the row's stored seeds."""
    sd = f" ± {row['ours top-1 SD']:.{DECIMALS}f}" if _given(row["ours top-1 SD"]) else ""
    seeds = int(row["seeds"])
    return f"{row['ours top-1']:.{DECIMALS}f}{sd} ({seeds} seed{'s' if seeds != 1 else ''})"


def _pair(paper, ours):
    """"— / 65.05": the paper's figure and ours ("—" where one has none)."""
    show = lambda v: f"{v:.{DECIMALS}f}" if _given(v) else "—"  # noqa: E731
    return f"{show(paper)} / {show(ours)}" if _given(ours) else "—"


def glance_page(frame):
    """``glance_frame`` rows (one paper's) as the page shows them (``page_table``): per table and row, its reading,
    the paper's top-1 beside ours (mean ± SD over the seeds), each side's epochs, the final training accuracy where
    the paper shows it (paper / ours), the status, a link to each seed's record and the command that remakes it."""
    shown = pd.DataFrame({
        "reading": frame["reading"],
        "paper": [f"{v:.{DECIMALS}f}" if _given(v) else text for v, text in zip(frame["paper top-1"],
                                                                                 frame["paper prints"])],
        "ours top-1": [_mean_sd(r) for _, r in frame.iterrows()],
        "epochs (ours of the paper's)": [f"{int(r['epochs'])} of {int(r[PAPER_EPOCHS])}"
                                         if _given(r[PAPER_EPOCHS]) else str(int(r["epochs"]))
                                         for _, r in frame.iterrows()],
        "training accuracy (paper / ours)": [_pair(r["paper training accuracy"], r["ours training accuracy"])
                                             for _, r in frame.iterrows()],
        "status": frame["status"], "records": frame["records"], "command": frame["command"]})
    shown.index = pd.MultiIndex.from_arrays([frame["table"], frame["row"].astype(str)])
    if all(v == "—" for v in shown["training accuracy (paper / ours)"]):
        shown = shown.drop(columns="training accuracy (paper / ours)")
    styler = page_table(shown, wrap=["reading", "paper", "status"])
    if not hasattr(styler, "format"):
        return styler

    def links(files):
        return " ".join(f'<a href="{html_text(record_href(f))}" title="{html_text(f)}">{i}</a>'
                        for i, f in enumerate(files.split(), 1))

    def command(text):
        return f"<details><summary>vixnb train</summary><code>{html_text(text)}</code></details>"

    return styler.format(links, subset=["records"], escape=None).format(command, subset=["command"], escape=None)
