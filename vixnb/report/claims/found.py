""""What this study found": the intro's first section, a few findings computed from the results store and the claims
ledger when the book is built (``findings``), each with its numbers and a link to the page that shows them."""
from __future__ import annotations

import base64
import json
import numbers
import re

import pandas as pd

from ... import papers
from ...errors import StoreError
from ...escape import csv_frame, html_text, markdown_text
from ...paths import repo_root
from ...runs.asked import row_specs
from ...results import ResultsStore, made_on, read_json
from ...runs.policy import unusable
from .schema import FAILS, HOLDS, NOT_RUN, NOT_TESTABLE, PAPER_NO, PAPER_YES
from .verdicts import VERDICT_PLURALS, claim_anchor, claims, verdict_text
from .standing import count_checks
from .synthesis import SOFTMAX, VIX_TOKENS, fused_costs, left_out_note
from ..tables.glance import DECIMALS, RUN_COLUMNS, run_columns
from ..tables.questions import arm_outcomes
from ..tables.pages import page_table
from .rules import NOT_DECIDED, NOT_LEARNED, why_not_decided
from ..records.learning import at_chance
from ...data import dataset_spec


def _fused(costs, link):
    if costs.empty or SOFTMAX not in costs.index:
        return None
    ms = next(c for c in costs.columns if c.startswith("step ms"))
    mb = next((c for c in costs.columns if c.startswith("peak MB") and "fp32" in c), None)
    linear = [m for m in ("Performer", "Nyströmformer") if m in costs.index]
    if not linear:
        return None
    parts = [f"{m} {costs.at[m, ms]:.2f} ms" + (f", {costs.at[m, mb]:,.0f} MB" if mb else "") for m in linear]
    return (f"**On the fused path, softmax attention is the cheap one.** At {VIX_TOKENS:,} tokens (ViX on CIFAR), "
            f"one fused softmax layer takes {costs.at[SOFTMAX, ms]:.2f} ms a step ({ms[9:-1]})"
            + (f" and {costs.at[SOFTMAX, mb]:,.0f} MB ({mb[9:-1]})" if mb else "") + "; " + "; ".join(parts)
            + ". The papers' memory savings are against a materialised attention matrix "
            f"({link('synthesis', 'the synthesis')}, {link('efficiency', 'efficiency')})." + left_out_note(costs))


def _counts(link):
    exact, printed = count_checks("vix")
    if not printed:
        return None
    return (f"**ViX's parameter counts are reproduced:** our models rebuild {exact} of the {printed} counts its "
            f"tables print, exactly, in the paper's convention; the pages name the exceptions and the printing errors "
            f"behind them ({link('vix_table1', 'ViX Tables 1-2')}, {link('vix_families', 'the families')}).")


def earlier_reading(store, profile="budget"):
    """``(at chance, stored)``: how many stored runs of the `shaped` paper's earlier reading (table ``earlier_reading``:
    the one-LayerNorm vanilla and the sequential simplified block) ended at chance (``records.learning.at_chance``,
    the test the chapter's table of what died reads)."""
    store = store if store is not None else ResultsStore()
    chapter = papers.book_chapter("shaped", "simplified")
    done = []
    for _, specs in row_specs("shaped", chapter, "earlier_reading", profile):
        for spec in specs:
            stored = store.get(spec.config)
            if stored and stored.get("status") == "done":
                done.append(stored)
    dataset = papers.table("shaped", "earlier_reading")["dataset"]
    return sum(at_chance(r, dataset_spec(dataset).num_classes) for r in done), len(done)


def _shaped(frame, link, store=None):
    if frame is None:
        return None
    dead, made = earlier_reading(store)
    accuracy = frame[frame.index.str.endswith("-accuracy")]
    holding = accuracy[accuracy["our verdict"] == HOLDS]
    if not dead and holding.empty:
        return None
    stalled = int((accuracy["our verdict"] == NOT_LEARNED).sum())
    text = ("**The blog's blocks as its text states them: SAS-P trains at every setting, the vanilla block stalls at "
            "width 128 in our runs; our earlier, literal reading did not train.** " if stalled else
            "**The blog's blocks as its text states them train; our earlier, literal reading did not.** ")
    if dead:
        text += (f"{dead} of the {made} runs of our earlier reading (one LayerNorm per vanilla block; the formula "
                 "MLP(S(X)) as the simplified block) ended at chance. ")
    if len(accuracy):  # every accuracy claim of the blog, each named with our verdict
        by_verdict = {}
        for _, row in accuracy.iterrows():
            by_verdict.setdefault(row["our verdict"], []).append(str(row["section"]))
        order = list(VERDICT_PLURALS)
        said = [f"{len(where)} {verdict if len(where) == 1 else VERDICT_PLURALS.get(verdict, verdict)} "
                f"({', '.join(where)})" for verdict, where in sorted(
                    by_verdict.items(), key=lambda vw: order.index(vw[0]) if vw[0] in order else len(order))]
        text += (f"Of the blog's {len(accuracy)} accuracy claims, with SAS-P and the two-LayerNorm vanilla block: "
                 + "; ".join(said) + ". ")
    if stalled:
        text += "The two-LayerNorm vanilla does not learn at width 128 in our budget runs. "
    text += _stall_finding(store)
    return text.rstrip().rstrip(".") + f" ({link('simplified', 'the simplified chapter')}: what we know so far)."


def _stall_finding(store):
    """The stall question's answer so far, from its stored first-steps record: which arms left the
    plateau within their first steps on the CPU, and which did not, every arm the record holds ("" where the record is
    not stored)."""
    store = store if store is not None else ResultsStore()
    record = store.load_record("measure", "shaped-first-steps-vanilla_stall_w128", profile="budget")
    if record is None:
        return ""
    outcomes = arm_outcomes(record)
    ahead = {a: o for a, o in outcomes.items() if o["ahead"]}
    others = [a for a in outcomes if a not in ahead]
    steps = " or ".join(map(str, sorted({o["steps"] for o in outcomes.values()})))
    if not ahead:
        return (f"In its first {steps} steps on a CPU, none of {len(outcomes)} arms ("
                + ", ".join(others) + ") lets it leave its plateau. ")
    return (f"In its first {steps} steps on a CPU, of {len(outcomes)} arms, "
            + ", ".join(f"{a} (+{o['lead']:.1f} points)" for a, o in ahead.items())
            + f" left its plateau (read at steps {' or '.join(sorted({o['at'] for o in ahead.values()}))}, beside its "
            "own run); " + ", ".join(others)
            + " did not: the whole runs that decide it are in the plan. ")


def verdicts_finding(frames, link):
    counts = {HOLDS: 0, FAILS: 0, NOT_RUN: 0, **{v: 0 for v in NOT_DECIDED}}
    for frame in frames.values():
        for verdict, n in frame["our verdict"].value_counts().items():
            if verdict in counts:
                counts[verdict] += int(n)
    undecided = sum(counts[v] for v in NOT_DECIDED)
    total = sum(len(f) for f in frames.values())
    testable = total - sum(int((f["our verdict"] == NOT_TESTABLE).sum()) for f in frames.values())
    text = (f"**Our verdicts so far:** of {testable} claims testable here, {counts[HOLDS]} hold and {counts[FAILS]} do "
            f"not on our runs, {counts[NOT_RUN]} are not yet run, and {undecided} have figures that decide nothing "
            f"({link('results', 'the results page')}, {link('claims', 'the claims ledger')})")
    # why each decides nothing: the rules' own words (rules.WHY_NOT_DECIDED), as the ledger prints them
    return text + (":\n" + why_not_decided(counts=counts, indent="  ") if undecided else ".")


def contradicted_claims():
    """Every claim of the papers' text that their own printed tables contradict (the paper side "no"), one row each:
    the paper, the claim's id, section and text, the figure claimed and the one the tables give. The errata page
    lists them all and the intro counts them (the same list)."""
    rows = []
    for key in papers.DOCUMENTS:
        if not papers.claims(key):
            continue
        frame = claims(key)
        for cid, row in frame[frame["paper bears it out"] == PAPER_NO].iterrows():
            rows.append({"paper": key, "id": cid, "section": row["section"], "claim": row["claim"],
                         "claimed": row["claimed"], "tables give": f"{row['paper figure']:,.2f}"})
    return pd.DataFrame(rows, columns=["paper", "id", "section", "claim", "claimed", "tables give"])


def contradicted_markdown(frame):
    """``contradicted_claims`` as the errata page's numbered list (Markdown, the claims' text escaped)."""
    return "".join(f"{i}. `{row['paper']}` §{markdown_text(str(row['section']))}: "
                   f"{markdown_text(row['claim'].rstrip('.'))}: "
                   f"claimed {markdown_text(row['claimed'])}, its tables give {row['tables give']} (claim "
                   f"`{row['id']}`).\n" for i, (_, row) in enumerate(frame.iterrows(), 1))


def _paper_side(link):
    bear, checked = 0, 0
    for key in papers.DOCUMENTS:
        if papers.claims(key):
            counts = claims(key)["paper bears it out"].value_counts()
            bear += int(counts.get(PAPER_YES, 0))
            checked += int(counts.get(PAPER_YES, 0) + counts.get(PAPER_NO, 0))
    return (f"**The papers against their own tables:** {bear} of the {checked} claims their tables can check are borne "
            f"out; all {checked - bear} that they contradict are listed, with the documents' other errors, on "
            f"{link('errata', 'the errata page')}.")


def findings(frames, link, *, store=None):
    """Markdown bullets, three to six: the fused-path cost reversal, the parameter counts, the blog's block, our
    verdicts and the papers' own check, each computed now. ``frames``: ``{paper: claims frame}`` (``ours.ledger``);
    ``link(stem, text)``: a link to the chapter ``stem`` (or plain ``text`` where the book has no such page)."""
    found = [_fused(fused_costs(store=store), link), _counts(link), _shaped(frames.get("shaped"), link, store),
             verdicts_finding(frames, link), _paper_side(link)]
    return "\n".join(f"- {text}" for text in found if text)


# --------------------------------------------------------------------------------------------------
# the results page: every claim of every document, one row each


def _chapters_of_sections(root):
    """``{(paper, section or None): chapter stem}``: where each chapter shows its claims, read from the chapters'
    ``claims_section`` calls (``None``: all the paper's claims not given to another chapter)."""
    out = {}
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        text = "".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"])
        for paper, sections in re.findall(r"claims_section\((\w+|\"\w+\"), profile(?:, sections=\[([^\]]*)\])?", text):
            key = paper.strip('"') if paper.startswith('"') else next(
                (k for k in papers.DOCUMENTS if any(c.get("notebook") == path.stem for c in papers.book_chapters(k))),
                None)
            for section in (re.findall(r'"([^"]+)"', sections) if sections else [None]):
                out[(key, section)] = path.stem
    return out


def results_frame(frames, *, root=None):
    """One row per claim of ``frames`` (``{paper: claims frame}``): document, claim, the paper's value (as claimed,
    and its own tables' figure), ours (figure, seeds and what it rests on: ``verdicts.verdict_text``), a status
    (holds, does not hold, one of ``rules.NOT_DECIDED``, not run, not testable), the chapter that shows it, the
    claim's id (its anchor there: ``claim_anchor``) and the numbers themselves (``FIGURES``), for the CSV."""
    where = _chapters_of_sections(root or repo_root())
    rows = []
    for key, frame in frames.items():
        for cid, row in frame.iterrows():
            chapter = where.get((key, str(row["section"]))) or where.get((key, None), "claims")
            figure = row["paper figure"]
            printed = isinstance(figure, numbers.Real) and figure == figure
            paper = f"{row['claimed']}" + (f" (tables: {figure:,.2f}, {row['paper bears it out']})" if printed else
                                           " (its tables print no figure for it)")
            ours = verdict_text(row) if row["our verdict"] not in (NOT_RUN, NOT_TESTABLE) or \
                row["our figure"] is not None else \
                f"{row['our verdict']}: {row['why no verdict']}" if row["why no verdict"] else row["our verdict"]
            rows.append({"document": key, "claim": f"{row['claim']} (§{row['section']})", "paper": paper,
                         "ours": ours, "status": row["our verdict"], "chapter": chapter, "claim id": cid,
                         **{name: _rounded(row[column]) for name, column in FIGURES.items()}})
    return pd.DataFrame(rows, columns=["document", "claim", "paper", "ours", "status", "chapter", "claim id",
                                       *FIGURES])


#: the numbers of a ``results_frame`` row, for its CSV (the page's text columns carry them as words): the paper's
#: figure, ours and the seeds behind ours
FIGURES = {"paper figure": "paper figure", "our figure": "our figure", "seeds": "seeds"}


def results_table(rows):
    """The results page's table of ``results_frame`` ``rows`` (one document's): numbered, without the document, the
    claim id and the bare numbers (``FIGURES``: its text columns give them), its chapter column a link to the claim's
    row on that chapter's page (``claim_anchor``)."""
    shown = rows.drop(columns=["document", "claim id", *FIGURES]).reset_index(drop=True).rename(index=lambda i: i + 1)
    shown["chapter"] = [f"{stem}#{claim_anchor(cid)}" for stem, cid in zip(rows["chapter"], rows["claim id"])]
    styler = page_table(shown, wrap=["claim", "paper", "ours"])

    def link(target):
        stem, _, anchor = target.partition("#")
        return f'<a href="{html_text(stem)}.html#{html_text(anchor)}">{html_text(stem)}</a>'

    # three wrapped columns at page_table's 12em each and the rest were 685 px, in a 676 px column at 1280 px
    shown = [c for c in ("claim", "paper", "ours") if c in styler.data.columns]  # "ours" leaves where none is run
    return styler.format(link, subset=["chapter"], escape=None).set_properties(subset=shown, **{"min-width": "10em"})


def runs_table(profile, *, store=None):
    """Every stored training run of ``profile``, one row each, for ``results.csv``: model, settings beyond the
    profile's, dataset, seed, epochs, top-1, top-5, device, precision, commit, date and the result file; then, where a
    published table row names it (``tables.glance.run_columns``), its paper, table(s), row, reading, the paper's
    top-1, its final training accuracy where the paper shows it, its status and the command that remakes it. Numbers
    stay numbers, rounded as the pages round them."""
    store = store if store is not None else ResultsStore()
    named = run_columns(profile, store=store)
    rows = []
    for path in sorted((store.root / profile).glob("*.json")):
        try:
            record = read_json(path)
        except StoreError:  # unreadable: the store lists it as "not used" (``ResultsStore.unusable_files``)
            continue
        config, prov = record.get("config") or {}, record.get("provenance") or {}
        if record.get("status") != "done" or unusable(record):  # what the store does not use is no result
            continue
        file = path.relative_to(store.root).as_posix()
        rows.append({"model": config.get("model"), "settings": " ".join(
            f"{k}={v}" for k, v in sorted((config.get("model_overrides") or {}).items())),
            "dataset": config.get("dataset"), "seed": config.get("seed"), "epochs": record.get("epochs_run"),
            "top1": _rounded(record.get("top1")), "top5": _rounded(record.get("top5")), "device": prov.get("device"),
            "precision": config.get("precision"), "commit": str(prov.get("commit", ""))[:10],
            "date": made_on(prov), "file": file, **named.get(file, {})})
    return pd.DataFrame(rows, columns=["model", "settings", "dataset", "seed", "epochs", "top1", "top5", "device",
                                       "precision", "commit", "date", "file", *RUN_COLUMNS])


def _rounded(value):
    return round(float(value), DECIMALS) if isinstance(value, numbers.Real) and not isinstance(value, bool) else None


def csv_link(frame, filename):
    """An HTML link that downloads ``frame`` as ``filename`` (the CSV inlined: the page needs no file beside it)."""
    data = base64.b64encode(csv_frame(frame).to_csv(index=False).encode("utf-8")).decode("ascii")
    return f'<a download="{filename}" href="data:text/csv;base64,{data}">{filename}</a>'
