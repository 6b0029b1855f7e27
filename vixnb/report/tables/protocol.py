"""The training protocol of a run config, for the page (``protocol_table``), and the authors' scripts that tested with
dropout active (``tested_with_dropout``)."""
from __future__ import annotations

import pandas as pd

from ... import papers
from ...models.counting import dropout_text
from ...runs.asked import run_of
from .pages import label, page_table


def _optimizer(config):
    adamw = f"AdamW, lr {config['lr']:g}, weight decay {config['weight_decay']:g}"
    if config["optimizer"] == "sgd":
        d = config["dualopt"]
        return f"SGD alone: DualOpT's SGD (lr {d['sgd_lr']:g}, momentum {d['sgd_momentum']:g}) from the first epoch"
    if config["optimizer"] != "dualopt":
        return adamw + ("" if config["weight_decay"] else " (Adam)")
    dualopt = config["dualopt"]
    return (f"DualOpT: AdamW (lr {config['lr']:g}, weight decay {config['weight_decay']:g}) until "
            f"{dualopt['patience']} epochs pass without a top-1 at least as high as the best (ties reset the count); "
            f"then the best weights are reloaded and SGD (lr {dualopt['sgd_lr']:g}, momentum "
            f"{dualopt['sgd_momentum']:g}) goes on under the same patience")


def _epochs(config):
    if config.get("stop") == "patience":
        return (f"until {config['dualopt']['patience']} epochs pass without a top-1 at least as high as the best "
                f"(the rule that ends DualOpT's SGD phase), at most {config['epochs']}")
    if config["optimizer"] != "dualopt":
        return config["epochs"]
    cap = config["dualopt"].get("adamw_epochs")
    if cap:
        return (f"capped at {config['epochs']}, the AdamW phase at {cap} of them, so that both phases run "
                "(uncapped, a run ends when the SGD phase's patience runs out)")
    return f"until the SGD phase's patience runs out, at most {config['epochs']}"


def _augmentation(config):
    if config.get("randaugment"):
        ops, magnitude = config["randaugment"]
        return f"RandAugment (num_ops {ops}, magnitude {magnitude})"
    augment = config.get("augment") or {}
    return ", ".join(k if v is True else f"{k} ±{v:g}°" for k, v in augment.items() if v) or "none"


def _reported(config):
    if config["protocol"] == "fixed":
        return (f"the best on {config['val_size']} held-out training images; the test set once, with those "
                "weights")
    return "the best test top-1 (the test set after every epoch; no validation split)"


def protocol_rows(config):
    """``{aspect: value}``: the training protocol of ``config`` (``spec.run_config``) in words: optimizer,
    schedule, augmentation, batch size, epochs, post-training (where there is one), precision, the epoch reported,
    and the per-layer gradient norms (where recorded)."""
    rows = {"optimizer": _optimizer(config), "schedule": config.get("schedule", "constant"),
            "augmentation": _augmentation(config), "batch size": config["batch_size"], "epochs": _epochs(config)}
    if config["post_train_epochs"]:
        rows["post-training"] = (f"SGD from the best weights on un-augmented images until the patience runs out, at "
                                 f"most {config['post_train_epochs']} epochs")
    rows.update({"precision": config["precision"], "epoch reported": _reported(config)})
    if config.get("grad_norm_every"):
        rows["gradient norms"] = f"every {config['grad_norm_every']} steps"
    return rows


def protocol_table(model, profile, *, dataset="cifar10", rows=None, **settings):
    """The training protocol of ``model``'s run on ``dataset`` in ``profile`` (``spec.run_config`` with
    ``settings``) as a page table (``protocol_rows``), one column named after the profile; ``rows``: more rows a page
    adds (``{"input": "224 px"}``)."""
    protocol = {**protocol_rows(run_of(model, settings, dataset=dataset, profile=profile).config), **(rows or {})}
    column = f"{profile} profile"
    return page_table(pd.Series(protocol, name=column).to_frame(), wrap=[column])



def tested_with_dropout(paper):
    """The models of ``paper`` whose authors' scripts measured their test accuracy with dropout active: scripts that
    never call ``model.eval()`` (the protocol's ``no_eval_mode``) on models with dropout (its ``dropout``, which
    ``vixnb papers check`` holds to the models built under the protocol), each with that dropout, as a page table
    (an empty frame where there are none)."""
    protocol = papers.protocol(paper)
    rows = {label(model): {"dropout active in their test": dropout_text(rates)}
            for model in protocol.get("no_eval_mode") or []
            if (rates := papers.stated_dropout(protocol, model))}
    return pd.DataFrame.from_dict(rows, orient="index")
