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
from ...runs.asked import book_rows
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
#: the page's training-accuracy column: where the paper prints it (paper / ours), and where it only plots it (ours)
TRAINING = {True: "training accuracy, paper / ours", False: "final training acc., ours (paper: none)"}
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


def _reading(config, table, asked=None):
    """What a run is beyond its table's ``model_config``: its own model settings ("layout=blog, block=parallel"; those
    its row asks for, ``asked``, where its stored configuration keeps an earlier default out of its key), its
    precision, and any run option the profile does not set (a warm-up)."""
    base = papers.table(*table).get("model_config") or {}
    settings = {k: v for k, v in {**(config.get("model_overrides") or {}), **(asked or {})}.items()
                if base.get(k) != v and not isinstance(v, (dict, list)) or k == "mixer_options"}
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
    for key, _, table, row, specs in book_rows(profile):
        entry = papers.table(key, table)
        found = results_of(specs, compute="never", progress=False, store=store)
        done = [(s, r) for s, r in zip(specs, found) if r.get("status") == "done"]
        if not done:
            continue
        protocol = (papers.load(key).get("protocol") or {}).get("epochs")
        classes = dataset_spec(entry["dataset"]).num_classes
        shows_training = _plots_training_accuracy(key, entry["dataset"])
        records = [r for _, r in done]
        printed = entry["rows"].get(row) if isinstance(entry["rows"].get(row), dict) else {}
        tops = [r["top1"] for r in records]
        train = [r["history"][-1]["train_acc"] for r in records if r.get("history")]
        files = [store.path(s.config).relative_to(store.root).as_posix() for s, _ in done]
        config = records[0]["config"]
        rows.append({
            "paper": key, "table": str(entry.get("caption", table)).split(":")[0],
            "row": printed.get("label") or row, "reading": _reading(config, (key, table), dict(specs[0].settings)),
            "paper prints": _printed(printed), "paper top-1": _number(printed.get("top1")),
            "ours top-1": _number(statistics.fmean(tops)),
            "ours top-1 SD": _number(statistics.stdev(tops)) if len(tops) > 1 else None,
            "seeds": len(records), "epochs": config["epochs"],
            "paper's epochs": papers.per_model(protocol, specs[0].model) if protocol else None,
            "paper training accuracy": _number(printed.get("train_acc_final")),
            "ours training accuracy": _number(statistics.fmean(train)) if shows_training and train else None,
            "status": _status(records, classes), "records": " ".join(files),
            "command": run_command(done[0][0]), "files": files,
            "runs": {f: {"top1": _number(r["top1"]), "command": run_command(spec), "status": _status([r], classes),
                         "training accuracy": _number(r["history"][-1]["train_acc"])
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
    """"53.82 ± 2.19 (3)": our top-1 over the row's stored seeds (their number in brackets)."""
    sd = f" ± {row['ours top-1 SD']:.{DECIMALS}f}" if _given(row["ours top-1 SD"]) else ""
    return f"{row['ours top-1']:.{DECIMALS}f}{sd} ({int(row['seeds'])})"


def _pair(paper, ours):
    """"— / 65.05": the paper's figure and ours ("—" where one has none)."""
    show = lambda v: f"{v:.{DECIMALS}f}" if _given(v) else "—"  # noqa: E731
    return f"{show(paper)} / {show(ours)}" if _given(ours) else "—"


def glance_page(frame):
    """``glance_frame`` rows (one paper's) as the page shows them (``page_table``), narrow enough for the text
    column: per table and row (its reading under its name, smaller), the paper's top-1 beside ours (mean ± SD, the
    seeds in brackets), our epochs of the paper's, the final training accuracy where the paper shows it (paper /
    ours), the status, and a link to each seed's record with the command that remakes it. What the paper prints where
    it prints no top-1 is in the CSV (``paper prints``)."""
    printed_training = any(_given(v) for v in frame["paper training accuracy"])
    shown = pd.DataFrame({
        "paper top-1": [f"{v:.{DECIMALS}f}" if _given(v) else "—" for v in frame["paper top-1"]],
        "ours top-1 (seeds)": [_mean_sd(r) for _, r in frame.iterrows()],
        "epochs, of the paper's": [f"{int(r['epochs'])} of {int(r[PAPER_EPOCHS])}" if _given(r[PAPER_EPOCHS])
                                   else str(int(r["epochs"])) for _, r in frame.iterrows()],
        TRAINING[printed_training]: [_pair(r["paper training accuracy"], r["ours training accuracy"])
                                     if printed_training else (f"{r['ours training accuracy']:.{DECIMALS}f}"
                                                               if _given(r["ours training accuracy"]) else "—")
                                     for _, r in frame.iterrows()],
        "status": frame["status"],
        "record, command": [f"{files}\n{command}" for files, command in zip(frame["records"], frame["command"])]})
    rows = [f'{html_text(row)}<br><span style="font-weight: normal; font-size: 0.9em">{html_text(reading)}</span>'
            for row, reading in zip(frame["row"].astype(str), frame["reading"])]
    shown.index = pd.MultiIndex.from_arrays([frame["table"].str.split(" (", n=1, regex=False).str[0], rows])
    # a column the paper's side leaves blank in every row says nothing: the CSV keeps what the paper prints
    shown = shown.drop(columns=[c for c in ("paper top-1", TRAINING[printed_training]) if (shown[c] == "—").all()])
    styler = page_table(shown)
    if not hasattr(styler, "format"):
        return styler

    def record(cell):
        files, command = cell.split("\n", 1)
        links = " ".join(f'<a href="{html_text(record_href(f))}" title="{html_text(f)}">{i}</a>'
                         for i, f in enumerate(files.split(), 1))
        return (f"{links}<details><summary>command</summary><code>{html_text(command)}</code></details>")

    return styler.format(record, subset=["record, command"], escape=None) \
        .format_index(lambda v: v, level=1, axis=0, escape=None) \
        .set_properties(subset=["status"], **{"min-width": "6em", "text-align": "left"})
