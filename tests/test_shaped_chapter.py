"""The `shaped` paper's chapter machinery: runs named by table rows (model + settings), the plan's entries for
them (seeds, kept weights, commands), the claims read on such runs, the statistics over seeds, and the panel."""
import math

import pytest
import torch
from torch import nn

from vixnb import create_model, papers, report

from vixnb.plan import plan
from vixnb.analysis import panel
from vixnb.cli import parser
from vixnb.results.store import config_key
from vixnb.runs.spec import run_model_settings, run_config
from vixnb.runs.asked import table_runs
from vixnb.report.records.metrics import RUN_STATISTICS


def test_a_row_name_means_one_run_in_every_table():
    seen = {}
    for name in papers.load("shaped")["tables"]:
        for row, model, settings in papers.table_runs("shaped", name):
            assert seen.setdefault(row, (model, settings)) == (model, settings), (row, name)
    assert seen["exp4_identity"] == ("vit_small_simplified",
                                     {"width": 128, "depth": 8, "heads": 4, "patch": 4, "alpha_beta": "identity"})
    assert seen["exp0_no_skips"][1]["skips"] is False
    # a ViX table's rows are its models, with no settings
    assert papers.row_run("vix", "table1", "vit") == ("vit", {})


def test_the_params_convention_is_per_paper():
    assert papers.params_convention("shaped") == "true" and papers.params_convention("vix") == "paper"


def test_the_plan_makes_every_experiment_with_its_seeds_and_kept_weights():
    entries = [e for e in plan.build("budget") if e.paper == "shaped"]
    runs = [e for e in entries if e.job == "train"]
    seeds = {}
    for e in runs:
        seeds.setdefault(e.name, []).append(e.seed)
    # 11 runs of the blog's in the readings its text states (SAS-P, two LayerNorms), Experiment 3 with the blog's 5
    # runs and the rest with the profile's 3 seeds; the 9 stored runs of our earlier reading, their first seed only
    three = ("exp0_no_skips", "exp1_vanilla", "exp1_simplified", "exp2_vanilla", "exp2_simplified", "exp4_identity",
             "exp4_attention", "exp5_dynamic", "exp6_inverse_dynamic")
    earlier = ("exp0_no_skips_one_norm", "exp1_vanilla_one_norm", "exp1_simplified_sequential", "exp2_vanilla_one_norm",
               "exp2_simplified_sequential", "exp4_identity_sequential", "exp4_attention_sequential",
               "exp3_vanilla_one_norm", "exp3_simplified_sequential")
    # our stall question's arms trained whole (gpu_arms), every seed, beside the row's own seeds
    arms = ("exp2_vanilla: fp32", "exp2_vanilla: warm-up 300 steps", "exp2_vanilla: lr 1e-3",
            "exp2_vanilla: He and Hofmann's recipe", "exp2_vanilla: init std 0.02", "exp1_vanilla: warm-up 300 steps")
    assert {k: sorted(v) for k, v in seeds.items()} == {
        **{r: [0, 1, 2] for r in three}, **{r: [0] for r in earlier},
        **{r: [0, 1, 2, 3, 4] for r in ("exp3_vanilla", "exp3_simplified")}, **{a: [0, 1, 2] for a in arms}}
    assert len(runs) == 55 + 9 and all(e.level == 2 for e in runs if e.name in arms)
    kept = sorted((e.name, e.seed) for e in runs if e.keep_weights == "store")
    # Experiment 3's first seeds for Fig. 8 and 11; the alpha/beta variants' for the maps study (study.yaml)
    assert kept == [("exp3_simplified", 0), ("exp3_vanilla", 0), ("exp4_attention", 0), ("exp4_identity", 0),
                    ("exp5_dynamic", 0), ("exp6_inverse_dynamic", 0)]
    sequential = next(e for e in runs if e.name == "exp4_attention_sequential")
    assert sequential.settings == {"heads": 4, "patch": 4, "width": 128, "depth": 8, "block": "sequential",
                                   "alpha_beta": "attention"}
    exp4 = next(e for e in runs if e.name == "exp4_identity" and e.seed == 0)
    assert exp4.command == ("vixnb train vit_small_simplified --dataset cifar10 --profile budget --seed 0 "
                            "--override width=128 --override depth=8 --override heads=4 --override patch=4 "
                            "--override alpha_beta=identity --keep-weights")
    assert next(e for e in runs if e.keep_weights == "store").command.endswith(" --keep-weights")
    assert sorted(e.name for e in entries if e.job == "measure") == [
        "shaped-attention-maps-cifar10", "shaped-first-steps-vanilla_gap_w96", "shaped-first-steps-vanilla_stall_w128"]
    # the same run shown in two tables is one entry
    assert sum(e.name == "exp2_simplified" for e in runs) == 3


def test_the_smoke_profile_shrinks_the_models_but_keeps_the_rest():
    book = papers.book_chapter("shaped", "simplified")
    runs = table_runs("shaped", book, "fig12", "smoke")
    assert [(row, settings["depth"], settings.get("alpha_beta"), seeds) for row, _, settings, seeds in runs] == [
        ("exp5_dynamic", 2, "dynamic", [0]), ("exp2_simplified", 2, None, [0])]


def test_the_plans_command_parses_back_to_the_same_run():
    args = parser().parse_args(["train", "vit_small_vanilla", "--override", "skips=false", "--override", "width=96",
                                "--keep-weights"])
    from vixnb.cli.commands import parse_overrides

    assert parse_overrides(args.override) == {"skips": False, "width": 96} and args.keep_weights


def test_the_blogs_claims_read_our_counts_exactly():
    ours, _ = report.claims.ours_from_store("shaped", "budget")
    frame = report.claims.claims("shaped", ours)
    params = frame.loc[["shaped-exp1-params", "shaped-exp2-params", "shaped-exp3-params"]]
    assert list(params["paper bears it out"]) == ["yes"] * 3 and list(params["our verdict"]) == ["holds"] * 3
    assert ours["cifar10"]["exp3_vanilla"]["params"] == 927370
    # accuracy claims have no printed figure and wait for runs
    assert "as points" not in frame.loc["shaped-exp1-params", "reading"]
    row = frame.loc["shaped-exp5-dynamic"]
    assert row["paper figure"] is None and row["paper bears it out"] == "—" and row["our verdict"] == "not yet run"


def _record(train_acc, top1, seconds=(3.0, 2.0, 2.0), grads=None, alpha_beta=None):
    history = [{"train_acc": a, "seconds": s, "grad_norms": grads, "alpha_beta": alpha_beta}
               for a, s in zip(train_acc, seconds)]
    return {"status": "done", "top1": top1, "history": history}


def test_statistics_over_seeds_are_exact():
    runs = [_record([10, 20, 30], 40, grads=[1.0, 4.0], alpha_beta=[[3.0, 1.0], [1.0, 3.0]]),
            _record([10, 20, 50], 60, seconds=(9.0, 4.0, 6.0), grads=[1.0, 2.0], alpha_beta=[[1.0, 1.0], [1.0, 1.0]])]
    assert RUN_STATISTICS["train_acc_final"](runs) == 40
    assert RUN_STATISTICS["train_acc_final_std"](runs) == pytest.approx(math.sqrt(200))
    assert RUN_STATISTICS["top1_mean"](runs) == 50
    assert RUN_STATISTICS["epoch_s"](runs) == (2.0 + 5.0) / 2  # epoch 1 left out
    assert RUN_STATISTICS["grad_norm_first_last"](runs) == (0.25 + 0.5) / 2
    # the second seed's layers sit at their 0.5/0.5 initialisation: no trend of it is read (issue 56)
    assert RUN_STATISTICS["identity_share_first_last"](runs) == pytest.approx(50.0)
    assert report.records.seed_statistic("epoch_s", [{"status": "not yet run"}]) is None


def test_seed_comparison_and_pairs():
    got = report.records.seed_comparison([1.0, 3.0], [0.0, 0.0])
    assert got == {"difference": 2.0, "standard_error": 1.0, "survives": False}
    assert report.records.seed_comparison([5.0, 5.5], [1.0, 1.5])["survives"] is True
    assert report.records.seed_comparison([1.0], [0.0])["survives"] is None
    frame = report.records.compare_pairs([("x", "a", "b")], {"a": [_record([1, 3], 70), _record([1, 5], 72)],
                                                             "b": [_record([1, 1], 60)]})
    train, test = frame.loc[("x", "final train acc. (%)")], frame.loc[("x", "best test top-1 (%)")]
    assert (train["a"], train["b"], train["a − b"]) == ("4.00 ± 1.41 (2)", "1.00 (1)", "+3.00")
    assert test["beyond 2 SE"] == "—" and test["a − b"] == "+11.00"
    assert report.records.compare_pairs([("y", "a", "c")], {"a": []}).iloc[0]["a"] == "not yet run"


def test_the_panel_takes_classes_in_turns():
    labels = [3, 0, 0, 1, 3, 2, 1, 0]
    assert panel(labels=labels, per_class=2) == [1, 3, 5, 0, 2, 6, 4]
    assert panel(labels=labels, per_class=1) == [1, 3, 5, 0]
    first = panel("synthetic")
    assert first == panel("synthetic") and len(first) == 20  # stable, two of each of the 10 classes


def test_training_curves_take_named_groups_and_a_std_band():
    fig = report.figures.training_curves({"a": [_record([1, 2], 1), _record([3, 4], 1)]}, metric="train_acc",
                                         band="std")
    ax = fig.axes[0]
    assert list(ax.lines[0].get_ydata()) == [2.0, 3.0]
    with pytest.raises(ValueError, match="band"):
        report.figures.training_curves([], band="minmax")


def test_an_ensembles_seconds_are_not_an_epoch_time():
    member = {**_record([1, 2], 1, seconds=(9.0, 9.0)), "provenance": {"execution": "ensemble of 3 seeds"}}
    assert RUN_STATISTICS["epoch_s"]([member]) is None
    assert RUN_STATISTICS["epoch_s"]([member, _record([1, 2], 1, seconds=(5.0, 3.0))]) == 3.0


def test_the_identity_share_needs_a_nonzero_sum():
    assert RUN_STATISTICS["identity_share_first_last"]([_record([1], 1, alpha_beta=[[0.0, 0.0], [1.0, 1.0]])]) is None


def test_an_override_that_is_a_training_option_is_refused():
    from vixnb.cli.commands import train

    args = parser().parse_args(["train", "vit_small_vanilla", "--override", "lr=0.1"])
    with pytest.raises(ValueError, match=r"--override lr=\.\.\.: lr is a training option; pass --lr instead"):
        train(args)


def test_a_kept_weights_run_stored_without_them_wants_its_weights_and_a_measured_record_goes_stale():
    from vixnb.analysis import record_stale
    from vixnb.results import ResultsStore

    store = ResultsStore()
    entry = next(e for e in plan.build("smoke") if e.paper == "shaped" and e.keep_weights == "store")
    store.put(entry.config, {"status": "done", "top1": 1.0, "history": [{"seconds": 1.0}]})
    again = next(e for e in plan.build("smoke", only=[entry.name]) if e.key == entry.key)
    assert again.status == "weights wanted" and "weights" in again.reason  # its numbers stand
    record = {"runs": {entry.name: {"config": entry.config, "weights_sha256": "abc"}}}
    assert "no weights stored now" in record_stale(record, store)
    store.put(entry.config, {"status": "done", "top1": 1.0, "weights": {"sha256": "def"}})
    assert "retrained" in record_stale(record, store)
    record["runs"][entry.name]["weights_sha256"] = "def"
    assert record_stale(record, store) is None


def test_a_stored_attention_record_from_other_weights_says_so():
    from vixnb.results import ResultsStore

    store = ResultsStore()
    entry = next(e for e in plan.build("budget") if e.paper == "shaped" and e.keep_weights == "store")
    store.put(entry.config, {"status": "done", "top1": 1.0, "weights": {"sha256": "now"}})
    name = "shaped-attention-maps-cifar10"
    store.save_record("measure", name, {"runs": {entry.name: {"config": entry.config, "weights_sha256": "then"}}},
                      profile="budget")
    record = report.records.attention_maps("shaped", "simplified", "cifar10", profile="budget", compute="never")
    assert "retrained" in record["stale"]
    assert report.records.attention_maps("shaped", "simplified", "cifar10", profile="smoke", compute="never") is None


def test_the_vanilla_block_normalises_before_the_mlp_and_the_default_simplified_block_is_parallel():
    vanilla = create_model("vit_small_vanilla", width=16, depth=1, heads=2, patch=8).blocks[0]
    assert isinstance(vanilla.norm2, nn.LayerNorm) and vanilla.norm.bias is None and vanilla.norm2.bias is None
    x = torch.randn(2, 5, 16)
    with torch.no_grad():  # x + O(A V(LN1 x)), then + MLP(LN2 .): the MLP reads a normalised input
        h = x + vanilla.mixer(vanilla.norm(x))
        assert torch.equal(vanilla(x), h + vanilla.mlp(vanilla.norm2(h)))
    simplified = create_model("vit_small_simplified", width=16, depth=1, heads=2, patch=8).blocks[0]
    assert simplified.parallel and isinstance(simplified.norm2, nn.Identity)
    with torch.no_grad():
        n = simplified.norm(x)
        assert torch.equal(simplified(x), simplified.mixer(n) + simplified.mlp(n))
    earlier = create_model("vit_small_vanilla", width=16, depth=1, heads=2, patch=8, layout="one-norm").blocks[0]
    assert isinstance(earlier.norm2, nn.Identity) and earlier.norm.bias is not None
    assert not create_model("vit_small_simplified", width=16, depth=1, heads=2, patch=8,
                            block="sequential").blocks[0].parallel


@pytest.mark.parametrize("model, settings, count", [
    ("vit_small_vanilla", {"width": 96, "depth": 8}, 358186),
    ("vit_small_simplified", {"width": 96, "depth": 8}, 209210),
    ("vit_small_vanilla", {"width": 128, "depth": 8}, 629130),
    ("vit_small_simplified", {"width": 128, "depth": 8}, 364954),
    ("vit_small_vanilla", {"width": 128, "depth": 12}, 927370),
    ("vit_small_simplified", {"width": 128, "depth": 12}, 531106)])
def test_the_blogs_six_counts_hold_in_every_reading(model, settings, count):
    other = {"layout": "one-norm"} if model == "vit_small_vanilla" else {"block": "sequential"}
    for reading in ({}, other):
        with torch.device("meta"):
            built = create_model(model, **settings, **reading)
        assert sum(p.numel() for p in built.parameters()) == count


def test_runs_stored_before_the_defaults_changed_keep_their_keys():
    """A config leaves out the earlier default (one-norm, sequential): the stored runs of our earlier reading keep
    their keys, and today's default simplified run is the stored SAS-P run."""
    config = run_config("vit_small_simplified", profile="budget", width=128, depth=8, heads=4, patch=4)
    assert config["model_overrides"]["block"] == "parallel" and config_key(config) == "e37049d575b0c171"
    sequential = run_config("vit_small_simplified", profile="budget", width=128, depth=8, heads=4, patch=4,
                            block="sequential")
    assert "block" not in sequential["model_overrides"] and config_key(sequential) == "7ba328dc4614b0e4"
    one_norm = run_config("vit_small_vanilla", profile="budget", width=128, depth=8, heads=4, patch=4,
                          layout="one-norm")
    assert "layout" not in one_norm["model_overrides"] and config_key(one_norm) == "57690c444203b22b"
    assert run_model_settings(one_norm)["layout"] == "one-norm" and run_model_settings(config)["block"] == "parallel"


def test_the_intros_finding_counts_our_earlier_readings_runs_at_chance_from_the_store(tmp_path):
    from vixnb.report.claims import found as findings
    from vixnb.results import ResultsStore

    assert findings.earlier_reading(ResultsStore(tmp_path)) == (0, 0)  # an empty store: nothing to say
    from vixnb.book.execute import repo_root

    committed = ResultsStore(repo_root() / "results")  # the committed store: 9 runs, kept as they were made
    dead, made = findings.earlier_reading(committed)
    assert made == 9 and 0 < dead <= made
    # the count is the chapter's own table of what died (issue 56: the intro said 6 where the table lists 7)
    from vixnb import papers, report
    from vixnb.runs.asked import row_specs

    chapter = papers.book_chapter("shaped", "simplified")
    runs = {row: [r for s in specs if (r := committed.get(s.config))]
            for row, specs in row_specs("shaped", chapter, "earlier_reading", "budget")}
    listed = report.records.runs_at_chance(runs, {})
    assert dead == sum(int(n.split(" of ")[0]) for n in listed["seeds at chance"])


def test_the_runs_overview_says_once_what_every_run_shares():
    """The chapter's "The training runs" table was 706 px wide in a 676 px column: what every row shares (settings,
    epochs, a device, the models' common prefix) is said once, in the caption."""
    from vixnb.report.records import runs_overview

    def rec(model, status="done", device="H100", **overrides):
        return {"status": status, "provenance": {"device": device},
                "config": {"model": model, "epochs": 10, "model_overrides": {"heads": 4, "patch": 4, **overrides}}}

    runs = {"exp1_vanilla": [rec("vit_small_vanilla", depth=8), rec("vit_small_vanilla", "failed", depth=8)],
            "exp1_simplified": [rec("vit_small_simplified", depth=8, block="parallel")],
            "exp3_simplified": [rec("vit_small_simplified", device="NVIDIA H200", depth=12, block="parallel")]}
    frame, caption = runs_overview(runs)
    assert caption == "Every run: models vit_small_simplified, vit_small_vanilla; heads 4, patch 4; 10 epochs."
    assert list(frame.columns) == ["model", "settings", "seeds done", "device"]
    assert frame.loc["exp1_vanilla"].tolist() == ["vanilla", "depth 8", "1 of 2", "H100"]
    assert frame.loc["exp3_simplified"].tolist() == ["simplified", "block parallel, depth 12", "1 of 1", "H200"]
    one, caption = runs_overview({"a": [rec("vit_small_vanilla")], "b": [rec("vit_small_vanilla", "failed")]})
    assert caption == "Every run: heads 4, patch 4; model vit_small_vanilla; 10 epochs." and "model" not in one
    assert one["settings"].tolist() == ["—", "—"] and one["device"].tolist() == ["H100", "not yet run"]


def test_first_steps_are_the_engines_own_steps_and_a_record_keeps_its_arms_in_order():
    """Issue 47: the stall question's arms are trained by the engine itself (``train.training_steps``): the first
    steps of a run are its steps as a whole run takes them (their mean is the run's first epoch's training loss),
    and a stored record (its JSON sorted) shows the row's own run first, then the arms in the question's order."""
    import json as _json

    from vixnb.analysis.first_steps import arms_frame, first_steps, first_steps_record, ordered_arms
    from vixnb.report.tables import arm_outcomes
    from vixnb.runs.spec import run_config
    from vixnb.engine.train import train

    config = run_config("vit_small_vanilla", profile="smoke", epochs=2, batch_size=4, width=16, depth=2, heads=2,
                        patch=8)
    config["train_size"] = 4 * 5  # five steps an epoch
    steps = first_steps(config, 5)
    whole = train(config, progress=False)
    assert len(steps["loss"]) == 5 and sum(steps["loss"]) / 5 == whole["history"][0]["train_loss"]
    assert sum(steps["acc"]) / 5 == pytest.approx(whole["history"][0]["train_acc"])
    record = _json.loads(_json.dumps(first_steps_record("shaped", "vanilla_stall_w128", "smoke", steps=2),
                                     sort_keys=True))
    assert list(record["arms"]) == sorted(record["arms"]) and list(record["arms"])[0] != "base"  # sorted by the JSON
    assert list(ordered_arms(record))[:3] == ["base", "seed 1", "seed 2"]
    assert arms_frame(record).index[0] == "base" and arms_frame(record).iloc[0, 0] == "none: the row's own run"
    assert "base" not in arm_outcomes(record)


def test_a_first_steps_record_keeps_the_arms_that_still_answer_and_makes_only_the_others(monkeypatch):
    """Issue 55: a new arm costs its own steps: the stored record's arms of the same run and enough steps are kept as
    they were made (their own provenance), an arm read further (``arm_steps``) is made again to its steps."""
    from vixnb.analysis import first_steps as module

    record = module.first_steps_record("shaped", "vanilla_stall_w128", "smoke", steps=2)
    assert all(a["steps"] == 2 and a["provenance"]["measured"] for a in record["arms"].values())
    made, real = [], module.first_steps

    def counted(config, steps, **options):
        made.append(steps)
        return real(config, steps, **options)

    monkeypatch.setattr(module, "first_steps", counted)
    earlier = {**record, "arms": {k: v for k, v in record["arms"].items() if k != "lr 1e-3"}}
    again = module.first_steps_record("shaped", "vanilla_stall_w128", "smoke", steps=2, earlier=earlier)
    assert made == [2] and again["arms"]["base"] == record["arms"]["base"]  # only the missing arm was trained
    assert again["arms"]["lr 1e-3"]["settings"]["lr"] == 0.001
    made.clear()
    longer = module.first_steps_record("shaped", "vanilla_stall_w128", "smoke", steps=3, earlier=record)
    assert made == [3] * len(record["arms"])  # too few steps: every arm is made again
    assert module.arm_steps({"first_steps": 400, "arm_steps": {"warm-up 300 steps": 800}}, "warm-up 300 steps") == 800
    assert module.arm_steps({"first_steps": 400}, "base") == 400 and longer["steps"] == 3
    # the question's own steps (400; the warm-up read to 800): a record whose every arm ran 400 steps makes only the
    # warm-up again, and each arm made is kept as it ends (a run stopped part way keeps it)
    made.clear()
    monkeypatch.setattr(module, "first_steps", lambda config, steps, **_: made.append(steps) or {
        "loss": [2.0] * steps, "acc": [10.0] * steps, "seconds": 1.0})
    at_400 = {**record, "steps": 400, "arms": {k: {**v, "steps": 400, "loss": v["loss"] * 200, "acc": v["acc"] * 200}
                                               for k, v in record["arms"].items()}}
    kept = []
    whole = module.first_steps_record("shaped", "vanilla_stall_w128", "smoke", earlier=at_400, keep=kept.append)
    assert made == [800] and whole["steps"] == 400 and len(whole["arms"]["warm-up 300 steps"]["loss"]) == 800
    assert len(kept) == 1 and set(kept[0]["arms"]) == set(whole["arms"])
    assert {k: len(v["loss"]) for k, v in whole["arms"].items() if k != "warm-up 300 steps"} == \
        {k: 400 for k in whole["arms"] if k != "warm-up 300 steps"}
