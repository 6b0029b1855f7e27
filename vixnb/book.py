"""Build the Jupyter Book (JB1) of the executed chapters.

Papermill (``vixnb.notebooks``) is the only executor: Jupyter Book is configured with ``execute_notebooks:
off`` and renders the copies papermill writes to ``book/executed/<stem>.ipynb`` (run in the book's profile) and
``book/executed/<profile>/<stem>.ipynb`` (run in that fixed profile with ``compute="never"``: rendered from the
results store, nothing trained or measured). The build fails on any Sphinx warning (``-W --keep-going`` from a
clean ``_build``) and on any error output left in an executed copy. The command line is ``vixnb book``.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .notebooks import (BOOK_SOURCES, EXECUTED_DIR, NOTEBOOK_DIR, STORED_ONLY, _error_outputs, _rel, _say, repo_root,
                        run_notebook)
from .profiles import get_profile, list_profiles

__all__ = ["toc_notebooks", "chapter_run", "copy_book_sources", "build_book"]


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


def toc_notebooks(root: Path | None = None) -> list[str]:
    """Names of the executed chapters listed in ``_toc.yml`` (in toc order), relative to ``book/executed/``.

    ``<stem>`` (entry ``book/executed/<stem>``) is ``notebooks/<stem>.ipynb`` run in the book's profile;
    ``<profile>/<stem>`` (entry ``book/executed/<profile>/<stem>``) is the same notebook run in that fixed
    profile from stored results (see :func:`chapter_run`).  ``ValueError``, naming the valid profiles, for
    any other folder.
    """
    import yaml

    root = root or repo_root()
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    prefix = EXECUTED_DIR.as_posix() + "/"
    names: list[str] = []
    for entry in _toc_files(toc):
        entry = entry.strip().lstrip("./")
        if entry.startswith(prefix):
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


def build_book(
    profile: str = "smoke",
    *,
    notebooks: Sequence[str] | None = None,
    clean: bool = True,
    parameters: Mapping[str, Any] | None = None,
    progress: bool = False,
    book_root: str | os.PathLike | None = None,
) -> Path:
    """Run the book's notebooks and build the HTML book; return ``<book_root>/_build/html``.

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
    ``_build/html``; the notebooks are always the checkout's.
    """
    get_profile(profile)  # unknown names are refused with the list of valid ones
    root = Path(book_root).resolve() if book_root is not None else repo_root()
    sources = repo_root() / NOTEBOOK_DIR
    chapters = toc_notebooks(root)
    todo = chapters if notebooks is None else list(notebooks)
    extra = [s for s in todo if s not in chapters]
    if extra:
        raise ValueError(
            f"not chapters of the book (_toc.yml): {', '.join(extra)}; chapters: {', '.join(chapters)}"
        )
    t0 = time.monotonic()
    _say(f"book: {len(todo)} of {len(chapters)} notebook(s) to run (plain chapters in profile {profile!r})")
    for name in todo:
        stem, chapter_profile, chapter_parameters = chapter_run(name, profile)
        run_notebook(
            sources / f"{stem}.ipynb",
            profile=chapter_profile,
            parameters={**(parameters or {}), **chapter_parameters},
            output=root / EXECUTED_DIR / f"{name}.ipynb",
            progress=progress,
        )
    missing = [s for s in chapters if not (root / EXECUTED_DIR / f"{s}.ipynb").is_file()]
    if missing:
        raise RuntimeError(
            "no executed copy for chapter(s) " + ", ".join(missing) + f" in {EXECUTED_DIR}/; run them first"
        )
    for name in chapters:  # copies made earlier (notebooks=[...]) get the same check
        errors = _error_outputs(root / EXECUTED_DIR / f"{name}.ipynb")
        if errors:
            raise RuntimeError(f"executed copy of {name} holds an error (cell {errors[0][0]}: {errors[0][1]})")

    build_dir = root / "_build"
    if clean and build_dir.exists():
        shutil.rmtree(build_dir)
    cmd = _jupyter_book_cmd() + ["build", str(root), "--builder", "html", "--warningiserror", "--keep-going"]
    _say("book: jupyter-book build --warningiserror --keep-going" + (" (clean)" if clean else ""))
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
        raise RuntimeError(f"jupyter-book exited 0 but {_rel(html / 'index.html')} is missing")
    _say(
        f"book: built {_rel(html)} in {time.monotonic() - t1:.1f} s "
        f"(total {time.monotonic() - t0:.1f} s); open {_rel(html / 'index.html')}"
    )
    return html
