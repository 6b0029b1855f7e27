"""Paper `cxv`: its tables as printed, its runs (every row a registered model whose settings build), DualOpT as the
protocol (and its cap in a capped profile), the GPU column's batch, the plan's order and its claims."""
import re

import pytest
import torch

from vixnb import papers
from vixnb.engine import steps
from vixnb.engine import train as engine
from vixnb.models import create_model, list_models
from vixnb.results.store import config_key
from vixnb.runs.spec import run_config, settings_of_model

TABLE1 = ("table1_cifar10", "table1_cifar100", "table1_tiny")


# ----- the paper file against the paper's text ---------------------------------------------------------------

def test_table1_is_transcribed_as_printed(paper_text):
    text = paper_text("cxv")
    printed = {}
    for line in text.splitlines():
        cells = line.split("\t")
        if len(cells) == 7 and cells[1].endswith("M") and cells[3].endswith("G"):
            printed[cells[0]] = cells[1:]
    assert len(printed) == 15
    c10, c100, tin = (papers.table("cxv", t)["rows"] for t in TABLE1)
    for model, row in c10.items():
        params, gpu, macs, *top1 = printed[row["label"]]
        assert (row["params_m"], row["gpu_gb"], row["macs_g"]) == (float(params[:-2]), float(gpu), float(macs[:-2]))
        assert [row["top1"], c100[model]["top1"], tin[model]["top1"]] == [float(t) for t in top1]
    assert list(c10) == list(c100) == list(tin)


def test_tables_2_to_4_are_transcribed_as_printed(paper_text):
    text = paper_text("cxv")
    assert [r["top1"] for r in papers.table("cxv", "table2")["rows"].values()] == \
        [float(v) for v in re.search(r"\n([\d.]+)\t([\d.]+)\t([\d.]+)\s*\n\s*\nTable 2", text).groups()]
    table3 = text[text.index("Models\tAccu. with AdamW"):text.index("Table 3:")]
    printed = [line.split("\t")[:4] for line in table3.splitlines() if re.match(r"[\w\- ]+\t[\d.]+\t", line)]
    ours = []
    for name in ("table3_tiny", "table3_cifar100", "table3_cifar10"):  # printed order
        rows = list(papers.table("cxv", name)["rows"].values())
        ours += [[a["top1"], b["top1"], b["increase_pct"]] for a, b in zip(rows[::2], rows[1::2])]
    assert ours == [[float(v) for v in row[1:]] for row in printed]
    table4 = re.findall(r"\n(\w+)-5/4\t([\d.]+)\t([\d.]+)", text)
    assert [[r["top1_main"], r["top1"]] for r in papers.table("cxv", "table4")["rows"].values()] == \
        [[float(a), float(b)] for _, a, b in table4]


@pytest.mark.parametrize("table", list(papers.load("cxv")["tables"]))
def test_every_row_is_a_registered_model_whose_settings_build(table):
    for row, model, settings in papers.table_runs("cxv", table):
        assert model in list_models(), (table, row)
        with torch.device("meta"):  # the settings that are not options of the run (optimizer, stop, ...)
            create_model(model, dataset=papers.table("cxv", table)["dataset"], **settings_of_model(settings))
        run_config(model, dataset=papers.table("cxv", table)["dataset"], profile="budget", **settings)


# ----- DualOpT as the protocol --------------------------------------------------------------------------------

def test_the_cxv_protocol_trains_with_dualopt_and_the_others_with_adamw():
    assert run_config("cnv_5_4", profile="budget")["optimizer"] == "dualopt"
    assert run_config("cnv_5_4", profile="budget", optimizer="adamw")["optimizer"] == "adamw"
    assert run_config("vit", profile="budget")["optimizer"] == "adamw"


def test_a_capped_profile_caps_both_phases_and_the_paper_profile_runs_to_a_ceiling():
    budget, paper = run_config("cnv_5_4", profile="budget"), run_config("cnv_5_4", profile="paper")
    assert (budget["epochs"], budget["dualopt"]["adamw_epochs"]) == (10, 5)
    assert (paper["epochs"], "adamw_epochs" in paper["dualopt"]) == (1000, False)
    assert run_config("cnv_5_4", profile="paper", epochs=1000) == paper  # the ceiling given is no cap
    assert run_config("cnv_5_4", profile="paper", optimizer="adamw")["epochs"] == 200
    post = run_config("cnv_5_4", profile="budget", randaugment=[1, 1], post_train_epochs=200)
    assert post["post_train_epochs"] == 5
    assert run_config("cnv_5_4", profile="paper", randaugment=[1, 1], post_train_epochs=200)["post_train_epochs"] == 200


def test_the_switch_comes_at_the_cap_when_patience_has_not_run_out():
    switch = engine.DualOptSwitch(patience=20, adamw_epochs=3)
    assert [switch.update(a) for a in (10, 20, 30, 40, 50)] == \
        ["continue", "continue", "switch", "continue", "continue"]
    assert (switch.phase, switch.reason) == ("sgd", "cap")
    patient = engine.DualOptSwitch(patience=1, adamw_epochs=5)
    assert [patient.update(a) for a in (10, 5)] == ["continue", "switch"] and patient.reason == "patience"


def test_a_capped_dualopt_run_records_why_it_switched(monkeypatch):
    config = run_config("cnv_5_4", profile="smoke", epochs=4, depth=1)
    assert config["optimizer"] == "dualopt" and config["dualopt"]["adamw_epochs"] == 2
    scores = iter([10.0, 20.0, 30.0, 40.0])
    monkeypatch.setattr(steps, "evaluate", lambda *a, **k: (next(scores), 90.0))
    result = engine.train(config, progress=False)
    assert [h["phase"] for h in result["history"]] == ["adamw", "adamw", "sgd", "sgd"]
    assert result["history"][1]["switched_to_sgd"] == "cap"


def test_sgd_alone_trains_with_dualopts_sgd_settings_for_adamw_alones_length():
    config = run_config("cnv_5_4", profile="smoke", optimizer="sgd", epochs=2, depth=1)
    assert config["optimizer"] == "sgd" and "adamw_epochs" not in config["dualopt"]
    assert run_config("cnv_5_4", profile="paper", optimizer="sgd")["epochs"] == \
        run_config("cnv_5_4", profile="paper", optimizer="adamw")["epochs"] == 200
    result = engine.train(config, progress=False)
    assert [h["phase"] for h in result["history"]] == ["sgd", "sgd"]
    assert not any(h.get("switched_to_sgd") for h in result["history"])
    model, _ = engine.build_model(config)
    optimizer = engine.make_optimizer(model, config, engine.first_phase(config))
    assert isinstance(optimizer, torch.optim.SGD)
    assert optimizer.defaults["lr"] == config["dualopt"]["sgd_lr"] and optimizer.defaults["weight_decay"] == 0
    with pytest.raises(ValueError, match="sgd"):
        run_config("vit_small_vanilla", profile="budget", optimizer="sgd")  # paper `shaped`: no DualOpT settings


def test_sgd_alone_to_patience_has_dualopts_budget_and_an_own_key():
    for profile in ("paper", "budget"):
        patience = run_config("cnv_5_4", profile=profile, optimizer="sgd", stop="patience")
        dualopt = run_config("cnv_5_4", profile=profile)
        # budget's cap (10) is within the patience (20): the run is the fixed-length one, without a stop
        assert patience.get("stop") == ("patience" if profile == "paper" else None)
        assert patience["epochs"] == dualopt["epochs"]
        assert patience["dualopt"] == {k: v for k, v in dualopt["dualopt"].items() if k != "adamw_epochs"}
    fixed = run_config("cnv_5_4", profile="paper", optimizer="sgd")
    assert "stop" not in fixed and run_config("cnv_5_4", profile="paper", optimizer="sgd", stop="epochs") == fixed
    for optimizer in ("adamw", "dualopt"):
        with pytest.raises(ValueError, match=f"stop='patience' with optimizer='{optimizer}'.*optimizer='sgd'"):
            run_config("cnv_5_4", profile="budget", optimizer=optimizer, stop="patience")
    with pytest.raises(ValueError, match="stop='never': give one of 'epochs', 'patience'"):
        run_config("cnv_5_4", profile="budget", optimizer="sgd", stop="never")


# the top-1 of each epoch: DualOpT's AdamW phase (patience 2: it switches after the third epoch), then the epochs
# of an SGD phase, which stops after its sixth (17 and 18 are the second and first epochs below the best, 20)
ADAMW_SCORES, SGD_SCORES = [5.0, 4.0, 3.0], [10.0, 20.0, 15.0, 20.0, 18.0, 17.0, 30.0, 40.0]


def _scripted_run(monkeypatch, config, scores, **kwargs):
    config["dualopt"] = {**config["dualopt"], "patience": 2}
    values = list(scores)
    monkeypatch.setattr(steps, "evaluate", lambda *a, **k: (values.pop(0), 90.0))
    return engine.train(config, progress=False, **kwargs)


def test_sgd_alone_to_patience_stops_where_dualopts_sgd_phase_stops(monkeypatch):
    rule = engine.dualopt_switch({"optimizer": "sgd", "stop": "patience", "dualopt": {"patience": 2}})
    assert rule.phase == "sgd" and [rule.update(a) for a in SGD_SCORES[:6]][-2:] == ["continue", "stop"]
    assert engine.dualopt_switch({"optimizer": "sgd", "dualopt": {"patience": 2}}) is None  # a fixed length
    dualopt = _scripted_run(monkeypatch, run_config("cnv_5_4", profile="smoke", epochs=20, depth=1),
                            ADAMW_SCORES + SGD_SCORES)
    alone = _scripted_run(monkeypatch, run_config("cnv_5_4", profile="smoke", epochs=21, depth=1, optimizer="sgd",
                                                  stop="patience"), SGD_SCORES)
    sgd_phase = [h for h in dualopt["history"] if h["phase"] == "sgd"]
    assert dualopt["history"][len(ADAMW_SCORES) - 1]["switched_to_sgd"] == "patience"
    assert [h["select_top1"] for h in alone["history"]] == [h["select_top1"] for h in sgd_phase] == SGD_SCORES[:6]
    assert [h["stop"] for h in alone["history"]] == [h["stop"] for h in sgd_phase] == [False] * 5 + [True]
    assert {h["phase"] for h in alone["history"]} == {"sgd"} and alone["epochs_run"] == 6


def test_sgd_alone_to_patience_resumes_into_the_same_stop(tmp_path, monkeypatch, crash_after_checkpoint):
    config = run_config("cnv_5_4", profile="smoke", epochs=21, depth=1, optimizer="sgd", stop="patience")
    Crash, checkpoint = crash_after_checkpoint(), tmp_path / "run.pt"
    for done in range(6):  # a crash after each of the first six epochs, then a call that only finishes
        with pytest.raises(Crash):
            _scripted_run(monkeypatch, dict(config), SGD_SCORES[done:], checkpoint=checkpoint)
    result = _scripted_run(monkeypatch, dict(config), SGD_SCORES[6:], checkpoint=checkpoint)
    assert result["epochs_run"] == 6 and result["history"][-1]["stop"] and result["top1"] == 20.0


def test_sgd_alone_to_patience_is_estimated_at_dualopts_nominal_length():
    from vixnb.plan.estimates import DUALOPT_NOMINAL_EPOCHS, expected_epochs

    paper = run_config("cnv_5_4", profile="paper", optimizer="sgd", stop="patience")
    assert expected_epochs(paper) == (DUALOPT_NOMINAL_EPOCHS, f"; SGD alone: nominal {DUALOPT_NOMINAL_EPOCHS} epochs "
                                                              "(stops on patience)")
    assert expected_epochs(run_config("cnv_5_4", profile="paper", optimizer="sgd")) == (200, "")
    assert expected_epochs(run_config("cnv_5_4", profile="budget", optimizer="sgd", stop="patience")) == (10, "")


# ----- the GPU column, the plan, the claims -------------------------------------------------------------------

def test_the_gpu_measurement_is_at_the_papers_batch():
    from vixnb.record_kinds import Request, record_name

    assert (papers.gpu_batch_size("cxv"), papers.gpu_batch_size("vix")) == (32, 64)
    assert record_name(Request("gpu_memory", paper="cxv", dataset="cifar10")) == "cxv-gpu-memory-cifar10-b32"
    assert record_name(Request("gpu_memory", paper="vix", dataset="cifar10", part="rope")) == \
        "vix-rope-gpu-memory-cifar10-b64"


def test_the_plan_runs_the_named_rows_first_and_a_shared_run_once():
    from vixnb.plan import plan

    entries = [e for e in plan.build("budget", order="rows") if e.job == "train"]  # the paper files' row order
    level1 = [(e.chapter, e.name, e.dataset) for e in entries if e.level == 1]
    assert level1[:8] == [("cxv_table1", m, "cifar10") for m in
                          ("cnv_5_4", "cpv_5_4", "cltv_5_4", "hybrid_vilt_6_8", "resnet18_cifar")] + \
        [("cxv_dualopt", r, "cifar10") for r in ("cnv_randaugment", "cpv_randaugment", "cltv_randaugment")]
    keys = [e.key for e in entries]
    assert len(keys) == len(set(keys))
    cnv = [e for e in entries if e.model == "cnv_5_4" and e.dataset == "cifar10" and e.seed == 0 and not e.settings]
    assert [e.chapter for e in cnv] == ["cxv_table1"]
    assert all(e.blocked for e in entries if e.dataset in ("cifar100", "tiny-imagenet"))


def test_a_cap_within_the_patience_makes_sgd_alone_to_patience_the_fixed_length_run():
    # budget: 10 epochs, patience 20: the patience cannot end the run, so both readings are one run (one key)
    assert config_key(run_config("cnv_5_4", profile="budget", optimizer="sgd", stop="patience")) == \
        config_key(run_config("cnv_5_4", profile="budget", optimizer="sgd"))
    longer = run_config("cnv_5_4", profile="budget", optimizer="sgd", stop="patience", epochs=21)
    assert longer["stop"] == "patience" and config_key(longer) != \
        config_key(run_config("cnv_5_4", profile="budget", optimizer="sgd", epochs=21))


def test_the_plan_lists_sgd_alone_for_table_3s_models():
    from vixnb.plan import plan

    entries = [e for e in plan.build("paper", chapter=["cxv_dualopt"]) if e.job == "train"]
    for stop, tables in ((None, "sgd_alone"), ("patience", "sgd_patience")):
        sgd = {(e.name, e.dataset) for e in entries if e.settings.get("optimizer") == "sgd"
               and e.settings.get("stop") == stop}
        expected = {(row, papers.table("cxv", t)["dataset"]) for t in (f"{tables}_cifar10", f"{tables}_cifar100",
                                                                       f"{tables}_tiny")
                    for row in papers.table("cxv", t)["rows"]}
        assert sgd == expected and len(expected) == 13
    assert all("--optimizer sgd" in e.command for e in entries if e.settings.get("optimizer") == "sgd")
    assert all(("--stop patience" in e.command) == (e.settings.get("stop") == "patience") for e in entries)
    fixed = {(e.model, e.dataset, e.seed): e.key for e in entries if e.settings == {"optimizer": "sgd"}}
    to_patience = {(e.model, e.dataset, e.seed): e.key for e in entries if e.settings.get("stop") == "patience"}
    assert fixed.keys() == to_patience.keys() and not set(fixed.values()) & set(to_patience.values())


def test_the_claims_read_the_papers_tables_as_expected():
    from vixnb import report

    frame = (report.claims.claims("cxv").set_index("id") if "id" in report.claims.claims("cxv")
             else report.claims.claims("cxv"))
    verdicts = dict(zip(frame.index if "id" not in frame else frame["id"], frame["paper bears it out"]))
    assert len(verdicts) == len(papers.claims("cxv"))
    # the paper's own numbers contradict two of its sentences: ConvMixer beats every CXV on CIFAR-100, and no
    # transformer uses 100 times a CXV's GPU memory; and two second readings of sentences that bear two: CLTV is
    # below ResNet-34 on CIFAR-10, and post-training alone adds 1.92 points on average, not about 3; and three
    # orderings of Table 1's GPU and top-1 columns: the ResNets, WaveMix and MLP Mixer use less GPU than CLTV,
    # ConvMixer more than Hybrid ViLT, and MLP Mixer is above ViT-10/4 on CIFAR-10
    assert {k for k, v in verdicts.items() if v == "no"} == {
        "cxv-4.2-best-on-cifar100", "cxv-4.2-cxv-vs-transformers-gpu", "cxv-4.2-beats-resnets-cifar10-every",
        "cxv-5.2-procedure-gain-post-training-alone", "cxv-4.2-cxv-least-gpu-of-all", "cxv-4.2-fnet-mixer-poor",
        "cxv-6-wavemix-convmixer-less-gpu"}
    # the paper-side figures of the orderings, from Table 1's and Table 4's printed columns
    figures = frame["paper figure"]
    assert figures["cxv-4.2-cxv-least-gpu-of-all"] == pytest.approx(3.2 / 0.4)  # CPV against WaveMix
    assert figures["cxv-4.2-mixer-twice-resnet34-gpu"] == pytest.approx(1.5 / 0.7)
    assert figures["cxv-5.2-randaugment-gain"] == pytest.approx(92.21 - 91.42)  # CPV, the smallest gain
    assert figures["cxv-5.2-post-training-every"] == pytest.approx(92.26 - 91.98)  # CNV, the smallest


# ----- page pieces ------------------------------------------------------------------------------------------

def _done(row_config, top1s, *, switch_at=None, post=0):
    """A done result per seed: AdamW epochs, then SGD from ``switch_at``, then ``post`` post-training epochs; the
    epoch top-1s ``top1s`` (one list per seed)."""
    out = []
    for seed, scores in enumerate(top1s):
        history = []
        for i, top1 in enumerate(scores, 1):
            stage = "post" if post and i > len(scores) - post else "main"
            phase = "sgd" if (switch_at and i > switch_at) or stage == "post" else "adamw"
            entry = {"epoch": i, "select_top1": top1, "stage": stage, "phase": phase, "train_acc": 50.0,
                     "train_loss": 1.0, "seconds": 1.0}
            if switch_at == i:
                entry["switched_to_sgd"] = "patience"
            history.append(entry)
        config = run_config(*row_config, seed=seed)
        out.append({"status": "done", "config": config, "history": history, "top1": max(scores), "top5": 99.0,
                    "epochs_run": len(scores),
                    "provenance": {"device": "cuda", "commit": "abcdef0", "date": "2026-11-23"},
                    "gpu_gb_reserved": 1.5})
    return out


def test_rows_beside_paper_sets_each_run_beside_its_printed_row(monkeypatch):
    from vixnb import report

    monkeypatch.setattr("vixnb.report.records.collect.other_code", lambda stored: None)
    results = {"cnv_randaugment": _done(("cnv_5_4",), [[80.0, 90.0, 92.0, 93.0]], switch_at=2, post=1),
               "cpv_randaugment": _done(("cpv_5_4",), [[70.0, 91.0, 95.0], [60.0, 89.0, 94.0]], switch_at=1, post=1),
               "cltv_randaugment": [{"status": "not yet run", "config": run_config("cltv_5_4"), "reason": "no copy"}]}
    got = report.tables.rows_beside_paper("cxv", "table4", results, metrics=("top1_main", "top1"))
    frame = got["accuracy"]
    main, after = "best test top-1 before post-training (%)", "best test top-1 (%)"
    assert frame.loc["CNV-5/4", (f"{main}, best seed", "ours")] == 92.0
    assert frame.loc["CNV-5/4", (f"{main}, best seed", "paper")] == 91.98
    assert frame.loc["CNV-5/4", (f"{after}, best seed", "Δ")] == pytest.approx(93.0 - 92.26)
    assert frame.loc["CPV-5/4", (f"{after}, mean ± std", "ours")] == "94.50 ± 0.71"
    assert frame.loc["CLTV-5/4", (f"{after}, best seed", "ours")] == "not yet run"
    runs = got["runs"]
    assert runs.loc["CNV-5/4", "SGD from epoch"] == "3" and runs.loc["CPV-5/4", "seeds"] == "2/2"
    assert runs.loc["CPV-5/4", "epochs run"] == "3, 3"


def test_a_run_a_claim_names_reads_as_its_row_label():
    from vixnb.report.claims.verdicts import run_label

    assert run_label("cnv_no_pad", "cxv") == "no padding in the embedding (cnv_no_pad)"
    assert run_label("cnv_5_4", "cxv") == "CNV-5/4"


def test_a_claims_runs_are_made_as_the_chapter_that_trains_them_made_them():
    from vixnb.runs.asked import row_runs

    vanilla = {"width": 96, "depth": 8, "heads": 4, "patch": 4}
    assert row_runs("shaped", "smoke")["exp1_vanilla"] == ("vit_small_vanilla", {**vanilla, "depth": 2})
    assert row_runs("shaped", "budget")["exp1_vanilla"] == ("vit_small_vanilla", vanilla)
    assert row_runs("cxv", "smoke")["cnv_no_pad"] == ("cnv_5_4", {"embed_padding": False})


def test_every_plan_command_parses_back_to_its_run(monkeypatch):
    """What `vixnb plan` prints for each cxv run, given to the CLI, asks for exactly that run (settings such as
    --randaugment 1 1 and --optimizer adamw included)."""
    import shlex

    from vixnb.plan import plan
    from vixnb.cli import parser
    from vixnb.cli import commands
    from vixnb.results import config_key

    class Asked(Exception):
        pass

    def fake_run(spec, **options):
        raise Asked(spec)

    monkeypatch.setattr("vixnb.runs.make.run", fake_run)
    entries = [e for e in plan.build("budget") if e.job == "train" and e.paper == "cxv"]
    assert any(e.settings.get("randaugment") for e in entries) and any(e.settings.get("optimizer") for e in entries)
    for e in entries:
        args = parser().parse_args(shlex.split(e.command)[1:])
        with pytest.raises(Asked) as asked:
            commands.train(args)
        (spec,) = asked.value.args
        assert spec.key == e.key and spec.keep == e.keep_weights, e.command
        assert config_key(run_config(spec.model, dataset=spec.dataset, profile=spec.profile, seed=spec.seed,
                                     **spec.settings)) == e.key, e.command
