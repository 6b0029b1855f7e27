"""One chapter executed end to end (slow: about 45 s): the `shaped` paper's chapter (notebooks/simplified.ipynb) in
the smoke profile through papermill, as `vixnb run` does it, into a temporary results store. Every chapter runs
in the slow tier (tests/test_book.py builds the smoke book); where this session builds it, this test reads the
chapter it executed instead of running it a second time."""
import nbformat

from conftest import smoke_book_built
from vixnb import report
from vixnb.book.execute import EXECUTED_DIR, run_notebook


def _glued(path):
    nb = nbformat.read(str(path), as_version=4)
    return {out["metadata"]["scrapbook"]["name"]: out["data"]["application/papermill.record/text/plain"]
            for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if "scrapbook" in out.get("metadata", {})}


def _errors(path):
    nb = nbformat.read(str(path), as_version=4)
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
            if out.get("output_type") == "error"]


def test_the_simplified_chapter_runs_end_to_end_in_smoke(tmp_path, request):
    if smoke_book_built(request):  # the whole suite: the smoke book ran this chapter already; read its copy
        executed = request.getfixturevalue("smoke_book")["root"] / EXECUTED_DIR / "simplified.ipynb"
    else:
        executed = run_notebook("simplified", profile="smoke", output=tmp_path / "simplified.ipynb", progress=False)
    assert not _errors(executed)
    glued = _glued(executed)
    # the counts are exact whatever the profile: the blog's Table 2 reduction, and every run the page asks is done
    assert glued["shaped_table2_params_change"] == "'-41.59 %'"
    # the page made every run it reads (smoke trains them here), and its count line says so in counts_sentence's words
    # (the claims block may still lack a figure no run of this page makes: it is left out)
    nb = nbformat.read(str(executed), as_version=4)
    outputs = [str(out.get("data", out.get("text", ""))) for c in nb.cells
               if c.cell_type == "code" and "claims_section(" not in c.source
               for out in c.get("outputs", []) if "scrapbook" not in out.get("metadata", {})]
    assert not any("not yet run" in text.lower() for text in outputs)
    counted = next(out["data"]["application/papermill.record/text/markdown"] for c in nb.cells
                   if c.cell_type == "code" for out in c.get("outputs", [])
                   if out.get("metadata", {}).get("scrapbook", {}).get("name") == "page_counts")
    assert counted == report.records.counts_sentence(None)
    # every cell that draws curves shows them: a figure helper must not stop later cells' figures from showing
    drawing = [c for c in nb.cells if c.cell_type == "code" and ("training_panels(" in c.source or
                                                                   c.source.lstrip().startswith("curves("))]
    assert len(drawing) >= 3
    assert all(any("image/png" in out.get("data", {}) for out in c.get("outputs", [])) for c in drawing), \
        [c.source[:60] for c in drawing if not any("image/png" in o.get("data", {}) for o in c.get("outputs", []))]
