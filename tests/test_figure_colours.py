"""Figures a reader can tell apart (issue 56): run colours at least ``MIN_DELTA_E`` apart in CIELAB within one figure,
every figure of a run on the run palette, legends outside the data, and the attention maps with their images' classes,
one colour scale and a flag on a run that did not learn."""
import itertools
import json
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from vixnb import papers, report  # noqa: E402
from vixnb.report.figures import colors  # noqa: E402
from vixnb.runs.asked import book_rows  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MAPS = REPO / "results" / "budget" / "measure" / "shaped-attention-maps-cifar10.json"
STALL = REPO / "results" / "budget" / "measure" / "shaped-first-steps-vanilla_stall_w128.json"
#: what the issue asks of any two run colours of one figure
DELTA_E = 20.0


def closest(colours):
    return min((colors.delta_e(a, b) for a, b in itertools.combinations(list(colours), 2)), default=float("inf"))


def test_cielab_distances_are_the_standard_ones():
    assert colors.lab((1.0, 1.0, 1.0)) == pytest.approx((100.0, 0.0, 0.0), abs=0.01)
    assert colors.lab((1.0, 0.0, 0.0)) == pytest.approx((53.24, 80.09, 67.20), abs=0.05)
    assert colors.delta_e((0, 0, 0), (1, 1, 1)) == pytest.approx(100.0, abs=0.01)


def test_names_of_one_figure_are_told_apart_even_where_their_own_colours_are_close():
    names = [f"Simplified, setting {k}" for k in range(8)] + [f"ViT {k}" for k in range(6)] + ["uniform", "dynamic"]
    colours = colors.palette(names, avoid=(colors.CHANCE_GREY, colors.BLACK))
    assert closest(colours.values()) >= DELTA_E
    assert min(colors.delta_e(c, colors.CHANCE_GREY) for c in colours.values()) >= DELTA_E
    assert colours["ViT 0"] == colors.model_color("ViT 0")  # the first of a hue keeps the book's colour


def test_every_table_of_every_chapter_draws_its_runs_apart():
    """The runs one figure draws together: a paper table's rows (the blog's Exp. 4 drew three magentas, #a1017c,
    #760176 and #bc1085; its Exp. 0 two vanilla blues nearly the same)."""
    tables = {}
    for key, _, table, row, specs in book_rows("budget"):
        entry = papers.table(key, table)["rows"][row]
        label = (entry.get("label") if isinstance(entry, dict) else None) or row
        tables.setdefault((key, table), {})[label] = [{"config": specs[0].config}]
    for (key, table), runs in tables.items():
        colours = colors.palette(list(runs), runs=runs, avoid=(colors.CHANCE_GREY,))
        assert closest(colours.values()) >= DELTA_E, (key, table)


def _line_colours(fig, skip=(colors.CHANCE_GREY, colors.BLACK)):
    drawn = {line.get_label(): matplotlib.colors.to_rgb(line.get_color()) for ax in fig.axes for line in ax.lines
             if not line.get_label().startswith("_")}
    return {k: c for k, c in drawn.items() if all(colors.delta_e(c, s) > 1 for s in skip)}


@pytest.mark.skipif(not STALL.is_file(), reason="the committed first-steps record is not in this checkout")
def test_the_first_steps_figure_draws_each_arm_apart_with_its_legend_outside():
    fig = report.figures.first_steps_curves(json.loads(STALL.read_text()))
    assert len(_line_colours(fig)) >= 7 and closest(_line_colours(fig).values()) >= DELTA_E
    assert fig.legends and all(ax.get_legend() is None for ax in fig.axes)
    plt.close(fig)


@pytest.mark.skipif(not MAPS.is_file(), reason="the committed attention-map record is not in this checkout")
def test_the_prominence_figure_is_on_the_run_palette_with_what_is_so_by_construction():
    record = json.loads(MAPS.read_text())
    labels = {"exp3_vanilla": "Vanilla", "exp3_simplified": "Simplified"}
    prominence, share = report.figures.prominence_figures(record, labels=labels)
    runs = {labels[row]: [{"config": run["config"]}] for row, run in record["runs"].items()}
    expected = colors.palette(list(runs), runs=runs, avoid=(colors.CHANCE_GREY,))
    lines = {line.get_label(): line for line in prominence.axes[0].lines}
    for label, colour in expected.items():  # the vanilla's blue of every other page, not matplotlib's first colour
        assert matplotlib.colors.to_rgb(lines[f"{label}: applied map"].get_color()) == pytest.approx(colour)
    assert lines["Simplified: softmax part"].get_linestyle() == "--" and \
        lines["Simplified: softmax part"].get_color() == lines["Simplified: applied map"].get_color()
    assert prominence.legends and prominence.axes[0].get_legend() is None  # the legend under the axes
    assert any("By construction" in t.get_text() and "65 × s" in t.get_text() for t in prominence.texts)
    plt.close(prominence)
    plt.close(share)


@pytest.mark.skipif(not MAPS.is_file(), reason="the committed attention-map record is not in this checkout")
def test_fig8_names_each_images_class_draws_one_colour_scale_and_flags_a_run_that_did_not_learn():
    record = json.loads(MAPS.read_text())
    from vixnb.results import ResultsStore

    flags = report.records.learning_flags(record, store=ResultsStore(REPO / "results"))
    assert list(flags) == ["exp3_vanilla"] and flags["exp3_vanilla"].startswith("training accuracy 19.5 -> 21.1 %")
    figures = report.figures.attention_map_panels(record, labels={"exp3_vanilla": "Vanilla"}, flags=flags)
    titles = [fig._suptitle.get_text() for fig in figures]
    assert "did not learn" in titles[1] and "did not learn" not in titles[0]
    for fig in figures:
        rows = [ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()]
        assert rows[:5] == ["airplane", "automobile", "bird", "cat", "deer"]  # the panel: classes 0 to 4
        bar = fig.axes[-1]
        assert bar.get_ylabel() == "class token's attention"
        limits = {tuple(image.get_clim()) for ax in fig.axes[:-1] for image in ax.images}
        assert len(limits) == 1  # one scale for every map of the run
        plt.close(fig)
    # a record that keeps its images draws them first, without the data set
    thumbs = dict(record, images=[[[[k, k, k]] * 32] * 32 for k in range(5)], labels=[9, 8, 7, 6, 5])
    from vixnb.analysis import panel_images, panel_labels

    assert len(panel_images(thumbs)) == 5 and panel_images(thumbs)[2].shape == (32, 32, 3)
    assert panel_labels(thumbs) == [9, 8, 7, 6, 5] and panel_labels(record) == [0, 1, 2, 3, 4]


def test_legends_sit_outside_the_data():
    fig = report.figures.per_layer_lines({"ViT": [1.0, 2.0], "ViP": [2.0, 1.0]}, y_label="entropy")
    assert fig.legends and fig.axes[0].get_legend() is None
    legend, ax = fig.legends[0].get_window_extent(), fig.axes[0].get_window_extent()
    assert legend.y1 <= ax.y0  # under the axes
    plt.close(fig)
    runs = {"a": [{"status": "done", "config": {"model_overrides": {"alpha_beta": "uniform"}},
                   "history": [{"alpha_beta": [[0.5, 0.5], [0.4, 0.6]]}, {"alpha_beta": [[0.6, 0.4], [0.3, 0.7]]}]}]}
    fig = report.figures.identity_share_trajectories(runs)
    assert fig.legends and all(ax.get_legend() is None for ax in fig.axes)
    plt.close(fig)
