"""vixnb.report's page pieces: runs and measurements collected under the compute policy (nothing trained or
measured with ``compute="never"``, even where a GPU is faked as available), ours beside the paper's with
deltas, the banner and provenance lines, and the figures."""
import math

import pandas as pd
import pytest
import torch

from vixnb.runs import spec as runspec
from vixnb import measure as M
from vixnb import papers, report
from vixnb.runs.spec import run_config
from vixnb.results import ResultsStore
from vixnb.runs import make as runs
from vixnb.runs.policy import obtain_record

COMPARABLE = report.tables.PAPER_COMPARABLE_GPU


@pytest.fixture
def fake_gpu(monkeypatch):
    """torch says a GPU is there; training or measuring anything fails the test."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))  # an H100: bf16, as the store's runs
    monkeypatch.setattr(runs, "train", lambda *a, **k: pytest.fail("trained although nothing may be trained"))
    monkeypatch.setattr(M, "gpu_memory_column", lambda *a, **k: pytest.fail("measured although compute='never'"))


def _done(model, profile, top1, seed=0, **extra):
    config = run_config(model, profile=profile, seed=seed)
    ResultsStore().put(config, {"status": "done", "top1": top1, "top5": 99.0, **extra,
                                "provenance": {"device": "fake GPU", "commit": "abc123", "seed": seed,
                                               "finished": "2025-03-04T05:06:07Z"}})


def _saved_memory(rows, **provenance):
    ResultsStore().save_record("measure", "vix-gpu-memory-cifar10-b64", {
        "rows": rows, "provenance": {"device": "fake GPU", "commit": "abc", "measured": "2025-03-04T05:06:07Z",
                                     "batch_size": 64, **provenance}}, profile="budget")


@pytest.mark.parametrize("profile", ["smoke", "budget"])
def test_collect_runs_with_compute_never_only_reads_the_store(fake_gpu, profile):
    _done("fnet", profile, 42.0)
    for _ in range(2):
        vit, fnet = report.records.collect_runs(["vit", "fnet"], dataset="cifar10", profile=profile, seeds=[0],
                                                compute="never", progress=False)
        assert vit["status"] == "not yet run" and "no stored result" in vit["reason"]
        assert fnet["status"] == "done" and fnet["top1"] == 42.0


def test_collect_runs_marks_a_missing_data_set_not_yet_run_with_the_command(monkeypatch, tmp_path):
    monkeypatch.setenv("VIXNB_DATA", str(tmp_path / "no-data"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    (run,) = report.records.collect_runs(["vit"], dataset="tiny-imagenet", profile="budget", seeds=[0], progress=False)
    assert run["status"] == "not yet run"
    assert "vixnb train vit --dataset tiny-imagenet --profile budget --download" in run["reason"]


def test_gpu_memory_with_compute_never_reads_the_saved_measurement(fake_gpu, monkeypatch):
    class Measured(Exception):
        pass

    def measuring(*a, **k):
        raise Measured

    args = dict(paper="vix", dataset="cifar10", profile="budget")
    assert report.records.gpu_memory(["vit"], compute="never", **args) is None
    _saved_memory({"vit": {COMPARABLE: 1.5}})
    monkeypatch.setattr(ResultsStore, "save_record", lambda *a, **k: pytest.fail("saved although compute='never'"))
    record = report.records.gpu_memory(["vit"], compute="never", **args)
    assert record["rows"]["vit"][COMPARABLE] == 1.5 and record["provenance"]["device"] == "fake GPU"
    assert report.records.gpu_memory(["vit"], compute="missing", **args) == record  # stored: not measured again
    monkeypatch.setattr(M, "gpu_memory_column", measuring)
    with pytest.raises(Measured):
        report.records.gpu_memory(["vit"], compute="always", **args)


def test_obtain_follows_the_policy(monkeypatch):
    store, calls = ResultsStore(), []

    def make():
        calls.append(1)
        return {"value": len(calls)}

    def gpu(present):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: present)

    kw = dict(profile="budget")
    gpu(True)
    assert obtain_record(store, "measure", "x", make, compute="never", **kw) is None and not calls
    gpu(False)  # a GPU profile on a CPU: nothing stored, nothing made
    assert obtain_record(store, "measure", "x", make, compute="missing", **kw) is None and not calls
    gpu(True)
    assert obtain_record(store, "measure", "x", make, compute="missing", **kw) == {"value": 1}
    assert obtain_record(store, "measure", "x", make, compute="missing", **kw) == {"value": 1}
    assert obtain_record(store, "measure", "x", make, compute="always", **kw) == {"value": 2}
    gpu(False)  # stored: read where it cannot be made again
    assert obtain_record(store, "measure", "x", make, compute="always", **kw) == {"value": 2}
    # a stale record is made again where it can be; read anyway, it says why
    stale = lambda record: "its weights changed" if record["value"] == 2 else None  # noqa: E731
    assert obtain_record(store, "measure", "x", make, compute="missing", stale=stale, **kw) == {
        "value": 2, "stale": "its weights changed; profile 'budget' needs a CUDA GPU to make it again"}
    gpu(True)
    assert obtain_record(store, "measure", "x", make, compute="missing", stale=stale, **kw) == {"value": 3}
    # a measurement that needs a GPU in any profile
    gpu(False)
    assert obtain_record(store, "measure", "y", make, compute="missing", needs_gpu=True, profile="smoke") is None
    with pytest.raises(ValueError, match="compute='sometimes': use one of 'never', 'missing', 'always'"):
        obtain_record(store, "measure", "x", make, compute="sometimes", **kw)


def test_decide_is_the_one_policy():
    from vixnb.runs.policy import Decision, decide

    stored = {"top1": 1.0}
    assert decide("never", stored=None, profile="smoke") == Decision("skip", "no stored result for this configuration")
    assert decide("never", stored=stored, profile="smoke", stale="old") == Decision("read", "old")
    assert decide("missing", stored=stored, profile="smoke") == Decision("read", "")
    assert decide("missing", stored=stored, profile="smoke", stale="old") == Decision("make", "old")
    assert decide("always", stored=stored, profile="smoke") == Decision("make", "")
    assert decide("missing", stored=None, profile="smoke") == Decision("make", "")


def test_banner_of_a_page_rendered_from_the_store():
    assert "results store" not in report.records.banner("budget")
    empty = report.records.banner("budget", compute="never")
    assert empty.startswith("> **Profile `budget`.**")
    assert ("Rendered from the results store (`results/budget/`): nothing was trained or measured when this page "
            "was built; each number's provenance (device, commit, seed, date) is shown with it.") in empty
    assert "holds no `budget` result yet" in empty and all(line.startswith(">") for line in empty.splitlines())
    _done("vit", "budget", 50.0)
    held = report.records.banner("budget", compute="never")
    assert "Rendered from the results store" in held and "holds no" not in held
    assert "holds no `paper` result yet" in report.records.banner("paper", compute="never")


def test_provenance_line_names_the_reading_of_each_changed_default():
    """A page says which reading made each number: for a setting whose default changed (the Performer's key_max),
    the value of each run behind the line, a config stored before the change (without the setting) meaning the
    earlier default."""
    from vixnb.report.records.provenance import readings

    made = {"device": "fake GPU", "commit": "abc", "seed": 0}
    earlier = {"config": run_config("hybrid_vip", profile="budget", key_max="per_head"), "provenance": made}
    assert earlier["config"]["model_overrides"] == {}  # as the run stored before "global" became the default
    records = [earlier, {"config": run_config("cvp", profile="budget"), "provenance": made},
               {"config": run_config("vit", profile="budget"), "provenance": made}]
    assert readings(records) == {"key_max": ["global (CvP)", "per_head (Hybrid ViP)"]}
    assert report.records.provenance_line(records).endswith("; key_max: global (CvP), per\\_head (Hybrid ViP).")
    assert "key_max" not in report.records.provenance_line(records[2:])


def test_provenance_line_names_the_dates():
    _done("vit", "budget", 50.0)
    line = report.records.provenance_line(report.records.collect_runs(["vit"], dataset="cifar10", profile="budget",
                                                                      seeds=[0], compute="never", progress=False))
    assert "device: fake GPU" in line and "commit: abc123" in line and "seed: 0" in line and "date: 2025-03-04" in line
    measured = {"provenance": {"device": "fake GPU", "measured": "2025-03-05T00:00:00Z"}}
    assert "date: 2025-03-05" in report.records.provenance_line([measured], profile="budget")
    noted = {"provenance": {"device": "fake GPU", "commit": "abc", "note": "shared GPU."}}
    assert report.records.provenance_line([noted], profile="budget").endswith("Note: shared GPU.")


def test_beside_paper_puts_ours_the_paper_and_the_delta_side_by_side():
    ours = pd.DataFrame({"top1": [50.0, None], "params": [10, 20]}, index=["vit", "fnet"])
    paper = pd.DataFrame({"top1": [56.81, 50.87], "params": [10, 21]}, index=["vit", "fnet"])
    frame = report.tables.beside_paper(ours, paper, {"top-1": ("top1", "top1"), "params": ("params", "params"),
                                                     "true": ("params", None)}, labels={"vit": "ViT"})
    assert list(frame.columns) == [("top-1", "ours"), ("top-1", "paper"), ("top-1", "Δ"), ("params", "ours"),
                                   ("params", "paper"), ("params", "Δ"), ("true", "ours")]
    assert list(frame.index) == ["ViT", "fnet"]
    assert frame.loc["ViT", ("top-1", "Δ")] == pytest.approx(50.0 - 56.81)
    assert frame.loc["fnet", ("top-1", "ours")] == "not yet run" and frame.loc["fnet", ("top-1", "Δ")] is None
    assert frame.loc["fnet", ("params", "Δ")] == -1
    without = report.tables.beside_paper(ours, paper, {"top-1": ("top1", "top1")}, delta=False)
    assert list(without.columns) == [("top-1", "ours"), ("top-1", "paper")]


def test_differences_subtract_the_first_of_each_pair_from_the_second():
    frame = pd.DataFrame({"top1": [50.0, 70.0, 40.0, None]}, index=["vit", "hybrid_vit", "fnet", "hybrid_fnet"])
    gains = report.tables.differences(frame, [("vit", "hybrid_vit"), ("fnet", "hybrid_fnet")], "top1")
    assert gains == {"vit": 20.0, "fnet": None}
    printed = report.tables.paper_frame("vix", "table1")
    assert report.tables.differences(printed, [("vit", "hybrid_vit")], "top1")["vit"] == pytest.approx(73.94 - 56.81)


def test_summarize_runs_gives_best_and_mean_over_seeds_and_flags_older_code():
    runs = [{"status": "done", "top1": t, "top5": 90.0 + t / 10, "params_paper": 530442, "gpu_gb_reserved": 1.5,
             "config": run_config("vit", profile="budget", seed=s),
             "provenance": {"commit": "0123456789abcdef", "finished": "2025-01-02T00:00:00Z", "device": "GPU"}}
            for s, t in enumerate([50.0, 52.0, 51.0])]
    runs.append({"status": "not yet run", "config": run_config("fnet", profile="budget"), "reason": "no data"})
    summary = report.records.summarize_runs(runs)
    assert summary.loc["vit", "seeds"] == 3 and summary.loc["vit", "top1 best"] == 52.0
    assert (summary.loc["vit", "top1 mean"] == pytest.approx(51.0)
            and summary.loc["vit", "top1 std"] == pytest.approx(1.0))
    assert summary.loc["vit", "commit"] == "0123456" and summary.loc["vit", "date"] == "2025-01-02"
    assert summary.loc["vit", "batch"] == 64 and summary.loc["vit", "note"] is None
    assert summary.loc["fnet", "seeds"] == 0
    assert report.records.accuracy_text(summary, "vit", "top1") == "51.00 ± 1.00"
    assert report.records.accuracy_text(summary, "fnet", "top1") is None
    stale = report.records.summarize_runs([{**runs[0], "params_paper": 530443}])
    assert stale.loc["vit", "note"] == "made by other model code (params_paper 530,443, today 530,442)"
    signed = report.records.summarize_runs([{**runs[0], "architecture": "0" * 16}])
    assert signed.loc["vit", "note"].startswith("made by other model code (architecture 0000000000000000, today ")


def test_results_beside_paper_from_stored_runs_and_memory(fake_gpu):
    models = ["vit", "fnet"]
    _done("vit", "budget", 50.0, gpu_gb_reserved=1.6)
    _saved_memory({"vit": {COMPARABLE: 9.37, "GPU GB reserved, fused (fp32)": 1.99}})
    runs = report.records.collect_runs(models, dataset="cifar10", profile="budget", seeds=[0], compute="never",
                                       progress=False)
    gpu = report.records.gpu_memory(models, paper="vix", dataset="cifar10", profile="budget", compute="never")
    labels = {m: report.tables.label(m) for m in models}
    frames = report.tables.results_beside_paper(report.tables.paper_frame("vix", "table1"), runs, dataset="cifar10",
                                                models=models, labels=labels, gpu=gpu)
    size, acc, mem, table = frames["size"], frames["accuracy"], frames["memory"], frames["runs"]
    assert size.loc["ViT", ("parameters (paper convention)", "ours")] == 530442
    assert size.loc["FNet", ("parameters (paper convention)", "Δ")] == 0
    # the budget profile's 10 epochs against the paper's 40: the difference says so, and no verdict is drawn
    assert acc.loc["ViT", ("top-1 (%)", "Δ, shorter protocol")] == pytest.approx(50.0 - 56.81)
    assert acc.loc["FNet", ("top-1 (%)", "ours")] == "not yet run"
    assert mem.loc["ViT", ("GPU GB, batch 64, authors' path", "paper")] == 14.1
    assert mem.loc["ViT", ("GPU GB, batch 64, authors' path", "ours")] == 9.37
    assert mem.loc["FNet", ("GPU GB, batch 64, authors' path", "ours")] == "not measured"
    assert table.loc["ViT", "seeds"] == "1/1" and table.loc["ViT", "batch"] == "64"
    assert table.loc["ViT", "run peak GB"] == 1.6 and table.loc["FNet", "seeds"] == "0/1"
    assert frames["summary"].loc["vit", "top1 best"] == 50.0
    assert math.isnan(frames["summary"].loc["fnet", "top1 best"])


def test_page_table_formats_and_wraps():
    frame = pd.DataFrame({"a": [1234567, 0.5], "note": ["x", None]}, index=["r1", "r2"])
    html = report.tables.page_table(frame, decimals=2, wrap=["note"]).to_html()
    assert "1,234,567" in html and "0.50" in html and "—" in html and "white-space: normal" in html
    assert report.tables.page_table(frame.iloc[0:0]).data == report.tables.NOT_YET_RUN
    # a difference that rounds to zero reads 0.00, never -0.00 (ours 213.1499 beside the paper's 213.15)
    assert [report.tables.cell_text(v, 2) for v in (-0.0001, -0.07, -1234.5)] == ["0.00", "-0.07", "-1,234.50"]


def test_accuracy_against_cost_shares_the_axes_and_names_missing_models():
    import matplotlib

    matplotlib.use("Agg")
    paper = pd.DataFrame({"GB": [14.1, 5.0, 2.2], "top-1": [56.8, 58.2, 57.5]}, index=["ViT", "ViP", "ViL"])
    ours = pd.DataFrame({"GB": [9.4, None, 2.0], "top-1": [52.4, None, 58.2]}, index=["ViT", "ViP", "ViL"])
    fig = report.figures.accuracy_against_cost(paper, ours, x="GB", y="top-1",
                                               groups={k: "linear" for k in paper.index}, x_label="GB")
    left, right = fig.axes[:2]
    assert left.get_xlim() == right.get_xlim() and left.get_ylim() == right.get_ylim()
    assert any("ViP" in t.get_text() and "Not in our panel" in t.get_text() for t in fig.texts)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["linear"]


def test_training_curves_band_over_seeds():
    import matplotlib

    matplotlib.use("Agg")
    runs = [{"status": "done", "config": {"model": "vit"}, "history": [{"select_top1": v} for v in values]}
            for values in ([10.0, 20.0], [12.0, 24.0])]
    fig = report.figures.training_curves(runs, labels={"vit": "ViT"})
    (line,) = fig.axes[0].get_lines()
    assert list(line.get_ydata()) == [11.0, 22.0] and line.get_label() == "ViT (2 seeds)"
    assert len(fig.axes[0].collections) == 1  # the band


def test_every_paper_table_row_is_a_registered_model_or_a_later_chapter():
    from vixnb import list_models

    assert set(papers.table_models("vix", "table1")) <= set(list_models())
    assert papers.table_models("vix", "table1") == papers.table_models("vix", "table2")


def test_a_truncated_result_file_is_named_on_the_page_and_the_rest_still_renders(fake_gpu):
    _done("fnet", "budget", 42.0)
    _done("vit", "budget", 50.0)
    path = ResultsStore().path(run_config("vit", profile="budget"))
    path.write_text(path.read_text()[:40])
    runs = report.records.collect_runs(["vit", "fnet"], dataset="cifar10", profile="budget", seeds=[0], compute="never",
                                       progress=False)
    assert runs[0]["status"] == "unreadable" and str(path) in runs[0]["reason"]
    assert "delete it and run again" in runs[0]["reason"] and runs[1]["top1"] == 42.0
    summary = report.records.summarize_runs(runs)
    assert summary.loc["vit", "top1 best"] == "unreadable result file" and str(path) in summary.loc["vit", "note"]


def test_results_beside_paper_with_an_empty_store_has_every_column(fake_gpu):
    models = ["vit", "hybrid_vit"]
    runs = report.records.collect_runs(models, dataset="cifar10", profile="budget", seeds=[0], compute="never",
                                       progress=False)
    frames = report.tables.results_beside_paper(report.tables.paper_frame("vix", "table1"), runs, dataset="cifar10",
                                                models=models, labels={m: report.tables.label(m) for m in models},
                                                gpu=None)
    assert frames["summary"]["top1 best"].isna().all() and frames["summary"]["seeds"].tolist() == [0, 0]
    assert frames["measured"][report.tables.PAPER_COMPARABLE_GPU].isna().all()
    assert report.tables.differences(frames["summary"], [("vit", "hybrid_vit")], "top1 best") == {"vit": None}
    assert frames["memory"].loc["ViT", ("GPU GB, batch 64, authors' path", "ours")] == "not yet measured"


def test_the_protocol_of_a_run_config_in_words():
    from vixnb.report.tables.protocol import protocol_rows

    dual = protocol_rows(run_config("cnv_5_4", profile="budget"))
    assert dual["optimizer"].startswith("DualOpT: AdamW (lr 0.001, weight decay 0.01) until 20 epochs pass")
    assert dual["epochs"].startswith("capped at 10, the AdamW phase at 5 of them")
    assert (dual["schedule"], dual["augmentation"], dual["batch size"]) == ("constant", "none", 32)
    assert "gradient norms" not in dual and "post-training" not in dual
    assert protocol_rows(run_config("cnv_5_4", profile="paper"))["epochs"] == \
        "until the SGD phase's patience runs out, at most 1000"
    post = protocol_rows(run_config("cnv_5_4", profile="budget", post_train_epochs=4, randaugment=[1, 1]))
    assert post["post-training"].endswith("at most 4 epochs")
    assert post["augmentation"] == "RandAugment (num_ops 1, magnitude 1)"
    blog = protocol_rows(run_config("vit_small_simplified", profile="paper"))
    assert blog == {"optimizer": "AdamW, lr 0.003, weight decay 0.01", "schedule": "cosine",
                    "augmentation": "hflip, vflip, rotate ±15°", "batch size": 256, "epochs": 50, "precision": "fp32",
                    "epoch reported": "the best test top-1 (the test set after every epoch; no validation split)",
                    "gradient norms": "every 10 steps"}
    assert protocol_rows(run_config("vit_b16_224", profile="budget"))["optimizer"] == \
        "AdamW, lr 0.0001, weight decay 0 (Adam)"
    fixed = protocol_rows(run_config("vit", profile="budget", protocol="fixed"))
    assert fixed["epoch reported"].startswith("the best on 5000 held-out training images")
    html = report.tables.protocol_table("vit_b16_224", "smoke", rows={"input": "32 px"}, input_size=32).to_html()
    assert "smoke profile" in html and "32 px" in html and "batch size" in html


# ----- issue 29: compact absences, no empty axes, the dashboard and the synthesis ------------------------------

def test_a_column_of_ours_without_a_number_leaves_the_table_and_one_line_says_so():
    from vixnb.report.tables.pages import MISSING_MARK, beside_paper, compact_missing

    paper = pd.DataFrame({"top1": [79.0, 78.0], "gpu_gb": [2.0, 1.0]}, index=["vit", "vin"])
    ours = pd.DataFrame({"top1": [80.5, None], "gpu_gb": [None, None]}, index=["vit", "vin"])
    frame = beside_paper(ours, paper, {"top-1": ("top1", "top1"), "GPU GB": ("gpu_gb", "gpu_gb")})
    kept, note = compact_missing(frame)
    assert list(kept.columns) == [("top-1", "ours"), ("top-1", "paper"), ("top-1", "Δ"), ("GPU GB", "paper")]
    assert kept.at["vin", ("top-1", "ours")] == MISSING_MARK and kept.at["vit", ("top-1", "ours")] == 80.5
    assert note == "not yet run, so not shown: GPU GB ours; · marks 1 more"
    styler = report.tables.page_table(frame, caption="Table 1")
    assert styler.caption == f"Table 1 ({note})"
    nothing = report.tables.page_table(pd.DataFrame({"ours": ["not yet run", "not yet run (3 seeds)"]}), caption="T")
    assert nothing.data == "T: not yet run (2 rows)."
    blank = report.tables.page_table(pd.DataFrame({"a": [1.0, None]}), blank=report.tables.NOT_YET_RUN_SHORT)
    assert blank.data["a"].tolist() == [1.0, MISSING_MARK]


def test_a_figure_without_data_of_ours_keeps_no_empty_axes():
    import matplotlib

    matplotlib.use("Agg")
    from vixnb.report.figures.charts import without_empty_panels

    empty = report.figures.training_curves([], labels={})  # an admonition on the page, not an image of text
    assert isinstance(empty, report.figures.MissingPanel) and "not yet run" in empty.text
    assert '<div class="admonition note">' in empty.html() and "not yet run" in empty.html()
    half = report.figures.curves_beside_paper({"ViT": []}, {"ViT": [10.0, 20.0]})
    assert len(half.axes) == 1 and half.axes[0].get_title() == "paper"
    both = report.figures.curves_beside_paper({"ViT": [{"status": "done", "history": [{"train_acc": 5.0}]}]},
                                              {"ViT": [1.0]})
    assert len(both.axes) == 2 and without_empty_panels(both) is both


def test_one_colour_per_model_a_chance_line_and_no_legend_entry_for_an_absent_run():
    import matplotlib

    matplotlib.use("Agg")
    assert (report.figures.model_color("ViP") == report.figures.model_color("Vision Performer (ViP)")
            != report.figures.model_color("ViL"))
    assert (report.figures.model_color("Hybrid ViP")
            != report.figures.model_color("ViP"))  # a variant: the light shade of its hue
    colours = report.figures.palette(["uniform", "ViT", "dynamic", "ViT, AdamW"])  # unknown names never share a colour
    assert len(set(colours.values())) == 4 and colours["ViT"] == report.figures.model_color("ViT")
    done = {"status": "done", "config": {"model": "vit", "dataset": "cifar100"},
            "history": [{"train_acc": 1.0}, {"train_acc": 3.0}]}
    fig = report.figures.training_curves({"ViT": [done], "ViP": []}, metric="train_acc")
    ax = fig.axes[0]
    legend = fig.legends[0]  # under the axes, outside the data (issue 56)
    assert ax.get_legend() is None and [t.get_text() for t in legend.get_texts()] == ["ViT (1 seed)", "chance (1 %)"]
    assert ax.lines[0].get_color() == report.figures.model_color("ViT") and list(ax.lines[1].get_ydata()) == [1.0, 1.0]
    assert fig.get_size_inches()[0] <= 6.9 and all(t.get_fontsize() >= 9 for t in legend.get_texts())


def test_a_fitted_line_prints_as_a_formula():
    from vixnb.report.cost.views import line_formula

    assert line_formula(4.27, -0.86) == "4.27 x − 0.86" and line_formula(1, 2) == "1.00 x + 2.00"


def test_the_dashboard_counts_what_the_papers_give_and_the_store_holds():
    from vixnb.plan.entries import TrainEntry
    from vixnb.runs.spec import RunSpec
    from vixnb.report.claims.standing import count_checks, printed_numbers

    assert count_checks("shaped") == (6, 6)  # the blog's six counts, rebuilt exactly
    assert printed_numbers("shaped") == 12
    entries = [TrainEntry(chapter="simplified", paper="shaped", name="x", profile="budget", status=s,
                          est_gpu_minutes=30.0, spec=RunSpec.of("vit_small_vanilla", profile="budget"))
               for s in ("stored", "missing", "missing")]
    board = report.claims.dashboard({"budget": entries})
    assert len(board) == 5 and board.index[-1] == "Optimizations of Transformers for Small-scale Performance"
    row = board.iloc[-1]
    assert row["budget results stored / stale / asked"] == "1 / 0 / 3" and row["GPU-hours left"] == 1.0
    assert row["parameter counts rebuilt exactly"] == "6 of 6"


def test_the_synthesis_reads_each_mechanism_from_the_model_and_sets_it_against_its_softmax_twin():
    from vixnb.report.claims import synthesis

    assert synthesis.mechanism("vil") == "Linformer" and synthesis.mechanism("vit") == synthesis.SOFTMAX
    assert synthesis.mechanism("cltv_5_4") == "linear attention" and synthesis.mechanism("resnet18_cifar") is None
    assert synthesis.mechanism("levip") == "Performer" and synthesis.mechanism("fnet") == "FNet (Fourier mixing)"
    rows = synthesis.comparisons("budget")
    vil = rows[(rows["document"] == "vix Table 1") & (rows["model"] == "ViL")].iloc[0]
    assert vil["against"] == "ViT" and vil["mechanism"] == "Linformer"
    assert vil["Δ top-1"] == round(57.45 - 56.81, 2) and vil["GPU memory ×"] == round(2.2 / 14.1, 2)
    hybrid = rows[(rows["mechanism"] == synthesis.CONV_EMBEDDING) & (rows["model"] == "Hybrid ViL")]
    assert hybrid.iloc[0]["against"] == "ViL"
    summary = synthesis.mechanism_summary(rows, synthesis.mechanism_claims("budget"))
    assert {"Performer", "Linformer", "Nyströmformer", synthesis.CONV_EMBEDDING} <= set(summary.index)
    # three tables on the page (one is too wide for the text column); without costs, the fused part is absent
    assert list(dict.fromkeys(summary.columns.get_level_values(0))) == [synthesis.PRINTED, synthesis.OURS]
    assert summary.at["Linformer", (synthesis.PRINTED, "rows (documents)")].endswith("(2)")


def test_every_registered_models_token_mixer_declares_its_mechanism():
    """A family with its own attention class declares ``mechanism`` beside ``map_description``: every registered model
    with a mixer has one, and a mixer class without it is named, not silently left out of the synthesis."""
    from torch import nn

    from vixnb.layers import MIXERS
    from vixnb.models import list_models
    from vixnb.report.claims import synthesis

    missing = {}
    for model in list_models():
        try:
            synthesis.mechanism(model)
        except TypeError as e:
            missing[model] = str(e)
    assert missing == {}

    class Forgotten(nn.Module):
        map_description = "exact softmax of a forgotten family"

    with pytest.raises(TypeError, match=r"Forgotten declares map_description but no mechanism: declare `mechanism"):
        synthesis.declared_mechanism(Forgotten)
    assert {kind: synthesis.declared_mechanism(cls) for kind, cls in MIXERS.items()}["nystrom"] == "Nyströmformer"


def test_a_stale_run_is_not_counted_done():
    runs = [{"status": "done"}, {"status": "done", "stale": "made by other model code"}, {"status": "not yet run"}]
    assert report.records.runs_done(runs) == 1  # as the plan counts it: stale, not stored


def _overlaps(a, b):
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("ours_run", [False, True], ids=["ours-not-run", "ours-run"])
def test_figure_legends_and_notes_clear_the_axes_and_their_labels(ours_run):
    """Issue 47: a figure legend under two panels, left over the remaining panel once the empty one ("ours" not yet
    run) went, was drawn over the tick labels, the axis title and the footnote (CXV Fig. 2, the ViX families
    figure, the linattn figures). Every legend and note is now clear of every axis (its tick labels and titles
    included) and of each other."""
    from vixnb.report.figures import accuracy_against_cost, curves_beside_paper

    labels = [f"Model {i}" for i in range(9)]
    paper = pd.DataFrame({"gb": range(1, 10), "top1": range(60, 69)}, index=labels)
    ours = paper.iloc[:5] if ours_run else paper.iloc[:0]
    groups = {m: f"family {i % 4}" for i, m in enumerate(labels)}
    history = [{"epoch": e, "train_acc": 10.0 + e} for e in range(1, 6)]
    runs = {m: ([{"status": "done", "history": history, "config": {}}] if ours_run else []) for m in labels[:5]}
    figures = [accuracy_against_cost(paper, ours, x="gb", y="top1", groups=groups, x_label="GPU memory (GB)",
                                     title="a title"),
               curves_beside_paper(runs, {m: [20.0 + e for e in range(5)] for m in labels[:5]}, title="curves")]
    for fig in figures:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        boxes = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.get_visible()]
        outside = [lg.get_window_extent(renderer) for lg in fig.legends] + \
            [t.get_window_extent(renderer) for t in fig.texts if t.get_text()]
        assert boxes and outside
        for box in outside:
            assert not any(_overlaps(box, axis) for axis in boxes), (box, boxes)
        for i, a in enumerate(outside):
            assert not any(_overlaps(a, b) for b in outside[i + 1:]), (a, outside)


def test_csv_downloads_escape_formulas_and_list_only_used_results(isolated_results):
    """Issue 48, class 2 (every output format escaped): results.csv and claims.csv wrote text as it is (a cell
    starting with =, +, -, @, a tab or a carriage return is a live formula in a spreadsheet), and results.csv listed
    results the store itself calls "not used"."""
    import base64
    import json
    import re

    from vixnb.report.claims import csv_link, runs_table
    from vixnb.results import ResultsStore

    frame = pd.DataFrame({"=cmd": ["=HYPERLINK(1)", "+A1", "-15.85: does not hold", "@SUM(A1)", "\tx", "\rx", "plain",
                                   "-41.59"], "n": [-1.5, 2, 3, 4, 5, 6, 7, 8]})
    text = base64.b64decode(re.search(r"base64,([^\"]+)", csv_link(frame, "x.csv")).group(1)).decode()
    rows = text.splitlines()
    assert rows[0] == "'=cmd,n" and rows[1] == "'=HYPERLINK(1),-1.5" and "'-15.85: does not hold" in text
    assert rows[-1] == "-41.59,8.0"  # a plain number stays a number (issue 56), never '-41.59
    assert all(not line.startswith(("=", "+", "@")) for line in rows)
    store = ResultsStore(isolated_results)
    config = runspec.run_config("fnet", profile="budget")
    store.put(config, {"status": "done", "top1": 50.0, "history": [], "provenance": {}})
    foreign = dict(config, model="no_such_model")
    path = store.path(config).with_name("no_such_model-cifar10-seed0-0000000000000000.json")
    path.write_text(json.dumps({"status": "done", "top1": 1.0, "config": foreign, "provenance": {}}))
    listed = runs_table("budget", store=store)
    assert list(listed["model"]) == ["fnet"]
