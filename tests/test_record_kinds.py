"""Record kinds complete from the paper file to the page and the ledger (``vixnb.record_kinds``): a kind is planned,
made, shown and read by the claims ledger without any module knowing it by name; batch-1 inference latency, the
kind added that way; numbered benchmarks and the scripts benchmarks run."""
import re
from pathlib import Path

import pytest
from IPython.display import Markdown

from vixnb import record_kinds, report

from vixnb.plan import plan
from vixnb.record_kinds import KINDS, Request, missing_script, record_name
from vixnb.report.claims import ours as claim_figures
from vixnb.report.tables import measurements
from vixnb.results import ResultsStore

ROOT = Path(__file__).resolve().parents[1]


def test_the_plan_and_the_batch_name_no_kind():
    """No special case keyed on a kind's or a benchmark's name: the plan and the batch ask the kind. ("train" is
    also what a plan entry is, beside "measure" and "bench": not a benchmark's name there.)"""
    entry_kinds = {"train", "measure", "bench"}
    for module, reads in (("vixnb/plan/plan.py", set()),
                          ("vixnb/plan/batch.py", {"fill"})):  # it reads `bench fill`'s winner
        source = (ROOT / module).read_text(encoding="utf-8")
        named = [name for kind in KINDS for name in {kind, kind.removeprefix("bench:")} - entry_kinds - reads
                 if re.search(rf"""["']{re.escape(name)}["']""", source)]
        assert named == [], f"{module} names the record kinds {named}"


def test_a_numbered_benchmark_is_its_newest_stored_record(tmp_path):
    store = ResultsStore(tmp_path)
    variants = Request("bench:nystrom-variants", name="nystrom-variants")
    assert record_name(variants, store) == "nystrom-variants"  # none stored: the plain name
    for n in (1, 3, 2):
        store.save_record("bench", f"nystrom-variants-{n}", {"rows": []})
    assert record_name(variants, store) == "nystrom-variants-3" and record_name(variants) == "nystrom-variants"
    store.save_record("bench", "train-7", {"rows": []})  # a kind that is not numbered keeps its name
    assert record_name(Request("bench:train", name="train"), store) == "train"


def test_a_benchmark_whose_script_is_not_here_is_named(monkeypatch, tmp_path):
    command = KINDS["bench:nystrom-variants"].command.format(path="out.json")
    monkeypatch.chdir(ROOT)
    assert missing_script(command) is None and missing_script(KINDS["bench:train"].command) is None
    monkeypatch.chdir(tmp_path)
    assert missing_script(command) == "tools/profile_nystrom.py" and missing_script("") is None


def test_batch_one_latency_is_planned_for_a_gpu_profile():
    entries = {e.name: e for e in plan.build("budget", chapter=["efficiency"])}
    latency = entries["favor-latency-cifar10"]
    assert (latency.job, latency.path, latency.level) == ("measure", "budget/measure/favor-latency-cifar10.json", 1)
    assert latency.command == "vixnb batch --profile budget --only favor-latency-cifar10"
    assert latency.status == "missing" and "efficiency" in entries


@pytest.fixture()
def two_models(monkeypatch):
    """The favor chapter's one list of measured models, narrowed to two (one not a vixnb model)."""
    monkeypatch.setattr(record_kinds, "efficiency_models", lambda request: ["fnet", "resnet50"])


def test_batch_one_latency_is_measured_on_the_cpu_in_smoke_and_shown_on_the_page(two_models, monkeypatch, tmp_path):
    store = ResultsStore(tmp_path)
    made = report.records.record("latency", paper="favor", notebook="efficiency", dataset="cifar10", profile="smoke",
                                 store=store)
    assert made["source"] == "measured" and made["provenance"]["device_type"] == "cpu"
    assert made["provenance"]["batch_size"] == 1 and made["forwards"] == {"untimed": 1, "timed": 3}
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.json")] == \
        ["smoke/measure/favor-latency-cifar10.json"]
    table = KINDS["latency"].show(made)
    assert list(table.index) == ["fnet", "resnet50"]
    assert list(table.columns) == ["ms (authors)", "ms (fused)", "min ms (authors)", "min ms (fused)", "status"]
    assert 0 < table.at["fnet", "min ms (authors)"] <= table.at["fnet", "ms (authors)"]
    assert table.at["resnet50", "status"] == "not measured: not a vixnb model"
    shown = []
    monkeypatch.setattr(measurements, "display", shown.append)
    # the chapter's page: read back, not measured again
    found = report.tables.records_section("favor", "efficiency", profile="smoke", compute="never", shown=["efficiency"],
                                          store=store)
    assert list(found) == ["latency"] and found["latency"]["source"] == "stored"
    assert shown[0].data == "### Batch-1 inference latency: one no-grad forward of one image (cifar10)"
    assert shown[1].data.index.tolist() == ["fnet", "resnet50"]  # the kind's table, styled for the page
    assert "device: cpu" in shown[2].data


def test_a_gpu_profile_without_a_stored_latency_says_how_to_make_it(two_models, monkeypatch, tmp_path):
    shown = []
    monkeypatch.setattr(measurements, "display", shown.append)
    found = report.tables.records_section("favor", "efficiency", profile="budget", compute="never",
                                          shown=["efficiency"], store=ResultsStore(tmp_path))
    assert found == {"latency": None} and all(isinstance(m, Markdown) for m in shown)
    assert "`vixnb batch --profile budget --only favor-latency-cifar10` on a GPU" in shown[1].data


def test_the_ledger_reads_the_latency_metric_with_the_device_it_was_timed_on(monkeypatch, tmp_path):
    store = ResultsStore(tmp_path)
    store.save_record("measure", "favor-latency-cifar10", {"rows": {"vit": {"ms (authors)": 1.5}, "fnet": {
        "ms (authors)": "oom"}}, "provenance": {"device": "NVIDIA H100 80GB HBM3", "dtype": "fp32"}},
        profile="budget")
    claim = {"id": "favor-latency", "section": "Speed", "text": "A test claim on batch-1 latency.",
             "method": "correlation", "x": "params", "y": "latency_ms", "models": {"paper": "vix", "table": "table1"},
             "printed": {"table": "table2", "row": "FLOPS", "column": "FFwd Time"}, "op": "approx", "value": 0.5,
             "tolerance": 0.1}
    monkeypatch.setattr(claim_figures, "paper_claims", lambda key: [claim])
    ours, records = claim_figures.ours_from_store("favor", "budget", store=store, count_flops=False)
    assert ours["cifar10"]["vit"]["latency_ms"] == 1.5 and ours["cifar10"]["fnet"]["latency_ms"] is None
    assert ours.facts["cifar10"]["vit"]["latency"].devices == frozenset({"NVIDIA H100 80GB HBM3"})
    assert report.records.metrics.METRICS["latency_ms"].origin == "latency" and records[0]["rows"]["vit"]
