"""The five documents side by side. They measure the same mechanisms (softmax attention, Linformer, Performer,
Nyströmformer, linear attention, FNet, MLP-Mixer, convolutional embeddings) under different protocols; none
compares itself with the others. Here each mechanism gets one table: every printed row of it, its top-1 against
the softmax model of the same table and family (and its GPU memory against that model's, where printed), our
difference where both runs are stored, and the claims that name it with the paper-side check and our verdict.

A model's mechanism is read from the model itself: the module that defines its token mixer (the class that
declares ``map_kind``), built on the meta device (no memory, no random numbers drawn)."""
import math
from functools import cache

import pandas as pd
import torch

from .. import papers
from ..models import create_model, list_models, model_family
from ..profiles import get_profile, model_settings, row_runs
from ..runs import run
from .claim_schema import FAILS, HOLDS
from .claim_verdicts import claims
from .tables import label

SOFTMAX = "softmax attention"
#: the module that defines a token mixer -> the mechanism it implements
MECHANISMS = {"softmax": SOFTMAX, "vit_small": SOFTMAX, "cvt": SOFTMAX, "levit": SOFTMAX, "cct": SOFTMAX,
              "shaped": "shaped attention", "linformer": "Linformer", "performer": "Performer",
              "nystrom": "Nyströmformer", "linear": "linear attention", "fnet": "FNet (Fourier mixing)",
              "mlp": "MLP-Mixer (token MLP)"}
CONV_EMBEDDING = "convolutional embeddings"
PAPER_SIDE = "paper's tables"


@cache
def _mechanism(model, settings):
    with torch.device("meta"):
        net = create_model(model, **dict(settings))
    for module in net.modules():
        if hasattr(type(module), "map_kind"):
            return MECHANISMS.get(type(module).__module__.rsplit(".", 1)[-1])
    return None


def mechanism(model, settings=None):
    """The mechanism of ``model``'s token mixer (``MECHANISMS``), or None for a model without one (a ResNet)."""
    settings = model_settings(settings)
    return _mechanism(model, tuple(sorted(settings.items()))) if model in list_models() else None


def _rows(key, table):
    """``[(row, model, settings, printed row)]`` of a table whose rows print a top-1."""
    spec = papers.table(key, table)
    rows = spec.get("rows") or {}
    if not isinstance(rows, dict):
        return []
    out = []
    for row, printed in rows.items():
        if isinstance(printed, dict) and isinstance(printed.get("top1"), (int, float)):
            model, settings = papers.row_run(key, table, row)
            if model in list_models():
                out.append((row, model, settings, printed))
    return out


def _ours(key, row, dataset, profile, runs_of):
    """Our mean top-1 of ``row`` over the profile's seeds stored, or None."""
    if row not in runs_of:
        return None
    model, settings = runs_of[row]
    seeds = get_profile(profile).get("seeds") or [0]
    done = [r["top1"] for r in (run(model, dataset=dataset, profile=profile, seed=s, compute="never", **settings)
                                for s in seeds) if r.get("status") == "done"]
    return sum(done) / len(done) if done else None


def _difference(a, b):
    return round(a - b, 2) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None


def _ratio(a, b):
    ok = all(isinstance(v, (int, float)) and not math.isnan(v) and v > 0 for v in (a, b))
    return round(a / b, 2) if ok else None


def _short(printed, model, repeated):
    """A row's name on the page: the model's label ("Hybrid ViN"), or the printed label where one model fills
    several rows of the table (the linear-attention report's "ViP-ReLU (ViT checkpoint)")."""
    return str(printed.get("label") or label(model)) if repeated else label(model)


def comparisons(profile="budget"):
    """One row per printed table row of a non-softmax mechanism (and per plain/hybrid pair, under
    ``CONV_EMBEDDING``): document and table, model, the softmax model it is set against (same table, same family,
    same embedding), the model's printed top-1 and its difference from the other's ("Δ top-1"), the printed
    GPU-memory ratio ("GPU memory ×"), and the same difference between our runs in ``profile`` where both are
    stored ("Δ top-1 ours")."""
    out = []
    for key in papers.DOCUMENTS:
        runs_of = row_runs(key, profile)
        for table, spec in papers.load(key)["tables"].items():
            rows = _rows(key, table)
            if not rows:
                continue
            dataset = spec.get("dataset")
            where = f"{key} {str(spec.get('caption', table)).split(':')[0]}"
            info = {row: (model, mechanism(model, settings), model_family(model), model.startswith("hybrid_"),
                          printed) for row, model, settings, printed in rows}
            repeated = {m: [i[0] for i in info.values()].count(m) > 1 for m, *_ in info.values()}
            for row, (model, mech, family, hybrid, printed) in info.items():
                pairs = []
                if mech and mech != SOFTMAX:
                    twins = [r for r, i in info.items() if i[1] == SOFTMAX and i[3] == hybrid]
                    same = [r for r in twins if info[r][2] == family]
                    base = (same or (twins if len(twins) == 1 else []) or [None])[0]
                    if base is None:
                        continue  # no softmax model of this family in the table: the claims say how it compares
                    pairs.append((mech, base))
                plain = model.removeprefix("hybrid_")
                if hybrid and plain in {i[0] for i in info.values()}:
                    pairs.append((CONV_EMBEDDING, next(r for r, i in info.items() if i[0] == plain)))
                for mech_shown, base in pairs:
                    theirs = info[base][4] if base else {}
                    mine, ref = (_ours(key, row, dataset, profile, runs_of),
                                 _ours(key, base, dataset, profile, runs_of)) if base else (None, None)
                    out.append({"mechanism": mech_shown, "document": where, "model": _short(printed, model, repeated[model]),
                                "against": _short(theirs, info[base][0], repeated[info[base][0]]),
                                "top-1": printed["top1"], "Δ top-1": _difference(printed["top1"],
                                                                                              theirs.get("top1")),
                                "GPU memory ×": _ratio(printed.get("gpu_gb"), theirs.get("gpu_gb")),
                                "Δ top-1 ours": _difference(mine, ref) if base else None})
    return pd.DataFrame(out)


def mechanism_claims(profile="budget"):
    """One row per claim that names a model of a mechanism (its ``a``, ``b`` or ``pairs`` rows): mechanism,
    document, the claim, whether the paper's own tables bear it out, and our verdict in ``profile``."""
    out = []
    for key in papers.DOCUMENTS:
        frame = claims(key, profile=profile)
        runs_of = papers.paper_runs(key)
        for claim in papers.claims(key):
            named = []
            for field in ("a", "b"):
                value = claim.get(field)
                named += value if isinstance(value, list) else [value] if value else []
            named += [m for pair in claim.get("pairs") or [] for m in pair]
            mechs = {mechanism(*runs_of[r]) for r in named if r in runs_of} - {None}
            if len(mechs - {SOFTMAX}) > 2:
                continue  # a sentence about all the mechanisms at once: the ledger lists it
            row = frame.loc[claim["id"]] if claim["id"] in frame.index else None
            for mech in sorted(mechs):
                out.append({"mechanism": mech, "document": key, "claim": claim["text"],
                            PAPER_SIDE: row["paper bears it out"] if row is not None else "—",
                            "ours": row["our verdict"] if row is not None else "—"})
    return pd.DataFrame(out)


def _spread(values):
    values = sorted(v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not values:
        return "—"
    middle = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    return f"{values[0]:+.1f} / {middle:+.1f} / {values[-1]:+.1f}" if len(values) > 1 else f"{values[0]:+.1f}"


def mechanism_summary(rows, claimed):
    """One row per mechanism from ``comparisons`` and ``mechanism_claims``: how many printed rows and documents,
    the printed Δ top-1 against softmax (least … median … most), the median printed GPU-memory ratio, the claims
    the paper's own tables bear out / do not, and our verdicts (hold / do not hold / not yet decided)."""
    out = {}
    for mech in [*dict.fromkeys([*rows.get("mechanism", []), *claimed.get("mechanism", [])])]:
        mine = rows[rows["mechanism"] == mech] if len(rows) else rows
        said = claimed[claimed["mechanism"] == mech] if len(claimed) else claimed
        ratios = sorted(v for v in mine.get("GPU memory ×", []) if v == v and v is not None)
        verdicts = said["ours"].value_counts() if len(said) else {}
        documents = mine["document"].str.split().str[0].nunique() if len(mine) else 0
        out[mech] = {
            "rows (documents)": f"{len(mine)} ({documents})" if len(mine) else "—",
            "Δ top-1 vs softmax, printed: least / median / most": _spread(mine.get("Δ top-1", [])),
            "GPU memory vs softmax, printed (median)": f"{ratios[len(ratios) // 2]:.2f}×" if ratios else "—",
            "Δ top-1 ours": _spread(mine["Δ top-1 ours"]) if len(mine) else "—",
            "claims the paper bears out / not": (f"{int((said[PAPER_SIDE] == 'yes').sum())} / "
                                                 f"{int((said[PAPER_SIDE] == 'no').sum())}") if len(said) else "—",
            "claims that hold on ours / not": (f"{int(verdicts.get(HOLDS, 0))} / {int(verdicts.get(FAILS, 0))}"
                                               if len(said) else "—"),
        }
    return pd.DataFrame.from_dict(out, orient="index")
