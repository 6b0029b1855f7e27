"""Build the Jupyter Book (JB1) of the executed chapters.

Papermill (``vixnb.book.execute``) is the only executor: Jupyter Book is configured with ``execute_notebooks:
off`` and renders the copies papermill writes to ``book/executed/<stem>.ipynb`` (run in the book's profile) and
``book/executed/<profile>/<stem>.ipynb`` (run in that fixed profile with ``compute="never"``: rendered from the
results store, nothing trained or measured). The build fails on any Sphinx warning (``-W --keep-going`` from a
clean ``_build``) and on any error output left in an executed copy. The command line is ``vixnb book``. The
launch links on the pages are the book's Sphinx extension, ``vixnb.book.links``.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import nbformat
import yaml

from .. import papers
from .execute import (BOOK_SOURCES, EXECUTED_DIR, NOTEBOOK_DIR, STORED_ONLY, error_outputs, relative_path, say, repo_root,
                        run_notebook)
from ..runs.profiles import get_profile, gpu_profile, list_profiles
from ..plan.plan import counts
from ..plan.stopping import descendants
from ..report.claims import contradicted_claims, contradicted_markdown, dashboard, findings, ledger, rules_statement
from ..report.records import book_plans, book_totals, status_counts
from ..report.tables.glance import RECORDS_DIR
from ..results import ResultsStore
from ..validate import checked

__all__ = ["toc_notebooks", "published_toc", "pipeline_check_toc", "chapter_run", "copy_book_sources", "build_book"]


def _toc_files(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        for key in ("root", "file"):
            if isinstance(node.get(key), str):
                yield node[key]
        for value in node.values():
            if isinstance(value, (list, dict)):
                yield from _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            yield from _toc_files(item)


def read_toc(path: Path) -> dict:
    """A table of contents (``_toc.yml``) as a mapping, or a ``ValueError`` naming the file and what is wrong: it
    cannot be read, is not YAML (with the line), or is not a mapping."""
    try:
        toc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{relative_path(path)}: cannot be read ({getattr(e, 'strerror', None) or e}); restore it "
                         "from git") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ValueError(f"{relative_path(path)}: not valid YAML{where} ({getattr(e, 'problem', None) or e}); fix it, "
                         "or restore it from git") from None
    if not isinstance(toc, dict) or "root" not in toc:
        raise ValueError(f"{relative_path(path)}: not a Jupyter Book table of contents (a mapping with a root); "
                         "restore it from git")
    return toc


def published_toc(profile: str, root: Path | None = None) -> dict:
    """The table of contents of the published book of GPU profile ``profile``: the intro, then every chapter of
    ``_toc.yml`` (each once, in its order) as ``book/executed/<profile>/<stem>``, rendered from the results
    store (``make book PROFILE=budget`` or ``paper``)."""
    root = root or repo_root()
    toc = read_toc(root / "_toc.yml")
    prefix = EXECUTED_DIR.as_posix() + "/"
    stems = []
    for entry in _toc_files(toc):
        stem = entry.strip().lstrip("./").removesuffix(".ipynb").rpartition("/")[2]
        if entry.strip().lstrip("./").startswith(prefix) and stem not in stems:
            stems.append(stem)
    caption = f"{get_profile(profile).get('page_title', profile)} (from the results store)"
    return {"format": "jb-book", "root": toc["root"],
            "parts": [{"caption": caption[:1].upper() + caption[1:],
                       "chapters": [{"file": f"{prefix}{profile}/{stem}"} for stem in stems]},
                      {"caption": "About the sources", "chapters": [{"file": ERRATA.with_suffix("").as_posix()},
                                                                    {"file": BIBLIOGRAPHY}]}]}


def pipeline_check_toc(root: Path | None = None) -> dict:
    """The table of contents of the pipeline check's book (``make check``, ``vixnb book --profile smoke``): the
    intro, then the parts of ``_toc.yml`` whose chapters run in the book's profile (``book/executed/<stem>``).
    The published part, rendered from the store, is left to the published book: one build renders it once."""
    root = root or repo_root()
    toc = read_toc(root / "_toc.yml")
    prefix = EXECUTED_DIR.as_posix() + "/"

    def plain(entry):
        entry = entry.strip().lstrip("./")
        return entry.startswith(prefix) and "/" not in entry[len(prefix):]

    parts = [part for part in toc.get("parts", []) if all(plain(c["file"]) for c in part.get("chapters", []))]
    if not parts:
        raise ValueError("_toc.yml has no part of plain chapters (book/executed/<stem>) for the pipeline check")
    return {"format": "jb-book", "root": toc["root"],
            "parts": [*parts, {"caption": "About the sources", "chapters": [{"file": BIBLIOGRAPHY}]}]}


def _published(profile: str) -> bool:
    """A GPU profile's book is the published one: every chapter from the results store, nothing run."""
    return gpu_profile(profile)


def toc_notebooks(root: Path | None = None, *, toc: Path | None = None) -> list[str]:
    """Names of the executed chapters listed in ``_toc.yml`` (in toc order), relative to ``book/executed/``.

    ``<stem>`` (entry ``book/executed/<stem>``) is ``notebooks/<stem>.ipynb`` run in the book's profile;
    ``<profile>/<stem>`` (entry ``book/executed/<profile>/<stem>``) is the same notebook run in that fixed
    profile from stored results (see :func:`chapter_run`).  ``ValueError``, naming the valid profiles, for
    any other folder.
    """
    root = root or repo_root()
    toc = read_toc(Path(toc or root / "_toc.yml"))
    prefix = EXECUTED_DIR.as_posix() + "/"
    names: list[str] = []
    for entry in _toc_files(toc):
        entry = entry.strip().lstrip("./")
        if entry.startswith(prefix) and entry.removesuffix(".md") != ERRATA.with_suffix("").as_posix():
            name = entry[len(prefix):].removesuffix(".ipynb")
            folder = name.rpartition("/")[0]
            if folder and folder not in list_profiles():
                raise ValueError(
                    f"_toc.yml entry {entry!r}: {folder!r} is not a profile (valid: {', '.join(list_profiles())}); "
                    f"chapters are {prefix}<stem> (run in the book's profile) or {prefix}<profile>/<stem> "
                    "(run in that profile from stored results)"
                )
            if name not in names:
                names.append(name)
    return names


def chapter_run(name: str, profile: str) -> tuple[str, str, dict[str, Any]]:
    """``(stem, profile, parameters)`` that chapter ``name`` (:func:`toc_notebooks`) runs with in a book
    built in ``profile``: ``<stem>`` runs in ``profile``; ``<fixed>/<stem>`` runs in ``fixed`` with
    ``STORED_ONLY``."""
    fixed, _, stem = name.rpartition("/")
    return (stem, fixed, dict(STORED_ONLY)) if fixed else (stem, profile, {})


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _jupyter_book_cmd() -> list[str]:
    return [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())"]


@contextmanager
def _kernel_threads(threads: int | None):
    """While chapters run side by side, the kernels they start get ``threads`` CPU threads each
    (``OMP_NUM_THREADS``, which torch reads at start-up), so that they share the cores instead of each taking all of
    them; the variable is as it was afterwards. ``None``: nothing changes."""
    if threads is None:
        yield
        return
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = before


def _end_kernels() -> None:
    """Stop the kernels this process started (its child processes: a chapter's kernel), so that the chapters
    running in other threads end (their executed copies removed, ``run_notebook``) when the build is stopped."""
    for pid in descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


def copy_book_sources(dest: str | os.PathLike) -> Path:
    """Copy the book's sources (``BOOK_SOURCES`` of the checkout, without ``book/executed/``) into ``dest``:
    a book root for ``build_book(..., book_root=dest)`` that leaves the checkout's book alone."""
    src, dest = repo_root(), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name in BOOK_SOURCES:
        if (src / name).is_dir():
            skip = shutil.ignore_patterns(EXECUTED_DIR.name, ".*") if name == EXECUTED_DIR.parent.name else None
            shutil.copytree(src / name, dest / name, ignore=skip, dirs_exist_ok=True)
        else:
            shutil.copy2(src / name, dest / name)
    return dest


@checked("jobs")
def build_book(
    profile: str = "smoke",
    *,
    notebooks: Sequence[str] | None = None,
    clean: bool = True,
    parameters: Mapping[str, Any] | None = None,
    progress: bool = False,
    book_root: str | os.PathLike | None = None,
    jobs: int = 1,
) -> Path:
    """Run the book's notebooks and build the HTML book; return ``<book_root>/_build/html``.

    In a GPU profile (``budget``, ``paper``: ``make book PROFILE=paper``) the book is the published one: every
    chapter of ``_toc.yml`` is run in that profile from the results store (``published_toc``; nothing trained or
    measured, so a CPU builds it), under a table of contents written to ``book/executed/_toc.<profile>.yml``.
    In ``smoke`` it is the pipeline check's part of ``_toc.yml`` (``pipeline_check_toc``). Either way the intro's list of pages and the store's totals
    (``write_contents``) are written first.

    ``notebooks=None`` runs every chapter listed in ``_toc.yml`` (:func:`toc_notebooks`):
    an entry ``book/executed/<stem>`` runs ``notebooks/<stem>.ipynb`` in
    ``profile``, an entry ``book/executed/<fixed>/<stem>`` runs it in the
    profile ``fixed`` with ``compute="never"`` (from the results store:
    nothing trained or measured), and each executed copy goes to the entry's
    path.  A list runs only those chapters, named ``<stem>`` or
    ``<fixed>/<stem>`` (``[]`` rebuilds from the executed copies already
    there).  ``parameters`` are passed to every notebook run.  The build is
    Jupyter Book 1 with ``--warningiserror --keep-going``, from a clean
    ``_build`` when ``clean``; any notebook error or Sphinx warning raises
    ``RuntimeError``.  ``book_root`` is the folder holding the book's sources
    (default: the checkout; elsewhere, see :func:`copy_book_sources`): the
    executed copies go to its ``book/executed/`` and the HTML to its
    ``_build/html``; the notebooks are always the checkout's. ``jobs``: how many chapters run at once, each in
    its own kernel (a store's runs are locked, so two chapters that train one run train it once).
    """
    get_profile(profile)  # unknown names are refused with the list of valid ones
    if notebooks is not None and (twice := [s for i, s in enumerate(notebooks) if s in notebooks[:i]]):
        raise ValueError(f"notebooks={list(notebooks)!r}: {twice[0]!r} is given twice; give each once")  # a set
    root = Path(book_root).resolve() if book_root is not None else repo_root()
    sources = repo_root() / NOTEBOOK_DIR
    toc_path = root / EXECUTED_DIR / f"_toc.{profile}.yml"
    toc_path.parent.mkdir(parents=True, exist_ok=True)
    toc = published_toc(profile, root) if _published(profile) else pipeline_check_toc(root)
    toc_path.write_text(yaml.safe_dump(toc, sort_keys=False), encoding="utf-8")
    chapters = toc_notebooks(root, toc=toc_path)
    todo = chapters if notebooks is None else list(notebooks)
    extra = [s for s in todo if s not in chapters]
    if extra:
        raise ValueError(
            f"not chapters of the book (_toc.yml): {', '.join(extra)}; chapters: {', '.join(chapters)}"
        )
    unknown = [name for name in todo if not (sources / f"{chapter_run(name, profile)[0]}.ipynb").is_file()]
    if unknown:  # found before any chapter runs, not after those before it
        raise ValueError(f"_toc.yml names chapter(s) with no notebook in {NOTEBOOK_DIR}/: {', '.join(unknown)}; "
                         f"fix the entries, or add the notebooks")
    t0 = time.monotonic()
    # first: it builds the GPU profiles' plans, whose models' facts (``models.facts``) the chapters then read kept
    write_contents(root, toc_path, profile)
    say(f"book: {len(todo)} of {len(chapters)} notebook(s) to run (plain chapters in profile {profile!r})")
    def run(name):
        stem, chapter_profile, chapter_parameters = chapter_run(name, profile)
        return run_notebook(
            sources / f"{stem}.ipynb",
            profile=chapter_profile,
            parameters={**(parameters or {}), **chapter_parameters},
            output=root / EXECUTED_DIR / f"{name}.ipynb",
            progress=progress,
        )

    if jobs < 1:
        raise ValueError(f"jobs={jobs!r}: give 1 or more (chapters run at once, each in its own kernel)")
    with _kernel_threads(max(1, (os.cpu_count() or 1) // jobs) if jobs > 1 else None), \
            ThreadPoolExecutor(max_workers=jobs) as pool:  # each chapter in its own kernel process
        futures = [pool.submit(run, name) for name in todo]
        try:
            for future in futures:
                future.result()  # the first failure, in the toc's order, after the chapters already started end
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM: the chapters running in the other threads end now too
            pool.shutdown(wait=False, cancel_futures=True)
            _end_kernels()
            raise
    missing = [s for s in chapters if not (root / EXECUTED_DIR / f"{s}.ipynb").is_file()]
    if missing:
        raise RuntimeError(
            "no executed copy for chapter(s) " + ", ".join(missing) + f" in {EXECUTED_DIR}/; run them first"
        )
    for name in chapters:  # copies made earlier (notebooks=[...]) get the same check
        errors = error_outputs(root / EXECUTED_DIR / f"{name}.ipynb")
        if errors:
            raise RuntimeError(f"executed copy of {name} holds an error (cell {errors[0][0]}: {errors[0][1]})")

    build_dir = root / "_build"
    if clean and build_dir.exists():
        shutil.rmtree(build_dir)
    cmd = _jupyter_book_cmd() + ["build", str(root), "--builder", "html", "--warningiserror", "--keep-going",
                                 "--toc", str(toc_path)]
    say("book: jupyter-book build --warningiserror --keep-going" + (" (clean)" if clean else ""))
    t1 = time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    warnings: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = _ANSI.sub("", line)  # JB calls Sphinx in-process, which colours its log
        sys.stdout.write(line)
        if "WARNING:" in line or "ERROR:" in line or "CRITICAL:" in line:
            warnings.append(line.rstrip())
    rc = proc.wait()
    sys.stdout.flush()
    if rc != 0 or warnings:
        detail = "\n  ".join(warnings[:20]) or "(see the log above)"
        raise RuntimeError(f"jupyter-book build failed (exit {rc}, {len(warnings)} warning/error line(s)):\n  {detail}")
    html = build_dir / "html"
    if not (html / "index.html").is_file():
        raise RuntimeError(f"jupyter-book exited 0 but {relative_path(html / 'index.html')} is missing")
    if _published(profile):
        served = serve_records(html, profile)
        say(f"book: {served} stored records served under {relative_path(html / RECORDS_DIR)}/")
    say(
        f"book: built {relative_path(html)} in {time.monotonic() - t1:.1f} s "
        f"(total {time.monotonic() - t0:.1f} s); open {relative_path(html / 'index.html')}"
    )
    return html


def serve_records(html: Path, profile: str, store: ResultsStore | None = None) -> int:
    """Copy the results store's records of ``profile`` (its training results, its measurements) and its benchmarks
    into the built book, ``<html>/records/`` (``report.tables.glance.RECORDS_DIR``), under their paths in the store,
    so that a page's link to a record (``record_href``) opens the JSON the number came from. Returns how many."""
    store = store if store is not None else ResultsStore()
    copied = 0
    for folder in (store.root / profile, store.root / profile / "measure", store.root / "bench"):
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            target = html / RECORDS_DIR / path.relative_to(store.root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            copied += 1
    return copied


# ----- the intro's generated part: the pages of this build and what the store holds ------------------------

CONTENTS = EXECUTED_DIR / "contents.md"
FINDINGS = EXECUTED_DIR / "findings.md"  # the intro's "What this study found", written with the contents
RULES = EXECUTED_DIR / "rules.md"  # the verdict rules as the intro prints them (``report.claims.rules_statement``)
#: the errata page of the published book: ``book/errata.template.md`` with its chapter links in the book's profile,
#: and the linattn report's inconsistencies as its paper file lists them (``notes``), which it includes
ERRATA, ERRATA_TEMPLATE, LINATTN_NOTES = (EXECUTED_DIR / "errata.md", Path("book/errata.template.md"),
                                          EXECUTED_DIR / "linattn_notes.md")
CONTRADICTED = EXECUTED_DIR / "contradicted_claims.md"  # every claim the papers' own tables contradict
BIBLIOGRAPHY = "book/bibliography"  # the bibliography page (book/references.bib), in every book


def write_errata(root: Path, profile: str) -> Path:
    """Write the errata page (``ERRATA``) of the published book in GPU profile ``profile``, and the lists it includes:
    ``LINATTN_NOTES`` (from ``vixnb/papers/linattn.yaml``) and ``CONTRADICTED``, every claim the papers' own tables
    contradict (``report.claims.contradicted_claims``, which the intro counts too)."""
    notes = papers.load("linattn").get("notes") or []
    (root / LINATTN_NOTES).parent.mkdir(parents=True, exist_ok=True)
    (root / LINATTN_NOTES).write_text("".join(f"{i}. {note}\n" for i, note in enumerate(notes, 1)), encoding="utf-8")
    contradicted = contradicted_claims()
    (root / CONTRADICTED).write_text(contradicted_markdown(contradicted), encoding="utf-8")
    page = (repo_root() / ERRATA_TEMPLATE).read_text(encoding="utf-8").replace("{profile}", profile)
    page = page.replace("The report's inconsistencies,", f"The report's {len(notes)} inconsistencies,")
    (root / ERRATA).write_text(page.replace("{contradicted}", str(len(contradicted))), encoding="utf-8")
    return root / ERRATA


def _chapter_title(stem: str) -> str:
    """A chapter's title: the first heading of ``notebooks/<stem>.ipynb``."""
    path = repo_root() / NOTEBOOK_DIR / f"{stem}.ipynb"
    if not path.is_file():
        return stem
    for cell in nbformat.read(str(path), as_version=4).cells:
        if cell.cell_type == "markdown" and cell.source.startswith("# "):
            return cell.source.partition("\n")[0][2:].strip()
    return stem


def _link_text(title: str) -> str:
    """A title as the text of a ``{doc}`` link: no backquotes (they end the role) or angle brackets (they start
    its target)."""
    return title.replace("`", "").replace("<", "(").replace(">", ")")


def _parts(toc: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """``[(caption, [docname, ...])]`` of a table of contents' parts."""
    return [(part.get("caption", ""), [c["file"] for c in part.get("chapters", [])]) for part in toc.get("parts", [])]


def markdown_table(frame) -> str:
    """A DataFrame as a Markdown pipe table (index first), for the generated Markdown the intro includes."""
    def cell(v):
        return str(v).replace("|", "\\|")

    head = ["", *map(cell, frame.columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join([cell(i), *(cell(v) for v in row)]) + " |" for i, row in zip(frame.index, frame.values)]
    return "\n".join(lines)


def _stands(entries) -> str:
    """One sentence from a plan: the chapters with results of ours in the store, each with ``plan.counts`` of its
    entries in the words every page prints (``report.records.status_counts``), and those with none."""
    by = {}
    for e in entries:
        by.setdefault(e.chapter, []).append(e)
    counted = {chapter: counts(mine) for chapter, mine in by.items()}
    some = [f"{_chapter_title(c)} (of its {n['entries']} entries: {status_counts(n)})"
            for c, n in counted.items() if n["missing"] < n["entries"]]
    none = [_chapter_title(c) for c, n in counted.items() if n["missing"] == n["entries"]]
    return ("Results of ours are in the store for " + ("; ".join(some) if some else "no chapter yet") + ". "
            + ("Nothing of ours is stored yet for " + "; ".join(none) + "." if none else ""))


def write_contents(root: Path, toc_path: Path, profile: str = "budget") -> Path:
    """Write ``book/executed/contents.md``, which the intro includes: the dashboard (``report.claims.dashboard``: one row
    per document, what is established without a GPU beside what the store holds of ``profile``, the published
    one), which chapters have results of ours, the totals of the results store over the GPU profiles (runs
    stored, missing and stale, the GPU-hours still to spend: ``report.records.book_totals``, from the plan) with links to
    the provenance page and the claims ledger, and every page of this build's table of contents by part.
    Generated on every build, so it says what this build's store holds."""
    toc = yaml.safe_load(Path(toc_path).read_text(encoding="utf-8"))
    parts = _parts(toc)
    docs = [doc for _, files in parts for doc in files]

    def first(stem):
        return next((d for d in docs if d.rpartition("/")[2] == stem), None)

    profile = profile if gpu_profile(profile) else "budget"
    plans = book_plans()
    totals = book_totals(plans)
    frames = {key: page["frame"] for key, page in ledger(profile).items()}
    board = dashboard(plans, profile, frames=frames)

    def link(stem, text):
        doc = first(stem)
        return f"{{doc}}`{_link_text(text)} </{doc}>`" if doc else text

    (root / FINDINGS).parent.mkdir(parents=True, exist_ok=True)
    (root / FINDINGS).write_text(findings(frames, link) + "\n", encoding="utf-8")
    (root / RULES).write_text(rules_statement() + "\n", encoding="utf-8")
    shown = totals["per_profile"].get(profile) or counts(plans.get(profile, []))
    others = "; ".join(f"`{p}`: of its {t['entries']} entries, {status_counts(t)}, {t['gpu_hours_left']:.1f} GPU-hours "
                       "left" for p, t in totals["per_profile"].items() if p != profile)
    lines = ["One row per document, counted when this book was built. The first three "
             "columns need no GPU: the papers' tables as printed, our models' parameter counts against the printed "
             "ones, and each quantitative claim checked against the paper's own tables. The next counts our "
             "verdicts on the claims (the claims ledger's). The last two count what "
             f"the results store holds of the `{profile}` profile, the one this book shows.\n\n"
             + markdown_table(board) + "\n\n" + _stands(plans.get(profile, [])),
             f"**What the results store holds** (the `{profile}` plan: `vixnb plan --profile {profile}`): of its "
             f"{shown['entries']} runs and measurements, {status_counts(shown)}; about {shown['gpu_hours_left']:.1f} "
             "GPU-hours to complete the book" + (f" (the other GPU profile, {others})" if others else "") + "."]
    if ERRATA.with_suffix("").as_posix() in docs:
        write_errata(root, profile)
    said = {"errata": "What the book found in the documents themselves (typos, swapped numbers, code bugs): "
                      "{{doc}}`the errata </{doc}>`.",
            "synthesis": "The five documents' numbers for each mechanism side by side: {{doc}}`the synthesis </{doc}>`.",
            "provenance": "Where each stored result came from, and what is missing: {{doc}}`the provenance page </{doc}>`.",
            "claims": "Every claim and its verdict: {{doc}}`the claims ledger </{doc}>`."}
    pointers = [text.format(doc=doc) for stem, text in said.items() if (doc := first(stem))]
    if pointers:
        lines.append(" ".join(pointers))
    for caption, files in parts:
        lines.append(f"\n**{caption}**\n")
        lines += [f"- {{doc}}`{_link_text(_chapter_title(doc.rpartition('/')[2]))} </{doc}>`" for doc in files]
    path = root / CONTENTS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(lines[:3]) + "\n" + "\n".join(lines[3:]) + "\n", encoding="utf-8")
    return path
