"""The arithmetic the pages show, moved out of the notebooks into ``vixnb/report``: exact values on small inputs."""
from types import SimpleNamespace

import pandas as pd
import pytest

from vixnb.report.claims import synthesis
from vixnb.report.figures import charts
from vixnb.report.figures import maps as map_figures
from vixnb.report.records import collect, metrics, provenance
from vixnb.report.tables import architecture, compare


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
    # the summary table's median is the same figure (issue 56: it printed 0.19× where the text said 0.18)
    rows = rows.assign(document="vix Table 1", **{"Δ top-1 ours": None})
    summary = synthesis.mechanism_summary(rows, pd.DataFrame(columns=["mechanism", "ours"]))
    assert summary.at["Performer", (synthesis.PRINTED, "GPU memory vs softmax (median)")] == "0.38×"


def test_a_superseded_mixer_is_quoted_from_the_benchmark_that_measures_its_form_today(tmp_path):
    """Issue 56: the intro pointed at `vixnb bench mixers` for a Nyström figure that `nystrom-variants-2` stores."""
    import json

    from vixnb.results import ResultsStore

    bench = tmp_path / "bench"
    bench.mkdir()
    row = {"tokens": synthesis.VIX_TOKENS, "status": "ok", "ms": 2.0, "peak_mb": 300.0}
    mixers = {"provenance": {"dtype": "bf16", "device": "NVIDIA H100 80GB HBM3"},
              "superseded": {"rows": ["nystrom"], "reason": "ran as the band"},
              "rows": [{**row, "kind": "softmax", "mechanism": "softmax (fused)"},
                       {**row, "kind": "nystrom", "mechanism": "nystrom", "ms": 9.0}]}
    (bench / "mixers-bf16.json").write_text(json.dumps(mixers))
    costs = synthesis.fused_costs(store=ResultsStore(tmp_path))
    assert "Nyströmformer" not in costs.index
    assert synthesis.left_out_note(costs).endswith("superseded (ran as the band); `vixnb bench mixers` measures them "
                                                   "again.")
    variants = {"provenance": {"device": "NVIDIA H100 80GB HBM3"}, "config": {"tokens": synthesis.VIX_TOKENS,
                                                                             "batch": 64},
                "rows": [{"mechanism": "nystrom: conv residual", "dtype": "bf16", "ms": 5.666, "peak_mb": 390.3,
                          "status": "ok", "x_fused_softmax": 3.147}]}
    for n in (1, 2):
        (bench / f"nystrom-variants-{n}.json").write_text(json.dumps(variants if n == 2 else {"rows": []}))
    note = synthesis.left_out_note(synthesis.fused_costs(store=ResultsStore(tmp_path)))
    assert note == (" Nyströmformer's stored rows (bf16, H100) are not quoted: superseded (ran as the band); its form "
                    "today, measured in another session: 5.67 ms, 390 MB in bf16 (the residual as a convolution; 3.15× "
                    "that record's fused softmax) (`nystrom-variants-2`, H100, batch 64).")


def test_the_maps_grids_put_a_status_where_a_run_is_not_done():
    from vixnb.report.tables import maps as map_tables

    runs = {"A": _run(rollout=["r0", "r1"], centre_query=[["c0", "c1", "c2"]], layers=[1, 2, 3],
                      methods={m: {"maps": [f"{m}0", f"{m}1"]} for m in map_tables.ATTRIBUTION_METHODS}),
            "B": _run("missing")}
    assert map_tables.rollout_rows(runs, 2) == {"A": ["r0", "r1"], "B": ["missing", "missing"]}
    assert map_tables.centre_query_rows(runs, ["A", "B"]) == {"A": ["c0", "c1", "c2"], "B": ["missing"] * 3}
    assert map_tables.centre_query_rows(runs, ["B"]) == {}
    assert map_tables.attribution_rows(runs, 2) == {
        "A, image 1": ["integrated_gradients0", "occlusion0", "grad_cam0"],
        "A, image 2": ["integrated_gradients1", "occlusion1", "grad_cam1"],
        "B, image 1": ["missing"] * 3, "B, image 2": ["missing"] * 3}


def test_map_groups_adds_the_other_mapped_runs_by_their_paper_table():
    from vixnb.report.tables import maps as map_tables

    study = {"X": {"paper": "vix", "table": "table1"}, "Y": {"paper": "cxv", "table": "table2"},
             "Z": {"paper": "cxv", "table": "table2"}, "W": {"paper": "vix", "table": "table1"}}
    maps = {"X": {"map": "softmax", "draws": True}, "Y": {"map": "a kernel map", "draws": True},
             "Z": {"map": "no attention map: mixing", "draws": False}, "W": {"map": "softmax", "draws": True}}
    groups = {"first": ["X"]}
    assert map_tables.map_groups(groups, study, maps) == {"first": ["X"], "vix table1": ["W"], "cxv table2": ["Y"]}
    assert groups == {"first": ["X"]}


def test_per_layer_groups_average_over_heads_and_leave_out_an_unmeasured_group():
    from vixnb.report.tables import maps as map_tables

    runs = {"A": _run(entropy=[[1.0, 3.0], [2.0, 2.0]]), "B": _run("failed")}
    assert map_tables.over_heads(runs["A"], "entropy") == [2.0, 2.0] and map_tables.over_heads(runs["B"], "x") == []
    panels = map_tables.per_layer_groups(runs, {"g": ["A", "B", "C"], "none": ["C"]}, {"entropy": "entropy"})
    assert panels == {"g": {"entropy": {"A": [2.0, 2.0], "B": []}}}


def test_approximation_panels_give_each_layers_error_per_count():
    from vixnb.report.tables import maps as map_tables

    per = lambda tv, fro: {"per_layer": {"tv": tv, "frobenius": fro}}  # noqa: E731
    errors = {"layers": 2, "performer": {"8": per([0.5, 0.4], [1.0, 0.9]), "16": per([0.3, 0.2], [0.7, 0.6])},
              "nystrom": {"4": per([0.1, 0.2], [0.2, 0.3])}}
    assert map_tables.approximation_panels(errors) == {
        "row total variation": {"performer (features)": ([8, 16], [[0.5, 0.3], [0.4, 0.2]]),
                                "nystrom (landmarks)": ([4], [[0.1], [0.2]])},
        "relative Frobenius error": {"performer (features)": ([8, 16], [[1.0, 0.7], [0.9, 0.6]]),
                                     "nystrom (landmarks)": ([4], [[0.2], [0.3]])}}


def test_randomisation_checks_one_row_per_done_run_with_the_learned_part_where_measured():
    from vixnb.report.tables import maps as map_tables

    runs = {"A": _run(randomised_layers=2, layers=[0, 1, 2], randomisation={"rank_correlation": 0.25, "changed": True}),
            "S": _run(randomised_layers=1, layers=[0], randomisation={"rank_correlation": 0.9, "changed": False},
                      randomisation_learned={"rank_correlation": 0.1, "changed": True}),
            "N": _run("missing")}
    frame = map_tables.randomisation_checks(runs)
    assert list(frame.index) == ["A", "S"]
    assert frame.loc["S"].to_dict() == {"layers re-drawn": "1 of 1", "rank correlation": 0.9, "changed": "no",
                                        "rank correlation, βA": 0.1, "changed, βA": "yes"}
    assert frame.loc["A", ["layers re-drawn", "rank correlation", "changed"]].to_dict() == {
        "layers re-drawn": "2 of 3", "rank correlation": 0.25, "changed": "yes"}


def test_attribution_agreement_curves_and_areas():
    from vixnb.report.tables import maps as map_tables

    methods = {"integrated_gradients": "IG", "occlusion": "Occlusion"}
    done = _run(agreement={"methods": ["integrated_gradients", "occlusion"], "matrix": [[1.0, 0.5], [0.5, 1.0]]},
                methods={"integrated_gradients": {"delta": [-0.5, 0.25], "fractions": [0, 1], "deletion": [1, 0],
                                                  "deletion_auc": [0.5, 0.25]},
                         "occlusion": {"fractions": [0, 1], "deletion": [1, 0.5], "deletion_auc": [0.75]}})
    runs = {"A": done, "B": _run("failed")}
    agreement = map_tables.attribution_agreement(runs, methods)
    assert agreement.loc["A", ["IG / Occlusion", "IG error"]].to_dict() == {"IG / Occlusion": 0.5, "IG error": 0.375}
    assert agreement.at["B", "status"] == "failed"
    assert map_tables.attribution_curves(runs, "deletion", methods) == {
        "deletion, IG": {"A": ([0, 1], [1, 0])}, "deletion, Occlusion": {"A": ([0, 1], [1, 0.5])}}
    assert map_tables.attribution_areas(runs, "deletion", methods).to_dict(orient="index") == {
        "A": {"IG": "0.375 ± 0.177", "Occlusion": "0.750 ± 0.000"}, "B": {"IG": "failed", "Occlusion": "failed"}}


def test_not_measured_names_the_studys_command():
    from vixnb.report.tables import maps as map_tables

    text = map_tables.not_measured("attention", "budget").data
    assert text.startswith("**Not yet run.** `vixnb batch --profile budget --only maps-attention-")
    assert "`vixnb plan --profile budget` gives the GPU time" in text


class _Built:
    def __init__(self, name, **overrides):
        self.name, self.overrides = name, overrides


def _fake_models(monkeypatch, sizes):
    monkeypatch.setattr(architecture, "create_model", lambda name, dataset, **o: _Built(name, **o))
    monkeypatch.setattr(architecture, "count_params", lambda m, convention="paper": (
        sizes[m.name] + (7 if m.overrides else 0) + (1 if convention == "true" else 0)))
    monkeypatch.setattr(architecture, "paper_macs", lambda m: 2e9 * sizes[m.name])
    monkeypatch.setattr(architecture, "flops", lambda m, path: {"macs": 3e9 * sizes[m.name]})
    return architecture


def test_model_costs_and_parameter_counts_of_the_models_as_built(monkeypatch):
    _fake_models(monkeypatch, {"a": 2_000_000, "a_rope": 2_000_010})
    assert architecture.model_costs(["a"]).loc["a"].to_dict() == {"params M (paper convention)": 2.0,
                                                      "params M (true)": 2.000001, "paper MACs G": 4e6,
                                                      "all MACs G": 6e6}
    assert architecture.parameter_counts([("A", "a_rope", "a")], "cifar10").loc["A"].to_dict() == {
        "paper convention": 2_000_010, "without RoPE": 2_000_000, "true": 2_000_011, "true, without RoPE": 2_000_001}


def test_levit_anomalies_set_the_printed_count_beside_the_architecture(monkeypatch):
    _fake_models(monkeypatch, {"levip": 100, "levin": 90, "levit": 200})
    table3 = pd.DataFrame({"params": [1100, 2000]}, index=["levip", "levit"])
    assert architecture.levit_anomalies(table3).to_dict(orient="index") == {
        "LeViP": {"printed": 1100, "architecture": 100, "check": "LeViN + 1,008 = 1,098",
                  "printed − architecture": 1000},
        "LeViT": {"printed": 2000, "architecture": 200, "check": "with the bias table: 207",
                  "printed − architecture": 1800}}


def test_accuracy_points_softmax_families_and_rope_deltas():
    points = charts.accuracy_points(pd.Series({"a": 1.5}), pd.Series({"a": 80.0}), {"a": "A"})
    assert points.to_dict(orient="index") == {"A": {"GB": 1.5, "top-1": 80.0}}
    assert architecture.softmax_of(["vit", "vip", "hybrid_vit", "hybrid_vip"], ["vil"]) == {
        "vit": "vit", "vip": "vit", "hybrid_vit": "hybrid_vit", "hybrid_vip": "hybrid_vit", "vil": "vit"}
    table1 = pd.DataFrame({"top1": [70.0]}, index=["vin"])
    table6 = pd.DataFrame({"top1": [72.5]}, index=["vin_rope"])
    delta = compare.rope_deltas(["vin_rope"], {"vin_rope": "vin"}, pd.DataFrame({"top1 best": {"vin_rope": 60.0}}),
                                pd.DataFrame(), table6, table1, {"vin": "ViN"})
    assert delta.loc["ViN"].to_dict() == {("paper", "learned"): 70.0, ("paper", "RoPE"): 72.5, ("paper", "Δ"): 2.5,
                                          ("ours", "learned"): None, ("ours", "RoPE"): 60.0, ("ours", "Δ"): None}


def test_times_against_the_reference_run():
    def seeds(epoch, test):
        return [_run(history=[{"seconds": 99.0, "eval_seconds": 99.0}, {"seconds": epoch, "eval_seconds": test}])]
    printed = {"vit": {"epoch_s": 10.0, "test_s": 2.0}, "vil": {"epoch_s": 5.0, "test_s": 1.0}}
    frame = compare.times_against(printed, {"vit": seeds(4.0, 1.0), "vil": seeds(2.0, 0.5)},
                                  {"vit": "ViT", "vil": "ViL"}, "vit")
    assert frame.loc["ViL"].to_dict() == {("epoch, × ViT", "ours"): 0.5, ("epoch, × ViT", "report"): 0.5,
                                          ("test pass, × ViT", "ours"): 0.5, ("test pass, × ViT", "report"): 0.5,
                                          ("epoch (s)", "ours"): 2.0, ("epoch (s)", "report"): 5.0}
    assert compare.ratio(None, 2.0) is None and compare.ratio(1.0, 0) is None and compare.ratio(1.0, 4.0) == 0.25


def test_the_optimizer_pairs_trios_and_patience_rows_of_a_paper_table(monkeypatch):
    tables = {"t3": {"dataset": "cifar100", "rows": {
                  "cnv": {"label": "CNV, DualOpT", "top1": 80.0},
                  "cnv_adamw": {"model": "cnv", "settings": {"optimizer": "adamw"}, "top1": 78.0}}},
              "alone": {"rows": {"cnv_sgd": {"model": "cnv"}}},
              "patience": {"rows": {"cnv_sgd_p": {"model": "cnv"}}}}
    monkeypatch.setattr(compare.papers, "table", lambda paper, name: tables[name])
    assert compare.optimizer_pairs("p", "t3") == [("CNV", "cnv", "cnv_adamw")]
    assert compare.model_trios("p", "t3", "alone") == [("CNV", "cnv", "cnv_sgd", "cnv_adamw")]
    assert compare.same_model_rows("p", "alone", "patience") == {"cnv_sgd": "cnv_sgd_p"}
    assert collect.table_compute("p", "t3", "smoke", "missing") == "never"
    assert collect.table_compute("p", "t3", "budget", "missing") == "missing"
    printed = pd.DataFrame({"top1": [80.0, 78.0], "increase_pct": [2.5641, None]}, index=["cnv", "cnv_adamw"])
    assert compare.printed_change(printed, [("CNV", "cnv", "cnv_adamw")]) == ["78.00 → 80.00 (2.56 %)"]


def test_the_predictions_grid_marks_each_prediction_and_the_per_class_panel_replaces_the_first():
    predicted = {"dataset": "synthetic", "panel": [0, 1], "labels": [3, 1],
                 "runs": {"a": {"status": "done", "predicted": [3, 2]}, "b": {"status": "missing"}},
                 "per_class": {"panel": [5], "labels": [0], "predicted": {"a": [0]}}}
    rows, columns = map_figures.prediction_grid(predicted, {"a": "A"})
    assert columns == ["class 3", "class 1"]
    assert rows["A"] == ["class 3 ✓", "class 2 ✗"] and list(rows) == ["test image", "A"]
    chosen = map_figures.chosen_predictions(predicted, "per_class")
    assert (chosen["panel"], chosen["labels"], chosen["runs"]["a"]["predicted"], chosen["runs"]["b"]["predicted"]) == (
        [5], [0], [0], None)
    assert map_figures.chosen_predictions(predicted, "first") is predicted
    assert map_figures.chosen_predictions(None, "per_class") is None
    with pytest.raises(ValueError, match="per_class"):
        map_figures.chosen_predictions(predicted, "random")


def test_transfer_counts_name_the_new_tensors():
    found = SimpleNamespace(loaded=["a.w", "b.w"], new=["blocks.0.attn.proj", "blocks.1.attn.proj", "x.gate"],
                            unused=[])
    assert architecture.transfer_counts(found) == {"loaded": 2, "new": 3, "unused": 0, "new tensors": "gate, proj"}
    assert architecture.transfer_counts(SimpleNamespace(loaded=[], new=[], unused=["u"]))["new tensors"] == "none"


def test_row_labels_keep_the_first_tables_label(monkeypatch):
    tables = {"t1": {"rows": {"a": {"label": "A first"}, "b": {}}}, "t2": {"rows": {"a": {"label": "A again"},
                                                                                    "c": {"label": "C"}}}}
    monkeypatch.setattr(compare.papers, "table", lambda paper, name: tables[name])
    assert compare.row_labels("p", ["t1", "t2"]) == {"a": "A first", "b": "b", "c": "C"}


def test_alone_frame_sets_the_method_against_one_optimizer_alone_at_its_budget_and_to_patience(monkeypatch):
    tables = {"t3": {"rows": {"cnv": {"label": "CNV, DualOpT", "top1": 80.0},
                              "cnv_adamw": {"model": "cnv", "settings": {"optimizer": "adamw"}, "top1": 78.0}}},
              "alone": {"rows": {"cnv_sgd": {"model": "cnv"}}}, "patience": {"rows": {"cnv_sgd_p": {"model": "cnv"}}}}
    monkeypatch.setattr(compare.papers, "table", lambda paper, name: tables[name])
    monkeypatch.setattr(compare, "compare_pairs", lambda pairs, runs, metrics, names: pd.DataFrame(
        {names[0]: [f"{a}" for _, a, _ in pairs], names[1]: [f"{b}" for _, _, b in pairs],
         "beyond 2 SE": [f"{a}>{b}" for _, a, b in pairs]}, index=[label for label, _, _ in pairs]))
    frame = compare.alone_frame("p", "t3", "alone", "patience", runs={})
    assert frame.loc["CNV"].to_dict() == {
        "paper: AdamW, DualOpT, SGD alone": "78.00, 80.00, —", "AdamW alone": "cnv_adamw", "DualOpT": "cnv",
        "SGD alone": "cnv_sgd", "beyond 2 SE": "cnv>cnv_sgd", "SGD to patience": "cnv_sgd_p",
        "beyond 2 SE (to patience)": "cnv>cnv_sgd_p"}


def test_transfer_preview_builds_both_models_on_the_meta_device_as_the_profile_shrinks_them(monkeypatch):
    import torch

    built = []

    def create(name, dataset, **settings):
        built.append((name, dataset, settings, torch.empty(1).device.type))
        return SimpleNamespace(state_dict=lambda: {"from": name})
    monkeypatch.setattr(compare.papers, "row_run",
                        lambda paper, table, row: ("vil", {"init_from": "vit_scratch", "lr": 1}))
    monkeypatch.setattr(architecture, "create_model", create)
    monkeypatch.setattr(architecture, "transfer", lambda state, target: (state, target))
    state, _ = architecture.transfer_preview("linattn", "test", "vil_checkpoint", {"depth": 2})
    assert state == {"from": "vit_b16_224"}
    assert built == [("vit_b16_224", "cifar10", {"depth": 2}, "meta"),
                     ("vil", "cifar10", {"lr": 1, "depth": 2}, "meta")]
