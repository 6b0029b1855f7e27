"""What reaches a page is escaped: text from a paper file or a result carrying HTML or Markdown is printed as text
in tables (cells, index, headings), captions and Markdown lines (``vixnb.escape``)."""
import pandas as pd

from vixnb import papers, report
from vixnb.escape import html_text, markdown_text

SCRIPT, IMAGE = "<script>alert(1)</script>", '<img src=x onerror="alert(2)">'


def test_escape_functions():
    assert html_text(SCRIPT) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert markdown_text("**bold** <b>") == r"\*\*bold\*\* &lt;b&gt;"


def test_a_page_from_a_paper_file_and_a_result_with_markup_prints_it_as_text(paper_dir):
    text = (paper_dir / "vix.yaml").read_text()
    text = text.replace('caption: "Table 1: CIFAR-10, batch size 64"', f"caption: '{SCRIPT}'") \
        .replace('label: "FNet",', f"label: '{IMAGE}',")
    (paper_dir / "vix.yaml").write_text(text)
    papers.load.cache_clear()
    table = papers.table("vix", "table1")
    paper = report.tables.paper_frame("vix", "table1")
    ours = pd.DataFrame({"top1": [f"{SCRIPT} 50.0"]}, index=["fnet"])
    frame = report.tables.beside_paper(ours, paper, {"Top-1": ("top1", "top1")}, order=["fnet", "vit"],
                                       labels={"fnet": paper.at["fnet", "label"]})
    page = report.tables.page_table(frame, caption=table["caption"]).to_html()
    assert "<script" not in page and "<img" not in page  # neither the caption, the row label nor the cell
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2 and "&lt;img src=x onerror=" in page
    result = {"status": "done", "config": {"dataset": "cifar10"},
              "provenance": {"device": IMAGE, "commit": "abc", "torch": "2", "seed": 0, "note": SCRIPT}}
    line = report.records.provenance_line([result], profile="budget")
    assert "<" not in line and "&lt;img src=x onerror=" in line and "Note: &lt;script&gt;" in line
    empty = report.tables.page_table(pd.DataFrame({"a": ["not yet run"]}), caption=SCRIPT)
    assert "<script" not in empty.data and "&lt;script&gt;" in empty.data


def test_a_figures_labels_are_printed_as_written_not_read_as_mathtext():
    import matplotlib
    import matplotlib.pyplot as plt

    from vixnb.report.figures.per_layer import per_layer_lines

    before = matplotlib.rcParams["text.parse_math"]
    label = "ViT $\\alpha$ (cost: $5)"  # from a paper file or a result: a dollar sign is not math
    fig = per_layer_lines({label: [1.0, 2.0]}, y_label="$y$", title="$x_1$")
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_text() in (label, "$y$", "$x_1$")]
    assert len(texts) == 3 and not any(t.get_parse_math() for t in texts)
    fig.canvas.draw()  # an odd number of dollars would fail to parse as math
    plt.close(fig)
    assert matplotlib.rcParams["text.parse_math"] == before  # no global setting touched
