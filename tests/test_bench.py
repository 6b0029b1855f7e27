"""Stored benchmarks (results/bench/): saved with provenance by the command line, read back as page tables,
"not yet run" when missing; the committed H100 runs parse."""
import json
import sys

import pytest

from vixnb import bench, report
from vixnb.cli import main
from vixnb.cli.tables import mixers_table
from vixnb.paths import checkout_root


def _mixer_row(mechanism, ms, ratio, peak):
    return {"mechanism": mechanism, "ms": ms, "ratio_vs_materialized_softmax": ratio, "peak_mb": peak, "params": 10}


def test_saved_mixers_come_back_as_a_page_table_with_provenance(isolated_results, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["vixnb", "bench", "mixers", "--dtype", "bf16"])
    rows = [_mixer_row("softmax (materialised)", 10.0, 1.0, 400.0), _mixer_row("softmax (fused)", 2.0, 0.2, 40.0),
            _mixer_row("nystrom", 5.0, 0.5, 80.0)]
    bench.save("mixers-bf16", bench.benchmark_record("mixers", rows, device="cpu", dtype="bf16", note="a test run."))
    saved = json.loads(bench.stored_path("mixers-bf16").read_text())
    assert saved["command"] == "vixnb bench mixers --dtype bf16" and saved["provenance"]["dtype"] == "bf16"
    assert saved["provenance"]["commit"] and saved["provenance"]["measured"]
    frame = bench.stored_table("mixers-bf16")
    assert frame.loc["nystrom", "x fused softmax"] == 2.5 and frame.loc["nystrom", "x materialised softmax"] == 0.5
    assert frame.loc["softmax (fused)", "peak MiB"] == 40.0
    line = report.records.provenance_line([frame.attrs])
    assert line.startswith("Provenance — device: cpu") and line.endswith("Note: a test run.")


def test_newest_numbered_benchmark(tmp_path):
    assert bench.newest("nystrom-variants", tmp_path) == "nystrom-variants"
    for name in ("nystrom-variants-2", "nystrom-variants-10", "nystrom-variants-x", "mixers-3"):
        bench.stored_path(name, tmp_path).parent.mkdir(exist_ok=True)
        bench.stored_path(name, tmp_path).write_text("{}")
    assert bench.newest("nystrom-variants", tmp_path) == "nystrom-variants-10"


def test_a_missing_benchmark_reads_not_yet_run():
    frame = bench.stored_table("mixers-bf16")
    assert frame.iloc[0, 0] == "not yet run (no results/bench/mixers-bf16.json)"
    assert report.records.provenance_line([frame.attrs]) == "No measurement was made for this section."


def test_bench_mixers_json_holds_rows_and_provenance(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["bench", "mixers", "--device", "cpu", "--tokens", "17", "--batch", "2", "--steps", "1",
                 "--warmup", "0", "--mixers", "fnet", "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert saved["benchmark"] == "mixers" and [r["mechanism"] for r in saved["rows"]] == \
        ["softmax (materialised)", "fnet"]
    assert saved["provenance"]["device_type"] == "cpu" and saved["provenance"]["dtype"] == "fp32"


def test_bench_mixers_in_process_starts_no_process_and_measures_no_cpu_memory(tmp_path, monkeypatch):
    """``--in-process`` (what a dress rehearsal runs: the GPU's path) measures every mechanism in the benchmark's own
    process; a CPU's memory, measured only in a fresh process per mechanism, is then not measured."""
    real = bench.mixers.subprocess.run

    def run(argv, *args, **kwargs):  # git (the provenance's commit) may run; no mechanism's process
        assert not any("_worker" in str(a) for a in argv), "started a process for a mechanism"
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(bench.mixers.subprocess, "run", run)
    out = tmp_path / "m.json"
    assert main(["bench", "mixers", "--device", "cpu", "--tokens", "17", "--batch", "2", "--steps", "1",
                 "--warmup", "0", "--mixers", "fnet", "--in-process", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["mechanism"] for r in rows] == ["softmax (materialised)", "fnet"]
    assert all(r["ms"] > 0 and r["peak_mb"] is None for r in rows)


def test_variants_table_pivots_dtypes_in_run_order(isolated_results):
    rows = [{"mechanism": m, "dtype": dt, "ms": ms, "x_fused_softmax": x}
            for dt, k in (("bf16", 1.0), ("fp32", 2.0))
            for m, ms, x in (("softmax (fused)", k, 1.0), ("nystrom: default", 3 * k, 3.0))]
    path = bench.stored_path("nystrom-variants-9")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"benchmark": "nystrom-variants", "provenance": {"device": "x"}, "rows": rows}))
    frame = bench.stored_table("nystrom-variants-9")
    assert list(frame.index) == ["softmax (fused)", "nystrom: default"]
    assert frame.loc["nystrom: default", "ms (fp32)"] == 6.0 and \
        frame.loc["nystrom: default", "x fused softmax (bf16)"] == 3.0


@pytest.mark.parametrize("name", ["mixers-bf16", "mixers-fp32", "train", "nystrom-variants-1", "nystrom-variants-2"])
def test_committed_gpu_benchmarks_parse_and_name_their_run(name):
    root = checkout_root() / "results"
    if not bench.stored_path(name, root).exists():
        pytest.skip("no committed benchmark")
    frame = bench.stored_table(name, root)
    prov = frame.attrs["provenance"]
    assert prov["device"].startswith("NVIDIA") and len(prov["commit"]) == 40 and prov["measured"].startswith("20")
    assert len(frame) >= 5


def test_bench_mixers_can_time_compiled_mixers():
    rows = bench.bench_mixers(device="cpu", tokens=9, dim=16, heads=2, dim_head=8, batch=2, warmup=1, steps=1,
                              mechanisms=[], isolate=False, compile=True)
    assert [r["mechanism"] for r in rows] == ["softmax (materialised)"]
    assert rows[0]["compiled"] == "default" and rows[0]["ms"] > 0 and "aten_ops" not in rows[0]
    assert "torch.compile" in mixers_table(rows)


def test_compile_modes_are_checked():
    assert bench.compile_mode(True) == "default" and bench.compile_mode(None) is None
    assert bench.compile_mode("reduce-overhead") == "reduce-overhead"
    with pytest.raises(ValueError, match="reduce-overhead"):
        bench.compile_mode("fast")


def test_bench_mixers_counts_dispatched_operators():
    """The count is of one forward + backward: the fused softmax dispatches one attention kernel each way;
    the materialised one forms the matrix (softmax forward and backward) in more operators."""
    rows = bench.bench_mixers(device="cpu", tokens=9, dim=16, heads=2, dim_head=8, batch=2, warmup=0, steps=1,
                              mechanisms=["softmax (fused)"], isolate=False)
    ref, fused = rows
    assert 0 < fused["aten_ops_compute"] < fused["aten_ops"]
    assert ref["aten_ops_compute"] > fused["aten_ops_compute"]
    assert f"{fused['aten_ops_compute']}/{fused['aten_ops']}" in mixers_table(rows)
    assert fused["ratio_vs_fused_softmax"] == 1.0 and ref["ratio_vs_fused_softmax"] == ref["ms"] / fused["ms"]


def test_benchmarks_keep_the_rng_state_and_the_thread_count():
    import torch

    before_threads = torch.get_num_threads()
    threads = 1 if before_threads != 1 else 2
    torch.manual_seed(123)
    before = torch.get_rng_state()
    rows = bench.bench_mixers(device="cpu", tokens=9, dim=16, heads=2, dim_head=8, batch=2, warmup=0, steps=1,
                              mechanisms=["performer"], isolate=False, threads=threads)
    assert [r["mechanism"] for r in rows] == ["softmax (materialised)", "performer"]
    bench.bench_train(["fnet"], device="cpu", batch=4, steps=1, warmup=0)
    assert torch.get_num_threads() == before_threads
    assert torch.equal(torch.get_rng_state(), before)


def test_a_written_benchmark_reads_back_like_a_stored_one(isolated_results):
    rows = [_mixer_row("softmax (materialised)", 10.0, 1.0, 400.0), _mixer_row("fnet", 5.0, 0.5, 80.0)]
    record = bench.benchmark_record("mixers", rows, device="cpu", dtype="fp32", command="vixnb bench mixers")
    assert set(record) == {"benchmark", "provenance", "command", "note", "rows"}
    bench.write(bench.stored_path("mixers-fp32"), record)  # what --json writes, copied into results/bench/
    assert bench.load("mixers-fp32") == record
    assert bench.stored_path("mixers-fp32") == isolated_results / "bench" / "mixers-fp32.json"
    assert bench.stored_table("mixers-fp32").loc["fnet", "x materialised softmax"] == 0.5


def test_bench_fill_measures_one_seed_and_an_ensemble_in_one_run_and_names_the_winner(tmp_path, capsys):
    import torch

    out = tmp_path / "fill.json"
    torch.manual_seed(5)
    before = torch.get_rng_state()
    assert main(["bench", "fill", "--models", "fnet", "--seeds", "2", "--batch", "2", "--steps", "1", "--warmup", "0",
                 "--no-compile", "--save", str(out), "--json"]) == 0
    assert torch.equal(torch.get_rng_state(), before)
    printed = capsys.readouterr().out.strip().splitlines()
    (row,) = json.loads(printed[-1])
    assert (row["model"], row["seeds"], row["batch_size"], row["device"]) == ("fnet", 2, 2, "cpu")
    assert all(0 < row[k] < float("inf")
               for k in ("one_seed_images_per_s", "ensemble_images_per_s", "ensemble_vs_one_seed"))
    assert row["ensemble_time_vs_separate"] == pytest.approx(1 / row["ensemble_vs_one_seed"])
    assert "compiled_images_per_s" not in row and row["can_ensemble"] is True
    assert row["winner"] in ("ensemble", "separate") and row["best_separate"] == "one_seed"
    assert "ensemble of 2 seeds" in "\n".join(printed) and "fnet: winner" in "\n".join(printed)
    saved = json.loads(out.read_text())
    assert saved["benchmark"] == "fill" and saved["provenance"]["device_type"] == "cpu" and \
        saved["provenance"]["commit"]
    assert bench.fill_winner(saved, "fnet") == row["winner"] and bench.fill_winner(saved, "vit") is None
    bench.write(bench.stored_path("fill"), saved)
    assert bench.stored_table("fill").loc["fnet", "winner"] == row["winner"]


def test_fill_winner_is_the_ensemble_only_where_it_beats_every_single_seed_approach():
    from vixnb.bench.fill import ratios

    def row(**speeds):
        r = {f"{k}_images_per_s": v for k, v in speeds.items()}
        ratios(r)
        return r

    faster = row(one_seed=100.0, ensemble=250.0, compiled=200.0, cuda_graphs=None)
    assert (faster["winner"], faster["best_separate"], faster["ensemble_vs_one_seed"]) == ("ensemble", "compiled", 2.5)
    slower = row(one_seed=100.0, ensemble=250.0, compiled=120.0, cuda_graphs=300.0)
    assert (slower["winner"], slower["best_separate"]) == ("separate", "cuda_graphs")
    assert slower["cuda_graphs_time_vs_separate"] == pytest.approx(1 / 3)
    assert row(one_seed=100.0, ensemble=None)["winner"] is None  # the ensemble ran out of memory: no winner
    assert bench.fill_winner([faster | {"model": "fnet"}], "fnet") == "ensemble"
