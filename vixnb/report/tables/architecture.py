"""The models as built today, beside what the papers print: their parameters (in the paper's convention and true)
and MACs, counts with and without a part, the printed counts that the architecture explains, each family's
softmax model, and what a transfer of a ViT's weights loads into a model. Each builds the models (the meta device
where no weight is needed); none measures or trains."""
from __future__ import annotations

import pandas as pd
import torch

from ... import papers
from ...models import create_model, model_family
from ...measure.flops import flops, paper_macs
from ...models.counting import count_params
from ...models.warm_start import transfer


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


def transfer_counts(found):
    """What a transfer report (``transfer``) moved: tensors loaded, new and unused, and the names (last part) of
    the new ones ("none" where there are none)."""
    new = sorted({name.rsplit(".", 1)[-1] for name in found.new})
    return {"loaded": len(found.loaded), "new": len(found.new), "unused": len(found.unused),
            "new tensors": ", ".join(new) or "none"}
