"""The rules that say whether our figures may decide a claim, in one place. ``verdicts.evaluate`` applies them
to every verdict of ours, so the ledger, the chapter pages, the results page and the synthesis agree.

1. A run that ended at chance (last training accuracy and test top-1 within ``CHANCE_MARGIN`` points of 100 / classes)
   or whose gradients were all zero decides nothing, nor does a measurement of its trained weights: "not decided:
   run failed", naming the run. A run that did not learn (``not_learned_reason``: over at least ``LEARN_EPOCHS``
   epochs its training accuracy gained less than ``LEARN_POINTS`` points, or its training loss fell by less than
   ``LEARN_LOSS_DROP``) decides nothing either: "not decided: a run did not learn", naming it. Both decide a claim
   that predicts that run's failure (the claim's ``predicts_failure``), judged on its own measure; and a stall shown
   to be the model's and recipe's (every seed of the configuration, at least ``SHOWN_SEEDS``, did not learn, and
   its fp32 runs did not either) decides, the verdict saying so ("the vanilla did not learn at this setting: 3 of 3
   seeds, fp32 too").
2. A magnitude ("about 16 %", "at least twice") of a figure that depends on the number of epochs is judged only
   under the paper's protocol; a sign or an ordering (a gain against 0, a ratio against 1) may be judged under a
   shorter one, and the verdict gives each side's real fraction ("FNet 10 of 100 epochs, ViT 10 of 40").
3. Times are compared only within one device and one precision; a time's magnitude against the paper's printed
   one only at the paper's precision.
4. Every verdict shows its number of seeds; with one seed, a verdict that a difference of ``seed_spread`` (the
   paper's reported spread, else ``DEFAULT_SPREAD`` points) would turn reads "not decided: one seed".

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
DEVICE = "not decided: devices or precisions differ"
#: every verdict of ours that decides nothing, as the results page counts them
NOT_DECIDED = (FAILED, NOT_LEARNED, ONE_SEED, PROTOCOL, DEVICE)

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
                  "too); the verdict names the run."),
    PROTOCOL: ("the claim states a magnitude (\"about 16 %\", \"at least twice\") of a figure that grows with "
               "training, and our runs are shorter than the paper's protocol; a sign or an ordering is judged under "
               "a shorter one, and the verdict gives each side's epochs of the paper's."),
    ONE_SEED: (f"one seed, and a difference of the paper's reported spread ({DEFAULT_SPREAD:g} point where it reports "
               "none) would turn the verdict."),
    DEVICE: ("the times come from different devices or precisions, or a time's size is set against the paper's at "
             "another precision."),
}


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
    too", else "") and ``name`` (the result file or record, for the page)."""
    seeds: int = 0
    epochs: int | None = None
    devices: frozenset = frozenset()
    precisions: frozenset = frozenset()
    failed: str = ""
    name: str = ""
    stalled: str = ""
    stall_shown: str = ""


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
    return Facts(seeds=len(records), epochs=max((r["config"]["epochs"] for r in records), default=None),
                 devices=frozenset(str(r.get("provenance", {}).get("device", "?")) for r in records),
                 precisions=frozenset(str(r["config"].get("precision", "fp32")) for r in records),
                 failed=failed_reason(failed[0], num_classes) if failed else "", name=name,
                 stalled=not_learned_reason(stalled[0]) + (f"; {len(stalled)} of {len(records)} seeds"
                                                          if len(records) > 1 else "") if stalled else "",
                 stall_shown=shown)


def record_facts(provenance, precision="fp32", name="", *, config=None, run=None, num_classes=10):
    """``Facts`` of one measurement record (its provenance's device; ``precision`` of what it timed); of a measure of
    trained weights, also the training run it measured: its ``config``'s epochs, and why the run decides nothing
    (``failed_reason`` of its stored record ``run``, on ``num_classes`` classes; rule 1)."""
    return Facts(seeds=1, epochs=(config or {}).get("epochs"),
                 devices=frozenset({str((provenance or {}).get("device", "?"))}), precisions=frozenset({precision}),
                 failed=failed_reason(run, num_classes) if run else "", name=name,
                 stalled=not_learned_reason(run) if run else "")


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


def protocol_label(key, models, facts, label):
    """"FNet 10 of 100 epochs, ViT 10 of 40": each model's epochs trained of the paper's protocol, or "" where
    every run trained the paper's epochs (or no run is involved)."""
    theirs = (papers.load(key).get("protocol") or {}).get("epochs")
    parts, short = [], False
    for model in models:
        f = facts.get(model)
        if f is None or f.epochs is None:
            continue
        run_model = papers.paper_runs(key).get(model, (model, {}))[0]
        paper = papers.per_model(theirs, model) if not isinstance(theirs, dict) or model in theirs else \
            papers.per_model(theirs, run_model)
        if paper is None:
            continue
        short |= f.epochs < paper
        text = f"{label(model)} {f.epochs} of {paper}"
        parts.append(text + (" epochs" if not parts else ""))
    return ", ".join(dict.fromkeys(parts)) if short else ""


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
    # 1. a failed run, or one that did not learn: one of the figures' training runs, or the run whose weights a
    # measurement read; a failure the claim predicts is its measure, and a stall shown to be the model's decides
    predicted = set(claim.get("predicts_failure") or [])
    failed = [(m, f) for m, f in involved.items() if f.failed and m not in predicted]
    if failed:
        return FAILED, "; ".join(f"{label(m)}: {f.failed}" for m, f in failed), seeds
    stalled = [(m, f) for m, f in involved.items() if f.stalled and m not in predicted]
    unshown = [(m, f) for m, f in stalled if not f.stall_shown]
    if unshown:
        return NOT_LEARNED, "; ".join(f"{label(m)}: {f.stalled}" for m, f in unshown), seeds
    notes = [f"{label(m)} did not learn in this setting ({f.stall_shown})" for m, f in stalled]
    notes += [f"the claim predicts the failure of {label(m)}: {f.failed or f.stalled}"
              for m, f in involved.items() if m in predicted and (f.failed or f.stalled)]
    verdict, why, seeds = _judge_rest(key, claim, verdict, get, involved, metrics, models, from_runs, seeds, label,
                                      seed_spread, sign_failed)
    return verdict, "; ".join(n for n in [*notes, why] if n), seeds


def _judge_rest(key, claim, verdict, get, involved, metrics, models, from_runs, seeds, label, seed_spread, sign_failed):
    """``judge``'s rules 2-4, once no run behind the figure failed unforeseen."""
    # 3. times: one device, one precision; a magnitude only at the paper's precision
    if any(METRICS[m].unit in TIME_UNITS for m in metrics):
        devices = set().union(*(f.devices for f in involved.values())) if involved else set()
        precisions = set().union(*(f.precisions for f in involved.values())) if involved else set()
        if len(devices) > 1 or len(precisions) > 1:
            return DEVICE, ("times from " + " against ".join(
                f"{label(m)} on {'/'.join(map(short_device, sorted(f.devices)))} {'/'.join(sorted(f.precisions))}"
                for m, f in involved.items())), seeds
        paper_precision = (papers.load(key).get("protocol") or {}).get("precision", "fp32")
        if is_magnitude(claim) and precisions and precisions != {paper_precision}:
            return DEVICE, (f"a time's size is compared only at the paper's precision ({paper_precision}); ours: "
                            f"{'/'.join(sorted(precisions))} on {'/'.join(map(short_device, sorted(devices)))}"), seeds
    # 2. the protocol: a magnitude of an epoch-dependent figure needs the paper's epochs
    epoch_bound = [m for m in metrics if METRICS[m].decided_by == EPOCHS]
    fractions = protocol_label(key, models, involved, label) if epoch_bound else ""
    if fractions and is_magnitude(claim) and not sign_failed:
        return PROTOCOL, f"a magnitude is judged only at the paper's epochs ({fractions})", seeds
    # 4. one seed
    if seeds == 1 and any(METRICS[m].unit == "points" for m in from_runs) and \
            _turns_within(claim, get, seed_spread if seed_spread is not None else DEFAULT_SPREAD):
        spread = seed_spread if seed_spread is not None else DEFAULT_SPREAD
        return ONE_SEED, (f"one seed, and {spread:g} point{'s' if spread != 1 else ''} of seed noise would turn it"
                          + (f" ({fractions})" if fractions else "")), seeds
    return verdict, fractions, seeds


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
