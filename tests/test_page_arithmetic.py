"""The arithmetic the pages show, moved out of the notebooks into ``vixnb/report``: exact values on small inputs."""
import pandas as pd

from vixnb.report import compare, metrics, provenance, synthesis


def _run(status="done", **fields):
    return {"status": status, **fields}


def test_relative_change_in_percent_and_none_where_missing():
    assert compare.relative_change(110, 100) == 10.0
    assert compare.relative_change(75, 100) == -25.0
    assert compare.relative_change(None, 100) is None and compare.relative_change(1, None) is None


def test_cost_changes_puts_ours_beside_the_blog_and_changes_the_second_row_against_the_first(monkeypatch):
    printed = {"t": {"rows": {"van": {"params": 200, "epoch_s": 10.0}, "simp": {"params": 150, "epoch_s": 8.0}}}}
    monkeypatch.setattr(compare.papers, "table", lambda paper, name: printed[name])
    monkeypatch.setattr(compare.papers, "row_run", lambda paper, name, row: (f"m_{row}", {"depth": 2}))
    built = {"m_van": 100, "m_simp": 80}
    monkeypatch.setattr(compare, "current_counts", lambda model, dataset, **s: {"params_true": built[model]})
    history = [{"seconds": 5.0}, {"seconds": 3.0}]  # epoch 1 left out (start-up)
    runs = {"van": [_run(history=history, seed=0)], "simp": [_run("failed", history=history)]}
    counts, changes = compare.cost_changes("p", {"t": "Experiment 1"}, runs, {"van": "vanilla", "simp": "SAS"})
    assert list(counts.index) == ["Experiment 1, vanilla", "Experiment 1, SAS"]
    assert counts.loc["Experiment 1, vanilla"].to_dict() == {
        ("parameters", "ours"): 100, ("parameters", "blog"): 200, ("epoch (s)", "ours"): 3.0,
        ("epoch (s)", "blog"): 10.0}
    assert pd.isna(counts.at["Experiment 1, SAS", ("epoch (s)", "ours")])  # no seed done
    assert changes.loc["Experiment 1"].to_dict() == {
        ("parameters, Δ %", "ours"): -20.0, ("parameters, Δ %", "blog"): -25.0,
        ("epoch time, Δ %", "ours"): None, ("epoch time, Δ %", "blog"): -20.0}


def test_runs_overview_counts_the_seeds_done_and_names_the_first_done_device():
    config = {"model": "vit", "model_overrides": {"width": 96, "depth": 8}, "epochs": 3}
    runs = {"a": [_run("failed", config=config), _run(config=config, provenance={"device": "H100"})],
            "b": [_run("missing", config={**config, "model_overrides": {}})]}
    frame = compare.runs_overview(runs, missing="not yet run")
    assert frame.to_dict(orient="index") == {
        "a": {"model": "vit", "settings": "width 96, depth 8", "seeds done": "1 of 2", "epochs": 3, "device": "H100"},
        "b": {"model": "vit", "settings": "", "seeds done": "0 of 1", "epochs": 3, "device": "not yet run"}}


def test_labelled_runs_labels_each_row_as_its_table_does(monkeypatch):
    monkeypatch.setattr(compare.papers, "table", lambda paper, name: {"rows": {"r1": {"label": "one"}, "r2": {}}})
    assert compare.labelled_runs("p", "t", {"r1": [1], "r2": [2], "r3": [3]}) == {"one": [1], "r2": [2]}


def test_mean_per_layer_averages_the_done_seeds_that_record_the_value():
    runs = [_run(history=[{"g": [1.0, 2.0]}, {"g": [3.0, 5.0]}]),
            _run(history=[{"g": [3.0, 4.0]}, {"g": [5.0, 7.0]}]),
            _run("failed", history=[{"g": [100.0, 100.0]}, {"g": [100.0, 100.0]}]),
            _run(history=[{"g": []}, {}])]
    assert metrics.mean_per_layer(runs, 0, "g") == [2.0, 3.0]
    assert metrics.mean_per_layer(runs, -1, "g") == [4.0, 6.0]
    assert metrics.mean_per_layer(runs, 0, "other") == []


def test_stale_note_names_the_weights_and_the_command_only_for_a_stale_record():
    assert provenance.stale_note({"stale": "run 3 retrained"}, "`vixnb batch`") == (
        " **Measured from other weights than those stored now** (run 3 retrained): `vixnb batch` measures again.")
    assert provenance.stale_note({}, "`vixnb batch`") == ""


def test_median_memory_ratio_and_conv_gain_from_the_comparison_rows():
    rows = pd.DataFrame({"mechanism": ["Performer", "Performer", "Performer", "Linformer", synthesis.CONV_EMBEDDING,
                                       synthesis.CONV_EMBEDDING, synthesis.CONV_EMBEDDING],
                         "GPU memory ×": [0.5, None, 0.25, None, None, None, None],
                         "Δ top-1": [None, None, None, None, 1.5, -0.25, 3.0]})
    assert synthesis.median_memory_ratio(rows, "Performer") == "0.38"
    assert synthesis.median_memory_ratio(rows, "Linformer") == "not printed"
    assert synthesis.conv_embedding_gain(rows) == ("+1.50", "-0.25")
