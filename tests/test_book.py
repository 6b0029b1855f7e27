"""Build the real book in the smoke profile (slow-ish: runs the chapters on CPU)."""
import re

import pytest

from vixnb.notebooks import build_book, repo_root, toc_notebooks

ROOT = repo_root()
CHAPTER = "vix_table1"


@pytest.fixture(scope="module")
def html():
    if not (ROOT / "notebooks" / f"{CHAPTER}.ipynb").is_file():
        pytest.skip(f"notebooks/{CHAPTER}.ipynb does not exist yet (the first chapter is being written)")
    return build_book("smoke", clean=True)


def test_toc_lists_the_chapter():
    assert CHAPTER in toc_notebooks(ROOT)


def test_book_builds_in_smoke_profile(html, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # nothing below may depend on the cwd
    assert html == ROOT / "_build" / "html"
    assert (html / "index.html").is_file() and (html / "book" / "intro.html").is_file()
    page = html / "book" / "executed" / f"{CHAPTER}.html"
    assert page.is_file(), sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html"))
    text = page.read_text(encoding="utf-8")
    plain = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))
    assert "pipeline check on synthetic data" in plain
    assert "<table" in text
    assert 'class="output traceback' not in text and "Traceback (most recent call last)" not in plain


def test_intro_links_the_chapter(html):
    intro = (html / "book" / "intro.html").read_text(encoding="utf-8")
    assert f'href="executed/{CHAPTER}.html"' in intro
