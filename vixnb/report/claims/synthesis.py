"""The five documents side by side. They measure the same mechanisms (softmax attention, Linformer, Performer,
Nyströmformer, linear attention, FNet, MLP-Mixer, convolutional embeddings) under different protocols; none
compares itself with the others. Here each mechanism gets one table: every printed row of it, its top-1 against
the softmax model of the same table and family (and its GPU memory against that model's, where printed), our
difference where both runs are stored, the claims about it with the paper-side check and our verdict (the claims
ledger's, one source of verdicts: ``ours.ledger``), and what one mixer layer costs on the fused path at the
ViX sequence length (``fused_costs``, from the stored ``vixnb bench mixers`` records).

A model's mechanism is read from the model itself: the ``mechanism`` its token mixer's class declares beside its
``map_description``, built on the meta device (no memory, no random numbers drawn)."""
import json
import math
import statistics

import pandas as pd

from ... import papers
from ...layers import MIXERS, SoftmaxAttention
from ...models import list_models, model_fact, model_family
from ...runs.profiles import get_profile
from ...runs.asked import row_runs
from ...runs.spec import settings_of_model
from ..records.collect import collect_runs
from ...results import ResultsStore, read_json
from .ours import ledger
from .schema import FAILS, HOLDS, NOT_RUN, NOT_TESTABLE
from ..tables.pages import label

SOFTMAX = SoftmaxAttention.mechanism
CONV_EMBEDDING = "convolutional embeddings"
PAPER_SIDE = "paper's tables"


def first_mechanism(model):
    """The ``mechanism`` declared by the first module class of a built ``model`` that declares a ``map_description``, or
    None."""
    for module in model.modules():
        if hasattr(type(module), "map_description"):
            return declared_mechanism(type(module))
    return None


def declared_mechanism(mixer):
    """The ``mechanism`` a token-mixer class declares beside its ``map_description``, or a one-line error naming the
    class that declares none."""
    declared = getattr(mixer, "mechanism", None)
    if not isinstance(declared, str) or not declared:
        raise TypeError(f"{mixer.__module__}.{mixer.__qualname__} declares map_description but no mechanism: declare "
                        "`mechanism = \"...\"` beside it (the synthesis page groups the models by it)")
    return declared


def mechanism(model, settings=None):
    """The mechanism of ``model``'s token mixer (the ``mechanism`` its class declares beside ``map_description``), or
    None for a model without one (a ResNet)."""
    settings = settings_of_model(settings)  # a paper row's create_model settings, without its run options
    return model_fact(first_mechanism, model, "cifar10", json.dumps(settings, sort_keys=True)) \
        if model in list_models() else None


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
    done = [r["top1"] for r in collect_runs([model], dataset=dataset, profile=profile, seeds=seeds, compute="never",
                                            progress=False, **settings) if r.get("status") == "done"]
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
            shown_dataset = DATASET_NAMES.get(dataset, dataset or "—")
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
                    out.append({"mechanism": mech_shown, "document": where, "dataset": shown_dataset,
                                "model": _short(printed, model, repeated[model]),
                                "against": _short(theirs, info[base][0], repeated[info[base][0]]),
                                "top-1": printed["top1"], "Δ top-1": _difference(printed["top1"],
                                                                                              theirs.get("top1")),
                                "GPU memory ×": _ratio(printed.get("gpu_gb"), theirs.get("gpu_gb")),
                                "Δ top-1 ours": _difference(mine, ref) if base else None})
    return pd.DataFrame(out)


def mechanism_claims(profile="budget", *, frames=None):
    """One row per claim about a mechanism (its ``a``, ``b`` or ``pairs`` rows name a model of it): mechanism,
    document, dataset, the claim, whether the paper's own tables bear it out, and our verdict in ``profile``, read
    from the claims ledger (``frames``: ``{paper: claims frame}`` as ``ours.ledger`` gives them; built here
    where None). A claim is listed under the mechanisms it sets against softmax attention, not under softmax
    attention as well (only a claim among softmax models is listed there); a sentence about more than two
    mechanisms at once is left to the ledger."""
    if frames is None:
        frames = {key: page["frame"] for key, page in ledger(profile).items()}
    out = []
    for key in papers.DOCUMENTS:
        frame = frames.get(key)
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
            about = (mechs - {SOFTMAX}) or mechs
            row = frame.loc[claim["id"]] if frame is not None and claim["id"] in frame.index else None
            dataset = claim.get("dataset") or next(
                (papers.table(key, t).get("dataset") for t in ([claim["table"]] if isinstance(claim.get("table"), str)
                                                              else claim.get("table") or [])), None)
            for mech in sorted(about):
                out.append({"mechanism": mech, "document": key, "dataset": DATASET_NAMES.get(dataset, dataset or "—"),
                            "claim": claim["text"], PAPER_SIDE: row["paper bears it out"] if row is not None else "—",
                            "ours": row["our verdict"] if row is not None else "—"})
    return pd.DataFrame(out, columns=["mechanism", "document", "dataset", "claim", PAPER_SIDE, "ours"])


#: a data set's name on the page
DATASET_NAMES = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "tiny-imagenet": "Tiny ImageNet",
                 "imagenet": "ImageNet"}
#: the ViX models' sequence length on CIFAR (32 x 32 patches of one pixel, and the class token)
VIX_TOKENS = 1025


#: where a mixer's form today is measured once its rows of a ``vixnb bench mixers`` record are superseded: the
#: benchmark (``results/bench/<name>-N.json``, the newest) and, per precision, the row of the form its ``auto`` setting
#: runs today (``layers.nystrom``: the residual as a convolution in bf16, as the banded matrix in fp32 on a GPU)
CURRENT_FORMS = {"nystrom": ("nystrom-variants", {
    "bf16": ("nystrom: conv residual", "the residual as a convolution"),
    "fp32": ("nystrom: toeplitz residual (auto on GPU)", "the residual as the banded matrix")})}


def fused_costs(tokens=VIX_TOKENS, *, store=None):
    """One row per mechanism: one mixer layer's forward and backward step (ms) and its peak memory (MB) on the fused
    path at ``tokens`` tokens, from each stored ``vixnb bench mixers`` record (``results/bench/mixers-*.json``: one
    column pair per record, named by its precision and device; a materialised or unfused variant is left out). A row
    the record marks superseded (``record["superseded"]``: a later change of the mixer) is never quoted: it is left
    out, and ``attrs["left out"]`` says which and why, for the page to say so, with ``attrs["current"]``: the form the
    mixer runs today as its own benchmark stores it (``CURRENT_FORMS``), a time from another session than the rows
    above, so quoted apart with its own record's fused softmax beside it."""
    store = store if store is not None else ResultsStore()
    columns, left_out, current = {}, [], {}
    for path in sorted((store.root / "bench").glob("mixers-*.json")):
        record = read_json(path)
        prov = record.get("provenance") or {}
        where = f"{prov.get('dtype', '?')}, {str(prov.get('device', '?')).replace('NVIDIA ', '').split(' ')[0]}"
        superseded = record.get("superseded") or {}
        for row in record.get("rows") or []:
            name = str(row.get("mechanism", ""))
            if row.get("tokens") != tokens or row.get("status") != "ok" or "materialised" in name or "unfused" in name:
                continue
            if row.get("kind") in (superseded.get("rows") or []):
                mech = declared_mechanism(MIXERS[row["kind"]]) if row.get("kind") in MIXERS else row.get("kind")
                left_out.append((mech, where, superseded.get("reason", "")))
                if row["kind"] in CURRENT_FORMS and mech not in current:
                    current[mech] = _current_form(row["kind"], tokens, store)
                continue
            mech = declared_mechanism(MIXERS[row["kind"]]) if row.get("kind") in MIXERS else None
            if mech:
                columns.setdefault(f"step ms ({where})", {})[mech] = round(row["ms"], 2)
                columns.setdefault(f"peak MB ({where})", {})[mech] = round(row["peak_mb"])
    frame = pd.DataFrame(columns)
    frame.attrs["left out"] = left_out
    frame.attrs["current"] = {mech: text for mech, text in current.items() if text}
    return frame


def _current_form(kind, tokens, store):
    """The form mixer ``kind`` runs today, as its newest stored benchmark (``CURRENT_FORMS``) measured it at ``tokens``
    tokens: "5.67 ms, 390 MB in bf16 (3.15× that record's fused softmax) ... (nystrom-variants-2, H100)"; "" where
    none is stored."""
    prefix, rows = CURRENT_FORMS[kind]
    name = store.newest_record("bench", prefix)
    record = store.load_record("bench", name) if name else None
    if not record or (record.get("config") or {}).get("tokens", tokens) != tokens:
        return ""
    found = {(r.get("mechanism"), r.get("dtype")): r for r in record.get("rows") or [] if r.get("status") == "ok"}
    parts = [f"{found[(row, dtype)]['ms']:.2f} ms, {found[(row, dtype)]['peak_mb']:,.0f} MB in {dtype} ({words}; "
             f"{found[(row, dtype)]['x_fused_softmax']:.2f}× that record's fused softmax)"
             for dtype, (row, words) in rows.items() if (row, dtype) in found]
    device = str((record.get("provenance") or {}).get("device", "?")).replace("NVIDIA ", "").split(" ")[0]
    batch = (record.get("config") or {}).get("batch")
    return "; ".join(parts) + f" (`{name}`, {device}" + (f", batch {batch}" if batch else "") + ")" if parts else ""


def left_out_note(costs):
    """One sentence naming the stored rows ``fused_costs`` did not quote, and why, with the mixer's form today as
    its own stored benchmark measured it (``attrs["current"]``) where one is stored ("" where none is left out)."""
    grouped = {}
    for mech, where, reason in costs.attrs.get("left out") or []:
        grouped.setdefault((mech, reason), []).append(where)
    current = costs.attrs.get("current") or {}
    return "".join(f" {mech}'s stored rows ({'; '.join(wheres)}) are not quoted: superseded ({reason})"
                   + (f"; its form today, measured in another session: {current[mech]}." if mech in current else
                      "; `vixnb bench mixers` measures them again.")
                   for (mech, reason), wheres in grouped.items())


def practitioners_answer(costs):
    """Markdown: which mechanism to choose, from the fused-path costs (``fused_costs``) against softmax attention's,
    each sentence computed from the stored records (the first record's columns; "" where none is stored)."""
    if costs.empty or SOFTMAX not in costs.index:
        return ""
    ms_col = next(c for c in costs.columns if c.startswith("step ms"))
    mb_col = next((c for c in costs.columns if c.startswith("peak MB") and c[7:] == ms_col[7:]), None)
    mb_col = next((c for c in costs.columns if c.startswith("peak MB") and "fp32" in c), mb_col)
    attention = [m for m in ("Performer", "Linformer", "Nyströmformer", "linear attention") if m in costs.index]
    slower = [m for m in attention if costs.at[m, ms_col] > costs.at[SOFTMAX, ms_col]]
    heavier = [m for m in attention if mb_col and costs.at[m, mb_col] > costs.at[SOFTMAX, mb_col]]
    mixers = [m for m in ("FNet (Fourier mixing)", "MLP-Mixer (token MLP)") if m in costs.index]
    text = [f"At {VIX_TOKENS} tokens (ViX on CIFAR), a fused softmax attention layer takes "
            f"{costs.at[SOFTMAX, ms_col]:.2f} ms a step ({ms_col[9:-1]})"
            + (f" and {costs.at[SOFTMAX, mb_col]:,.0f} MB ({mb_col[9:-1]})" if mb_col else "") + "."]
    if slower:
        text.append(f"{len(slower)} of the {len(attention)} linear-attention mechanisms are slower: "
                    + ", ".join(f"{m} {costs.at[m, ms_col]:.2f} ms" for m in slower) + ".")
    if heavier:
        text.append(f"{len(heavier)} of them also need more memory: " + ", ".join(
            f"{m} {costs.at[m, mb_col]:,.0f} MB" for m in heavier) + ".")
    cheaper = [m for m in mixers if costs.at[m, ms_col] < costs.at[SOFTMAX, ms_col]
               and (not mb_col or costs.at[m, mb_col] < costs.at[SOFTMAX, mb_col])]
    if cheaper:
        text.append("Cheaper on both counts: " + ", ".join(
            f"{m} {costs.at[m, ms_col]:.2f} ms" + (f", {costs.at[m, mb_col]:,.0f} MB" if mb_col else "")
            for m in cheaper) + ", which mix tokens without attention and cost accuracy in the papers' tables.")
    text.append("So at these lengths, with a fused attention kernel (PyTorch's scaled_dot_product_attention), "
                "keep softmax attention; the papers' memory savings are against a materialised attention matrix. "
                "Measure a linear mechanism with `vixnb bench mixers` at your own sequence length before choosing it.")
    return " ".join(text)


def _spread(values):
    values = sorted(v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not values:
        return "—"
    middle = statistics.median(values)
    return f"{values[0]:+.1f} / {middle:+.1f} / {values[-1]:+.1f}" if len(values) > 1 else f"{values[0]:+.1f}"


#: the parts of ``mechanism_summary``, one table each on the page (together they are too wide for the text column)
PRINTED, OURS, FUSED = "as the papers print it", "our runs", "one layer on the fused path, measured by us"


def mechanism_summary(rows, claimed, costs=None):
    """One row per mechanism from ``comparisons`` and ``mechanism_claims``, its columns in three parts (the first
    level of its column index): ``PRINTED``, how many printed rows and documents, the printed Δ top-1 against softmax
    (least … median … most), the median printed GPU-memory ratio and the claims the paper's own tables bear out / do
    not; ``OURS``, our Δ top-1 and our verdicts (hold / do not hold / not decided, from the ledger); ``FUSED``, the
    fused-path step time and peak memory of one layer (``costs``: ``fused_costs``)."""
    out = {}
    costs = costs if costs is not None else pd.DataFrame()
    for mech in [*dict.fromkeys([*rows.get("mechanism", []), *claimed.get("mechanism", [])])]:
        mine = rows[rows["mechanism"] == mech] if len(rows) else rows
        said = claimed[claimed["mechanism"] == mech] if len(claimed) else claimed
        memory = median_memory_ratio(rows, mech) if len(rows) else "not printed"  # the "Reading it" figure too
        verdicts = said["ours"].value_counts() if len(said) else {}
        documents = mine["document"].str.split().str[0].nunique() if len(mine) else 0
        undecided = sum(int(n) for v, n in dict(verdicts).items()
                        if v not in (HOLDS, FAILS, NOT_RUN, NOT_TESTABLE, "—"))
        out[mech] = {
            (PRINTED, "rows (documents)"): f"{len(mine)} ({documents})" if len(mine) else "—",
            (PRINTED, "Δ top-1 vs softmax: least / median / most"): _spread(mine.get("Δ top-1", [])),
            (PRINTED, "GPU memory vs softmax (median)"): f"{memory}×" if memory != "not printed" else "—",
            (PRINTED, "claims the paper bears out / not"): (f"{int((said[PAPER_SIDE] == 'yes').sum())} / "
                                                           f"{int((said[PAPER_SIDE] == 'no').sum())}"
                                                           if len(said) else "—"),
            (OURS, "Δ top-1 vs softmax: least / median / most"): _spread(mine["Δ top-1 ours"]) if len(mine) else "—",
            (OURS, "claims: hold / do not / not decided"): (f"{int(verdicts.get(HOLDS, 0))} / "
                                                            f"{int(verdicts.get(FAILS, 0))} / {undecided}"
                                                            if len(said) else "—"),
            **{(FUSED, c): (costs.at[mech, c] if mech in costs.index and costs.at[mech, c] == costs.at[mech, c]
                            else "—")
               for c in costs.columns},
        }
    frame = pd.DataFrame.from_dict(out, orient="index")
    if len(frame.columns):
        frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame


def median_memory_ratio(rows, mechanism):
    """The median printed GPU-memory ratio against softmax of ``mechanism``'s rows of ``comparisons``, as the page
    writes it (two decimals), or "not printed" where no row of it prints one."""
    values = rows.loc[rows["mechanism"] == mechanism, "GPU memory ×"].dropna()
    return f"{statistics.median(values):.2f}" if len(values) else "not printed"


def conv_embedding_gain(rows):
    """The printed Δ top-1 of a convolutional embedding over a linear one (``CONV_EMBEDDING`` rows of
    ``comparisons``): ``(median, least)``, signed with two decimals."""
    gains = rows.loc[rows["mechanism"] == CONV_EMBEDDING, "Δ top-1"].dropna()
    return f"{gains.median():+.2f}", f"{gains.min():+.2f}"
