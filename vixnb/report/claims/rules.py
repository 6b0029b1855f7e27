"""The rules that say whether our figures may decide a claim, in one place. ``verdicts.evaluate`` applies them
to every verdict of ours, so the ledger, the chapter pages, the results page and the synthesis agree.

1. A figure that depends on what a run learned (``Metric.decided_by`` ``EPOCHS``: an accuracy, a measure of trained
   weights; never a time, a memory or a count) is not decided by a run that ended at chance (last training accuracy
   and test top-1 within ``CHANCE_MARGIN`` points of 100 / classes) or whose gradients were all zero, nor by a
   measurement of its trained weights: "not decided: run failed", naming the run. A run that did not learn
   (``not_learned_reason``: over at least ``LEARN_EPOCHS`` epochs its training accuracy gained less than
   ``LEARN_POINTS`` points, or its training loss fell by less than ``LEARN_LOSS_DROP``) decides nothing either: "not
   decided: a run did not learn", naming it. Both decide a claim that predicts that run's failure (the claim's
   ``predicts_failure``), judged on its own measure at the run's last epoch (rule 2 does not hold it back: the
   failure is the measure); and a stall shown to be the model's and recipe's (every seed of the configuration, at
   least ``SHOWN_SEEDS``, did not learn, and its fp32 runs did not either) decides, the verdict saying so ("the
   vanilla did not learn at this setting: 3 of 3 seeds, fp32 too"). A trend over layers is read on the layers whose
   value moved from its initialisation (``Metric.note`` says which); where too few moved, the run did not learn what
   the claim measures.
2. A magnitude ("about 16 %", "at least twice") of a figure that depends on the number of epochs is judged only
   under the paper's protocol; a sign or an ordering (a gain against 0, a ratio against 1) may be judged under a
   shorter one where every side ran the same share of its own paper's protocol, and the verdict gives each side's
   real fraction ("FNet 10 of 100 epochs, ViT 10 of 40"); sides at different shares decide nothing.
3. Times are compared only within one device, one precision and one machine session (``session``: the device, day
   and commit a run was made on; a lent GPU machine is a fresh machine each session); a time's magnitude
   against the paper's printed one only at the paper's precision.
4. Every verdict shows its number of seeds; with one seed, a verdict that a difference of ``seed_spread`` (the
   paper's reported spread, else ``DEFAULT_SPREAD`` points) would turn reads "not decided: one seed".
5. A claim about the authors' build is judged on their build where ours can be built their way (the claim's
   ``authors_build``, ``verdicts.evaluate``), ours given beside it; where it cannot: "not decided: our build differs".

``rules_statement`` is the rules in one paragraph, the text the intro and the results page print.

``facts`` describes the runs and measurements behind each model's figures: ``{model: {origin: Facts}}`` (the origin
of ``metrics.METRICS``: ``runs``, ``gpu_memory``, ``efficiency``), built by ``run_facts`` / ``record_facts``
(``ours.ours_from_store`` does it for the book)."""
from __future__ import annotations

from typing import NamedTuple

from ... import papers
from ..records.learning import (CHANCE_MARGIN, LEARN_EPOCHS, LEARN_LOSS_DROP, LEARN_POINTS, failed_reason,  # noqa: F401
                                not_learned_reason)
from ..records.metrics import EPOCHS, METRICS
from ..records.provenance import short_device
from ...results import made_on


def pair_figure(method, va, vb):
    """A pairwise claim's figure of ``va`` (its a side) against ``vb`` (its b side) by ``method``: relative gain in
    %, gain in points, ratio, or ``va`` itself."""
    if method == "relative_gain":
        return (va - vb) / vb * 100.0
    if method == "point_gain":
        return va - vb
    if method == "ratio":
        return va / vb
    return va

FAILED = "not decided: run failed"
NOT_LEARNED = "not decided: a run did not learn"
ONE_SEED = "not decided: one seed"
PROTOCOL = "not decided: protocol"
DEVICE = "not decided: times from different machines or precisions"
BUILD = "not decided: our build differs"
#: every verdict of ours that decides nothing, as the results page counts them
NOT_DECIDED = (FAILED, NOT_LEARNED, ONE_SEED, PROTOCOL, DEVICE, BUILD)

SHOWN_SEEDS = 3  # the seeds a stall must hold in (every one of them) before it is the model's and recipe's
DEFAULT_SPREAD = 1.0  # points of accuracy: one seed's noise where the paper reports none
TIME_UNITS = ("s", "ms")
#: thresholds that make a claim a sign or an ordering rather than a magnitude
_NEUTRAL = {"point_gain": 0.0, "relative_gain": 0.0, "ratio": 1.0}


#: why each verdict of ``NOT_DECIDED`` decides nothing, one line each (the ledger's "How to read" and each chapter's
#: claims summary print these: ``why_not_decided``)
WHY_NOT_DECIDED = {
    FAILED: (f"a run behind the figure failed: its last training accuracy and test top-1 ended within "
             f"{CHANCE_MARGIN:g} points of chance (100 / classes), or its gradients were all zero; the verdict names "
             "the run."),
    NOT_LEARNED: (f"a run behind the figure did not learn: over its epochs its training accuracy gained less than "
                  f"{LEARN_POINTS:g} points, or its training loss fell by less than {LEARN_LOSS_DROP:.0%}, and it is "
                  f"not shown to be the model's and recipe's (every one of at least {SHOWN_SEEDS} seeds, and in fp32 "
                  "too); or the per-layer values a trend is read on sit at their initialisation; the verdict names the "
                  "run."),
    PROTOCOL: ("the claim states a magnitude (\"about 16 %\", \"at least twice\") of a figure that grows with "
               "training, and our runs are shorter than the paper's protocol; or the sides ran different shares of "
               "their own papers' protocols. A sign or an ordering is judged under a shorter protocol where every side "
               "ran the same share of its own, and the verdict gives each side's epochs of the paper's."),
    ONE_SEED: (f"one seed, and a difference of the paper's reported spread ({DEFAULT_SPREAD:g} point where it reports "
               "none) would turn the verdict."),
    DEVICE: ("the times come from different devices, precisions or machine sessions (a lent GPU machine is a fresh "
             "machine each session), or a time's size is set against the paper's at another precision."),
    BUILD: ("the claim is about the authors' build, and ours differs in what the claim measures in a way this "
            "study cannot build their way; the verdict says how, with our build's figure beside it."),
}


def rules_statement():
    """The verdict rules in one paragraph (Markdown), the text the intro and the results page both print: when a
    claim gets *holds* or *does not hold*, and each reason it decides nothing (``NOT_DECIDED``), from the rules'
    own thresholds."""
    return (
        "A claim gets *holds* or *does not hold* only from runs that can decide it. A figure that depends on what a "
        f"run learned decides nothing where a run behind it failed (it ended within {CHANCE_MARGIN:g} points "
        "of chance, or its gradients were all zero) or did not learn (its training accuracy gained less than "
        f"{LEARN_POINTS:g} points over its epochs, or its loss fell by less than {LEARN_LOSS_DROP:.0%}), unless the "
        "claim predicts that failure or the stall is shown to be the model's and recipe's (every one of at least "
        f"{SHOWN_SEEDS} seeds, and in fp32 too); a time, a memory or a count does not depend on it. A magnitude is "
        "judged only under the paper's protocol; a sign or an ordering also under a shorter one, where every side ran "
        "the same share of its own paper's protocol (the verdict gives each side's epochs, \"FNet 10 of 100 epochs, "
        "ViT 10 of 40\"). Times are compared only from one device, one precision and one machine session, and a "
        "time's size only at the paper's precision. With one seed, a verdict that the paper's reported spread "
        f"({DEFAULT_SPREAD:g} point where it reports none) would turn decides nothing. A claim about the authors' "
        "build is judged on their build where ours can be built their way, ours beside it. A claim with two parts "
        "holds only where both do. Every verdict shows its number of seeds.")


def why_not_decided(verdicts=NOT_DECIDED, *, counts=None, indent=""):
    """Markdown, one line per verdict of ``verdicts`` (of ``NOT_DECIDED``): "- *not decided: one seed*: why".
    ``counts`` (``{verdict: n}``): each line starts with its number ("- 3 *not decided: ...*") and a verdict counted
    0 is left out; ``indent`` starts each line (a list nested in another: the intro's findings)."""
    shown = [v for v in verdicts if counts is None or counts.get(v)]
    return "\n".join(f"{indent}- {'' if counts is None else f'{counts[v]} '}*{v}*: {WHY_NOT_DECIDED[v]}" for v in shown)


class Facts(NamedTuple):
    """What one model's figures rest on: ``seeds`` done, ``epochs`` trained (None: not a training run),
    ``devices`` and ``precisions`` (sets), ``failed`` (why the run decides nothing, else ""), ``stalled`` (why a
    run did not learn, else ""), ``stall_shown`` (where the stall is the model's and recipe's: "3 of 3 seeds, fp32
    too", else ""), ``name`` (the result file or record, for the page), ``sessions`` (the machine sessions its figures
    were made in: ``session``) and ``notes`` (``((metric, text), ...)``: what a metric's ``note`` says of these runs:
    the layers a trend was read on)."""
    seeds: int = 0
    epochs: int | None = None
    devices: frozenset = frozenset()
    precisions: frozenset = frozenset()
    failed: str = ""
    name: str = ""
    stalled: str = ""
    stall_shown: str = ""
    sessions: frozenset = frozenset()
    notes: tuple = ()


def session(provenance):
    """The machine session a stored result or record was made in, as the page names it ("H100, 2026-11-25,
    d5fec8a"): its device, day and commit (a lent GPU session runs one commit of the code). Two results of one session
    ran on one machine (a lent GPU machine is a fresh one each session: the same configuration's epoch took a fifth
    longer in one session than in another on the same GPU model)."""
    prov = provenance or {}
    return f"{short_device(prov.get('device', '?'))}, {made_on(prov) or '?'}, {str(prov.get('commit', '?'))[:7]}"


class Figures(dict):
    """Our figures (``{dataset: {model: {metric: value}}}``, as ``verdicts.claims`` reads them) with
    ``facts``: ``{dataset: {model: {origin: Facts}}}``, what each model's figures rest on."""

    def __init__(self, *args, facts=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.facts = facts if facts is not None else {}


def facts_for(ours, dataset):
    """``{model: {origin: Facts}}`` of ``ours`` on ``dataset``; None where ``ours`` is not a ``Figures`` (no runs
    known)."""
    if not isinstance(ours, Figures):
        return None
    return ours.facts.get(dataset, {})


def run_facts(records, num_classes, name="", fp32_records=()):
    """``Facts`` of the done training records of one configuration (its seeds); ``fp32_records``: the done records of
    the same configuration in fp32 (where it is trained in bf16), which show whether a stall survives fp32."""
    failed = [r for r in records if failed_reason(r, num_classes)]
    stalled = [r for r in records if not_learned_reason(r)]
    shown = ""
    fp32_stalled = [r for r in fp32_records if not_learned_reason(r) or failed_reason(r, num_classes)]
    if len(records) >= SHOWN_SEEDS and len(stalled) == len(records) and fp32_records and \
            len(fp32_stalled) == len(fp32_records):
        shown = f"{len(stalled)} of {len(records)} seeds, fp32 too ({len(fp32_stalled)} of {len(fp32_records)})"
    notes = tuple((key, text) for key, metric in METRICS.items() if metric.note and (text := metric.note(records)))
    return Facts(seeds=len(records), epochs=max((r["config"]["epochs"] for r in records), default=None),
                 devices=frozenset(str(r.get("provenance", {}).get("device", "?")) for r in records),
                 precisions=frozenset(str(r["config"].get("precision", "fp32")) for r in records),
                 failed=failed_reason(failed[0], num_classes) if failed else "", name=name,
                 stalled=not_learned_reason(stalled[0]) + (f"; {len(stalled)} of {len(records)} seeds"
                                                          if len(records) > 1 else "") if stalled else "",
                 stall_shown=shown, sessions=frozenset(session(r.get("provenance")) for r in records), notes=notes)


def record_facts(provenance, precision="fp32", name="", *, config=None, run=None, num_classes=10):
    """``Facts`` of one measurement record (its provenance's device; ``precision`` of what it timed); of a measure of
    trained weights, also the training run it measured: its ``config``'s epochs, and why the run decides nothing
    (``failed_reason`` of its stored record ``run``, on ``num_classes`` classes; rule 1)."""
    return Facts(seeds=1, epochs=(config or {}).get("epochs"),
                 devices=frozenset({str((provenance or {}).get("device", "?"))}), precisions=frozenset({precision}),
                 failed=failed_reason(run, num_classes) if run else "", name=name,
                 stalled=not_learned_reason(run) if run else "", sessions=frozenset({session(provenance)}))


def _metrics(claim):
    return [claim["x"], claim["y"]] if claim.get("method") == "correlation" else \
        list(dict.fromkeys([claim["metric"], claim.get("metric_b", claim["metric"])]))


def claim_models(claim):
    """The models a claim names: its ``models``, else those of its ``pair_list`` (in order, once each)."""
    if claim.get("models"):
        return list(claim["models"])
    return list(dict.fromkeys(m for pair in claim.get("pair_list") or [] for m in pair if m is not None))


def claim_parts(claim):
    """A claim's conditions on its figure: its own ``op``/``value``/``tolerance``, then each of its ``also`` (a claim
    with two parts: "nearly identical, the simplified ahead by a small margin")."""
    return [claim, *({**claim, **part} for part in claim.get("also") or [])]


def is_magnitude(claim):
    """Whether a claim states a size (about X, at least X) rather than a sign or an ordering; a claim with parts
    (``also``) where any of them does."""
    if claim.get("also"):
        return any(_part_is_magnitude(part) for part in claim_parts(claim))
    return _part_is_magnitude(claim)


def _part_is_magnitude(claim):
    method, op = claim.get("method"), claim.get("op")
    if method == "value":  # one figure's sign (greater or less than 0) is not a size
        return not (op in ("greater", "less") and claim["value"] == 0)
    if method not in _NEUTRAL:
        return True  # a correlation: absolute
    return op == "approx" or abs(claim["value"] - _NEUTRAL[method]) > 1e-12


def protocol_epochs(key, models, facts):
    """``[(model, ours, paper's)]``: the epochs each model of ``models`` trained (``facts``) and its paper's protocol
    gives it, for the models with both."""
    theirs = (papers.load(key).get("protocol") or {}).get("epochs")
    out = []
    for model in models:
        f = facts.get(model)
        if f is None or f.epochs is None:
            continue
        run_model = papers.paper_runs(key).get(model, (model, {}))[0]
        paper = papers.per_model(theirs, model) if not isinstance(theirs, dict) or model in theirs else \
            papers.per_model(theirs, run_model)
        if paper is not None:
            out.append((model, f.epochs, paper))
    return out


def protocol_label(key, models, facts, label):
    """"FNet 10 of 100 epochs, ViT 10 of 40": each model's epochs trained of the paper's protocol, or "" where
    every run trained the paper's epochs (or no run is involved)."""
    epochs = protocol_epochs(key, models, facts)
    if not any(ours < paper for _, ours, paper in epochs):
        return ""
    parts = [f"{label(model)} {ours} of {paper}" for model, ours, paper in epochs]
    return ", ".join(dict.fromkeys(p + (" epochs" if i == 0 else "") for i, p in enumerate(parts)))


def unequal_shares(key, models, facts, label):
    """Where the models ran different shares of their own paper's protocol, one of them short of it (a sign
    compared at 10 of 100 epochs against 10 of 40): "FNet 10 of 100 epochs (10 %), ViL 10 of 40 (25 %)"; else ""."""
    epochs = protocol_epochs(key, models, facts)
    shares = {min(ours / paper, 1.0) for _, ours, paper in epochs}
    if len(shares) < 2 or not any(ours < paper for _, ours, paper in epochs):
        return ""
    return ", ".join(f"{label(model)} {ours} of {paper}{' epochs' if i == 0 else ''} ({min(ours / paper, 1.0):.0%})"
                     for i, (model, ours, paper) in enumerate(epochs))


def _depends_on_learning(metrics):
    """Whether a figure of ``metrics`` depends on what a run learned (``EPOCHS``): a time, a memory or a count does
    not."""
    return any(METRICS[m].decided_by == EPOCHS for m in metrics)


def judge(key, claim, verdict, get, facts, *, label=str, seed_spread=None, sign_failed=False):
    """``(verdict, why, seeds)``: the ``verdict`` (holds / does not hold) that ``_evaluate`` reached on claim (parsed)
    of paper ``key``, kept or turned into one of ``NOT_DECIDED`` by the rules above; ``why`` says on what it rests
    or why it decides nothing; ``seeds`` is the fewest seeds behind a figure of the claim (None: no training run).
    ``get(model, metric)``: our figure; ``facts``: ``{model: {origin: Facts}}``; ``label``: a model's name on the
    page. ``sign_failed``: a part of the claim that is a sign or an ordering does not hold (a shorter protocol
    decides that, whatever its magnitudes)."""
    metrics, models = _metrics(claim), claim_models(claim)
    from_runs = [m for m in metrics if METRICS[m].origin == "runs"]
    origin = METRICS[metrics[0]].origin
    involved = {m: facts[m][origin] for m in models if origin in facts.get(m, {})}
    seeds = min((f.seeds for m, f in involved.items() if f.epochs is not None), default=None) if from_runs else None
    notes = [f"{label(m)}: {text}" for m, f in involved.items() for metric, text in f.notes if metric in metrics]
    predicted, failure_decides = set(claim.get("predicts_failure") or []), False
    if _depends_on_learning(metrics):
        # 1. a failed run, or one that did not learn: one of the figures' training runs, or the run whose weights a
        # measurement read; a failure the claim predicts is its measure, and a stall shown to be the model's decides
        failed = [(m, f) for m, f in involved.items() if f.failed and m not in predicted]
        if failed:
            return FAILED, "; ".join(f"{label(m)}: {f.failed}" for m, f in failed), seeds
        stalled = [(m, f) for m, f in involved.items() if f.stalled and m not in predicted]
        unshown = [(m, f) for m, f in stalled if not f.stall_shown]
        if unshown:
            return NOT_LEARNED, "; ".join(f"{label(m)}: {f.stalled}" for m, f in unshown), seeds
        notes = [f"{label(m)} did not learn in this setting ({f.stall_shown})" for m, f in stalled] + notes
        failing = [(m, f) for m, f in involved.items() if m in predicted and (f.failed or f.stalled)]
        notes += [f"the claim predicts the failure of {label(m)}: {f.failed or f.stalled}" for m, f in failing]
        # the predicted failure happened: the claim's measure at the run's last epoch decides it (rule 2 does not
        # hold it back: more epochs of a run at chance do not make it the run the claim is about)
        failure_decides = bool(failing) and {m for m, _ in failing} == predicted & set(involved)
    verdict, why, seeds = _judge_rest(key, claim, verdict, get, involved, metrics, models, from_runs, seeds, label,
                                      seed_spread, sign_failed, failure_decides)
    return verdict, "; ".join(n for n in [*notes, why] if n), seeds


def _judge_rest(key, claim, verdict, get, involved, metrics, models, from_runs, seeds, label, seed_spread, sign_failed,
                failure_decides=False):
    """``judge``'s rules 2-4, once no run behind the figure failed unforeseen."""
    # 3. times: one device, one precision, one machine session; a magnitude only at the paper's precision
    if any(METRICS[m].unit in TIME_UNITS for m in metrics):
        devices = set().union(*(f.devices for f in involved.values())) if involved else set()
        precisions = set().union(*(f.precisions for f in involved.values())) if involved else set()
        sessions = set().union(*(f.sessions for f in involved.values())) if involved else set()
        if len(devices) > 1 or len(precisions) > 1:
            return DEVICE, ("times from " + " against ".join(
                f"{label(m)} on {'/'.join(map(short_device, sorted(f.devices)))} {'/'.join(sorted(f.precisions))}"
                for m, f in involved.items())), seeds
        reasons = []
        if len(sessions) > 1:
            reasons.append(f"times from {len(sessions)} machine sessions, not one: " + " against ".join(
                f"{label(m)} in {' and '.join(sorted(f.sessions))}" for m, f in involved.items()))
        paper_precision = (papers.load(key).get("protocol") or {}).get("precision", "fp32")
        if is_magnitude(claim) and precisions and precisions != {paper_precision}:
            reasons.append(f"a time's size is compared only at the paper's precision ({paper_precision}); ours: "
                           f"{'/'.join(sorted(precisions))} on {'/'.join(map(short_device, sorted(devices)))}")
        if reasons:
            return DEVICE, "; ".join(reasons), seeds
    # 2. the protocol: a magnitude of an epoch-dependent figure needs the paper's epochs; a sign, every side at the
    # same share of its own paper's protocol
    epoch_bound = [m for m in metrics if METRICS[m].decided_by == EPOCHS]
    fractions = protocol_label(key, models, involved, label) if epoch_bound else ""
    if failure_decides and fractions:
        fractions = f"decided by its measure at the last epoch ({fractions})"
    elif fractions and is_magnitude(claim) and not sign_failed:
        return PROTOCOL, f"a magnitude is judged only at the paper's epochs ({fractions})", seeds
    elif fractions and (unequal := unequal_shares(key, models, involved, label)):
        return PROTOCOL, f"the sides ran different shares of their own paper's protocol ({unequal})", seeds
    # 4. one seed
    if seeds == 1 and any(METRICS[m].unit == "points" for m in from_runs) and \
            _turns_within(claim, get, seed_spread if seed_spread is not None else DEFAULT_SPREAD):
        spread = seed_spread if seed_spread is not None else DEFAULT_SPREAD
        return ONE_SEED, (f"one seed, and {spread:g} point{'s' if spread != 1 else ''} of seed noise would turn it"
                          + (f" ({fractions})" if fractions else "")), seeds
    return verdict, fractions, seeds


def unlearned_figures(missing, facts, label=str):
    """Why figures ``missing`` (``[(metric, model)]``) are missing where the runs behind them are stored: what the
    metric's ``note`` says of them (a trend over layers whose values sit at their initialisation); "" where a figure
    is missing for another reason (no run stored)."""
    texts = []
    for metric, model in missing:
        notes = dict((facts or {}).get(model, {}).get("runs", Facts()).notes)
        if metric not in notes:
            return ""
        texts.append(f"{label(model)}: {notes[metric]}")
    return "; ".join(dict.fromkeys(texts))


def _satisfies(op, value, figure, tolerance=0.0):
    if op == "approx":
        return abs(figure - value) <= tolerance + 1e-9 * max(1.0, abs(value))
    return {"at_least": figure >= value, "at_most": figure <= value, "greater": figure > value,
            "less": figure < value}[op]


def satisfies(claim, figure):
    """Whether ``figure`` satisfies every part of ``claim`` (``claim_parts``)."""
    return all(_satisfies(p["op"], p["value"], figure, p.get("tolerance") or 0.0) for p in claim_parts(claim))


def sign_fails(claim, figure):
    """Whether a part of ``claim`` that is a sign or an ordering (not a magnitude) is not satisfied by ``figure``."""
    return any(not _part_is_magnitude(p) and not _satisfies(p["op"], p["value"], figure, p.get("tolerance") or 0.0)
               for p in claim_parts(claim))


def _turns_within(claim, get, spread):
    """Whether moving each pair's a-side figure by ``spread`` (in the metric's points) either way turns the verdict
    of a pairwise claim (each pair alone, then over the pairs as the claim reads them)."""
    method = claim.get("method")
    if method not in (*_NEUTRAL, "value"):
        return False
    metric, metric_b = claim["metric"], claim.get("metric_b", claim["metric"])

    def figure(va, vb):
        return pair_figure(method, va, vb)

    outcomes = set()
    for shift in (-spread, 0.0, spread):
        pairs = []
        for a, b in claim["pair_list"]:
            try:
                va, vb = get(a, metric) + shift, (get(b, metric_b) if b is not None else None)
            except Exception:  # a missing figure: the claim's own evaluation said so
                return False
            if b is not None and method in ("relative_gain", "ratio") and not vb:
                return False
            pairs.append(figure(va, vb))
        if claim.get("over") == "mean" and len(pairs) > 1:
            outcomes.add(satisfies(claim, sum(pairs) / len(pairs)))
        else:
            outcomes.add(all(satisfies(claim, f) for f in pairs))
    return len(outcomes) > 1
