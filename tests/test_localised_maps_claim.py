"""The blog's Fig. 8 claim ("localised vs chaotic" attention maps, paper `shaped`) read by its proxy: the entropy of
the class token's attention over the patches (``analysis.class_token_entropy``), a claims metric of the chapter's
attention-map record (``record_kinds.KINDS["attention_maps"]``), simplified over vanilla."""
import math

import pytest
import torch

from vixnb import papers
from vixnb.analysis import class_token_entropy
from vixnb.book.execute import repo_root
from vixnb.record_kinds import kept_runs, all_requests, record_name
from vixnb.report.claims import ours as claim_figures
from vixnb.report.claims import rules
from vixnb.report.claims.verdicts import FAILS, HOLDS, NOT_RUN, claims, protocol_note
from vixnb.results import ResultsStore

CLAIM = "shaped-fig8-localised-maps"
#: the chapter's attention-map record, as its paper file asks for it
REQUEST = next(r for r in all_requests() if r.kind == "attention_maps" and r.paper == "shaped")


def test_the_entropy_of_one_patch_is_0_and_of_n_patches_evenly_log_n():
    one_hot, even = [0.0, 0.0, 1.0, 0.0], [0.25] * 4
    # (images, layers, patches): layer 0 one-hot in both images, layer 1 even in one and one-hot in the other
    entropy = class_token_entropy([[one_hot, even], [one_hot, one_hot]])
    assert entropy.shape == (2,) and entropy[0].item() == 0.0
    assert entropy[1].item() == pytest.approx(math.log(4) / 2, abs=1e-12)
    # a row is made a distribution first: the class token's own column is not in it, so rows need not sum to 1
    assert class_token_entropy([[[2.0, 2.0, 0.0, 0.0]]]).item() == pytest.approx(math.log(2), abs=1e-12)
    assert class_token_entropy(torch.full((3, 5, 64), 0.01)).tolist() == pytest.approx([math.log(64)] * 5, abs=1e-12)
    with pytest.raises(ValueError, match="images, layers, patches"):
        class_token_entropy([0.5, 0.5])


def test_the_claim_is_read_by_its_proxy_and_the_budget_decides_only_its_ordering():
    claim = next(c for c in papers.claims("shaped") if c["id"] == CLAIM)
    assert "entropy of the class token's attention" in claim["reading"] and "not_testable" not in claim
    assert claims("shaped", {}).loc[CLAIM, "our verdict"] == NOT_RUN
    # the entropy depends on the epochs trained: under the budget's shorter protocol the ordering (ratio < 1) is
    # judged, naming each side's epochs, a magnitude never; the smoke profile decides nothing
    assert protocol_note("shaped", claim, "budget") == (
        True, "Simplified (exp3_simplified) 10 of 50 epochs, Vanilla (exp3_vanilla) 10 of 50")
    assert protocol_note("shaped", {**claim, "value": 0.5}, "budget")[0] is False
    assert protocol_note("shaped", claim, "smoke")[0] is False


def _verdict(store, profile="budget"):
    ours, _ = claim_figures.ours_from_store("shaped", profile, store=store, count_flops=False)
    row = claims("shaped", ours, profile=profile).loc[CLAIM]
    return row, ours


def test_the_claim_on_the_committed_store_names_the_run_that_did_not_learn():
    """The budget store holds the attention-map record of Experiment 3's kept weights (made on a CPU from them): the
    vanilla's run did not learn (training accuracy flat near 20 %), so its maps decide nothing, and the verdict says
    which run."""
    from vixnb.report.claims.rules import NOT_LEARNED

    store = ResultsStore(repo_root() / "results")
    record = store.load_record("measure", record_name(REQUEST), profile="budget")
    assert record is not None and record["provenance"]["device_type"] == "cpu"
    row, _ = _verdict(store)
    assert row["our verdict"] == NOT_LEARNED and row["why no verdict"].startswith("Vanilla (exp3_vanilla): training")


def _configs(profile="budget"):
    return {row: spec.config for row, spec in kept_runs(REQUEST, profile).items()}


def _planted(store, maps, *, profile="budget", dataset="cifar10", made_in="budget"):
    """An attention-map record as ``analysis.attention_record`` stores it (five panel images, twelve layers, 64
    patches; a GPU's provenance), of the chapter's Experiment 3 runs, whose class token's rows are ``maps``."""
    configs, kept = _configs(made_in), kept_runs(REQUEST, made_in)
    runs = {row: {"status": "done", "model": config["model"], "settings": dict(kept[row].settings), "seed": 0,
                  "config": config, "weights_sha256": "0" * 64, "class_token": maps[row],
                  "prominence": [[1.0] * 4] * 12, "prominence_softmax": [[1.0] * 4] * 12, "identity_share": [],
                  "training": {"device": "NVIDIA H100 80GB HBM3", "profile": made_in, "seed": 0}}
            for row, config in configs.items() if row in maps}
    record = {"dataset": dataset, "panel": [3, 6, 25, 0, 22], "prominence_images": 1000, "runs": runs,
              "provenance": {"device": "NVIDIA H100 80GB HBM3", "device_type": "cuda", "profile": made_in,
                             "dataset": "cifar10", "measured": "2025-01-01T00:00:00Z"}}
    store.save_record("measure", record_name(REQUEST), record, profile=profile)
    return configs


def _maps(row):
    """Five images x twelve layers of one row: half the mass on two patches (entropy log 2), or even (log 64)."""
    two = [0.5, 0.5] + [0.0] * 62
    return [[two if row == "localised" else [1 / 64] * 64] * 12] * 5


def test_a_planted_gpu_record_decides_the_claim_by_the_entropy_ratio(tmp_path):
    store = ResultsStore(tmp_path)
    _planted(store, {"exp3_simplified": _maps("localised"), "exp3_vanilla": _maps("even")})
    row, ours = _verdict(store)
    assert row["our verdict"] == HOLDS and row["our figure"] == pytest.approx(math.log(2) / math.log(64), abs=1e-9)
    assert "epochs" in row["why no verdict"]  # an ordering judged under the budget's shorter protocol, which it names
    assert ours["cifar10"]["exp3_vanilla"]["class_token_entropy"] == pytest.approx(math.log(64), abs=1e-9)
    facts = ours.facts["cifar10"]["exp3_simplified"]["attention_maps"]
    assert facts.devices == frozenset({"NVIDIA H100 80GB HBM3"}) and \
        facts.epochs == _configs()["exp3_simplified"]["epochs"]
    # the other way round it does not hold
    _planted(store, {"exp3_simplified": _maps("even"), "exp3_vanilla": _maps("localised")})
    assert _verdict(store)[0]["our verdict"] == FAILS


def test_a_record_of_a_run_at_chance_decides_nothing(tmp_path):
    store = ResultsStore(tmp_path)
    configs = _planted(store, {"exp3_simplified": _maps("localised"), "exp3_vanilla": _maps("even")})
    at_chance = [{"epoch": e, "train_acc": 10.0, "select_top1": 10.06} for e in (1, 2)]
    store.put(configs["exp3_vanilla"], {"status": "done", "config": configs["exp3_vanilla"], "top1": 10.06,
                                        "history": at_chance})
    row, _ = _verdict(store)
    assert row["our verdict"] == rules.FAILED and "at chance" in row["why no verdict"]


def test_a_smoke_record_never_yields_a_verdict(tmp_path):
    store = ResultsStore(tmp_path)
    maps = {"exp3_simplified": _maps("localised"), "exp3_vanilla": _maps("even")}
    # made on the smoke profile's synthetic images: not read, even where it sits among the budget's records
    _planted(store, maps, dataset="synthetic", made_in="smoke")
    assert _verdict(store)[0]["our verdict"] == NOT_RUN
    _planted(store, maps, made_in="smoke")  # a smoke provenance: not read either
    assert _verdict(store)[0]["our verdict"] == NOT_RUN
    # the smoke profile's own record: a pipeline check decides nothing
    _planted(store, maps, profile="smoke", dataset="synthetic", made_in="smoke")
    assert _verdict(store, "smoke")[0]["our verdict"] == NOT_RUN
