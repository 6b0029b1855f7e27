"""vixnb.report.cost.views: measuring or reading back under the compute policy, the narrow views of the records,
Pareto fronts, correlations beside the favor paper's, the line fit, and the scaling sweep's tables."""
import importlib.machinery
import json
import sys
import types

import matplotlib
import pandas as pd
import pytest
import torch

import vixnb
import vixnb.runs.make
import vixnb.engine.train
from vixnb import measure as M
from vixnb import papers, record_kinds, report
from vixnb.measure import costs
from vixnb.report.cost import views as cost
from vixnb.results import ResultsStore

matplotlib.use("Agg")


def _fake_record(name, gb=None):
    prov = {"device": "fake GPU", "commit": "abc", "torch": torch.__version__}
    tr = {"status": "ok", "peak_reserved_gb": gb, "peak_allocated_gb": gb, "step_ms": 5.0} if gb else \
         {"status": M.CPU_MEMORY_NOTE, "step_ms": 5.0}
    inf = {"batches": [{"batch_size": 64, "status": "ok", "peak_allocated_gb": gb} if gb else
                       {"batch_size": 64, "status": M.CPU_MEMORY_NOTE}]}
    tp = {"images_per_s": 1000.0, "batch_size": 256}
    return {"model": name, "params_paper": 1234, "params_true": 2345, "size_mb": 1.5, "batch_size": 64,
            "flops": {"gmacs": 0.0123, "gflops": 0.0250, "favor_gflops": 0.0130},
            "training": {p: tr for p in M.PATHS}, "inference": {p: inf for p in M.PATHS},
            "throughput": {p: tp for p in M.PATHS}, "provenance": prov}


def _shape_record(name, gflops=0.02):
    """What ``shape_records`` gives: counts, no path measured."""
    rec = _fake_record(name)
    rec["flops"] = {"gmacs": gflops / 2, "gflops": gflops, "favor_gflops": gflops / 2}
    return {**rec, "training": {}, "inference": {}, "throughput": {}}


def _fake_sweep(device="fake GPU"):
    rows = []
    for n, ms in ((256, 1.0), (1024, 16.0)):
        for mech, scale in (("softmax (fused)", 1.0), ("softmax (materialised)", 2.0), ("linear", 0.5)):
            rows.append({"mechanism": mech, "tokens": n, "ms": ms * scale, "peak_mb": 10.0 * n * scale / 256,
                         "gflops": 0.01 * n, "estimate_gb": 0.001 * n * scale, "status": "ok", "batch": 8,
                         "dim": 128, "mode": "forward+backward", "dtype": "fp32", "provenance": {"device": device}})
    rows.append({**rows[-1], "tokens": 4096, "ms": None, "peak_mb": None, "gflops": 40.96, "status": "oom"})
    return rows


def _gpu(monkeypatch, available):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)


@pytest.fixture()
def fake_measuring(monkeypatch):
    calls = []

    def measure_many(models, **kwargs):
        calls.append(("models", kwargs))
        return [_fake_record(m, gb=0.5 + i) for i, m in enumerate(models)]

    def scaling_sweep(**kwargs):
        calls.append(("sweep", kwargs))
        return _fake_sweep()

    monkeypatch.setattr(costs, "measure_many", measure_many)
    monkeypatch.setattr(costs, "scaling_sweep", scaling_sweep)
    return calls


# --------------------------------------------------------------------------------------------------
# measuring, or reading back, under the compute policy

def _efficiency(monkeypatch, models, *, profile, compute="missing", root=None):
    """The favor chapter's efficiency record (``report.records.record``) in the store at ``root``, its one list of
    models (``record_kinds.efficiency_models``) narrowed to ``models`` for the test."""
    monkeypatch.setattr(record_kinds, "efficiency_models", lambda request: list(models))
    return report.records.record("efficiency", paper="favor", notebook="efficiency", dataset="cifar10", profile=profile,
                                 compute=compute, store=ResultsStore(root))


def test_settings_follow_the_profile(fake_measuring, monkeypatch, tmp_path):
    _gpu(monkeypatch, True)
    smoke = _efficiency(monkeypatch, ["vit"], profile="smoke", root=tmp_path)
    (_, models), (_, sweep) = fake_measuring
    assert models["device"] == "cpu" and models["depth"] == 1 and models["batch_size"] == 2
    assert models["iters"] == 2 and models["cpu_batch"] == 2 and sweep["tokens"] == (256, 1024)
    assert smoke["device"] == "cpu" and smoke["batch_size"] == 2
    fake_measuring.clear()
    _efficiency(monkeypatch, ["vit"], profile="budget", root=tmp_path)
    (_, models), (_, sweep) = fake_measuring
    assert models["device"] == "cuda" and "depth" not in models and models["batch_size"] == 64
    assert models["iters"] is None and models["steps"] == 2 and sweep["tokens"] == (256, 1024, 4096, 16384)
    fake_measuring.clear()
    costs.efficiency_record(["vit"], profile="paper", batch_size=8, tokens=[64], iters=5)
    (_, models), (_, sweep) = fake_measuring
    assert (models["batch_size"], models["iters"], sweep["tokens"]) == (8, 5, (64,))
    with pytest.raises(ValueError, match="compute='sometimes'"):
        _efficiency(monkeypatch, ["vit"], profile="budget", compute="sometimes", root=tmp_path)


def test_the_efficiency_record_is_saved_on_a_gpu_and_reads_back_on_a_cpu(fake_measuring, monkeypatch, tmp_path):
    _gpu(monkeypatch, True)
    run = _efficiency(monkeypatch, ["vit", "fnet"], profile="budget", root=tmp_path)
    assert run["source"] == "measured" and [r["model"] for r in run["records"]] == ["vit", "fnet"]
    assert [c[0] for c in fake_measuring] == ["models", "sweep"]
    assert fake_measuring[0][1]["device"] == "cuda" and fake_measuring[0][1]["steps"] == 2
    assert ResultsStore(tmp_path).record_path("measure", "efficiency", profile="budget").exists()
    # rebuilt on a CPU: the stored measurements, with their device and sweep sizes; nothing measured again
    _gpu(monkeypatch, False)
    back = _efficiency(monkeypatch, ["vit", "fnet"], profile="budget", root=tmp_path)
    assert len(fake_measuring) == 2 and back["source"] == "stored"
    assert back["device"] == "cuda" and sorted({r["tokens"] for r in back["sweep"]}) == [256, 1024, 4096]
    assert cost.cost_frame(back["records"]).shape[0] == 2
    assert "device: fake GPU" in report.records.provenance_line(back["records"])
    # compute="always" on a CPU has no GPU to measure on: the store's record, nothing measured
    again = _efficiency(monkeypatch, ["vit", "fnet"], profile="budget", compute="always", root=tmp_path)
    assert again["source"] == "stored" and len(fake_measuring) == 2


def test_gpu_profile_on_a_cpu_without_measurements_is_not_yet_run(fake_measuring, monkeypatch, tmp_path):
    _gpu(monkeypatch, False)
    assert _efficiency(monkeypatch, vixnb.list_models(), profile="paper", root=tmp_path) is None
    assert not fake_measuring
    run = {"records": [], "sweep": []}  # what the page shows then
    frame = cost.cost_frame(run["records"])
    assert frame.empty
    for view in ("size", "training", "inference"):
        assert report.tables.page_table(cost.cost_view(frame, view)).data == report.tables.NOT_YET_RUN
    for table in (cost.sweep_table([], "ms"), cost.crossover_table([], "softmax (fused)"),
                  cost.relative_memory([], tokens=1025)):
        assert report.tables.page_table(table).data == report.tables.NOT_YET_RUN
    pairs = cost.correlation_pairs(frame, {"FLOPS": cost.FAVOR_GFLOPS},
                                   cost.printed_correlations(papers.table("favor", "table2")))
    assert set(pairs["ours"]) == {"not yet run"} and len(pairs) == 15
    assert report.records.provenance_line(run["records"]) == "No measurement was made for this section."
    assert cost.line_fit(frame, cost.FAVOR_GFLOPS, "train GB alloc (authors)") is None
    assert cost.plot_pareto_fronts(frame, {}, {"params (true)": ("parameters", True)}) is None
    assert cost.plot_scaling(run["sweep"]) is None
    assert not list(tmp_path.rglob("*.json"))


@pytest.fixture()
def no_measuring(monkeypatch):
    """Nothing may be timed, measured on a GPU, stored or trained; counting shapes on the CPU is allowed."""
    def fail(*a, **k):
        pytest.fail("measured, stored or trained although compute='never'")

    def shapes_only(real):
        def counting(*args, **kwargs):
            if kwargs.get("paths") != () or kwargs.get("device") != "cpu":
                fail()
            return real(*args, **kwargs)
        return counting

    for name in ("measure_many", "measure", "measure_model"):
        monkeypatch.setattr(M, name, shapes_only(getattr(M, name)))
    for name in ("scaling_sweep", "save_measurements", "gpu_memory_column", "training_memory", "throughput"):
        monkeypatch.setattr(M, name, fail)
    monkeypatch.setattr(vixnb.runs.make, "train", fail)
    monkeypatch.setattr(ResultsStore, "save_record", fail)
    _gpu(monkeypatch, True)


@pytest.mark.parametrize("profile", ["budget", "smoke"])
def test_compute_never_measures_nothing_even_on_a_gpu(no_measuring, monkeypatch, tmp_path, profile):
    assert _efficiency(monkeypatch, ["fnet"], profile=profile, compute="never", root=tmp_path) is None
    runs = report.records.collect_runs(["fnet"], dataset="cifar10", profile=profile, seeds=[0], compute="never",
                                       progress=False)
    assert [r["status"] for r in runs] == ["not yet run"]  # smoke: not trained either
    # what needs no GPU is counted from shapes whatever the policy: parameters, Size MB, FLOPs
    counted = cost.shape_records(["fnet"])
    assert counted[0]["params_paper"] == papers.table("vix", "table1")["rows"]["fnet"]["params"]
    assert counted[0]["training"] == {} and counted[0]["provenance"]["device_type"] == "cpu"
    assert not list(tmp_path.rglob("*.json"))


def test_compute_never_reads_stored_measurements(no_measuring, monkeypatch, tmp_path):
    path = ResultsStore(tmp_path).record_path("measure", "efficiency", profile="budget")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"records": [_fake_record("vit", gb=1.0)], "sweep": _fake_sweep(),
                                      "device": "cuda", "batch_size": 64}))
    run = _efficiency(monkeypatch, ["vit"], profile="budget", compute="never", root=tmp_path)
    assert run["source"] == "stored" and cost.cost_frame(run["records"]).shape[0] == 1


@pytest.fixture()
def fake_timm(monkeypatch):
    timm = types.ModuleType("timm")
    timm.__spec__ = importlib.machinery.ModuleSpec("timm", None)
    timm.create_model = lambda name, pretrained: torch.nn.Identity()
    monkeypatch.setitem(sys.modules, "timm", timm)
    calls = []
    monkeypatch.setattr(costs, "measure_model", lambda model, **k: calls.append(k) or {"model": k["name"]})
    return calls


def test_references_are_counted_on_the_cpu_and_measured_on_a_gpu(fake_timm, fake_measuring, monkeypatch,
                                                                   tmp_path):
    cost.shape_records(["resnet50"])
    assert (fake_timm[-1]["device"], fake_timm[-1]["paths"]) == ("cpu", ())
    assert fake_timm[-1]["input_size"] == (3, 224, 224)
    _gpu(monkeypatch, True)
    run = _efficiency(monkeypatch, ["vit", "resnet50"], profile="budget", root=tmp_path)
    assert (fake_timm[-1]["device"], fake_timm[-1]["paths"]) == ("cuda", ("fused",))
    assert [r["model"] for r in run["records"]] == ["vit", "resnet50"]


def test_references_without_timm_say_so(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "timm" else real(name, *a))
    records = cost.shape_records(["resnet50"])
    assert records == [{"model": "resnet50", "status": "not measured: timm is not installed"}]
    view = cost.cost_view(cost.cost_frame(records), "size")
    assert view.loc["resnet50", "status"] == "not measured: timm is not installed"


def test_smoke_measures_on_the_cpu_into_the_smoke_store(fake_measuring, monkeypatch, tmp_path):
    _gpu(monkeypatch, False)
    run = _efficiency(monkeypatch, ["vit"], profile="smoke", root=tmp_path)
    assert fake_measuring[0][1]["device"] == "cpu" and fake_measuring[0][1]["depth"] == 1
    assert fake_measuring[0][1]["cpu_batch"] == 2 and fake_measuring[1][1]["tokens"] == (256, 1024)
    assert run["source"] == "measured"
    # kept as the smoke profile's training runs are (results/smoke/ is git-ignored): read back, not measured again
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.json")] == ["smoke/measure/efficiency.json"]
    assert _efficiency(monkeypatch, ["vit"], profile="smoke", root=tmp_path)["source"] == "stored"
    assert len(fake_measuring) == 2


# --------------------------------------------------------------------------------------------------
# the records as narrow tables

LABELS = {m: report.tables.label(m) for m in ("vit", "hybrid_vin", "fnet", "vip")}


def test_cost_views_are_narrow_with_display_labels():
    frame = cost.cost_frame([_fake_record("vit", gb=1.0), _fake_record("hybrid_vin", gb=2.0)])
    size = cost.cost_view(frame, "size", labels=LABELS)
    assert list(size.index) == ["ViT", "Hybrid ViN"] and size.shape[1] == 6
    assert size.loc["ViT", "params (true)"] == 2345 and size.loc["ViT", "GFLOPs (favor convention)"] == 0.013
    training = cost.cost_view(frame, "training", labels=LABELS)
    assert training.shape[1] == 6 and training.loc["Hybrid ViN", ("fused", "GB reserved")] == 2.0
    assert list(training.columns)[:3] == [("authors", "GB reserved"), ("authors", "GB allocated"),
                                          ("authors", "step ms")]
    inference = cost.cost_view(frame, "inference", labels=LABELS)
    assert inference.loc["ViT", ("fused", "at batch")] == 256 and isinstance(inference.iloc[0, 2], int)
    html = report.tables.page_table(size).to_html()
    assert "2,345" in html and "0.0123" in html and "nan" not in html.lower()


def test_rows_follow_the_order_and_empty_cells_say_why():
    records = [_fake_record("vit", gb=1.0), {"model": "fnet", "status": "error: RuntimeError: boom"}]
    view = cost.cost_view(cost.cost_frame(records), "size", order=["fnet", "vip", "vit"], labels=LABELS)
    assert list(view.index) == ["FNet", "ViP", "ViT"]
    assert view.loc["FNet", "GFLOPs"] == "error: RuntimeError: boom" and view.loc["ViP", "GFLOPs"] == "not yet run"
    assert view.loc["ViT", "GFLOPs"] == 0.025


def test_cpu_memory_reads_na_cpu_beside_cpu_timings():
    frame = cost.cost_frame([_fake_record("vit")])
    assert "n/a (cpu)" in report.tables.page_table(cost.cost_view(frame, "training")).to_html()
    assert "1,000" in report.tables.page_table(cost.cost_view(frame, "inference")).to_html()


def test_training_memory_comes_from_the_stored_batch64_measurement():
    stored = {"rows": {"vit": {"GPU GB reserved, authors (fp32)": 9.37, "GPU GB allocated, authors (fp32)": 8.4,
                               "GPU GB reserved, fused (fp32)": 1.99, "GPU GB allocated, fused (fp32)": "oom",
                               "step ms, authors (fp32)": 12.0}},
              "provenance": {"device": "H100", "commit": "abc", "measured": "2026-01-01T00:00:00Z"}}
    frame = cost.cost_frame([_shape_record("vit"), _shape_record("fnet")], training_memory=stored)
    view = cost.cost_view(frame, "training", labels=LABELS)
    assert view.loc["ViT", ("authors", "GB reserved")] == 9.37 and view.loc["ViT", ("fused", "GB allocated")] == "oom"
    assert view.loc["FNet", ("fused", "GB reserved")] == "not yet run"
    assert ("authors", "step ms") not in view.columns  # another measurement's step times are not taken
    assert frame.attrs["training_memory"] == [stored]
    assert "device: H100" in report.records.provenance_line(frame.attrs["training_memory"])
    # the records' own training memory, where measured, is not replaced
    measured = cost.cost_frame([_fake_record("vit", gb=1.0)], training_memory=stored)
    assert measured.loc["vit", "train GB (authors)"] == 1.0 and measured.attrs["training_memory"][0]["model"] == "vit"


# --------------------------------------------------------------------------------------------------
# Pareto fronts, correlations, the line fit

def test_pareto_front():
    # (memory, accuracy): lower memory and higher accuracy are better
    xs = [1.0, 2.0, 3.0, 2.5, None]
    ys = [50.0, 60.0, 70.0, 55.0, 99.0]
    assert cost.pareto_front(xs, ys) == [0, 1, 2]
    assert cost.pareto_front([10, 20], [1, 2], x_lower_is_better=False) == [1]
    assert cost.pareto_front([1.0, float("nan"), 2.0], [5.0, 9.0, 4.0]) == [0]


def test_favor_numbers_match_the_paper_text(paper_text):
    """vixnb/papers/favor.yaml is a faithful transcription of the favor paper's Table 2 and fit."""
    text = paper_text("favor")
    table = cost.printed_correlations(papers.table("favor", "table2"))
    printed = {"FLOPS": "FLOPS", "θ": "$\\theta$", "FT Time": "FT Time", "FFwd Time": "FFwd Time",
               "FFwd Mem": "FFwd Memory"}
    for row, label in printed.items():
        line = next(line for line in text.splitlines() if line.startswith(label + "\t"))
        cells = [float(v) if v else None for v in line.split("\t")[1:]]
        ours = [None if pd.isna(v) else v for v in table.loc[row].tolist()]
        assert ours == cells, row
    fit = papers.load("favor")["ram_fit"]
    assert f"{fit['slope_gb_per_gflop']:.2f} \\cdot GFlops + {fit['intercept_gb']:.2f}" in text


def test_favor_table1_matches_the_paper_text(paper_text):
    """Every cell of favor.yaml's Table 1 (19 rows: the DeiT mark, the original top-1 with its ↑/↓/* mark, the new
    top-1 and the printed difference) equals the paper's table, row by row in printed order."""
    text = paper_text("favor")
    block = text[text.index("Model\tDeiT\tOrig."):text.index("Table 1: ImageNet-1k")]
    printed = [line.split("\t") for line in block.splitlines()[2:] if line.strip()]
    rows = list(papers.table("favor", "table1")["rows"].values())
    assert len(printed) == len(rows) == 19
    for row, (label, deit, orig, new, delta) in zip(rows, printed):
        mark = orig.replace(" <sup>*</sup>", "*")
        assert row["label"] == label and row["deit_based"] == (deit == "$\\checkmark$"), label
        assert f"{row['orig_top1']}{row.get('orig_mark', '')}" == mark, label
        assert (row["top1"], row["delta"]) == (float(new), float(delta.replace(" ", ""))), label
    shown = cost.printed_accuracy_table(papers.table("favor", "table1"))
    assert shown.loc["CvT-13", "orig. top-1"] == "83.3↑" and shown.loc["TokenLearner-ViT-8", "orig. top-1"] == "77.87↓"
    assert shown.loc["XCiT-S", "orig. top-1"] == "82.0" and shown.loc["ViT-S (DeiT III)", "Δ"] == "-0.06"
    assert sum(r["deit_based"] for r in rows) == 9 and sum("orig_mark" in r for r in rows) == 4


def test_correlation_pairs_beside_the_papers():
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0], "y": [2.0, 4.1, 5.9, 8.2], "z": [1.0, "oom", None, 2.0]},
                         index=list("abcd"))
    printed = pd.DataFrame({"B": [0.5, None], "C": [0.2, 0.9]}, index=["A", "B"])
    pairs = cost.correlation_pairs(frame, {"A": "x", "B": "y", "C": "z"}, printed)
    assert list(pairs.index) == ["A – B", "A – C", "B – C"]
    assert pairs.loc["A – B", "ours"] == pytest.approx(frame["x"].corr(frame["y"]))
    assert pairs.loc["A – B", "paper"] == 0.5 and pairs.loc["A – B", "models"] == 4
    assert pairs.loc["A – C", "ours"] == "not yet run" and pairs.loc["A – C", "models"] == 2  # only a and d
    assert "nan" not in report.tables.page_table(pairs, decimals=2).to_html().lower()


def test_line_fit_and_fits_side_by_side():
    frame = pd.DataFrame({"gf": [0.1, 0.2, 0.4, None], "gb": [0.7, 0.9, 1.3, 5.0]}, index=list("abcd"))
    fit = cost.line_fit(frame, "gf", "gb")
    assert fit["slope"] == pytest.approx(2.0) and fit["intercept"] == pytest.approx(0.5)
    assert fit["pearson_r"] == pytest.approx(1.0) and fit["points"] == 3
    assert cost.line_fit(frame.iloc[:2], "gf", "gb")["pearson_r"] is None
    assert cost.line_fit(frame.iloc[:1], "gf", "gb") is None and cost.line_fit(frame, "gf", "absent") is None
    table = cost.fits_frame({"paper": {"slope": 25.43, "intercept": 25.5, "pearson_r": 0.85}, "ours": None})
    assert table.loc["ours", "slope"] == "not yet run" and table.loc["paper", "models"] is None
    html = report.tables.page_table(cost.fits_frame({"paper": {"slope": 25.43}, "ours": fit}), decimals=2).to_html()
    assert "2.00" in html and ">3<" in html  # the count of models stays whole


def test_figures_name_what_they_show():
    frame = cost.cost_frame([_fake_record("vit", gb=1.0), _fake_record("fnet", gb=2.0), _fake_record("vip", gb=3.0)])
    frame.loc["fnet", "params (true)"] = 1000
    accuracy = {"vit": 60.0, "fnet": 50.0, "vip": float("nan")}
    fig = cost.plot_pareto_fronts(frame, accuracy, {"params (true)": ("parameters", True),
                                                    "train GB (fused)": ("training memory", True),
                                                    "absent": ("throughput", False)}, labels=LABELS)
    labels = {t.get_text() for ax in fig.axes for t in ax.texts}
    assert {"ViT", "FNet"} <= labels and "ViP" not in labels
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 2
    assert any("throughput" in t.get_text() for t in fig.texts)
    fit = cost.line_fit(frame, cost.FAVOR_GFLOPS, "train GB alloc (authors)")
    fig = cost.plot_line_fit(frame, cost.FAVOR_GFLOPS, "train GB alloc (authors)", fit, labels=LABELS,
                             reference=(25.43, 25.5, "favor paper"))
    assert {"favor paper", f"ours: {fit['slope']:.2f} x + {fit['intercept']:.2f}"} <= {
        t.get_text() for t in fig.axes[0].get_legend().get_texts()}
    assert len(cost.plot_scaling(_fake_sweep()).axes) == 3


# --------------------------------------------------------------------------------------------------
# the scaling sweep

def test_sweep_crossover_and_relative_memory_tables():
    rows = _fake_sweep()
    assert cost.sweep_table(rows, "ms").loc["linear", 4096] == "oom"
    assert cost.sweep_table(rows, "peak_mb").loc["linear", 1024] == pytest.approx(20.0)
    assert cost.sweep_table(rows, "gflops").loc["linear", 4096] == pytest.approx(40.96)  # shapes: known when oom
    cpu_rows = [{**r, "peak_mb": None} for r in rows]
    assert cost.sweep_table(cpu_rows, "peak_mb").empty
    cross = cost.crossover_table(rows, "softmax (fused)")
    assert cross.loc["linear", "ms per step"] == "all sizes" and "peak MB" in cross.columns
    assert "peak MB" not in cost.crossover_table(cpu_rows, "softmax (fused)").columns
    near = cost.relative_memory(rows, tokens=1025)
    assert near.attrs["tokens"] == 1024
    assert near.loc["softmax (materialised)", "× fused softmax"] == pytest.approx(2.0)
    assert near.loc["linear", "× materialised softmax"] == pytest.approx(0.25)
    estimate = cost.relative_memory(cpu_rows, tokens=300, metric="estimate_gb")
    assert estimate.attrs["tokens"] == 256 and "estimate GB" in estimate.columns


def test_smoke_pages_leave_out_cells_tagged_remove_in_smoke(tmp_path):
    import nbformat

    from vixnb.book import execute as notebooks

    for profile, removed in (("smoke", True), ("budget", False)):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title"),
                                             nbformat.v4.new_code_cell("1", metadata={"tags": ["remove-in-smoke"]})])
        path = tmp_path / f"{profile}.ipynb"
        nbformat.write(nb, path)
        notebooks.mark_executed_copy(path, profile)
        tags = nbformat.read(path, as_version=4).cells[1].metadata["tags"]
        assert ("remove-cell" in tags) == removed


def test_log_axes_print_plain_tick_labels_and_an_odd_last_panel_spans_its_row():
    """Issue 47: the Pareto and memory-fit figures printed their log ticks as raw mathtext ($\\mathdefault{10^{6}}$:
    a figure of plain text does not parse it), and three Pareto panels left a fourth, empty one."""
    from vixnb.report.cost.views import line_fit, plot_line_fit, plot_pareto_fronts

    frame = pd.DataFrame({"params": [1e5, 5e5, 2e6, 9e6], "gflops": [0.3, 0.6, 1.0, 1.8], "mem": [1.1, 1.4, 1.8, 3.6]},
                         index=list("abcd"))
    pareto = plot_pareto_fronts(frame, dict(zip("abcd", (35, 50, 60, 70))), {
        "params": ("parameters", True), "gflops": ("GFLOPs", True), "mem": ("memory", True)})
    fit = plot_line_fit(frame, "gflops", "mem", line_fit(frame, "gflops", "mem"), reference=(4, 2, "paper"))
    for fig in (pareto, fit):
        fig.canvas.draw()
        ticks = [t.get_text() for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                 for t in axis.get_ticklabels(which="both")]
        assert ticks and not [t for t in ticks if "$" in t or "mathdefault" in t], ticks
    assert "10⁶" in [t.get_text() for t in pareto.axes[0].get_xticklabels()]
    assert len(pareto.axes) == 3 and all(ax.get_visible() for ax in pareto.axes)
    assert pareto.axes[2].get_position().width > 1.8 * pareto.axes[0].get_position().width  # the last spans its row
