"""vixnb.measure on a CPU: FLOP counts against analytic formulas, parameter conventions, the scaling
sweep's bookkeeping and crossovers, out-of-memory recording, the CPU budget guard and JSON output."""
import json
import math
from pathlib import Path

import pytest
import torch

import vixnb
from vixnb import measure as M
from vixnb import report
from vixnb.cli import parser
from vixnb.cli.tables import measure_table
from vixnb.measure import memory, timing


# --------------------------------------------------------------------------------------------------
# FLOPs

def vit_flops_analytic(*, depth, tokens=1025, patches=1024, channels=3, dim=128, heads=4, dim_head=32, mlp=256,
                       classes=10):
    """ViT forward FLOPs of one image, convention FLOPs = 2 x MACs (a (m x k)(k x n) product is 2 m k n).

    Per image, N = tokens (1024 patches + class token), inner = heads x dim_head:
      patch embedding  Linear(3 -> dim) on the 1024 patches       2 * P * C * dim
      per layer:
        qkv            Linear(dim -> 3 inner), no bias             2 * N * dim * 3 inner
        Q K^T          heads x (N x dh)(dh x N)                    2 * heads * N * N * dh
        A V            heads x (N x N)(N x dh)                     2 * heads * N * N * dh
        out proj       Linear(inner -> dim)                        2 * N * inner * dim
        MLP            Linear(dim -> mlp), Linear(mlp -> dim)      2 * N * dim * mlp * 2
      head             Linear(dim -> classes) on the class token   2 * dim * classes
    Biases, LayerNorms, residual adds and the attention scale are not matrix products (not counted here).
    The favor paper's per-op costs on top: softmax 5 per element of each heads x N x N matrix, GELU 8 per
    element of the N x mlp hidden activation.
    """
    inner = heads * dim_head
    n = tokens
    per_layer = (2 * n * dim * 3 * inner + 2 * heads * n * n * dim_head * 2 + 2 * n * inner * dim
                 + 2 * n * dim * mlp * 2)
    matmul = 2 * patches * channels * dim + depth * per_layer + 2 * dim * classes
    softmax = depth * 5 * heads * n * n
    gelu = depth * 8 * n * mlp
    return matmul, softmax, gelu


@pytest.mark.parametrize("path", ["fused", "authors"])
def test_vit_flops_match_the_analytic_formula(path):
    model = vixnb.create_model("vit", depth=1)
    counted = M.flops(model, path=path)
    matmul, softmax, gelu = vit_flops_analytic(depth=1)
    assert counted["matmul_flops"] == matmul == 807_406_592
    assert counted["macs"] == matmul // 2
    assert counted["extra_ops"] == {"softmax": softmax, "gelu": gelu, "exp_log": 0, "fft": 0}
    assert counted["extra_op_flops"] == softmax + gelu
    assert counted["flops"] == matmul + softmax + gelu
    assert counted["favor_flops"] == matmul // 2 + softmax + gelu + counted["elementwise_flops"]
    assert counted["gflops"] == pytest.approx(counted["flops"] / 1e9)
    assert set(counted["conventions"]) >= {"matmul_flops", "macs", "flops", "extra_op_flops", "favor_flops"}
    # without the per-op costs only the matrix products remain
    plain = M.flops(model, per_op_costs=False, path=path)
    assert plain["flops"] == plain["matmul_flops"] == matmul and plain["extra_op_flops"] == 0


def test_vit_paper_configuration_flops():
    matmul, softmax, gelu = vit_flops_analytic(depth=4)
    counted = M.flops(vixnb.create_model("vit"))
    assert (counted["matmul_flops"], counted["extra_ops"]["softmax"], counted["extra_ops"]["gelu"]) == \
        (matmul, softmax, gelu)
    assert counted["gmacs"] == pytest.approx(1.6136, abs=1e-4)


def test_real_forward_counts_the_cpu_attention_kernel_like_meta():
    """The CPU flash-attention kernel has no formula in torch.utils.flop_counter: ours must count it."""
    model = vixnb.create_model("vit", depth=1).eval()
    by_meta, c_meta = M.count_ops(model, lambda d: torch.zeros(1, 3, 32, 32, device=d), on_meta=True)
    by_real, c_real = M.count_ops(model, lambda d: torch.zeros(1, 3, 32, 32, device=d), on_meta=False)
    assert sum(by_meta.values()) == sum(by_real.values())
    assert c_meta.extra == c_real.extra


def test_fnet_fft_cost():
    """FNet's fft2 over (tokens, dim): the favor paper's 5 N log2 N per transform, N = 1025 x 128 points."""
    counted = M.flops(vixnb.create_model("fnet", depth=1))
    n = 1025 * 128
    assert counted["extra_ops"]["fft"] == int(5 * n * math.log2(n))
    assert counted["extra_ops"]["softmax"] == 0


def test_exp_is_counted_inside_the_performer():
    counted = M.flops(vixnb.create_model("vip", depth=1))
    # softmax-kernel features: exp over (tokens x 110 features) per head, for queries and keys
    assert counted["extra_ops"]["exp_log"] == 20 * 2 * 4 * 1025 * 110


# --------------------------------------------------------------------------------------------------
# measure(): parameter conventions, provenance, JSON

@pytest.fixture(scope="module")
def fnet_record():
    return M.measure("fnet", depth=1, batch_size=2, iters=1, steps=1, device="cpu")


def test_measure_reports_both_parameter_conventions():
    rec = M.measure("vit", device="cpu", paths=())
    model = vixnb.create_model("vit")
    assert rec["params_paper"] == vixnb.count_params(model, "paper") == 530_442
    assert rec["params_true"] == vixnb.count_params(model, "true") == 661_770
    assert rec["params_trainable"] == rec["params_true"]
    assert rec["size_mb"] == pytest.approx(vixnb.summary_size_mb(model))
    assert rec["training"] == rec["inference"] == rec["throughput"] == {}


def test_measure_is_json_serialisable_with_provenance(fnet_record):
    text = json.dumps(fnet_record, allow_nan=False)
    back = json.loads(text)
    assert back == fnet_record
    for key in ("device", "dtype", "batch_size", "torch", "commit"):
        assert key in fnet_record["provenance"]
    assert fnet_record["provenance"]["torch"] == torch.__version__
    assert fnet_record["batch_size"] == 2 and fnet_record["overrides"] == {"depth": 1}
    for path in ("authors", "fused"):
        tr = fnet_record["training"][path]
        assert tr["provenance"]["batch_size"] == 2 and tr["dtype"] == "fp32" and tr["path"] == path
        if not torch.cuda.is_available():
            assert tr["status"] == "skipped: CUDA memory statistics need a GPU"
            assert tr["step_ms"] > 0 and "peak_allocated_gb" not in tr
            inf = fnet_record["inference"][path]
            assert [b["batch_size"] for b in inf["batches"]] == [1, 32, 64, 128]
            assert all(b["status"].startswith("skipped: CUDA") for b in inf["batches"])
            tp = fnet_record["throughput"][path]
            assert tp["status"] == "ok (cpu timing)" and tp["images_per_s"] > 0 and "CPU" in tp["protocol"]


def test_format_table_and_frame(fnet_record):
    text = measure_table([fnet_record])
    assert "fnet" in text and "267,786" not in text  # depth 1: not the paper configuration
    frame = M.records_frame([fnet_record])
    assert frame.loc["fnet", "params (true)"] == fnet_record["params_true"]


def test_cli_json(capsys):
    args = parser().parse_args(["measure", "fnet", "--json", "--device", "cpu", "--batch-size", "2", "--iters", "1",
                                "--override", "depth=1"])
    args.fn(args)
    lines = capsys.readouterr().out.strip().splitlines()
    record = json.loads(lines[-1])
    assert record["model"] == "fnet" and record["overrides"] == {"depth": 1}
    args = parser().parse_args(["measure", "vitt"])
    with pytest.raises(ValueError, match="valid names"):
        args.fn(args)


def _rng_states():
    states = [torch.get_rng_state()]
    if torch.cuda.is_available():
        states.append(torch.cuda.get_rng_state())
    return states


def test_measuring_keeps_the_global_rng_state():
    """Measuring draws from seed 0 inside ``local_rng``: it neither reseeds nor advances the caller's RNG."""
    torch.manual_seed(123)
    before = _rng_states()
    model = vixnb.create_model("fnet", depth=1)
    after_model = _rng_states()
    M.measure("fnet", depth=1, batch_size=2, iters=1, steps=1, device="cpu", inference_batch_sizes=(1,))
    M.measure_model(model, name="fnet", batch_size=2, iters=1, steps=1, device="cpu")
    M.scaling_sweep(mechanisms=["softmax (fused)", "performer"], tokens=(16,), dim=32, heads=2, dim_head=16,
                    device="cpu", warmup=0, steps=1)
    vixnb.count_params(model, "paper"), vixnb.summary_size_mb(model)
    assert all(torch.equal(a, b) for a, b in zip(after_model, _rng_states()))
    assert not all(torch.equal(a, b) for a, b in zip(before, after_model))  # creating a model draws, as it should


def test_cpu_budget_is_read_when_measuring(monkeypatch):
    est = {"gb": 0.5, "gflop": 1.0}
    monkeypatch.delenv("VIXNB_CPU_BUDGET_GB", raising=False)
    monkeypatch.delenv("VIXNB_CPU_BUDGET_GFLOP", raising=False)
    assert M.cpu_budget() == (4.0, 100.0) and M.budget_status(est) is None
    monkeypatch.setenv("VIXNB_CPU_BUDGET_GB", "0.25")
    assert M.budget_status(est) == "skipped: estimated 0.5 GB exceeds the CPU budget of 0.25 GB"
    monkeypatch.setenv("VIXNB_CPU_BUDGET_GB", "8")
    monkeypatch.setenv("VIXNB_CPU_BUDGET_GFLOP", "0.5")
    assert M.budget_status(est).endswith("exceeds the CPU budget of 0.5 GFLOP")
    assert M.budget_status(est, budget_gb=math.inf, budget_gflop=math.inf) is None


def test_measure_imports_neither_report_nor_the_command_line():
    import subprocess
    import sys

    code = ("import sys, vixnb.measure\n"
            "print(sorted(m for m in sys.modules if m.startswith(('vixnb.report', 'vixnb.cli', 'vixnb.efficiency'))))")
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root,
                         env={**__import__("os").environ, "PYTHONPATH": root}).stdout
    assert out.strip() == "[]"


def test_measurements_live_in_the_results_store(tmp_path):
    from vixnb.results import ResultsStore

    path = M.save_measurements({"rows": {"vit": {"GB": math.nan}}, "dtype": torch.bfloat16}, "budget", "x", tmp_path)
    assert path == ResultsStore(tmp_path).record_path("measure", "x", profile="budget") == \
        tmp_path / "budget/measure/x.json"
    assert M.load_measurements("budget", "x", tmp_path) == {"rows": {"vit": {"GB": None}}, "dtype": "bf16"}
    assert M.load_measurements("budget", "missing", tmp_path) is None


def test_committed_measurements_load():
    from vixnb.paths import checkout_root

    root = checkout_root() / "results"
    names = [p.stem for p in (root / "budget" / "measure").glob("*.json")]
    if not names:
        pytest.skip("no committed measurement")
    for name in names:
        saved = M.load_measurements("budget", name, root)
        assert saved["provenance"]["device"] and (saved.get("rows") or saved.get("runs") or saved.get("arms")), name


# --------------------------------------------------------------------------------------------------
# out of memory and the CPU budget

def test_training_oom_is_recorded(monkeypatch):
    def boom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(memory, "train_step", boom)
    rec = M.training_memory(vixnb.create_model("fnet", depth=1), batch_size=2, device="cpu")
    assert rec["status"] == "oom" and "Tried to allocate" in rec["error"]
    assert rec["batch_size"] == 2 and rec["provenance"]["torch"] == torch.__version__
    json.dumps(rec, allow_nan=False)


def test_other_errors_are_not_swallowed(monkeypatch):
    def bug(*args, **kwargs):
        raise ValueError("a bug, not a memory limit")

    monkeypatch.setattr(memory, "train_step", bug)
    with pytest.raises(ValueError, match="a bug"):
        M.training_memory(vixnb.create_model("fnet", depth=1), batch_size=2, device="cpu")


def test_sweep_and_throughput_oom_are_recorded(monkeypatch):
    def boom(*args, **kwargs):
        raise torch.OutOfMemoryError("out of memory")

    monkeypatch.setattr(timing, "time_ms", boom)
    rows = M.scaling_sweep(mechanisms=["fnet"], tokens=(16,), dim=32, heads=2, dim_head=16, device="cpu")
    assert [r["status"] for r in rows] == ["oom"] and rows[0]["ms"] is None
    tp = M.throughput(vixnb.create_model("fnet", depth=1), device="cpu", cpu_batch=1)
    assert tp["status"] == "oom"


def test_cpu_budget_guard_skips_before_running(monkeypatch):
    monkeypatch.setattr(timing, "time_ms", lambda *a, **k: pytest.fail("a step over the budget must not run"))
    rows = M.scaling_sweep(mechanisms=["softmax (materialised)"], tokens=(16384,), device="cpu")
    assert len(rows) == 1 and rows[0]["status"].startswith("skipped: estimated")
    assert "exceeds the CPU budget" in rows[0]["status"] and rows[0]["estimate_gb"] > 4
    rec = M.training_memory(vixnb.create_model("vit"), batch_size=64, device="cpu", path="authors")
    assert rec["status"].startswith("skipped: estimated") and rec["estimate_gb"] > 4


# --------------------------------------------------------------------------------------------------
# the scaling sweep and crossovers

def test_sweep_has_a_row_for_every_mechanism_and_size():
    tokens = (16, 32)
    rows = M.scaling_sweep(mechanisms=["softmax", "fnet", "linear"], tokens=tokens, dim=32, heads=2, dim_head=16,
                           device="cpu", warmup=0, steps=1)
    labels = ["fnet", "linear", "softmax (fused)", "softmax (materialised)"]
    assert sorted({r["mechanism"] for r in rows}) == labels
    assert sorted((r["mechanism"], r["tokens"]) for r in rows) == sorted((m, n) for m in labels for n in tokens)
    for r in rows:
        assert r["status"].startswith("ok") and r["ms"] > 0 and r["gflops"] >= 0 and r["estimate_gb"] > 0
        assert r["batch"] == 1 and r["dtype"] == "fp32" and r["provenance"]["torch"] == torch.__version__
    json.dumps(rows, allow_nan=False)
    # materialising the attention matrix costs memory, not FLOPs
    at = {r["mechanism"]: r for r in rows if r["tokens"] == 32}
    assert at["softmax (materialised)"]["gflops"] == pytest.approx(at["softmax (fused)"]["gflops"])
    assert at["softmax (materialised)"]["estimate_gb"] > at["softmax (fused)"]["estimate_gb"]
    assert "mechanism" in measure_table(rows)
    with pytest.raises(ValueError, match="unknown mechanisms"):
        M.scaling_sweep(mechanisms=["cosine"], tokens=(16,))


def _row(mech, n, ms=None, status="ok"):
    return {"mechanism": mech, "tokens": n, "ms": ms, "status": status}


def test_crossovers_on_synthetic_rows():
    grid = (256, 1024, 4096, 16384)
    rows = []
    for n in grid:
        rows.append(_row("softmax (fused)", n, ms=1e-3 * n * n))            # quadratic reference
        rows.append(_row("linear", n, ms=100 * n / 256))                     # ratio 390.625 / n: crosses at 390.6
        rows.append(_row("cheap", n, ms=1e-6 * n))                           # cheaper everywhere
        rows.append(_row("dear", n, ms=1e-2 * n * n))                        # never cheaper
        rows.append(_row("steep", n, ms=1e-7 * n ** 3))                      # cheaper at small sizes only
    rows.append(_row("late", 256, ms=1e9))
    rows.append(_row("late", 1024, ms=1e9))
    rows.append(_row("late", 4096, ms=1e9, status="skipped: estimated 9 GB exceeds the CPU budget of 4 GB"))
    rows.append(_row("late", 16384, ms=5.0))
    rows.append(_row("lonely", 256, ms=1.0))
    got = {x["mechanism"]: x for x in M.crossovers(rows, references=("softmax (fused)",), metrics=("ms",))}
    assert got["linear"]["status"] == "crosses" and got["linear"]["cheaper_from"] == 1024
    assert got["linear"]["crossover_tokens"] == pytest.approx(390.625)
    assert got["cheap"]["status"] == "cheaper at every measured size" and got["cheap"]["cheaper_from"] == 256
    assert got["cheap"]["crossover_tokens"] is None
    assert got["dear"]["status"] == "not cheaper up to 16384 tokens" and got["dear"]["cheaper_from"] is None
    assert got["steep"]["cheaper_at"] == [256, 1024, 4096] and got["steep"]["cheaper_from"] is None
    assert got["steep"]["status"] == "not cheaper at 16384 tokens (cheaper only at 256, 1024, 4096)"
    # the skipped point is ignored; the crossing is bracketed by 1024 and 16384
    assert got["late"]["tokens"] == [256, 1024, 16384] and got["late"]["cheaper_from"] == 16384
    assert 1024 < got["late"]["crossover_tokens"] < 16384
    assert got["lonely"]["status"] == "insufficient data"
    frame = M.crossover_frame(list(got.values()))
    assert frame.loc["linear"].iloc[0] == "~391 tokens"


def test_crossover_with_reference_out_of_memory():
    rows = [_row("softmax (materialised)", 1024, ms=10.0), _row("softmax (materialised)", 4096, status="oom"),
            _row("linear", 1024, ms=20.0), _row("linear", 4096, ms=40.0)]
    (x,) = M.crossovers(rows, references=("softmax (materialised)",), metrics=("ms",))
    assert x["status"] == "crosses" and x["cheaper_from"] == 4096 and x["crossover_tokens"] is None


# --------------------------------------------------------------------------------------------------
# the favor paper's batch search (a pure function)

def test_batch_candidates_fit_the_memory():
    mb = 1024**2
    probes = {4: 1024 * mb + 4 * 10 * mb, 8: 1024 * mb + 8 * 10 * mb, 16: 1024 * mb + 16 * 10 * mb}
    total = 80 * 1024 * mb
    cands = M.batch_candidates(probes, total)
    fit = (total - 1024 * mb) / (10 * mb)
    assert max(cands) == 4096 and all(c <= fit for c in cands)
    assert M.batch_candidates(probes, total, max_batch=512)[-1] == 512


def test_measure_model_takes_any_classifier():
    """The path for reference architectures (timm): any module with an explicit input size."""
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.GELU(), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(8, 5))
    rec = M.measure_model(net, name="tiny-cnn", input_size=(3, 16, 16), device="cpu", batch_size=2, iters=1,
                          steps=1, paths=("fused",))
    conv = 2 * 16 * 16 * 8 * 27  # 2 x MACs of the 3x3 conv (bias not counted)
    assert rec["flops"]["matmul_flops"] == conv + 2 * 8 * 5
    assert rec["flops"]["extra_ops"]["gelu"] == 8 * 8 * 16 * 16
    assert rec["params_true"] == rec["params_paper"] == 3 * 8 * 9 + 8 + 8 * 5 + 5
    json.dumps(rec, allow_nan=False)


def test_gpu_memory_column_says_what_it_could_not_measure():
    frame = M.gpu_memory_column(["fnet"], batch_size=2, device="cpu", depth=1)
    row = frame.loc["fnet"]
    assert row["GPU GB reserved, authors (fp32)"] == "skipped: CUDA memory statistics need a GPU"
    assert row["step ms, fused (fp32)"] > 0
    assert frame.attrs["provenance"]["batch_size"] == 2


def test_page_table_formats_and_blanks():
    import pandas as pd

    frame = pd.DataFrame({"n": [1234567, 3], "x": [0.012345, None], "y": [123.456, 1.23456], "s": ["oom", None]},
                         index=["a", "b"])
    html = report.tables.page_table(frame, caption="cap").to_html()
    for cell in ("1,234,567", "0.0123", "123", "1.23", "oom", "—", "cap"):
        assert cell in html
    assert "nan" not in html.lower() and "None" not in html
    assert "0.50" in report.tables.page_table(pd.DataFrame({"r": [0.5]}), decimals=2).to_html()
    assert report.tables.page_table(pd.DataFrame(), empty="nothing").data == "nothing"


def test_nystrom_counts_on_the_meta_device():
    """Nystrom's pseudo-inverse switches autocast off, which must not break shape-only (meta) counting."""
    record = M.measure("vin", depth=1, cpu_batch=1, iters=1, steps=1, inference_batch_sizes=(1,))
    assert record["flops"]["flops"] > 0 and record["flops_authors_path"]["flops"] > 0
