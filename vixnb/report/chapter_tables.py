"""The arithmetic of the chapters' own tables and figures, out of their notebooks: points of accuracy against
GPU memory, the models' costs as built today, the families' softmax pairs, RoPE against the learned embedding,
times against a reference run, the row pairs and trios of a paper table, and the transfer of a ViT's weights.
Each reads the paper file, the models as built today or the runs a page collected; none measures or trains."""
from __future__ import annotations

import pandas as pd
import torch

from .. import papers
from ..analysis.records import panel_images
from ..data import CIFAR10_CLASSES
from ..measure.flops import flops, paper_macs
from ..models import create_model, model_family
from ..models.counting import count_params
from ..models.warm_start import transfer
from .collect import compare_pairs
from .metrics import seed_statistic


def accuracy_points(memory, top1, labels):
    """A DataFrame of ("GB", "top-1") points indexed by label (``labels``: ``{model: label}``), from ``memory`` and
    ``top1`` (Series indexed by model; None where not had), for ``accuracy_against_cost``."""
    return pd.DataFrame({"GB": memory, "top-1": top1}).rename(index=labels)


def model_costs(models, dataset="cifar10"):
    """One row per model as built today on ``dataset``: its parameters in the paper's convention and true (M), the
    MACs the ``cxv`` paper counts and all MACs on the fused path (G)."""
    def costs(model):
        built = create_model(model, dataset=dataset)
        return {"params M (paper convention)": count_params(built, "paper") / 1e6,
                "params M (true)": count_params(built, "true") / 1e6,
                "paper MACs G": paper_macs(built) / 1e9,
                "all MACs G": flops(built, path="fused")["macs"] / 1e9}
    return pd.DataFrame({m: costs(m) for m in models}).T


def parameter_counts(pairs, dataset):
    """One row per ``(label, model, base)``: the parameters of ``model`` and of ``base`` as built today on
    ``dataset``, in the paper's convention and true ("without RoPE": the base's)."""
    counts = {}
    for label, model, base in pairs:
        built, plain = create_model(model, dataset=dataset), create_model(base, dataset=dataset)
        counts[label] = {"paper convention": count_params(built), "without RoPE": count_params(plain),
                         "true": count_params(built, "true"), "true, without RoPE": count_params(plain, "true")}
    return pd.DataFrame.from_dict(counts, orient="index")


def levit_anomalies(table3):
    """LeViP's and LeViT's printed parameters (``table3``: the vix paper's Table 3 frame) beside the architecture's
    count, with the check that explains each: LeViP is LeViN plus 1,008, LeViT counts its bias table."""
    def counted(name, **overrides):
        return count_params(create_model(name, dataset="cifar10", **overrides))
    check = {"LeViP": {"printed": table3.at["levip", "params"], "architecture": counted("levip"),
                       "check": f"LeViN + 1,008 = {counted('levin') + 1008:,}"},
             "LeViT": {"printed": table3.at["levit", "params"], "architecture": counted("levit"),
                       "check": f"with the bias table: {counted('levit', mixer_options={'pos_bias': True}):,}"}}
    anomalies = pd.DataFrame.from_dict(check, orient="index")
    anomalies["printed − architecture"] = anomalies["printed"] - anomalies["architecture"]
    return anomalies


def softmax_of(printed_models, models=()):
    """``{model: its family's softmax model}`` of ``printed_models`` and ``models`` (those of a printed family): a
    family is a model family with a linear or a hybrid embedding, and its softmax model the first of it in
    ``printed_models`` (the paper prints it first)."""
    def family(m):
        return model_family(m), m.startswith("hybrid_")
    first = {}
    for m in printed_models:
        first.setdefault(family(m), m)
    return {m: first[family(m)] for m in [*printed_models, *models] if family(m) in first}


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


def transfer_preview(paper, table, row, shrink, source="vit_b16_224"):
    """The transfer report (``transfer``) of the ``source`` ViT's weights into the model of ``row`` of ``paper``'s
    ``table``, both as a profile builds them (``shrink``: its model settings), on the meta device: names and
    shapes, no weights."""
    model, settings = papers.row_run(paper, table, row)
    settings = {**settings, **shrink}
    settings.pop("init_from")
    with torch.device("meta"):
        vit = create_model(source, dataset="cifar10", **shrink)
        target = create_model(model, dataset="cifar10", **settings)
    return transfer(vit.state_dict(), target)


def optimizer_pairs(paper, table, other="adamw"):
    """``[(label, row, its other-optimizer row)]`` of ``paper``'s ``table``: each row without settings (the
    paper's method) beside the row of the same model whose ``optimizer`` setting is ``other``; the label is the
    row's label up to its last comma."""
    rows = papers.table(paper, table)["rows"]
    return [(rows[r]["label"].rsplit(",", 1)[0], r,
             next(o for o, e in rows.items() if e.get("model") == r and (e.get("settings") or {}).get("optimizer") == other))
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


def transfer_counts(found):
    """What a transfer report (``transfer``) moved: tensors loaded, new and unused, and the names (last part) of
    the new ones ("none" where there are none)."""
    new = sorted({name.rsplit(".", 1)[-1] for name in found.new})
    return {"loaded": len(found.loaded), "new": len(found.new), "unused": len(found.unused),
            "new tensors": ", ".join(new) or "none"}


def chosen_predictions(predicted, selection="first"):
    """A predictions record (None stays None) on the panel ``selection`` names: "first", the first test images as
    measured; "per_class", one test image of each class (the record's ``per_class`` part)."""
    if predicted is None or selection == "first":
        return predicted
    if selection != "per_class":
        raise ValueError(f"selection={selection!r}: use 'first' or 'per_class'")
    per_class = predicted["per_class"]
    return {**predicted, "panel": per_class["panel"], "labels": per_class["labels"],
            "runs": {n: {**r, "predicted": per_class["predicted"].get(n)} for n, r in predicted["runs"].items()}}


def prediction_grid(predicted, labels):
    """``(rows, columns)`` for ``map_grid``: the panel's test images ("not on this machine" where its dataset is
    not here), then per done run (labelled by ``labels``) its prediction of each image, ✓ where right, ✗ where
    wrong; the columns are the true labels (CIFAR-10's class names, "class k" otherwise)."""
    names = CIFAR10_CLASSES if predicted["dataset"] == "cifar10" else [f"class {k}" for k in range(10)]
    truth = predicted["labels"]
    rows = {"test image": panel_images(predicted) or ["not on this machine"] * len(truth)}
    rows.update({labels[n]: [f"{names[p]} {'✓' if p == t else '✗'}" for p, t in zip(r["predicted"], truth)]
                 for n, r in predicted["runs"].items() if r["status"] == "done"})
    return rows, [names[t] for t in truth]


def table_compute(paper, table, profile, compute):
    """The compute policy for ``paper``'s ``table``: ``compute``, but "never" for a table not on CIFAR-10 in the
    smoke profile (a pipeline check takes the same path on CIFAR-10; the other data sets cannot be had on the
    machines the book is built on)."""
    return compute if profile != "smoke" or papers.table(paper, table)["dataset"] == "cifar10" else "never"


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
