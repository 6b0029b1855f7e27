"""The measurements a chapter asks for, as page tables: each with its heading, its table or the command that makes
it, and its provenance line."""
from __future__ import annotations

from IPython.display import Markdown, display

from ... import papers
from ...measure.costs import speed_table  # noqa: F401  (tables.speed_table: the speed kind's page table)
from ...profiles import small_sizes
from ...record_kinds import chapter_requests, kind_of, record_name
from ..records.collect import record
from ..records.provenance import provenance_line
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
