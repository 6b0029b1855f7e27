"""Tables, figures and provenance for the chapters: our numbers beside the papers'."""
import math
import numbers
import statistics

import matplotlib.pyplot as plt
import pandas as pd
from tqdm.auto import tqdm

from .. import papers
from ..measure.counting import count_params, summary_size_mb
from ..profiles import get_profile
from ..registry import create_model
from ..results import ResultsStore
from ..train import run


def paper_table(doc, table):
    """A published table as a DataFrame indexed by our model names (see vixnb/papers/)."""
    return pd.DataFrame.from_dict(papers.table(doc, table)["rows"], orient="index")


def paper_caption(doc, table):
    return papers.caption(doc, table)


def banner(profile, *, stored_only=False):
    """A markdown banner that says what kind of numbers the page shows; with ``stored_only`` (the notebook
    parameter), also that the page was rendered from the results store, and whether that store holds any
    result of ``profile`` yet."""
    prof = get_profile(profile)
    if profile == "smoke":
        text = ("> **Smoke profile: pipeline check on synthetic data — not the paper's numbers.** "
                f"{prof['description']} Accuracies below measure nothing about the models.")
    else:
        text = f"> **Profile `{profile}`.** {prof['description']}"
    if stored_only:
        text += (f"\n>\n> Rendered from the results store (`results/{profile}/`): nothing was trained or measured "
                 "when this page was built; each number's provenance (device, commit, seed, date) is shown with it.")
        if not ResultsStore().holds_profile(profile):
            text += (f" **The store holds no `{profile}` result yet:** these runs have not been made, and the page "
                     "shows them as \"not yet run\".")
    return text


def collect_runs(models, *, dataset, profile, seeds, compute="missing", progress=True):
    """One result per (model, seed) under the compute policy (``vixnb.results``): stored, freshly trained, or
    marked "not yet run"."""
    jobs = [(m, s) for m in models for s in seeds]
    bar = tqdm(jobs, desc=f"{profile} runs", disable=not progress)
    results = []
    for model, seed in bar:
        bar.set_postfix(model=model, seed=seed)
        results.append(run(model, dataset=dataset, profile=profile, seed=seed, compute=compute, progress=False))
    return results


def _mean_std(values):
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def _mean_std_cell(mean, std, n):
    """Mean ± std over ``n`` seeds as text, two decimals ("12.34" for one seed, "not yet run" for none)."""
    if mean is None:
        return "not yet run"
    return f"{mean:.2f}" if n == 1 else f"{mean:.2f} ± {std:.2f}"


SHORT = {"vit": "ViT", "vip": "ViP", "vil": "ViL", "vin": "ViN", "fnet": "FNet", "mlp_mixer": "MLP Mixer"}
SIZE_COLUMNS = ["params (paper conv.)", "paper params", "params (true)", "Size MB", "paper Size MB"]
ACCURACY_COLUMNS = ["top-1 (mean ± std)", "top-1 best", "paper top-1", "Δ top-1", "top-5 (mean ± std)", "top-5 (best seed)",
                    "paper top-5", "GPU GB", "paper GPU GB", "seeds"]


def short_name(model):
    """vit -> ViT, hybrid_vin -> Hybrid ViN."""
    base = model.removeprefix("hybrid_")
    return ("Hybrid " if model.startswith("hybrid_") else "") + SHORT.get(base, base)


def comparison_table(results, *, doc="vix", table="table1", dataset="cifar10"):
    """Ours beside the paper's, one row per model of ``results``.

    Parameter counts and Size (MB) are properties of the paper configuration for ``dataset`` (computed
    here, not taken from training runs). Accuracies: mean ± std over seeds, and best of the seeds (the
    paper reports the best of three runs)."""
    paper = paper_table(doc, table)
    by_model = {}
    for r in results:
        by_model.setdefault(r["config"]["model"], []).append(r)
    rows = []
    for model, runs in by_model.items():
        built = create_model(model, dataset=dataset)
        done = [r for r in runs if r["status"] == "done"]
        top1, top5 = [r["top1"] for r in done], [r["top5"] for r in done]
        gpu = [r["gpu_gb_reserved"] for r in done if "gpu_gb_reserved" in r]
        p = paper.loc[model] if model in paper.index else {}
        best = max(done, key=lambda r: r["top1"]) if done else None
        rows.append({
            "model": short_name(model),
            "params (paper conv.)": count_params(built, "paper"), "paper params": p.get("params"),
            "params (true)": count_params(built, "true"),
            "Size MB": round(summary_size_mb(built), 2), "paper Size MB": p.get("size_mb"),
            "top-1 (mean ± std)": _mean_std_cell(*_mean_std(top1), len(top1)),
            "top-1 best": round(best["top1"], 2) if best else None, "paper top-1": p.get("top1"),
            "Δ top-1": round(best["top1"] - p["top1"], 2) if best and "top1" in p else None,
            "top-5 (mean ± std)": _mean_std_cell(*_mean_std(top5), len(top5)),
            "top-5 (best seed)": round(best["top5"], 2) if best else None, "paper top-5": p.get("top5"),
            "GPU GB": round(max(gpu), 2) if gpu else "not measured",
            "paper GPU GB": p.get("gpu_gb"),
            "seeds": f"{len(done)}/{len(runs)}",
        })
    table = pd.DataFrame(rows).set_index("model").astype(object)
    return table.where(table.notna(), "—")


def hybrid_gains(table):
    """The paper's convolutional-embedding claim, from ``comparison_table``: for each token mixer, best top-1
    of the Hybrid model minus that of the plain one, ours beside the paper's (points; "—" where either run
    is missing)."""
    rows = {}
    for base in SHORT.values():
        plain, hybrid = base, f"Hybrid {base}"
        if plain not in table.index or hybrid not in table.index:
            continue
        cell = lambda col: (table.loc[hybrid, col] - table.loc[plain, col]  # noqa: E731
                            if all(isinstance(table.loc[m, col], (int, float)) for m in (plain, hybrid)) else "—")
        rows[base] = {"top-1 plain": table.loc[plain, "top-1 best"], "top-1 hybrid": table.loc[hybrid, "top-1 best"],
                      "gain": cell("top-1 best"), "paper gain": cell("paper top-1")}
    return pd.DataFrame.from_dict(rows, orient="index").astype(object)


def provenance_line(records, *, profile=None):
    """One line naming the profile, devices, commits, torch versions and dates (UTC day a run finished or a
    measurement was made) behind ``records``: training results (``train.run``; their seeds and data too) or
    ``vixnb.measure`` records and sweep rows. ``profile`` names the profile where the records do not; records
    without provenance that are "not yet run" are counted."""
    made = [r for r in records if isinstance(r, dict) and r.get("provenance")]
    if not made:
        reasons = sorted({r["reason"] for r in records if isinstance(r, dict) and r.get("reason")})
        if reasons:
            return f"No run of this configuration has been made yet ({'; '.join(reasons)})."
        return "No measurement was made for this section."
    provs = [r["provenance"] for r in made]
    fields = {k: sorted({str(p[k]) for p in provs if k in p}) for k in ("profile", "device", "commit", "torch", "seed")}
    if profile is not None:
        fields["profile"] = [str(profile)]
    fields["data"] = sorted({str(r["provenance"].get("data", r["config"]["dataset"])) for r in made
                             if "data" in r["provenance"] or "config" in r})
    fields["date"] = sorted({str(when)[:10] for p in provs if (when := p.get("finished") or p.get("measured"))})
    missing = sum(1 for r in records if isinstance(r, dict) and r.get("status") == "not yet run")
    line = "; ".join(f"{k}: {', '.join(v)}" for k, v in fields.items() if v)
    notes = sorted({p["note"] for p in provs if p.get("note")})
    return (f"Provenance — {line}" + (f"; {missing} run(s) not yet run" if missing else "") + "."
            + "".join(f" Note: {n.rstrip('.')}." for n in notes))


BATCH64_COLUMN = "GPU GB reserved, authors (fp32)"


def plot_accuracy_vs_memory(table, gpu_memory=None, *, title="Top-1 accuracy vs GPU memory"):
    """Figure 4 of seed 000: the paper's points (GPU memory at batch 64), and ours where measured: the
    batch-64 training step on the authors' path from ``gpu_memory`` (``gpu_memory_table``) when it holds
    measurements, else the peak over each training run at that model's own batch size."""
    ours = table[["top-1 best"]].copy()
    x_label = "GPU memory (GB), peak reserved over the training run"
    if gpu_memory is not None and BATCH64_COLUMN in gpu_memory:
        ours["GPU GB"] = gpu_memory[BATCH64_COLUMN].reindex(ours.index)
        x_label = "GPU memory (GB), one training step at batch 64, authors' path"
    else:
        ours["GPU GB"] = table["GPU GB"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    panels = [("paper", table[["paper GPU GB", "paper top-1"]], "GPU memory (GB), batch 64"),
              ("ours", ours[["GPU GB", "top-1 best"]], x_label)]
    for ax, (who, data, xlabel) in zip(axes, panels):
        pts = data.apply(pd.to_numeric, errors="coerce").dropna()
        for i, (label, (gx, gy)) in enumerate(pts.iterrows()):
            hybrid = label.startswith("Hybrid")
            ax.scatter(gx, gy, marker="^" if hybrid else "s", color="tab:green" if hybrid else "tab:blue")
            ax.annotate(label.replace("Hybrid ", "H-"), (gx, gy), fontsize=7, xytext=(4, -8 if i % 2 else 3),
                        textcoords="offset points")
        ax.set_title(who)
        ax.margins(x=0.15, y=0.08)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("top-1 (%)")
        if pts.empty:
            ax.set_xticks([])
            ax.set_yticks([])
            ax.text(0.5, 0.5, "GPU memory not measured\n(no GPU run for this profile)", ha="center", va="center",
                    transform=ax.transAxes)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def vix_table_for(dataset):
    """Seed 000's table for a dataset: Table 1 (CIFAR-10) or Table 2 (Tiny ImageNet)."""
    tables = {"cifar10": "table1", "tiny-imagenet": "table2"}
    if dataset not in tables:
        raise ValueError(f"seed 000 reports Tables 1/2 for {', '.join(tables)}; got dataset={dataset!r}")
    return tables[dataset]


def accuracy_columns(profile):
    """The accuracy view's columns; the smoke profile leaves out Δ, which would compare a pipeline check
    with the paper."""
    return [c for c in ACCURACY_COLUMNS if not (profile == "smoke" and c.startswith("Δ"))]


def gpu_memory_table(models, *, dataset="cifar10", profile="smoke", batch_size=64, table="table1", stored_only=False):
    """The paper's "GPU (GB)" column beside ours: peak memory of one training step at ``batch_size`` on the
    authors' path (materialised softmax, fp32) and ours (fused), from ``vixnb.measure``. Measured when this
    profile runs on a GPU here (and saved with the results) unless ``stored_only``, else read from a saved
    measurement, else marked as not measured."""
    import torch

    from .. import measure

    name = f"vix-gpu-memory-{dataset}-b{batch_size}"
    if not stored_only and get_profile(profile)["device"] == "cuda" and torch.cuda.is_available():
        frame = measure.gpu_memory_column(models, dataset=dataset, batch_size=batch_size)
        measure.save_measurements({"rows": frame.to_dict(orient="index"), "provenance": frame.attrs["provenance"]},
                                  profile, name)
        rows, source = frame.to_dict(orient="index"), frame.attrs["provenance"]
    elif (saved := measure.load_measurements(profile, name)) is not None:
        rows, source = saved["rows"], saved["provenance"]
    else:
        rows, source = {m: {"ours": "not measured (needs a GPU run of this profile)"} for m in models}, None
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame = frame.reindex([m for m in models if m in frame.index] + [m for m in frame.index if m not in models])
    frame = frame[[c for c in frame.columns if not c.startswith("step ms")]]  # memory only: speed is the efficiency chapter's
    paper = paper_table("vix", table)
    frame.insert(0, "paper GPU GB", [paper.loc[m, "gpu_gb"] if m in paper.index else "—" for m in frame.index])
    frame.index = [short_name(m) for m in frame.index]
    frame.attrs["provenance"] = source
    return frame


# --------------------------------------------------------------------------------------------------
# formatting: plain-text cells (command-line tables) and tables for the page

NOT_YET_RUN = "**Not yet run** for this profile on this machine."
# Compact, right-aligned tables with a rule under the header (scoped to each table by pandas' Styler).
PAGE_TABLE_STYLE = [
    {"selector": "", "props": "border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em 0;"},
    {"selector": "th, td", "props": "padding: 0.2em 0.75em; text-align: right;"},
    {"selector": "td, th.row_heading", "props": "white-space: nowrap;"},
    {"selector": "th.row_heading", "props": "text-align: left;"},
    {"selector": "thead tr:last-child th", "props": "border-bottom: 1px solid currentColor;"},
    {"selector": "thead tr:not(:last-child) th", "props": "text-align: center;"},
    {"selector": "tbody tr:nth-child(even)", "props": "background: rgba(127, 127, 127, 0.08);"},
    {"selector": "caption", "props": "caption-side: top; text-align: left; font-weight: bold; padding: 0.3em 0;"},
]


def text_cell(value, spec, *, blank="-"):
    """A cell of a plain-text table: ``blank`` for None, text as it is, a number formatted by ``spec``."""
    if value is None:
        return blank
    if isinstance(value, str):
        return value
    return format(value, spec)


def _number(v, decimals=None):
    """A cell for the page: thousands separators, about three significant digits (``decimals`` fixed
    decimals instead, for numbers that are not whole), text as it is."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return str(v)
    if isinstance(v, numbers.Integral) or (abs(v) >= 1000 and float(v).is_integer()):
        return f"{v:,.0f}"
    if not math.isfinite(v):
        return "oom" if v > 0 else str(v)
    if decimals is not None:
        return f"{v:,.{decimals}f}"
    a = abs(v)
    if a == 0:
        return "0"
    return f"{v:,.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 1 else f"{v:#.3g}"


def page_table(frame, *, caption=None, blank="—", empty=NOT_YET_RUN, decimals=None):
    """A DataFrame ready for the page: a ``Styler`` with thousands separators, about three significant
    digits (``decimals`` fixes the decimals of numbers that are not whole instead, e.g. 2 beside a paper's
    two-decimal numbers), ``blank`` for NaN/None, and ``caption`` above it; an empty ``frame`` gives the
    markdown ``empty`` instead."""
    from IPython.display import Markdown

    if frame is None or frame.empty:
        return Markdown(empty)
    frame = frame.copy()
    frame.index.name = None
    styler = frame.style.format(lambda v: _number(v, decimals), na_rep=blank).set_table_styles(PAGE_TABLE_STYLE)
    return styler.set_caption(caption) if caption else styler
