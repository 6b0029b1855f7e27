"""The measurements a chapter asks for, as page tables: each with its heading, its table or the command that makes
it, and its provenance line."""
from __future__ import annotations

from html import escape

import matplotlib.pyplot as plt
from IPython.display import HTML, Markdown, display

from ... import papers
from ...analysis.first_steps import LEAD_POINTS, arms_frame, ordered_arms
from ...measure.costs import speed_table  # noqa: F401  (tables.speed_table: the speed kind's page table)
from ...runs.profiles import small_sizes
from ...record_kinds import chapter_requests, kind_of, record_name
from ..records.collect import record
from ..records.provenance import provenance_line
from ...escape import markdown_text
from ..figures import first_steps_curves
from .glance import record_href
from .questions import arm_outcomes, seconds_line
from .pages import not_yet_run, page_table


def records_section(paper, notebook, *, profile, compute="missing", shown=(), store=None):
    """Every measurement the chapter asks for (its paper file's ``book: measure``) that has a page table (its kind's
    ``show``) and is not among ``shown`` (the kinds the page lays out itself): a heading (the kind's description),
    its table or how to make it, and its provenance. Displays them; returns ``{kind: record or None}``."""
    out = {}
    for request in chapter_requests(paper, papers.book_chapter(paper, notebook)):
        kind = kind_of(request)
        if kind.group != "measure" or kind.show is None or request.kind in shown:
            continue
        found = record(request.kind, paper=paper, notebook=notebook, dataset=request.dataset, profile=profile,
                       compute=compute, store=store)
        display(Markdown(f"### {kind.description[:1].upper()}{kind.description[1:]} ({request.dataset})"))
        if found is None:
            display(Markdown(not_yet_run(f"`vixnb batch --profile {profile} --only {record_name(request)}` on a "
                                         f"{'GPU' if kind.needs_gpu or not small_sizes(profile) else 'machine'}")))
        else:
            display(page_table(kind.show(found)))
            display(Markdown(provenance_line([found], profile=profile)))
        out[request.kind] = found
    return out


#: what a CPU's first steps are not: the note beside every first-steps record on a page
CPU_BF16 = (" The arms ran under bf16 autocast on a CPU, which is not a GPU's bf16 (PyTorch's CPU autocast casts other "
            "operations, with other kernels): they show whether a change moves a run in its first steps, not what a "
            "GPU run reaches.")


def first_steps_section(found, question, where, *, profile, paper="shaped"):
    """A question's first-steps record (``analysis.first_steps_record``) on the page: a heading (``where``), the
    arms' table (``analysis.arms_frame``: loss and accuracy at the start, middle and end of their steps), their
    curves, which arms lead the row's own run on the steps both ran (``questions.arm_outcomes``), each arm's CPU
    seconds, what a CPU's bf16 is not, the provenance, a link to the record and each arm's ``vixnb train`` command (it
    trains the arm whole); the command that makes the record where none is stored."""
    display(Markdown(f"### {markdown_text(where)}"))
    if found is None:
        display(Markdown(not_yet_run(f"`vixnb batch --profile {profile} --device cpu --only "
                                     f"{paper}-first-steps-{question}` (on a CPU: it times nothing)")))
        return
    display(Markdown(f"*{markdown_text(found.get('text', question))}*"))
    table = arms_frame(found)
    seconds = {name: arm.get("seconds") for name, arm in ordered_arms(found).items()}
    table[("CPU seconds", "")] = [round(seconds[name]) if isinstance(seconds.get(name), (int, float)) else None
                                  for name in table.index]  # None where the record keeps none
    display(page_table(table, decimals=2,
                       caption=f"each arm's first {found['steps']} optimizer steps, mean over "
                               f"{found.get('window', 20)} steps; its CPU seconds"))
    first_steps_curves(found)
    plt.show()
    ahead = {a: o["lead"] for a, o in arm_outcomes(found).items() if o["ahead"]}  # on the steps both ran
    if small_sizes(profile):  # a pipeline check: nothing said of the arms
        display(Markdown(f"A pipeline check ({profile} profile, synthetic images, a few steps): these numbers say "
                         "nothing of the arms. " + provenance_line([found], profile=profile)))
        return
    name = f"{paper}-first-steps-{question}"
    display(Markdown(
        (f"Arms ahead of the row's own run by at least {LEAD_POINTS:g} points of training accuracy over the last "
         f"{found.get('window', 20)} steps both ran: "
         + ", ".join(f"**{markdown_text(a)}** (+{d:.1f})" for a, d in ahead.items())
         + "." if ahead else f"No arm leads the row's own run by {LEAD_POINTS:g} points of training accuracy over the "
         f"last {found.get('window', 20)} steps.") + " " + seconds_line(seconds) + CPU_BF16 + " "
        + provenance_line([found], profile=profile) + f" Record: [`{name}.json`]"
        f"({record_href(f'{profile}/measure/{name}.json')})."))
    commands = "".join(f"<li><b>{escape(arm)}</b>: <code>{escape(a['command'])}</code></li>"
                       for arm, a in ordered_arms(found).items())
    display(HTML(f"<details><summary>Each arm whole: its <code>vixnb train</code> command</summary><ul>{commands}"
                 "</ul></details>"))
