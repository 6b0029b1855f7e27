"""Paper `linattn`: its test and training tables against the report's text (Tables 2-19), the derived seconds per
epoch, and its claims (checked by the claims schema, naming only runs of the `test` table). Builds no model."""
import re
import statistics

import pytest

from conftest import source_document

from vixnb import papers
from vixnb.analysis import panel, prediction_record, record_stale
from vixnb.data import load_split
from vixnb.runs.spec import RunSpec, run_config
from vixnb.record_kinds import KINDS, chapter_requests, weights_read
from vixnb.report.claims import schema as claim_schema
from vixnb.results import ResultsStore
from vixnb.runs.make import keep_where

KEY = "linattn"
#: run -> (training table, test table), the report's numbering
TABLES = {"vit_scratch": (2, 3), "vil_scratch": (4, 5), "vil_checkpoint": (6, 7), "vipa_scratch": (8, 9),
          "vipa_checkpoint": (10, 11), "viprelu_scratch": (12, 13), "viprelu_checkpoint": (14, 15),
          "vipexp_scratch": (16, 17), "vipexp_checkpoint": (18, 19)}


@pytest.fixture(scope="module")
def document():
    return source_document(KEY)


def parse_tables(text):
    """``{N: [[cell, ...], ...]}``: the rows of every tab-separated table that opens with an ``Epoch`` or ``Test``
    header (``Accuracy  Loss  Speed``) and ends at its caption line ``Table N: ...``, as printed (text cells)."""
    tables, rows = {}, None
    for line in text.splitlines():
        cells = line.split("\t")
        if cells in (["Epoch", "Accuracy", "Loss", "Speed"], ["Test", "Accuracy", "Loss", "Speed"]):
            rows = []
        elif rows is not None and (m := re.match(r"Table (\d+):", line.strip())):
            tables[int(m.group(1))] = rows
            rows = None
        elif rows is not None and len(cells) == 4:
            rows.append(cells)
        elif rows is not None and line.strip():
            raise AssertionError(f"unexpected line inside a table: {line!r}")
    return tables


def epochs_once(rows):
    """A training table's rows keyed by epoch, each epoch once (a repeated epoch must repeat the same numbers)."""
    by_epoch = {}
    for epoch, *values in rows:
        if epoch in by_epoch:
            assert by_epoch[epoch] == values, f"epoch {epoch} printed twice with different numbers"
        by_epoch[epoch] = values
    return by_epoch


@pytest.fixture(scope="module")
def printed(document):
    tables = parse_tables(document)
    assert sorted(tables) == list(range(2, 20)), sorted(tables)
    return tables


def test_the_test_table_has_the_nine_runs_in_printed_order():
    rows = papers.table(KEY, "test")["rows"]
    assert list(rows) == list(TABLES)
    assert [row["printed_in"] for row in rows.values()] == [f"Table {t}" for _, t in TABLES.values()]
    assert list(papers.load(KEY)["training"]) == list(TABLES)
    assert papers.table(KEY, "test")["dataset"] == "cifar10"
    for row, (model, settings) in papers.paper_runs(KEY).items():
        base = row.removesuffix("_lr_1e-3").removesuffix("_heads_128")
        source = {"_lr_1e-3": "vit_lr_1e-3", "_heads_128": "vit_heads_128"}.get(row[len(base):], "vit_scratch")
        assert model == {"vit": "vit_b16_224", "vil": "vil_b16_224"}.get(row[:3], "vip_b16_224"), row
        assert ("init_from" in settings) == base.endswith("_checkpoint"), row
        assert settings.get("init_from") in (None, source), row
        if row.startswith("vip"):
            assert settings["kernel"] == {"vipa": "favor+", "viprelu": "relu", "vipexp": "exp"}[row.split("_")[0]]


@pytest.mark.parametrize("table, vit, suffix, change", [
    ("adam_default_lr", "vit_lr_1e-3", "_lr_1e-3", {"lr": 1.0e-3}),   # the unstated learning rate: Adam's default
    ("head_width_128", "vit_heads_128", "_heads_128", {"dim_head": 128}),  # Table 1's other head width
])
def test_each_other_reading_is_every_test_run_with_one_change_and_is_trained(table, vit, suffix, change):
    """The nine runs of the test table again, each as its twin there but for ``change`` (and a warm start from that
    reading's own ViT run), planned by the chapter beside the first reading."""
    other = papers.table_runs(KEY, table)
    twins = ["vit_scratch" if row == vit else row.removesuffix(suffix) for row, _, _ in other]
    assert twins == list(TABLES)
    for (row, model, settings), twin in zip(other, twins):
        twin_model, twin_settings = papers.row_run(KEY, "test", twin)
        expected = {**twin_settings, **change}
        if "init_from" in twin_settings:
            expected["init_from"] = vit
        assert (model, settings) == (twin_model, expected), row
    assert table in papers.book_chapter(KEY, "linattn")["train"]
    assert papers.load(KEY)["protocol"]["lr"] == 1.0e-4  # the tables beside the report's stay the 1e-4 reading


def test_every_test_row_equals_the_documents(printed):
    rows = papers.table(KEY, "test")["rows"]
    count = 0
    for run, (_, test_table) in TABLES.items():
        (line,) = printed[test_table]
        assert line[0] == "1"
        row = rows[run]
        assert [row["top1"], row["test_loss"], row["test_s"]] == [float(v) for v in line[1:]], run
        count += 1
    assert count == 9


def test_every_training_row_equals_the_documents(printed):
    training = papers.load(KEY)["training"]
    count = 0
    for run, (train_table, _) in TABLES.items():
        entry = training[run]
        assert entry["table"] == f"Table {train_table}", run
        # each epoch printed once, in order (Table 2 included: it does not repeat epochs 1-6)
        assert [line[0] for line in printed[train_table]] == [str(e) for e in range(1, 11)], run
        by_epoch = epochs_once(printed[train_table])
        for key in ("train_acc", "train_loss", "epoch_s"):
            assert len(entry[key]) == 10, (run, key)
        for i, (acc, loss, seconds) in enumerate(by_epoch.values()):
            assert [entry["train_acc"][i], entry["train_loss"][i], entry["epoch_s"][i]] == \
                [float(acc), float(loss), float(seconds)], (run, i + 1)
            count += 1
    assert count == 90


def test_each_derived_epoch_s_is_the_mean_of_epochs_2_to_10(printed):
    rows = papers.table(KEY, "test")["rows"]
    for run, (train_table, _) in TABLES.items():
        seconds = [float(values[2]) for values in epochs_once(printed[train_table]).values()]
        assert rows[run]["epoch_s"] == round(statistics.fmean(seconds[1:]), 3), run
        assert rows[run]["epoch_s"] != round(statistics.fmean(seconds), 3), run  # epoch 1 is left out
        accuracy = [float(values[0]) for values in epochs_once(printed[train_table]).values()]
        assert rows[run]["train_acc_final"] == accuracy[-1], run  # the last epoch's, as printed


def test_epochs_once_rejects_a_repeated_epoch_with_other_numbers():
    assert list(epochs_once([["1", "a", "b", "c"], ["1", "a", "b", "c"], ["2", "d", "e", "f"]])) == ["1", "2"]
    with pytest.raises(AssertionError, match="epoch 1 printed twice"):
        epochs_once([["1", "a", "b", "c"], ["1", "x", "b", "c"]])


def test_every_claim_parses_and_names_only_runs_of_the_test_table():
    runs = set(papers.table_models(KEY, "test"))
    claims = claim_schema.paper_claims(KEY)
    assert len(claims) >= 6
    for claim in claims:
        assert claim["id"].startswith(f"{KEY}-"), claim["id"]
        parsed = claim_schema.parse_claim(KEY, claim)
        named = {m for pair in parsed["pair_list"] or [] for m in pair if m is not None}
        assert named and named <= runs, (claim["id"], named - runs)
        assert claim.get("table") in (None, "test"), claim["id"]
        assert claim.get("reading"), claim["id"]


def test_the_claims_the_brief_asks_for_are_there():
    claims = {c["id"]: c for c in papers.claims(KEY)}
    gain = claims["linattn-vil-epoch-time"]
    assert (gain["method"], gain["metric"], gain["a"], gain["b"]) == \
        ("relative_gain", "epoch_s", "vil_scratch", "vit_scratch")
    keep = claims["linattn-checkpoint-keeps-accuracy"]
    assert (keep["pairs"], keep["over"], keep["op"]) == ("zip", "all", "at_least")
    assert [a.replace("_checkpoint", "") for a in keep["a"]] == [b.replace("_scratch", "") for b in keep["b"]]
    assert claims["linattn-linear-test-half"]["metric"] == "test_s"
    assert claims["linattn-viprelu-fastest-test"]["a"] == "viprelu_scratch"


def test_the_paper_side_of_the_claims_on_the_report_s_own_numbers():
    """The figures the ledger will show on the paper's side, computed here from the test table."""
    rows = papers.table(KEY, "test")["rows"]
    vil, vit = rows["vil_scratch"]["epoch_s"], rows["vit_scratch"]["epoch_s"]
    assert (vil - vit) / vit * 100 == pytest.approx(-58.28, abs=0.01)  # "almost 50 %": within 50 ± 10
    gains = [rows[f"{m}_checkpoint"]["top1"] - rows[f"{m}_scratch"]["top1"]
             for m in ("vil", "vipa", "viprelu", "vipexp")]
    assert min(gains) == pytest.approx(58.24 - 61.59)  # ViP-a: the report does not bear out "maintains"
    fastest = min(rows, key=lambda r: rows[r]["test_s"])
    assert fastest == "viprelu_checkpoint" and rows["viprelu_scratch"]["test_s"] > rows["vipexp_scratch"]["test_s"]


# ----- the prediction panels (Figs. 1-2, 6-7, 10-15): each kept model's label of the panel's test images ---------

def test_the_chapter_keeps_the_test_runs_weights_locally_and_asks_for_their_predictions():
    chapter = papers.book_chapter("linattn", "linattn")
    request = next(r for r in chapter_requests("linattn", chapter) if r.kind == "predictions")
    kind = KINDS["predictions"]
    assert (kind.needs_gpu, kind.reads_weights, kind.record_name(request)) == \
        (True, True, "linattn-predictions-cifar10")
    read = weights_read(request, "budget")
    assert [(r.model, r.settings.get("init_from"), r.seed) for r in read][:2] == [("vit_b16_224", None, 0),
                                                                                   ("vil_b16_224", None, 0)]
    assert len(read) == len(papers.table("linattn", "test")["rows"])
    # ViT-B/16's 172 MB are over the store's cap: kept on the GPU machine; the smoke profile's tiny model fits
    assert keep_where(run_config("vit_b16_224", profile="budget")) == "local"
    assert keep_where(run_config("vit_b16_224", profile="smoke", **chapter["profile_settings"]["smoke"])) == "store"


def test_the_prediction_record_of_a_smoke_model():
    store = ResultsStore()
    shrink = papers.book_chapter("linattn", "linattn")["profile_settings"]["smoke"]
    runs = {"vit_scratch": RunSpec.of("vit_b16_224", profile="smoke", **shrink),
            "vil_scratch": RunSpec.of("vil_b16_224", profile="smoke", **shrink)}
    unmade = prediction_record(runs, dataset="cifar10", profile="smoke", compute="never", store=store)
    assert {r["status"] for r in unmade["runs"].values()} == {"not yet run"}
    record = prediction_record(runs, dataset="cifar10", profile="smoke", compute="missing", store=store)
    _, labels = load_split("synthetic", "test")
    # the report's selection, "the first 10 images", by default; the book's panel (one of each class) beside it
    assert record["dataset"] == "synthetic" and record["panel"] == list(range(10))
    assert record["labels"] == [int(labels[i]) for i in range(10)]
    per_class = record["per_class"]
    assert per_class["panel"] == panel("synthetic", labels=labels)[:10]
    assert per_class["labels"] == [int(labels[i]) for i in per_class["panel"]] == list(range(10))  # one of each class
    for name, run in record["runs"].items():
        assert run["status"] == "done" and len(run["predicted"]) == 10 and set(run["predicted"]) <= set(range(10))
        assert len(per_class["predicted"][name]) == 10
        assert run["weights_sha256"] and run["config"]["model"] in ("vit_b16_224", "vil_b16_224")
    assert record_stale(record, store) is None
    again = prediction_record(runs, dataset="cifar10", profile="smoke", compute="never", store=store)
    assert again["runs"] == record["runs"]  # read from the kept weights: the same labels
