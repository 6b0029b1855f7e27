"""Build the real book in the smoke profile (slow-ish: runs the chapters on CPU), in a temporary book root
with a temporary results store: the checkout's own ``_build/``, ``book/executed/`` and ``results/`` are left alone."""
import re

import pytest

from vixnb.book.build import toc_notebooks
from vixnb.book.execute import EXECUTED_DIR, repo_root

ROOT = repo_root()
CHAPTER = "vix_table1"
STORED = f"budget/{CHAPTER}"  # the same chapter in the budget profile, rendered from the (here empty) results store


def _checkout_book_files():
    """(path, mtime) of the checkout's built book and executed chapters, to check that a test build leaves them
    alone."""
    files = [*(ROOT / "_build").rglob("*.html"), *(ROOT / EXECUTED_DIR).rglob("*.ipynb")]
    return sorted((p, p.stat().st_mtime_ns) for p in files if p.is_file())


@pytest.fixture(scope="module")
def book(request):
    if not (ROOT / "notebooks" / f"{CHAPTER}.ipynb").is_file():
        pytest.skip(f"notebooks/{CHAPTER}.ipynb does not exist yet (the first chapter is being written)")
    before = _checkout_book_files()
    built = request.getfixturevalue("smoke_book")  # conftest: built once per session
    return {**built, "checkout_before": before}


@pytest.fixture(scope="module")
def html(book):
    return book["html"]


def test_toc_lists_the_chapter():
    assert CHAPTER in toc_notebooks(ROOT) and STORED in toc_notebooks(ROOT)


def test_book_builds_in_smoke_profile(book, html, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # nothing below may depend on the cwd
    assert html == book["root"] / "_build" / "html"
    assert (html / "index.html").is_file() and (html / "book" / "intro.html").is_file()
    page = html / "book" / "executed" / f"{CHAPTER}.html"
    assert page.is_file(), sorted(p.relative_to(html).as_posix() for p in html.rglob("*.html"))
    text = page.read_text(encoding="utf-8")
    plain = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))
    assert "pipeline check on synthetic data" in plain
    assert "<table" in text
    assert 'class="output traceback' not in text and "Traceback (most recent call last)" not in plain


def test_the_pipeline_check_leaves_the_published_part_to_the_published_book(html):
    assert not (html / "book" / "executed" / f"{STORED}.html").exists()  # rendered once, by the published book
    intro = (html / "book" / "intro.html").read_text(encoding="utf-8")
    assert f'href="executed/{CHAPTER}.html"' in intro and f'href="executed/{STORED}.html"' not in intro


def test_build_leaves_the_checkout_alone(book):
    assert _checkout_book_files() == book["checkout_before"]


@pytest.mark.parametrize("page, title", [(CHAPTER, "pipeline check, smoke profile"),
                                         ("simplified", "pipeline check, smoke profile")])
def test_pages_name_their_profile_and_show_no_injected_parameters_or_raw_reprs(html, page, title):
    text = (html / "book" / "executed" / f"{page}.html").read_text(encoding="utf-8")
    heading = re.search(r"<h1>([^<]*)<a class=\"headerlink\"", text).group(1)
    assert heading.strip().endswith(f"({title})")
    assert "tag_parameters" in text and "tag_injected-parameters" not in text  # papermill's cell is removed
    for raw in ("&lt;Figure size", "&lt;pandas.", "<Figure size", "NaN", "&lt;IPython"):
        assert raw not in text, raw


def test_chapter_pages_launch_the_committed_notebook_on_colab_and_kaggle(html):
    import vixnb

    blob = f"github.com/vixnb/vixnb/blob/{vixnb.RELEASE_TAG}/notebooks/{CHAPTER}.ipynb"
    for page in (CHAPTER,):
        text = (html / "book" / "executed" / f"{page}.html").read_text(encoding="utf-8")
        assert f'href="https://colab.research.google.com/{blob.replace("github.com/", "github/")}"' in text
        assert f'href="https://kaggle.com/kernels/welcome?src=https://{blob}"' in text
        assert "blob/v0.1.0/book/executed" not in text  # never the uncommitted executed copy
    intro = (html / "book" / "intro.html").read_text(encoding="utf-8")
    plain = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", intro))
    assert "What the results store holds" in plain and "GPU-hours to complete the book" in plain
    assert 'href="executed/claims.html"' in intro
