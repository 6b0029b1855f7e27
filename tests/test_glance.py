"""Results at a glance (``vixnb.report.tables.glance``): every stored run of a published table row beside the paper's
figure, with the record behind it served with the book, and the CSVs that keep numbers as numbers (issue 56)."""
import io
import json
from pathlib import Path, PurePosixPath

import pandas as pd
import pytest

from vixnb.book import build
from vixnb.escape import csv_frame
from vixnb.report.claims import found
from vixnb.report.tables import glance
from vixnb.results import ResultsStore
from vixnb.runs.asked import book_rows

REPO = Path(__file__).resolve().parents[1]
STORE = ResultsStore(REPO / "results")


@pytest.fixture(scope="module")
def frame():
    if not (STORE.root / "budget").is_dir():
        pytest.skip("the committed budget results are not in this checkout")
    return glance.glance_frame("budget", store=STORE)


def test_every_stored_table_row_is_listed_once_with_its_seeds(frame):
    expected = [(key, row, n) for key, _, _, row, specs in book_rows("budget")
                if (n := sum(STORE.path(s.config).is_file() for s in specs))]
    assert len(frame) == len(expected) and list(frame["seeds"]) == [n for *_, n in expected]
    assert list(frame["paper"]) == [k for k, *_ in expected]
    # a number of the paper's where its table prints one (ViX Table 1's top-1), else what it prints
    vit = frame[(frame["paper"] == "vix") & (frame["table"] == "Table 1")].iloc[0]
    assert vit["paper top-1"] == 56.81 and vit["paper's epochs"] == 40 and vit["epochs"] == 10
    blog = frame[(frame["paper"] == "shaped") & (frame["table"] == "Table 2")]
    assert list(blog["paper prints"]) == ["params 358,186; epoch_s 12.954", "params 209,210; epoch_s 11.305"]
    # the blog plots training accuracy: ours is given; ViX shows none
    assert blog["ours training accuracy"].notna().all() and pd.isna(vit["ours training accuracy"])
    assert set(frame["status"]) >= {"learned", "did not learn (1 of 1 seed)", "at chance (2 of 2 seeds)"}


def test_each_row_links_a_record_that_the_book_serves(frame, tmp_path):
    html = tmp_path / "html"
    served = build.serve_records(html, "budget", STORE)
    assert served == len(list((STORE.root / "budget").glob("*.json"))) + \
        len(list((STORE.root / "budget" / "measure").glob("*.json"))) + len(list((STORE.root / "bench").glob("*.json")))
    page = html / PurePosixPath(build.published_toc("budget", REPO)["parts"][0]["chapters"][0]["file"]).parent
    assert len(page.relative_to(html).parts) == glance.PAGE_DEPTH  # book/executed/budget: the pages' folder
    for files in frame["records"]:
        for file in files.split():
            target = (page / glance.record_href(file)).resolve()
            assert target.is_file() and json.loads(target.read_text())["status"] == "done", file
    shown = glance.glance_page(frame[frame["paper"] == "shaped"]).to_html()
    first = frame[frame["paper"] == "shaped"]["records"].iloc[0].split()[0]
    assert f'href="{glance.record_href(first)}"' in shown and "vixnb train vit_small_vanilla" in shown


def test_the_csvs_keep_numbers_as_numbers(frame):
    """claims.csv wrote '-41.59 (the formula guard escaped every cell that starts with "-"): a number stays a number,
    text that could be a formula is still escaped."""
    runs = found.runs_table("budget", store=STORE)
    assert runs["paper prints"].notna().sum() == runs["table"].notna().sum() > 30  # the paper's side of each row
    read = pd.read_csv(io.StringIO(csv_frame(runs).to_csv(index=False)))
    for column in ("seed", "epochs", "top1", "top5", "paper top-1", "training accuracy"):
        assert pd.api.types.is_numeric_dtype(read[column]), column
    assert read["top1"].round(2).equals(read["top1"])  # rounded as the pages round them
    read = pd.read_csv(io.StringIO(csv_frame(frame).to_csv(index=False)))
    assert all(pd.api.types.is_numeric_dtype(read[c]) for c in glance.NUMERIC)
    claims = found.results_frame({"shaped": pd.DataFrame(
        {"section": ["1"], "claim": ["fewer parameters"], "claimed": ["≈ -41.59 %"], "paper figure": [-41.5918],
         "paper bears it out": ["yes"], "our figure": [-41.5918], "our verdict": ["holds"], "seeds": [None],
         "why no verdict": [""], "reading": [""]}, index=["shaped-exp1-params"])})
    read = pd.read_csv(io.StringIO(csv_frame(claims).to_csv(index=False)))
    assert read.loc[0, "our figure"] == -41.59 and read.loc[0, "paper figure"] == -41.59
    assert read.loc[0, "ours"].startswith("'-41.59: ")  # text that starts like a formula stays escaped
