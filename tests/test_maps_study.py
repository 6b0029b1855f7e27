"""The maps study's configuration (vixnb/analysis/study.yaml), the weights it keeps, its plan entries and what a
device call packs (issue 17)."""
import os
import time
from pathlib import Path

import pytest

from vixnb import analysis, papers

from vixnb.plan import batch

from vixnb.plan import plan
from vixnb.analysis import records
from vixnb.runs import asked
from vixnb.runs.asked import table_specs
from vixnb.results import ResultsStore
from vixnb.plan.entries import MeasureEntry, TrainEntry
from vixnb.record_kinds import Request
from vixnb.runs.spec import Keep, RunSpec

MAPPED_VIX = {"vit", "vip", "vil", "vin", "hybrid_vit", "hybrid_vip", "hybrid_vil", "hybrid_vin"}


@pytest.mark.parametrize("profile", ["smoke", "budget", "paper"])
def test_every_study_run_is_a_table_row_its_chapter_trains(profile):
    study = analysis.study()
    for label in study["runs"]:
        run = asked.study_run(label, profile)
        spec = study["runs"][label]
        assert (run.model, dict(run.settings)) == papers.row_run(spec["paper"], spec["table"], spec["row"]) or \
            profile == "smoke"
        assert run.seed == 0 and run.dataset == papers.table(spec["paper"], spec["table"])["dataset"]
        assert run.keep == Keep.NONE  # what a run keeps is the keep decision's (table_specs, study_own_specs)
    for name in ("linear", "attribution"):
        assert set(study[name]) <= set(study["runs"])
    assert study["approximation"] in study["runs"]
    assert analysis.study_settings(profile)["images"] >= analysis.study_settings(profile)["shown"]


def test_unknown_profile_and_run_get_one_line_errors():
    with pytest.raises(ValueError, match=r"unknown profile 'huge'; valid profiles: budget, paper, smoke"):
        analysis.study_settings("huge")
    with pytest.raises(ValueError, match=r"'ViQ' is not a run of vixnb/analysis/study.yaml"):
        asked.study_run("ViQ", "budget")
    with pytest.raises(ValueError, match="measurement must be one of"):
        analysis.study_record_name("maps")


def kept_rows(key, book, table, profile):
    """The rows whose runs keep weights (``table_specs``'s one keep decision): only a row's first seed keeps them."""
    rows = table_specs(key, book, table, profile)
    assert all(spec.keep == Keep.NONE for _, specs in rows for spec in specs[1:])
    return {row for row, specs in rows if specs[0].keep != Keep.NONE}


def test_kept_rows_are_the_mapped_and_attributed_runs_that_fit_the_cap():
    vix = papers.training_chapter("vix", "table1")
    assert kept_rows("vix", vix, "table1", "budget") == MAPPED_VIX  # FNet and MLP-Mixer have no map
    cxv = papers.training_chapter("cxv", "table1_cifar10")
    # ResNet-18 is attributed, but its 21.3 MiB of float16 weights are over the 16 MiB cap; ConvMixer and WaveMix
    # have no map
    assert kept_rows("cxv", cxv, "table1_cifar10", "budget") == {"cnv_5_4", "cpv_5_4", "cltv_5_4", "hybrid_vilt_6_8"}
    for table, rows in (("table3", papers.table_models("vix", "table3")),
                        ("table5", ["pit", "pin", "pip", "hybrid_pit", "hybrid_pin", "hybrid_pip"]),
                        ("table6", papers.table_models("vix", "table6"))):
        assert kept_rows("vix", papers.training_chapter("vix", table), table, "budget") == set(rows)
    # the linattn chapter keeps its test table's weights for its prediction panels: on the GPU machine, since a
    # B/16's weights are over the store's cap (runs.keep_where says where)
    assert kept_rows("linattn", papers.training_chapter("linattn", "test"), "test", "budget") == \
        set(papers.table_models("linattn", "test"))
    linattn = table_specs("linattn", papers.training_chapter("linattn", "test"), "test", "budget")
    assert {specs[0].keep for _, specs in linattn} == {Keep.LOCAL}
    vix_specs = dict(table_specs("vix", vix, "table1", "budget"))
    assert vix_specs["vit"][0].keep == Keep.STORE and vix_specs["fnet"][0].keep == Keep.NONE
    shaped = papers.book_chapter("shaped", "simplified")
    assert kept_rows("shaped", shaped, "table5", "budget") == set(papers.table_models("shaped", "table5"))
    # the SAS-P block's alpha/beta variants (Experiments 4-6)
    assert kept_rows("shaped", shaped, "fig10", "budget") == {"exp4_identity", "exp4_attention"}
    assert kept_rows("shaped", shaped, "fig13", "budget") == {"exp5_dynamic", "exp6_inverse_dynamic"}
    assert kept_rows("vix", vix, "table2", "budget") == set()


def test_the_study_says_what_each_map_is_and_which_have_none():
    maps = analysis.study_maps("budget")
    none = {label for label, k in maps.items() if not k["draws"]}
    assert none == {"FNet", "MLP-Mixer", "ResNet-18", "ConvMixer-16", "WaveMix-5"}
    assert maps["ViT"]["source"] == "vix table1, row vit" and maps["CNV-5/4"]["model"] == "cnv_5_4"


def test_the_study_covers_every_mechanism_and_family():
    """Every family file, every token mixer with a map (the Performer's kernels, Hybrid ViLT's linear attention, the
    four convolutional-transformer families with their X mixers) and the RoPE forms are runs of the study; "no
    attention map" only where no token-to-token matrix exists (FNet, the token MLP, the convolutional models)."""
    from vixnb.models import list_models, model_family

    maps = analysis.study_maps("budget")
    assert {model_family(k["model"]) for k in maps.values()} == {model_family(m) for m in list_models()}
    described = " | ".join(k["map"] for k in maps.values())
    for mechanism in ("phi: positive orthogonal random features", "phi: ReLU of q and k", "phi: exp of q and k",
                      "LinformerAttention", "NystromAttention", "ImageLinearAttention", "LeViTAttention",
                      "CCTAttention", "ConvAttention", "ShapedAttention"):
        assert mechanism in described, mechanism
    families = {"levit": {"levit", "levip", "levil", "levin"}, "cct": {"cct", "ccp", "ccl", "ccn"},
                "cvt": {"cvt", "cvp", "cvl", "cvn"}, "pit": {"pit", "pin", "pip"}}
    models = {k["model"] for k in maps.values()}
    for family, members in families.items():
        assert members <= models, family
    assert set(papers.table_models("vix", "table6")) <= models  # the RoPE forms
    assert maps["Hybrid ViLT-6/8"]["model"] == "hybrid_vilt_6_8"
    for label, entry in maps.items():
        if not entry["draws"]:
            assert "no token-to-token matrix" in entry["map"] or "has no attention layer" in entry["map"], label
    # each run has an entry in the plan, the mapped ones that fit the cap keeping their weights
    entries = [e for e in plan.build("budget") if e.job == "train"]
    for label in maps:
        run = asked.study_run(label, "budget")
        assert any(e.key == run.key for e in entries), label


def test_plan_keeps_the_weights_of_the_study_runs_and_measures_after_them():
    entries = plan.build("budget")
    kept = {(e.model, e.dataset) for e in entries if e.job == "train" and e.keep_weights != "no"}
    assert {(m, "cifar10") for m in MAPPED_VIX | {"cnv_5_4", "cpv_5_4", "cltv_5_4"}} <= kept
    assert ("resnet18_cifar", "cifar10") not in kept
    for e in entries:
        if e.job == "train" and e.keep_weights != "no":
            # in the store, or on the GPU machine where the weights are over the store's cap (the B/16 rows)
            assert e.command.endswith(("--keep-weights", "--keep-weights local")) and e.seed == 0
    names = [e.name for e in entries]
    for measurement in records.STUDY_RECORDS:
        name = analysis.study_record_name(measurement)
        measure = entries[names.index(name)]
        assert measure.chapter == "maps" and measure.level == 1 and measure.path == f"budget/measure/{name}.json"
        needed = [i for i, e in enumerate(entries) if isinstance(e, TrainEntry) and e.key in measure.needs]
        assert needed and max(needed) < names.index(name)
    attribution = entries[names.index("maps-attribution-cifar10")]
    assert len(attribution.needs) == 3  # ViT, Hybrid ViT, CPV-5/4 (ResNet-18's weights are not kept)
    assert not any(e.chapter == "maps" for e in plan.build("smoke"))  # a CPU profile measures as it renders


def test_after_needs_moves_a_measurement_behind_the_runs_it_reads():
    a, b, c = (TrainEntry(chapter="c", paper="p", name=name, profile="budget",
                          spec=RunSpec.of("vit", profile="budget", depth=depth))
               for name, depth in zip("abc", (1, 2, 3)))
    m = MeasureEntry(chapter="c", paper="p", name="m", profile="budget", path="budget/measure/m.json",
                     request=Request("maps-attention"), needs=frozenset({a.key, c.key}))
    assert [e.name for e in plan.after_needs([m, a, b, c])] == ["a", "b", "c", "m"]
    assert [e.name for e in plan.after_needs([a, c, b, m])] == ["a", "c", "b", "m"]  # already after: unmoved


def test_pack_since_brings_back_only_what_this_call_wrote(tmp_path):
    folder = ResultsStore().root / "budget"
    (folder / "weights").mkdir(parents=True)
    old, new = "vit-cifar10-seed0-00000000000000aa", "vit-cifar10-seed1-00000000000000bb"  # stored runs' names
    for path in (folder / f"{old}.json", folder / "weights" / f"{old}.pt", folder / f"{new}.json",
                 folder / "weights" / f"{new}.pt"):
        path.write_text("{}")
    start = time.time()
    long_ago = start - 3600
    for path in (folder / f"{old}.json", folder / "weights" / f"{old}.pt"):  # the store that travelled with the tree
        os.utime(path, (long_ago, long_ago))
    _, packed, _ = batch.pack(tmp_path / "out.tar.gz", "budget", since=start - 1)
    assert packed == [f"results/budget/{new}.json", f"results/budget/weights/{new}.pt"]
    _, packed, _ = batch.pack(tmp_path / "all.tar.gz", "budget")
    assert len(packed) == 4


def _small_study(monkeypatch, **extra):
    study = dict(analysis.study())
    study.update(runs={k: study["runs"][k] for k in ("ViT", "FNet", "ResNet-18", "simplified block")},
                 linear=["ViT"], attribution=["ViT", "ResNet-18"], approximation="ViT",
                 approximation_features=[16, 64], approximation_landmarks=[16, 2048], **extra)
    monkeypatch.setattr(records, "study", lambda: study)
    return study


def test_study_record_measures_trained_runs_and_marks_the_rest(monkeypatch):
    from vixnb import report

    _small_study(monkeypatch)
    # nothing trained and compute="never": the record is not stored, and says which runs are missing
    unstored = report.records.study_measurement("attention", profile="smoke", compute="never")
    assert unstored is None  # nothing stored, nothing measured
    with pytest.raises(RuntimeError, match="no trained weights of ViT"):  # the batch: measure, never train
        report.records.study_measurement("attention", profile="smoke", compute="missing", train="never", required=True)
    record = report.records.study_measurement("attention", profile="smoke", compute="missing")
    runs = record["runs"]
    assert runs["FNet"]["status"] == runs["ResNet-18"]["status"] == "no attention map"
    assert runs["FNet"]["kind"].startswith("no attention map")
    vit, simplified = runs["ViT"], runs["simplified block"]
    assert vit["status"] == simplified["status"] == "done" and len(vit["weights_sha256"]) == 64
    assert vit["start"] == "cls" and vit["residual"] and not simplified["residual"]
    shown = analysis.study_settings("smoke")["shown"]
    side = int((vit["tokens"][-1] - 1) ** 0.5)
    assert len(vit["rollout"]) == shown and len(vit["rollout"][0]) == side
    assert len(vit["centre_query"]) == 1 and "centre_query" not in simplified  # only the `linear` runs
    layers = len(vit["layers"])
    assert len(vit["entropy"]) == len(vit["prominence"]) == len(vit["distance_px"]) == layers
    errors = vit["approximation"]
    assert sorted(errors["performer"]) == [16, 64] and errors["omitted"] == {"nystrom": [2048]}
    assert len(errors["performer"][16]["per_layer"]["tv"]) == errors["layers"]
    assert record["provenance"]["profile"] == "smoke" and \
        len(record["panel"]) == analysis.study_settings("smoke")["images"]
    # stored whole: read back without measuring, and stale once a run's weights change
    store = ResultsStore()
    assert report.records.study_measurement("attention", profile="smoke", compute="never")["runs"]["ViT"] == \
        store.load_record("measure", analysis.study_record_name("attention"), profile="smoke")["runs"]["ViT"]
    assert analysis.record_stale(record, store) is None
    # the study's sizes or runs changed in study.yaml: the stored record no longer answers
    changed = {**record, "settings": {**record["settings"], "images": 99}}
    assert "smoke settings changed" in analysis.record_stale(changed, store)
    fewer = {**record, "runs": {k: v for k, v in record["runs"].items() if k != "FNet"}}
    assert "attention runs changed" in analysis.record_stale(fewer, store)


def test_over_the_cap_runs_are_not_kept_and_say_why(monkeypatch):
    from vixnb.runs.make import WEIGHTS_LIMIT_MB

    _small_study(monkeypatch)
    module, run, _ = records.trained("ResNet-18", "budget", "never", ResultsStore())
    assert module is None and run["status"] == "not kept"
    assert f"over the {WEIGHTS_LIMIT_MB} MiB cap" in run["reason"]


def test_the_panel_indices_are_pinned():
    """The same images on every page and in every profile: the panel's test indices, written out."""
    assert analysis.panel("synthetic") == [1, 22, 11, 5, 4, 19, 0, 3, 15, 2, 10, 34, 36, 16, 9, 21, 44, 6, 25, 7]


def test_the_cifar10_panel_is_the_first_image_of_each_class_in_turns():
    from vixnb.data import DatasetNotFoundError

    try:  # image folders are read class by class in turns, so the first of each class comes first
        assert analysis.panel("cifar10") == list(range(20))
    except DatasetNotFoundError:
        pytest.skip("no CIFAR-10 copy here (VIXNB_DATA): its panel is checked where one is")


def test_the_pipeline_check_maps_one_run_per_mechanism_and_family_and_a_gpu_profile_every_run():
    from vixnb.runs.asked import study
    from vixnb.analysis.records import study_labels
    from vixnb.report.claims import synthesis

    runs, check = study()["runs"], study()["pipeline_check"]
    assert set(check) <= set(runs) and set(study()["attribution"]) <= set(check)
    assert study_labels("attention", "budget") == list(runs) == study_labels("attention")
    assert study_labels("attention", "smoke") == [label for label in runs if label in check]
    assert study_labels("attention", "budget-rehearsal") == study_labels("attention", "smoke")
    # every mechanism of the study is in the check
    mechanisms = {label: synthesis.mechanism(*papers.row_run(s["paper"], s["table"], s["row"])) for label, s in
                  runs.items()}
    assert {mechanisms[label] for label in check} == set(mechanisms.values())


def test_the_pipeline_check_holds_every_run_the_maps_page_names():
    import json

    from vixnb.runs.asked import study

    source = "".join("".join(c["source"])
                     for c in json.load(open(Path(__file__).parents[1] / "notebooks" / "maps.ipynb"))["cells"]
                     if c["cell_type"] == "code")
    named = {label for label in study()["runs"] if f'"{label}"' in source}
    assert named and named <= set(study()["pipeline_check"])


def test_whether_a_map_is_drawn_is_the_mixer_s_declaration_not_its_sentence():
    import torch.nn as nn

    from vixnb.layers import maps

    class Declared(nn.Module):  # says nothing of maps in words, declares it has none
        map_description = "a mixing whose line does not begin with the usual words"
        draws_map = False

        def attention_map(self, x):
            raise NotImplementedError

    class Worded(nn.Module):  # its words begin as a map-less mixer's do; it declares nothing: it has a map
        map_description = "no attention map, say these words, yet the class draws one"

        def attention_map(self, x):
            return x

    assert [name for name, _ in maps.mappers(nn.Sequential(Declared(), Worded()))] == ["1"]
    assert maps.model_draws_map(nn.Sequential(Declared())) is False
    assert maps.model_draws_map(nn.Sequential(Worded())) is True


def test_a_model_of_our_own_enters_the_maps_study_by_name(monkeypatch, tmp_path):
    """A model registered in one file of its family (here: in the test) is named in ``study.yaml`` as
    ``{model: NAME}``: the study asks for its run itself (the plan lists it under the maps chapter, keeping its
    weights), and the study's records read it as they read a paper's row."""
    from vixnb.models import register_model
    from vixnb.models.registry import CFGS, MODELS

    @register_model(paper="vix", label="ViT, one block (ours)")
    def vit_one_block_ours(**kwargs):
        return MODELS["vit"](**{**kwargs, "depth": 1})

    import yaml

    def study_file(runs):  # study.yaml with these runs: every reader of the study reads it (``asked.study``)
        path = tmp_path / f"study-{len(list(tmp_path.iterdir()))}.yaml"
        path.write_text(yaml.safe_dump({**yaml.safe_load(asked.STUDY_FILE.read_text()), "runs": runs}))
        monkeypatch.setattr(asked, "STUDY_FILE", path)
        asked.study.cache_clear()

    ours_run = {"model": "vit_one_block_ours", "settings": {"batch_size": 128}}  # the protocol's batch is per model
    study = asked.study()
    try:
        study_file({**study["runs"], "Ours": ours_run})
        assert asked.study_run("Ours", "budget") == RunSpec.of("vit_one_block_ours", dataset="cifar10",
                                                               profile="budget", seed=0, batch_size=128)
        [(label, spec)] = asked.study_own_specs("budget")
        assert (label, spec.model, spec.dataset, spec.keep) == ("Ours", "vit_one_block_ours", "cifar10", Keep.STORE)
        entries = plan.build("budget", chapter=["maps"])
        [ours] = [e for e in entries if isinstance(e, TrainEntry) and e.name == "Ours"]
        assert (ours.chapter, ours.level, ours.keep_weights, ours.key) == ("maps", 1, Keep.STORE, spec.key)
        readers = [e for e in entries if isinstance(e, MeasureEntry) and spec.key in e.needs]
        assert {e.name for e in readers} == {"maps-attention-cifar10", "maps-attribution-cifar10"} or \
            {e.name for e in readers} == {"maps-attention-cifar10"}
        maps = records.study_maps("budget")
        assert maps["Ours"]["source"] == "the study's own run" and maps["Ours"]["draws"]
        from vixnb.report.tables.maps import OWN_RUNS, map_groups

        groups = map_groups({}, asked.study()["runs"], maps)
        assert groups[OWN_RUNS] == ["Ours"] and list(groups)[-1] == OWN_RUNS  # its own group, after the papers'
        # over the store's cap, the study keeps none of its weights and its records do not wait for it
        monkeypatch.setattr(asked, "weights_too_large", lambda config: "over the cap")
        [(_, over)] = asked.study_own_specs("budget")
        assert over.keep == Keep.NONE
        monkeypatch.undo()
        study_file({**study["runs"], "Ours": ours_run})
        study_file({**study["runs"], "Ours": {"model": "vit_one_block_ours"}})
        with pytest.raises(ValueError, match=r"'vit_one_block_ours': the vix paper's protocol gives no batch_size for "
                                             r"it; pass batch_size="):
            asked.study_own_specs("budget")
        study_file({**study["runs"], "Ours": {"model": "vit_nowhere"}})
        with pytest.raises(ValueError, match=r"run 'Ours' names model 'vit_nowhere', which is not registered"):
            asked.study_run("Ours", "budget")
    finally:
        for registry in (MODELS, CFGS):
            registry.pop("vit_one_block_ours", None)
        monkeypatch.undo()
        asked.study.cache_clear()
