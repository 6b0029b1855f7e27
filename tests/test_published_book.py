"""The published book (issue 18): `make book PROFILE=budget` runs every chapter in the budget profile from the
committed results store on this CPU (nothing trained or measured), builds with -W from a clean _build, and gives
the same glued numbers when built again. Built in a temporary book root: the checkout is left alone."""
import re
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pandas as pd
import pytest
import yaml

from vixnb.book.build import CONTENTS, build_book, chapter_run, copy_book_sources, published_toc, toc_notebooks
from vixnb.book.execute import EXECUTED_DIR, NOTEBOOK_DIR, repo_root, run_notebook
from vixnb.plan.plan import STATUSES

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
    files = [c["file"] for c in toc["parts"][0]["chapters"]]
    stems = list(dict.fromkeys(name.rpartition("/")[2] for name in toc_notebooks(ROOT)))
    assert files == [f"{EXECUTED_DIR.as_posix()}/{PROFILE}/{stem}" for stem in stems]
    assert toc["root"] == "book/intro" and len(toc["parts"]) == 2  # the chapters, then the errata and bibliography
    assert [c["file"] for c in toc["parts"][1]["chapters"]] == [f"{EXECUTED_DIR.as_posix()}/errata",
                                                                "book/bibliography"]
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
    assert "What the results store holds" in intro and 'href="executed/errata.html"' in intro
    errata = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", (html / EXECUTED_DIR / "errata.html").read_text()))
    assert "662,410" in errata and "16 inconsistencies" in errata  # the LeViP typo; linattn.yaml's 16 notes
    bibliography = (html / "book" / "bibliography.html").read_text(encoding="utf-8")
    assert "Resource-efficient Hybrid" in bibliography and "Simplifying Transformer Blocks" in bibliography
    page = (html / EXECUTED_DIR / PROFILE / "vix_table1.html").read_text(encoding="utf-8")
    assert "bibliography.html#" in page  # the chapter's header cites its source


@pytest.mark.parametrize("stem", ["vix_table1", "simplified"])
def test_published_pages_name_their_profile_and_source_and_show_no_raw_reprs(published, stem):
    text = (published["html"] / EXECUTED_DIR / PROFILE / f"{stem}.html").read_text(encoding="utf-8")
    plain = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text))
    heading = re.search(r"<h1>([^<]*)<a class=\"headerlink\"", text).group(1)
    assert "profile)" not in heading  # the profile is named once, in the navigation caption
    assert "this machine's device" not in plain and "Results shown: read from the results store" in plain
    assert f"Rendered from the results store ( results/{PROFILE}/ ): nothing was trained or measured" in plain
    assert "tag_parameters" in text and "tag_injected-parameters" not in text  # papermill's cell is removed
    for raw in ("&lt;Figure size", "&lt;pandas.", "<Figure size", "&lt;IPython"):
        assert raw not in text, raw


def test_building_again_gives_the_same_glued_numbers(published, tmp_path, monkeypatch):
    monkeypatch.delenv("VIXNB_RESULTS")  # the committed store, as the published build read it (conftest isolates)
    root = published["root"]

    def again(stem):
        _, profile, parameters = chapter_run(f"{PROFILE}/{stem}", PROFILE)
        return run_notebook(ROOT / NOTEBOOK_DIR / f"{stem}.ipynb", profile=profile, parameters=parameters,
                            output=tmp_path / f"{stem}.ipynb", progress=False)

    with ThreadPoolExecutor(len(AGAIN)) as pool:  # each in its own kernel, as the book runs them
        copies = dict(zip(AGAIN, pool.map(again, AGAIN)))
    for stem in AGAIN:
        glued = _glued(root / EXECUTED_DIR / PROFILE / f"{stem}.ipynb")
        assert glued, f"{stem} glues nothing"
        assert _glued(copies[stem]) == glued, stem
    contents = (root / CONTENTS).read_text(encoding="utf-8")
    from vixnb.book.build import write_contents

    assert write_contents(tmp_path, root / EXECUTED_DIR / f"_toc.{PROFILE}.yml").read_text(encoding="utf-8") == contents


def test_the_intro_contents_name_the_totals_and_link_every_page(tmp_path, monkeypatch):
    import vixnb.book.build

    from vixnb.book.build import write_contents

    zero = dict.fromkeys(STATUSES, 0)
    per = {"budget": {**zero, "entries": 466, "stored": 6, "missing": 452, "stale": 8, "gpu_hours_left": 32.05},
           "paper": {**zero, "entries": 472, "stored": 1, "missing": 468, "stale": 3, "gpu_hours_left": 543.26}}
    totals = {"per_profile": per, **{k: per["budget"][k] + per["paper"][k] for k in per["budget"]}}
    monkeypatch.setattr(vixnb.book.build, "book_totals",
                        lambda plans: totals)  # the numbers are report.book_totals' own test
    monkeypatch.setattr(vixnb.book.build, "book_plans", lambda: {"budget": [], "paper": []})
    board = pd.DataFrame({"GPU-hours left": [1.5]}, index=["A document"])
    monkeypatch.setattr(vixnb.book.build, "dashboard",
                        lambda plans, profile, frames=None: board)  # tests/test_report.py
    monkeypatch.setattr(vixnb.book.build, "ledger", lambda profile: {})  # the claims ledger: tests/test_claims.py
    monkeypatch.setattr(vixnb.book.build, "findings", lambda frames, link: "")  # tests/test_verdict_rules.py
    toc = tmp_path / "toc.yml"
    toc.write_text(yaml.safe_dump(published_toc(PROFILE, ROOT)))
    text = write_contents(tmp_path, toc).read_text(encoding="utf-8")
    # the book's profile in full, the other GPU profile beside it: each plan's own entries (they share benchmarks)
    assert (f"(the `{PROFILE}` plan: `vixnb plan --profile {PROFILE}`): of its 466 runs and measurements, 6 stored, "
            "8 stale, 452 missing; about 32.0 GPU-hours to complete the book (the other GPU profile, `paper`: of its "
            "472 entries, 1 stored, 3 stale, 468 missing, 543.3 GPU-hours left).") in " ".join(text.split())
    assert "|  | GPU-hours left |\n|---|---|\n| A document | 1.5 |" in text  # the dashboard, as a Markdown table
    assert f"{{doc}}`the synthesis </book/executed/{PROFILE}/synthesis>`" in text
    assert f"{{doc}}`the provenance page </book/executed/{PROFILE}/provenance>`" in text
    assert f"{{doc}}`the claims ledger </book/executed/{PROFILE}/claims>`" in text
    assert "- {doc}`ViX Tables 1 and 2: linear attention, token mixing, hybrid embeddings " \
           f"</book/executed/{PROFILE}/vix_table1>`" in text


#: the chapters whose page ends with a count of its entries (a footer); every chapter with a plan entry has a banner
FOOTERS = ("vix_table1", "vix_families", "vix_rope", "cxv_table1", "cxv_ablations", "cxv_dualopt", "linattn",
           "simplified")


def _plain(text):
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)).replace("&#8220;", "")


def _statuses(entries, text):
    """``(entries, (n of each of the plan's STATUSES))`` of "5 stored, 5 weights wanted, 66 missing" (a status
    not named: 0)."""
    found = {s: int(n) for n, s in re.findall(r"(\d+) (" + "|".join(STATUSES) + ")", text)}
    return entries, tuple(found.get(s, 0) for s in STATUSES)


def page_counts(text):
    """``[(entries, stored, missing, stale)]`` of each count a page's text prints: "Of the N entries this page reads
    in budget: S stored, …" (the words of ``report.counts_sentence``), and the wordings the footers used before it,
    "Of the N … runs this page asks for, S are done" and "Runs done here: S of N" (their other counts unknown:
    None), so that a footer in other words is still compared."""
    found = []
    for n, stored, rest in re.findall(r"Of the (\d+) entries this page reads in budget : (\d+) stored([^.]*)\.", text):
        others = {s: int(k) for k, s in re.findall(r"(\d+) (missing|stale|damaged|unverified|weights wanted)", rest)}
        found.append((int(n), int(stored), others.get("missing", 0), others.get("stale", 0)))
    found += [(int(n), int(done), None, None) for n, done in
              re.findall(r"Of the (\d+) [^.]*?runs this page asks for[^,.]*, (\d+) are done", text)]
    found += [(int(n), int(done), None, None) for done, n in re.findall(r"Runs done here: (\d+) of (\d+)", text)]
    return found


def html_counts(html):
    """The counts the built book prints, parsed from its HTML: the intro's totals and per-profile counts, each
    dashboard row, each chapter's banner (its block quote) and footers (the counts on the rest of its page), the plan
    page's table and the provenance page's totals."""
    from bs4 import BeautifulSoup

    intro = _plain((html / "book" / "intro.html").read_text(encoding="utf-8"))
    held = intro.partition("What the results store holds")[2].partition("GPU-hours left)")[0]
    out = {"intro per profile": {p: _statuses(int(n), rest) for p, n, rest in re.findall(
               r"(budget|paper)(?: plan: vixnb plan --profile \1 \))? ?: of its (\d+) "
               r"(?:runs and measurements|entries), "
               r"([^;(]*)", held)},
           "dashboard": dashboard_rows(html / "book" / "intro.html"), "banners": {}, "footers": {},
           "intro chapters": sorted(_statuses(int(n), rest) for n, rest in re.findall(
               r"\(of its (\d+) entries: ([^)]*)\)", intro.partition("Results of ours are in the store for ")[2]))}
    for page in sorted((html / EXECUTED_DIR / PROFILE).glob("*.html")):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        main = soup.find("main") or soup
        banners = [c for q in main.find_all("blockquote") for c in page_counts(_plain(str(q)))]
        for q in main.find_all("blockquote"):
            q.decompose()
        footers = page_counts(_plain(str(main)))
        if banners:
            assert len(banners) == 1, (page.stem, banners)
            out["banners"][page.stem] = banners[0]
        if footers:
            out["footers"][page.stem] = footers
    provenance = _plain((html / EXECUTED_DIR / PROFILE / "provenance.html").read_text(encoding="utf-8"))
    out["provenance per profile"] = {p: _statuses(int(n), rest) for n, p, rest in re.findall(
        r"[Oo]f the (\d+) (?:entries )?of the (budget|paper) plan: ([^;.]*)", provenance)}
    out["plan page"] = plan_totals(html / EXECUTED_DIR / PROFILE / "plan.html")
    return out


def dashboard_rows(page):
    """``{document title: (stored, stale, asked)}`` of the intro dashboard's "budget results stored / stale / asked"
    column."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    column = f"{PROFILE} results stored / stale / asked"
    table = next(t for t in soup.find_all("table")
                 if column in [" ".join(th.get_text().split()) for th in t.find_all("th")])
    head = [" ".join(th.get_text().split()) for th in table.find("thead").find_all("th")]
    rows = {}
    for tr in table.find("tbody").find_all("tr"):
        cells = [" ".join(c.get_text().split()) for c in tr.find_all(["th", "td"])]
        rows[cells[0]] = tuple(int(n) for n in cells[head.index(column)].split(" / "))
    return rows


def plan_totals(page):
    """``[(profile, chapter, entries, stored)]`` of the plan page's totals table (its index is profile, chapter; a
    profile's cell spans its chapters' rows). Read with the HTML parser the book's theme brings (bs4)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    table = next(t for t in soup.find_all("table") if {"entries", "stored", "left"} <= {
        th.get_text(strip=True) for th in t.find_all("th")})
    head = [th.get_text(strip=True) for th in table.find("thead").find("tr").find_all("th")]
    columns = [c for c in head if c]
    rows, profile = [], None
    for tr in table.find("tbody").find_all("tr"):
        cells = [c.get_text(strip=True) for c in tr.find_all(["th", "td"])]
        if len(cells) == len(columns) + 2:
            profile, cells = cells[0], cells[1:]
        values = dict(zip(columns, cells[1:]))
        rows.append((profile, cells[0], int(values["entries"]), int(values["stored"])))
    return rows


def check_counts(html, plans):
    """Every count the built book prints equals ``plan.counts`` of ``plans`` (``{profile: vixnb plan --json}``): the
    intro, its dashboard, each chapter's banner and footers (one denominator, the chapter's plan entries), the plan
    and provenance pages."""
    from collections import Counter

    from vixnb import papers

    by = {p: Counter(e["status"] for e in entries) for p, entries in plans.items()}
    got = html_counts(html)
    want = {p: (sum(c.values()), tuple(c[s] for s in STATUSES)) for p, c in by.items()}
    assert got["intro per profile"] == want and got["provenance per profile"] == want
    titles = {papers.load(key).get("title", key): key for key in papers.DOCUMENTS}
    assert set(got["dashboard"]) == set(titles), "a dashboard row per document"
    for title, row in got["dashboard"].items():
        mine = Counter(e["status"] for e in plans[PROFILE] if e["paper"] == titles[title])
        assert row == (mine["stored"], mine["stale"], sum(mine.values())), title
    chapters = {}
    for e in plans[PROFILE]:
        chapters.setdefault(e["chapter"], Counter())[e["status"]] += 1
    assert got["intro chapters"] == sorted((sum(c.values()), tuple(c[s] for s in STATUSES))
                                           for c in chapters.values() if c["missing"] < sum(c.values()))
    for chapter in FOOTERS:
        assert chapter in got["banners"] and len(got["footers"].get(chapter, [])) == 1, \
            f"{chapter}: one banner and one footer with counts ({got['footers'].get(chapter)})"
    for where in ("banners", "footers"):
        for chapter, found in got[where].items():
            mine = Counter(e["status"] for e in plans[PROFILE] if e["chapter"] == chapter)
            want = (sum(mine.values()), mine["stored"], mine["missing"], mine["stale"])
            for counted in (found if where == "footers" else [found]):
                assert counted == tuple(w if c is not None else None for w, c in zip(want, counted)), \
                    (where, chapter, counted, want)
    assert got["banners"], "no banner with counts found"
    assert got["plan page"], "no totals table on the plan page"
    for profile, chapter, entries, stored in got["plan page"]:
        mine = [e for e in plans[profile] if chapter == "book" or e["chapter"] == chapter]
        assert (entries, stored) == (len(mine), sum(e["status"] == "stored" for e in mine)), (profile, chapter)


def test_the_results_page_links_each_claim_to_its_row_on_its_chapter(published):
    from bs4 import BeautifulSoup

    pages = published["html"] / EXECUTED_DIR / PROFILE
    soup = BeautifulSoup((pages / "results.html").read_text(encoding="utf-8"), "html.parser")
    links = [a["href"] for table in soup.find_all("table") for a in table.find_all("a", href=True)]
    rows = sum(len(table.find("tbody").find_all("tr")) for table in soup.find_all("table")
               if "chapter" in [th.get_text(strip=True) for th in table.find_all("th")])
    assert links and len(links) == rows  # every row of the per-document tables links its claim
    targets = {}
    for href in links:
        page, _, anchor = href.partition("#")
        if page not in targets:
            targets[page] = BeautifulSoup((pages / page).read_text(encoding="utf-8"), "html.parser")
        assert anchor.startswith("claim-") and targets[page].find(id=anchor), href


def test_every_count_in_the_built_book_agrees_with_the_plan(published, monkeypatch, capsys):
    import json

    from vixnb.cli import main

    monkeypatch.delenv("VIXNB_RESULTS")  # the committed store, as the book was built from it (conftest isolates)
    monkeypatch.chdir(ROOT)
    plans = {}
    for p in ("budget", "paper"):  # `vixnb plan --json` as a reader runs it, in this process (its models built once)
        assert main(["plan", "--profile", p, "--json"]) == 0
        plans[p] = json.loads(capsys.readouterr().out)
    check_counts(published["html"], plans)
