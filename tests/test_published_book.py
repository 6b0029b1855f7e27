"""The published book (issue 18): `make book PROFILE=budget` runs every chapter in the budget profile from the
committed results store on this CPU (nothing trained or measured), builds with -W from a clean _build, and gives
the same glued numbers when built again. Built in a temporary book root: the checkout is left alone."""
import re

import nbformat
import pandas as pd
import pytest
import yaml

from vixnb.book import CONTENTS, build_book, chapter_run, copy_book_sources, published_toc, toc_notebooks
from vixnb.notebooks import EXECUTED_DIR, NOTEBOOK_DIR, repo_root, run_notebook

ROOT = repo_root()
PROFILE = "budget"
AGAIN = ["efficiency", "provenance"]  # run a second time: cheap chapters that glue numbers (costs, every stored run)


def _glued(path):
    """``{name: data}`` of the values a notebook glued (myst-nb's ``scrapbook`` outputs, every mime type)."""
    nb = nbformat.read(str(path), as_version=4)
    return {out["metadata"]["scrapbook"]["name"]: dict(out["data"])
            for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if "scrapbook" in out.get("metadata", {})}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = copy_book_sources(tmp_path_factory.mktemp("published"))
    html = build_book(PROFILE, clean=True, book_root=root, jobs=2)
    return {"root": root, "html": html}


def test_the_published_toc_holds_every_chapter_once_in_the_profile():
    toc = published_toc(PROFILE, ROOT)
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    stems = list(dict.fromkeys(name.rpartition("/")[2] for name in toc_notebooks(ROOT)))
    assert files == [f"{EXECUTED_DIR.as_posix()}/{PROFILE}/{stem}" for stem in stems]
    assert toc["root"] == "book/intro" and len(toc["parts"]) == 1
    assert all(chapter_run(f"{PROFILE}/{stem}", "smoke")[1:] == (PROFILE, {"compute": "never"}) for stem in stems)


def test_the_published_book_builds_from_the_committed_store(published):
    html, root = published["html"], published["root"]
    toc = yaml.safe_load((root / EXECUTED_DIR / f"_toc.{PROFILE}.yml").read_text())
    for chapter in toc["parts"][0]["chapters"]:
        page = html / f"{chapter['file']}.html"
        text = page.read_text(encoding="utf-8")
        plain = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))
        assert "Traceback (most recent call last)" not in plain, page.name
        assert "pipeline check on synthetic data" not in plain, page.name
    assert not (html / EXECUTED_DIR / "vix_table1.html").exists()  # no smoke part in the published book
    intro = (html / "book" / "intro.html").read_text(encoding="utf-8")
    assert f'href="executed/{PROFILE}/provenance.html"' in intro and f'href="executed/{PROFILE}/claims.html"' in intro
    assert "What the results store holds" in intro


@pytest.mark.parametrize("stem", ["vix_table1", "simplified"])
def test_published_pages_name_their_profile_and_source_and_show_no_raw_reprs(published, stem):
    text = (published["html"] / EXECUTED_DIR / PROFILE / f"{stem}.html").read_text(encoding="utf-8")
    plain = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))
    heading = re.search(r"<h1>([^<]*)<a class=\"headerlink\"", text).group(1)
    assert heading.strip().endswith("(GPU results, budget profile)")
    assert f"Rendered from the results store ( results/{PROFILE}/ ): nothing was trained or measured" in plain
    assert "tag_parameters" in text and "tag_injected-parameters" not in text  # papermill's cell is removed
    for raw in ("&lt;Figure size", "&lt;pandas.", "<Figure size", "&lt;IPython"):
        assert raw not in text, raw


def test_building_again_gives_the_same_glued_numbers(published, tmp_path, monkeypatch):
    monkeypatch.delenv("VIXNB_RESULTS")  # the committed store, as the published build read it (conftest isolates)
    root = published["root"]
    for stem in AGAIN:
        first = root / EXECUTED_DIR / PROFILE / f"{stem}.ipynb"
        _, profile, parameters = chapter_run(f"{PROFILE}/{stem}", PROFILE)
        again = run_notebook(ROOT / NOTEBOOK_DIR / f"{stem}.ipynb", profile=profile, parameters=parameters,
                             output=tmp_path / f"{stem}.ipynb", progress=False)
        glued = _glued(first)
        assert glued, f"{stem} glues nothing"
        assert _glued(again) == glued, stem
    contents = (root / CONTENTS).read_text(encoding="utf-8")
    from vixnb.book import write_contents

    assert write_contents(tmp_path, root / EXECUTED_DIR / f"_toc.{PROFILE}.yml").read_text(encoding="utf-8") == contents


def test_the_intro_contents_name_the_totals_and_link_every_page(tmp_path, monkeypatch):
    import vixnb.book

    from vixnb.book import write_contents

    totals = {"stored": 7, "missing": 920, "stale": 11, "gpu_hours_left": 575.31,
              "per_profile": {"budget": {"stored": 6, "missing": 452, "stale": 8, "gpu_hours_left": 32.05},
                              "paper": {"stored": 1, "missing": 468, "stale": 3, "gpu_hours_left": 543.26}}}
    monkeypatch.setattr(vixnb.book, "book_totals", lambda plans: totals)  # the numbers are report.book_totals' own test
    monkeypatch.setattr(vixnb.book, "book_plans", lambda: {"budget": [], "paper": []})
    board = pd.DataFrame({"GPU-hours left": [1.5]}, index=["A document"])
    monkeypatch.setattr(vixnb.book, "dashboard", lambda plans, profile: board)  # tested in tests/test_report.py
    toc = tmp_path / "toc.yml"
    toc.write_text(yaml.safe_dump(published_toc(PROFILE, ROOT)))
    text = write_contents(tmp_path, toc).read_text(encoding="utf-8")
    assert ("7 runs and measurements stored, 920 missing, 11 stale; about 575.3 GPU-hours to complete the book "
            "(budget: 6 stored, 452 missing, 8 stale, 32.0 GPU-hours left; paper: 1 stored, 468 missing, 3 stale, "
            "543.3 GPU-hours left)") in " ".join(text.split())
    assert "|  | GPU-hours left |\n|---|---|\n| A document | 1.5 |" in text  # the dashboard, as a Markdown table
    assert f"{{doc}}`the synthesis </book/executed/{PROFILE}/synthesis>`" in text
    assert f"{{doc}}`the provenance page </book/executed/{PROFILE}/provenance>`" in text
    assert f"{{doc}}`the claims ledger </book/executed/{PROFILE}/claims>`" in text
    assert "- {doc}`ViX Tables 1 and 2: linear attention, token mixing, hybrid embeddings " \
           f"</book/executed/{PROFILE}/vix_table1>`" in text
