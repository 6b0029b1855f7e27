"""What a chapter's questions have found so far, in words computed from the stored records when the page is built
(``known_so_far``): each question's row in whole runs against the other rows of its table, what each arm of its
first steps on the CPU did (every arm the record holds, named by the record, each over the steps it ran, with its CPU
seconds), what the paper's recipe is and which arms change it, and what stays unexplained."""
from __future__ import annotations

import statistics

from ... import papers
from ...analysis.first_steps import LEAD_POINTS, arm_change, ordered_arms
from ...data import dataset_spec
from ...escape import markdown_text
from ...runs.asked import question_spec, question_specs, row_specs
from ...runs.make import run
from ..records.learning import failed_reason, not_learned_reason
from .glance import record_href

#: the parts of a recipe an arm may change, by the words of its settings' names: what each is called on the page
RECIPE_PARTS = {"lr": "the peak learning rate", "warmup": "a warm-up", "clip": "gradient clipping",
                "init": "the initial scale of the weights", "weight_decay": "weight decay"}
#: the parts whose arms tell "too high a learning rate" from "needs a warm-up"
LR_APART = ("lr", "clip", "init")


def recipe_part(setting):
    """The part of a recipe (``RECIPE_PARTS``) a setting's name changes ("warmup_steps": "warmup"), or None."""
    return next((part for part in RECIPE_PARTS if setting == part or part in setting), None)


def _mean(values):
    return statistics.fmean(values) if values else None


def seconds_line(seconds):
    """"Its runs (the row's own and each arm) took 205 to 906 CPU seconds each (57 minutes in all)." from ``{arm:
    seconds or None}`` of a first-steps record; where it keeps none, that it keeps none."""
    kept = [v for v in seconds.values() if isinstance(v, (int, float))]
    if not kept:
        return "The record keeps no run's CPU seconds."
    return (f"Its runs (the row's own and each arm) took {min(kept):,.0f} to {max(kept):,.0f} CPU seconds each "
            f"({sum(kept) / 60:,.0f} minutes in all"
            f"{'' if len(kept) == len(seconds) else f'; {len(seconds) - len(kept)} keep none'}).")


def _done(specs, compute, store):
    return [r for r in (run(s, compute=compute, store=store) for s in specs) if r.get("status") == "done"]


def _seeds(n):
    return f"{n} seed{'s' if n != 1 else ''}"


def _whole(paper, question, spec, profile, compute, store, name):
    """``(lines, stalled)``: a question's row in whole runs against the other rows of its table (final training
    accuracy and test top-1, means over the stored seeds), or the row's stall; then each arm trained whole, where the
    plan has made it. ``stalled``: whether the row's stored runs did not learn."""
    table = papers.table(paper, spec["table"])
    labels = {row: (entry.get("label") if isinstance(entry, dict) else None) or row for row, entry in
              table["rows"].items()}
    chapter = next(c for c in papers.book_chapters(paper) if question in (c.get("questions") or {}))
    runs = {row: _done(specs, compute, store) for row, specs in row_specs(paper, chapter, spec["table"], profile)}
    classes = dataset_spec(table["dataset"]).num_classes
    protocol = papers.protocol(paper).get("epochs")
    texts, stalled_any = [], False
    for row in spec["rows"]:
        mine = runs.get(row) or []
        if not mine:
            texts.append(f"**{markdown_text(name)}**: not yet run in whole runs.")
            continue
        epochs = mine[0]["config"]["epochs"]
        theirs = papers.per_model(protocol, mine[0]["config"]["model"]) if protocol else None
        at = f"at {epochs} of the paper's {theirs} epochs" if theirs else f"at {epochs} epochs"
        where = f"{mine[0]['config'].get('precision', 'fp32')}" + (" on a GPU" if any(
            "cuda" in str(r["provenance"].get("device_type", "")) for r in mine) else "")
        stalled = [why for r in mine if (why := failed_reason(r, classes) or not_learned_reason(r))]
        stalled_any |= bool(stalled)
        head = f"**{markdown_text(name)}**, in whole runs {at} ({where}): "
        others = [(o, runs[o]) for o in table["rows"] if o != row and runs.get(o)]

        def train(rs):
            return _mean([r["history"][-1]["train_acc"] for r in rs])

        if stalled:
            text = (f"{labels[row]} did not learn ({len(stalled)} of {_seeds(len(mine))}: {stalled[0]})"
                    + "".join(f"; {labels[o]} reached {train(rs):.2f} % final training accuracy ({_seeds(len(rs))})"
                              for o, rs in others) + ".")
        else:
            parts = []
            for o, rs in others:
                lead, top = train(rs) - train(mine), _mean([r["top1"] for r in rs]) - _mean([r["top1"] for r in mine])
                parts.append(f"{labels[o]} {'leads' if lead >= 0 else 'trails'} {labels[row]} by {abs(lead):.2f} "
                             f"points of final training accuracy ({train(rs):.2f} against {train(mine):.2f} %, "
                             f"{len(rs)} against {_seeds(len(mine))}) and by {abs(top):.2f} points of test top-1")
            text = "; ".join(parts) + "." if parts else f"{labels[row]} learned ({_seeds(len(mine))})."
        texts.append(head + text)
        asked, unrun = question_specs(paper, spec, profile), []
        for arm in spec.get("gpu_arms") or []:
            done = _done(asked[f"{row}: {arm}"], compute, store)
            if done:
                texts.append(f"Whole runs of its arm *{markdown_text(arm)}*: {_seeds(len(done))}, final training "
                             f"accuracy {train(done):.2f} %, test top-1 {_mean([r['top1'] for r in done]):.2f} %.")
            else:
                unrun.append(f"*{markdown_text(arm)}*")
        if unrun:  # one line for every arm still to run
            texts.append(f"Whole runs of its arm{'s' if len(unrun) > 1 else ''} {', '.join(unrun)}: not yet run (the "
                         f"plan holds them: `vixnb plan --profile {profile}`).")
    return texts, stalled_any


def arm_outcomes(record):
    """``{arm: {"change", "steps", "lead", "at", "at_mean", "end", "seconds", "ahead", "settings"}}`` of every arm of
    a first-steps record beside its base (the row's own run): its change, the steps it ran, its lead in training
    accuracy over the base on the last window both ran (``at``: "381–400"; ``at_mean``: its own mean there), its own
    mean over its last window (``end``), its CPU seconds (None where the record keeps none), whether it leads by at
    least ``LEAD_POINTS`` and its settings."""
    arms = ordered_arms(record)
    if not arms:
        return {}
    window = record.get("window", 20)
    base = next(iter(arms.values()))
    out = {}
    for name, arm in list(arms.items())[1:]:
        common = min(len(arm["acc"]), len(base["acc"]))
        lo = max(0, common - window)
        at_mean = _mean(arm["acc"][lo:common]) if common else None
        lead = at_mean - _mean(base["acc"][lo:common]) if common else None
        out[name] = {"change": arm_change(arm, base), "steps": len(arm["acc"]), "lead": lead,
                     "at": f"{lo + 1}–{common}", "at_mean": at_mean,
                     "end": _mean(arm["acc"][-window:]), "seconds": arm.get("seconds"),
                     "ahead": lead is not None and lead >= LEAD_POINTS, "settings": arm.get("settings") or {}}
    return out


def _warmup_steps(outcome):
    """The warm-up an arm's settings set (its steps), or None."""
    return next((v for k, v in outcome["settings"].items() if recipe_part(k) == "warmup"), None)


def _read_at(outcome):
    """The first and last step of the window an arm's lead is read on (``at``: "381–400")."""
    start, end = (int(x) for x in outcome["at"].split("–"))
    return start, end


def _warmup_note(arm, outcome, window):
    """Where an arm with a warm-up is read against its peak: "*warm-up 300 steps*: its lead is read at steps 381–400,
    81 to 100 steps after its learning rate reached its peak at step 300"; for an arm that ran longer than its base,
    where it ended; read sooner after the peak than the warm-up took to reach it, that a longer run is to tell."""
    warmup = _warmup_steps(outcome)
    if not warmup:
        return ""
    start, end = _read_at(outcome)
    text = (f" *{markdown_text(arm)}*: its lead is read at steps {outcome['at']}, {max(start - warmup, 0)} to "
            f"{end - warmup} steps after its learning rate reached its peak at step {warmup}")
    if outcome["steps"] > end:
        return text + (f"; it ran on to step {outcome['steps']}, where its last {window} steps average "
                       f"{outcome['end']:.1f} % training accuracy.")
    if start - warmup < warmup:
        return text + ": whether it stays ahead well past the peak takes a longer run."
    return text + "."


def _arms(record, question, profile, stalled):
    """What the arms of one first-steps record did, every arm named by the record: against a row that stalled,
    which left its plateau; against one that learned, which gained on it."""
    outcomes = arm_outcomes(record)
    if not outcomes:
        return []
    window = record.get("window", 20)
    name = f"{record.get('paper', '')}-first-steps-{question}"
    link = f"[`{name}`]({record_href(f'{profile}/measure/{name}.json')})"
    ahead = {a: o for a, o in outcomes.items() if o["ahead"]}
    behind = {a: o for a, o in outcomes.items() if not o["ahead"]}

    def said(arms):
        return ", ".join(f"*{markdown_text(a)}* ({markdown_text(o['change'])}: {o['lead']:+.1f})"
                         for a, o in arms.items())

    moved = "left the plateau of the row's own run" if stalled else "gained on the row's own run"
    steps = sorted({o["steps"] for o in outcomes.values()})
    text = (f"On the CPU, each arm's first {' or '.join(map(str, steps))} optimizer steps (record {link}): of "
            f"{len(outcomes)} arms, "
            + (f"{len(ahead)} {moved}, leading it by at least {LEAD_POINTS:g} points of training accuracy over the "
               f"last {window} steps both ran: {said(ahead)}" if ahead else
               f"none led it by {LEAD_POINTS:g} points of training accuracy")
            + (f"; {len(behind)} did not: {said(behind)}." if behind else "."))
    text += "".join(_warmup_note(a, o, window) for a, o in ahead.items())
    return [text + " " + seconds_line({a: arm.get("seconds") for a, arm in ordered_arms(record).items()})]


def _recipe(paper, studied):
    """What the paper's recipe is, which arms that moved our runs change it (they explain our runs, not the
    difference from the paper's), and what stays unexplained; ``studied``: ``[(name, row label, stalled,
    outcomes)]`` of the questions with a first-steps record."""
    if not studied:
        return []
    protocol = papers.protocol(paper)
    lr, decay, warm = protocol.get("lr"), protocol.get("weight_decay"), protocol.get("warmup_steps") or 0
    trains_in = protocol.get("precision", "fp32")
    recipe = (f"AdamW at lr {lr:g}" + (f" with a {warm}-step warm-up" if warm else " with no warm-up")
              + (f", weight decay {decay:g} on every parameter" if decay else "") + ", no gradient clipping, a "
              f"{protocol.get('schedule', 'constant')} schedule and PyTorch's default initialisation, in {trains_in}")

    def parts(outcome):
        return {recipe_part(k) for k in outcome["settings"]} - {None}

    def arms(names):
        return ", ".join(f"*{markdown_text(a)}*" for a in dict.fromkeys(names))

    changing = {}
    for name, _, _, outcomes in studied:
        for a, o in outcomes.items():
            if o["ahead"] and parts(o):
                changing.setdefault(a, []).append(name)
    text = f"**The paper's recipe**: {recipe}. "
    if changing:
        text += ("The arms that moved our runs by changing it (" + "; ".join(
            f"*{markdown_text(a)}* at {' and '.join(map(markdown_text, where))}" for a, where in changing.items())
            + ") explain our runs, not their difference from the paper's: the paper trained without them.")
    else:
        text += "No arm that changes it moved our runs."
    lines = [text]
    for name, label, stalled, outcomes in studied:
        nearer = [a for a, o in outcomes.items() if o["settings"].get("precision") == trains_in]
        what = (f"why the paper's {label.lower()} learns with the recipe ours stalls on" if stalled else
                f"why our {label.lower()} trails with the paper's recipe where the paper's curves are close")
        left = [a for a, o in outcomes.items() if not o["ahead"] and a not in nearer]
        other = [a for a, o in outcomes.items() if o["ahead"] and not parts(o) and a not in nearer]
        line = f"**What stays unexplained at {markdown_text(name)}**: {what}. "
        if nearer:
            verb = "leave the plateau" if stalled else "gain on our run"
            line += (f"Training in {trains_in}, as the paper does and our budget runs do not ({arms(nearer)}), did "
                     f"{'' if any(outcomes[a]['ahead'] for a in nearer) else 'not '}{verb}"
                     + (f"; nor did {arms(left)}" if left else "") + ". ")
        if other:
            line += (f"{arms(other)} moved it by a change of neither the recipe nor the precision ("
                     + ", ".join(markdown_text(outcomes[a]["change"]) for a in other) + "). ")
        tested = {p for o in outcomes.values() for p in parts(o)}
        apart = [p for p in LR_APART if p in tested]
        if apart:
            line += "Arms that tell \"too high a learning rate\" from \"needs a warm-up\": " + "; ".join(
                f"{RECIPE_PARTS[p]} (" + ", ".join(f"*{markdown_text(a)}* {o['lead']:+.1f}" for a, o in outcomes.items()
                                                   if p in parts(o)) + ")" for p in apart) + "."
            if stalled:
                line += _rate_or_warmup(outcomes, parts)
        elif stalled:
            line += ("No arm lowers the peak learning rate, clips the gradients or changes the initial scale, so "
                     "\"too high a learning rate\" and \"needs a warm-up\" are not told apart.")
        lines.append(line.rstrip())
    return lines


def _rate_or_warmup(outcomes, parts):
    """What the arms that change the learning rate alone and the warm-up alone say of a stalled run, in words: a
    warm-up arm that kept learning at the paper's peak rate well past its warm-up (as long again) tells that the
    peak does not stall the run once reached gradually; "" where the record cannot say it."""
    alone = {part: [(a, o) for a, o in outcomes.items() if parts(o) == {part}] for part in ("lr", "warmup")}
    warm = next(((a, o) for a, o in alone["warmup"] if o["ahead"]), None)
    if warm is None:
        return ""
    name, outcome = warm
    peak, (_, end) = _warmup_steps(outcome), _read_at(outcome)
    if outcome["steps"] < 2 * peak or outcome["end"] <= outcome["at_mean"]:
        return ""
    lower = ", ".join(f"*{markdown_text(a)}* {o['lead']:+.1f}" for a, o in alone["lr"] if o["ahead"])
    return (f" *{markdown_text(name)}* kept learning for {outcome['steps'] - peak} steps at the paper's peak learning "
            f"rate ({outcome['end']:.1f} % at step {outcome['steps']} against {outcome['at_mean']:.1f} % at steps "
            f"{outcome['at']}, step {end} being {end - peak} after the peak): in these first steps the peak does not "
            "stall the run once it is reached gradually, so the stall reads as the missing warm-up's (full-size steps "
            "from the first), not the rate's" + (
                f"; a lower peak from the first step ({lower}) avoids those steps too." if lower else ".")
            + " Whole runs on a GPU are to confirm it.")


def known_so_far(paper, notebook, first_steps, profile, *, names=None, compute="never", store=None):
    """Markdown: what the questions of chapter ``notebook`` have found so far, from the stored records of ``profile``
    (``first_steps``: ``{question: its first-steps record or None}``; ``names``: ``{question: its name on the page}``,
    the order they are said in), one bullet each: each question's row in whole runs, what each arm of its first steps
    did on the CPU (every arm its record holds), the paper's recipe and which arms change it, what stays unexplained,
    and what the CPU's numbers are (its bf16 autocast is not a GPU's)."""
    chapter = papers.book_chapter(paper, notebook)
    questions = {q: s for q, s in (chapter.get("questions") or {}).items()
                 if s.get("rows") and profile in (s.get("profiles") or [profile])}
    order = list(names or questions)
    lines, studied = [], []
    for question in [q for q in order if q in questions]:
        spec = question_spec(paper, question)
        name = (names or {}).get(question) or str(papers.table(paper, spec["table"]).get("caption", question))
        whole, stalled = _whole(paper, question, spec, profile, compute, store, name)
        lines += whole
        if first_steps.get(question):
            lines += _arms(first_steps[question], question, profile, stalled)
            label = papers.table(paper, spec["table"])["rows"][spec["rows"][0]]
            studied.append((name, (label.get("label") if isinstance(label, dict) else None) or spec["rows"][0],
                            stalled, arm_outcomes(first_steps[question])))
    lines += _recipe(paper, studied)
    if studied:
        lines.append("**What the CPU's numbers are**: the arms run the engine's own steps (data order, augmentation, "
                     "schedule) under bf16 autocast on a CPU, which is not a GPU's bf16: PyTorch's CPU autocast casts "
                     "other operations, with other kernels. They tell whether a change moves a run in its first steps, "
                     "not what a whole run on a GPU reaches.")
    if not lines:
        return f"Nothing yet: no question of this chapter is asked in the `{profile}` profile."
    return "\n".join(f"- {line}" for line in lines if line)
