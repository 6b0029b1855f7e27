"""A published results table (parameters, Size MB, top-1/top-5, GPU memory) beside ours, from training runs
and a batch-size GPU-memory measurement: the frames a chapter shows for any paper table of that shape. Also the
rows of a paper table set against each other: changes and ratios against a reference row (``cost_changes``,
``times_against``, ``rope_deltas``), and the row pairs and trios a table's settings make (``optimizer_pairs``,
``model_trios``, ``same_model_rows``) with the method against one optimizer alone (``alone_frame``)."""
from __future__ import annotations

import statistics

import pandas as pd

from ... import papers
from ...models import model_cfg
from ..records.collect import accuracy_text, compare_pairs, current_counts, summarize_runs
from ..records.metrics import PER_SEED, seed_statistic
from .pages import DELTA, beside_paper, paper_frame

#: the stored GPU-memory column that stands beside a paper's "GPU (GB)": one training step at the paper's batch
#: size on the authors' path (materialised attention, fp32), peak reserved (closest to an nvidia-smi reading)
PAPER_COMPARABLE_GPU = "GPU GB reserved, authors (fp32)"
FUSED_GPU = "GPU GB reserved, fused (fp32)"


def results_beside_paper(paper_rows, runs, *, dataset, models, labels, gpu=None, deltas=True, gpu_batch=64):
    """``{"size", "accuracy", "memory", "runs", "summary", "measured"}``: DataFrames of ours beside the paper's
    ``paper_rows`` (a DataFrame indexed by model: params, size_mb, top1, top5, gpu_gb), in the order of ``models``.

    - size: parameters (paper convention and true) and Size (MB) of the models as built today;
    - accuracy: best top-1 / top-5 over the seeds done (the paper reports the best of three runs), with the
      mean ± std over seeds when there are several; ``deltas=False`` leaves out Δ (a pipeline check);
    - memory: the ``gpu`` record's batch-size measurement (authors' path and fused) beside the paper's (its batch
      ``gpu_batch`` where no record is stored yet: ``papers.gpu_batch_size``);
    - runs: per model the seeds done, epochs, batch size, precision, training-run peak GPU memory, commit and
      date of the best seed, and a note when it was made by older model code or is not yet run;
    - summary and measured: the numbers behind them, indexed by model name (``summarize_runs`` and the rows
      of the ``gpu`` record), for figures and differences."""
    counts = {m: current_counts(m, dataset) for m in models}
    sizes = pd.DataFrame.from_dict(counts, orient="index")
    size = beside_paper(sizes, paper_rows, {"parameters (paper convention)": ("params_paper", "params"),
                                            "parameters (true)": ("params_true", None),
                                            "Size (MB)": ("size_mb", "size_mb")}, order=models, labels=labels)

    summary = summarize_runs(runs)
    ours = pd.DataFrame(index=models)
    several = bool(len(summary)) and summary["seeds"].max() > 1
    for metric in ("top1", "top5"):
        ours[metric] = summary[f"{metric} best"] if f"{metric} best" in summary else None
        if several:
            ours[f"{metric} mean"] = [accuracy_text(summary, m, metric) for m in models]
    metrics = {"top-1 (%)": ("top1", "top1"), "top-5 (%)": ("top5", "top5")}
    if several:
        metrics = {"top-1 (%), best seed": ("top1", "top1"), "top-1 mean ± std": ("top1 mean", None),
                   "top-5 (%), best seed": ("top5", "top5"), "top-5 mean ± std": ("top5 mean", None)}
    accuracy = beside_paper(ours, paper_rows, metrics, order=models, labels=labels, delta=deltas)
    shorter = [m for m in models if m in summary.index and summary.at[m, "epochs"] == summary.at[m, "epochs"]
               and summary.at[m, "epochs"] < model_cfg(m)["epochs"]]
    if shorter:  # ours from fewer epochs than the paper's protocol: a difference to read, not a verdict
        accuracy.columns = pd.MultiIndex.from_tuples(
            [(h, f"{DELTA}, shorter protocol" if part == DELTA else part) for h, part in accuracy.columns])

    rows = (gpu or {}).get("rows", {})
    measured = pd.DataFrame.from_dict({m: rows[m] for m in models if m in rows}, orient="index")
    measured = measured.reindex(columns=list(dict.fromkeys([*measured.columns, PAPER_COMPARABLE_GPU, FUSED_GPU])))
    batch = ((gpu or {}).get("provenance") or {}).get("batch_size", gpu_batch)
    missing = "not yet measured" if gpu is None else "not measured"
    memory = beside_paper(measured, paper_rows,
                          {f"GPU GB, batch {batch}, authors' path": (PAPER_COMPARABLE_GPU, "gpu_gb"),
                           "fused attention": (FUSED_GPU, None)},
                          order=models, labels=labels, missing=missing)

    columns = ["seeds", "epochs", "batch", "precision", "run peak GB", "commit", "date", "note"]
    table = summary.reindex(index=models, columns=columns).astype(object)
    table["seeds"] = [f"{int(summary.at[m, 'seeds'])}/{int(summary.at[m, 'asked'])}" if m in summary.index else None
                      for m in models]
    table.index = [labels.get(m, m) for m in models]
    table = table.where(table.notna(), None)
    for column in ("epochs", "batch"):
        table[column] = [None if v is None else str(int(v)) for v in table[column]]
    if table["note"].isna().all():
        table = table.drop(columns="note")
    if not any(m in summary.index and summary.at[m, "seeds"] for m in models):
        table = table.iloc[0:0]  # no run done: the page says so in one line, not with a grid of dashes
    return {"size": size, "accuracy": accuracy, "memory": memory, "runs": table,
            "summary": summary.reindex(models), "measured": measured.reindex(models)}


def rows_beside_paper(paper, table, results, *, metrics=("top1",), deltas=True):
    """A paper table whose rows are runs (``papers.row_run``: one model in several settings, e.g. ablations or
    optimizers) beside ours: ``{"accuracy", "runs", "summary"}``. ``results`` is ``{row: [result per seed]}``
    (``collect.table_results``); ``metrics`` are ``metrics.PER_SEED`` keys (``top1``, ``top1_main``, ...), each
    shown as our best seed beside the paper's column of that name, with the mean ± std over seeds when there are
    several; a column the paper does not print shows ours alone. ``runs``: per row the seeds done, epochs run
    (the DualOpT switch epoch where there was one), batch, precision, the run's peak GPU GB, commit and date."""
    printed, rows = paper_frame(paper, table), papers.table(paper, table)["rows"]
    labels = {row: (entry or {}).get("label", row) for row, entry in rows.items()}
    ours, runs = {}, {}
    for row, records in results.items():
        done = [r for r in records if r["status"] == "done"]
        figures = {}
        for metric in metrics:
            values = [v for v in (PER_SEED[metric][1](r) for r in done) if v is not None]
            figures[metric] = max(values) if values else None
            if len(values) > 1:
                figures[f"{metric} mean"] = f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f}"
        ours[row] = figures
        summary = summarize_runs(records)
        runs[row] = summary.iloc[0].to_dict() if len(summary) else {}
        switches = sorted({i + 1 for r in done for i, h in enumerate(r["history"]) if h.get("switched_to_sgd")})
        runs[row]["epochs run"] = (", ".join(f"{r['epochs_run']}" for r in done) or None)
        runs[row]["SGD from epoch"] = ", ".join(str(s + 1) for s in switches) or None
    ours = pd.DataFrame.from_dict(ours, orient="index")
    several = any(f"{m} mean" in ours.columns for m in metrics)
    columns = {}
    for metric in metrics:
        name = PER_SEED[metric][0]
        paper_col = metric if metric in printed.columns else None
        columns[f"{name}, best seed" if several else name] = (metric, paper_col)
        if several:
            columns[f"{name}, mean ± std"] = (f"{metric} mean", None)
    accuracy = beside_paper(ours, printed, columns, order=list(results), labels=labels, delta=deltas)
    frame = pd.DataFrame.from_dict(runs, orient="index")
    keep = ["seeds", "asked", "epochs run", "SGD from epoch", "batch", "precision", "run peak GB", "commit", "date",
            "note"]
    frame = frame.reindex(columns=keep).astype(object)
    frame["seeds"] = [f"{int(s)}/{int(a)}" if s == s and a == a else None
                      for s, a in zip(frame["seeds"], frame["asked"])]
    frame = frame.drop(columns="asked")
    frame["batch"] = [None if v is None or v != v else str(int(v)) for v in frame["batch"]]
    frame = frame.where(frame.notna(), None)
    for column in ("SGD from epoch", "note"):
        if frame[column].isna().all():
            frame = frame.drop(columns=column)
    frame.index = [labels.get(r, r) for r in frame.index]
    return {"accuracy": accuracy, "runs": frame, "summary": ours}


def relative_change(a, b):
    """The change of ``a`` against ``b`` in %, or None where either is missing."""
    return None if a is None or b is None else 100 * (a - b) / b


def cost_changes(paper, tables, runs, labels):
    """Parameters and epoch time of each row of ``tables`` (``{table: heading}``, each table a pair of rows: the
    vanilla model first, then the changed one), ours beside the printed ones, and the change of the second row
    against the first. ``runs``: ``{row: training records}``; ``labels``: ``{row: label}``. Returns
    ``(counts, changes)``: DataFrames with ("parameters" | "epoch (s)", "ours" | "blog") columns, one row per
    table row, and ("parameters, Δ %" | "epoch time, Δ %", "ours" | "blog") columns, one row per table. Our
    parameters are the true count of the model as built today, our epoch time the mean over the done seeds."""
    counts, changes = {}, {}
    for name, heading in tables.items():
        printed = papers.table(paper, name)["rows"]
        ours = {}
        for row in printed:
            model, settings = papers.row_run(paper, name, row)
            ours[row] = {"params": current_counts(model, "cifar10", **settings)["params_true"],
                         "epoch_s": seed_statistic("epoch_s", runs[row])}
            counts[f"{heading}, {labels[row]}"] = {
                ("parameters", "ours"): ours[row]["params"], ("parameters", "blog"): printed[row]["params"],
                ("epoch (s)", "ours"): ours[row]["epoch_s"], ("epoch (s)", "blog"): printed[row]["epoch_s"]}
        vanilla, changed = list(printed)
        changes[heading] = {
            (column_heading, side): relative_change(values[changed][column], values[vanilla][column])
            for column, column_heading in [("params", "parameters, Δ %"), ("epoch_s", "epoch time, Δ %")]
            for side, values in (("ours", ours), ("blog", printed))}
    return pd.DataFrame.from_dict(counts, orient="index"), pd.DataFrame.from_dict(changes, orient="index")


def labelled_runs(paper, table, runs):
    """``{label: training records}`` of the rows of ``paper``'s ``table``, each labelled as that table labels it
    (its row name where it has no label), from ``runs`` (``{row: training records}``)."""
    rows = papers.table(paper, table)["rows"]
    return {rows[r].get("label", r): runs[r] for r in rows}


def row_labels(paper, tables):
    """``{row: label}`` of the rows of ``paper``'s ``tables``, each labelled as the first of them that shows it
    labels it (its row name where it has no label)."""
    labels = {}
    for name in tables:
        for row, entry in papers.table(paper, name)["rows"].items():
            labels.setdefault(row, entry.get("label", row))
    return labels


def rope_deltas(models, base, ours, ours_base, table6, table1, labels):
    """Per RoPE model (indexed by its base's label): the printed top-1 of the learned embedding (``table1``) and of
    RoPE (``table6``) and their difference, beside ours (best top-1 from the ``summary`` frames ``ours`` and
    ``ours_base``; None where not had). ``base``: ``{RoPE model: its base}``."""
    def best(summary, model):
        column = summary.get("top1 best")
        return None if column is None else column.get(model)
    delta = {}
    for m in models:
        b = base[m]
        rope, learned = best(ours, m), best(ours_base, b)
        delta[labels[b]] = {("paper", "learned"): table1.at[b, "top1"], ("paper", "RoPE"): table6.at[m, "top1"],
                            ("paper", "Δ"): table6.at[m, "top1"] - table1.at[b, "top1"],
                            ("ours", "learned"): learned, ("ours", "RoPE"): rope,
                            ("ours", "Δ"): None if None in (rope, learned) else rope - learned}
    return pd.DataFrame.from_dict(delta, orient="index").astype(object)


def ratio(a, b):
    """``a / b``, or None where ``a`` is missing or ``b`` missing or zero."""
    return a / b if a is not None and b else None


def times_against(printed, runs, labels, reference):
    """Per row of ``printed`` (``{row: {"epoch_s", "test_s"}}``): its epoch and test-pass time as a multiple of
    the ``reference`` row's, ours (mean over the done seeds of ``runs[row]``) beside the report's, and the epoch
    seconds themselves."""
    def ours(row):
        return {m: seed_statistic(m, runs[row]) for m in ("epoch_s", "test_s")}
    ref, theirs_ref = ours(reference), printed[reference]
    times = {}
    for row in printed:
        mine, theirs = ours(row), printed[row]
        times[labels[row]] = {
            ("epoch, × ViT", "ours"): ratio(mine["epoch_s"], ref["epoch_s"]),
            ("epoch, × ViT", "report"): theirs["epoch_s"] / theirs_ref["epoch_s"],
            ("test pass, × ViT", "ours"): ratio(mine["test_s"], ref["test_s"]),
            ("test pass, × ViT", "report"): theirs["test_s"] / theirs_ref["test_s"],
            ("epoch (s)", "ours"): mine["epoch_s"], ("epoch (s)", "report"): theirs["epoch_s"]}
    return pd.DataFrame(times).T


def optimizer_pairs(paper, table, other="adamw"):
    """``[(label, row, its other-optimizer row)]`` of ``paper``'s ``table``: each row without settings (the
    paper's method) beside the row of the same model whose ``optimizer`` setting is ``other``; the label is the
    row's label up to its last comma."""
    rows = papers.table(paper, table)["rows"]
    return [(rows[r]["label"].rsplit(",", 1)[0], r,
             next(o for o, e in rows.items()
                  if e.get("model") == r and (e.get("settings") or {}).get("optimizer") == other))
            for r in rows if "settings" not in rows[r]]


def model_trios(paper, table, alone):
    """``[(label, method row, row of ``alone``, the other row of that model in ``table``)]``: for each row of
    ``paper``'s table ``alone`` (one optimizer alone), the row of its model in ``table`` (the method), that row,
    and the first row of ``table`` naming that model (the other optimizer alone)."""
    rows = papers.table(paper, table)["rows"]
    return [(rows[e["model"]]["label"].rsplit(",", 1)[0], e["model"], row,
             next(o for o, x in rows.items() if x.get("model") == e["model"]))
            for row, e in papers.table(paper, alone)["rows"].items()]


def same_model_rows(paper, table, other):
    """``{row of table: the row of other naming the same model}`` (``paper``'s tables)."""
    others = papers.table(paper, other)["rows"]
    return {row: next(p for p, x in others.items() if x["model"] == e["model"])
            for row, e in papers.table(paper, table)["rows"].items()}


def printed_change(printed, pairs, column="top1", change="increase_pct"):
    """Per ``(label, row, other)`` of ``pairs``: the printed ``other`` → ``row`` value and the printed change, as
    the page writes it ("a → b (c %)", two decimals)."""
    return [f"{printed.at[b, column]:.2f} → {printed.at[a, column]:.2f} ({printed.at[a, change]:.2f} %)"
            for _, a, b in pairs]


def alone_frame(paper, table, alone, patience, runs):
    """The method of ``paper``'s ``table`` (DualOpT) against one optimizer alone (table ``alone``, SGD) at the
    method's budget and to patience (table ``patience``), with the other optimizer alone (AdamW) and the printed
    values beside: top-1, mean ± std over seeds, from ``runs`` (``{row: training records}`` of the three tables)."""
    rows = papers.table(paper, table)["rows"]
    trios = model_trios(paper, table, alone)
    to_patience = same_model_rows(paper, alone, patience)
    frame = compare_pairs([(l, d, s) for l, d, s, _ in trios], runs, metrics=("top1",), names=("DualOpT", "SGD alone"))
    equal = compare_pairs([(l, d, to_patience[s]) for l, d, s, _ in trios], runs, metrics=("top1",),
                          names=("DualOpT", "SGD to patience"))
    frame = frame.join(equal.drop(columns="DualOpT").rename(columns={"beyond 2 SE": "beyond 2 SE (to patience)"}))
    frame.insert(0, "AdamW alone", compare_pairs([(l, a, s) for l, _, s, a in trios], runs, metrics=("top1",),
                                                 names=("AdamW alone", "SGD alone"))["AdamW alone"])
    frame.insert(0, "paper: AdamW, DualOpT, SGD alone", [f"{rows[a]['top1']:.2f}, {rows[d]['top1']:.2f}, —"
                                                         for _, d, _, a in trios])
    return frame
