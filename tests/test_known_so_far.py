"""What the blog chapter knows so far (issue 56), in words computed from the stored records: every arm a first-steps
record holds, each over the steps it ran, with its CPU seconds; the whole runs; the recipe and what stays unexplained.
"""
import copy
import json
from pathlib import Path

import pytest

from vixnb.report.tables import questions
from vixnb.results import ResultsStore

REPO = Path(__file__).resolve().parents[1]
MEASURE = REPO / "results" / "budget" / "measure"
NAMES = {"vanilla_gap_w96": "width 96", "vanilla_stall_w128": "width 128"}


@pytest.fixture(scope="module")
def records():
    if not (MEASURE / "shaped-first-steps-vanilla_stall_w128.json").is_file():
        pytest.skip("the committed first-steps records are not in this checkout")
    return {q: json.loads((MEASURE / f"shaped-first-steps-{q}.json").read_text()) for q in NAMES}


def known(records):
    return questions.known_so_far("shaped", "simplified", records, "budget", names=NAMES,
                                  store=ResultsStore(REPO / "results"))


def test_the_section_says_what_the_stored_records_give(records):
    text = known(records)
    lines = text.split("\n")
    assert lines[0].startswith("- **width 96**, in whole runs at 10 of the paper's 50 epochs (bf16 on a GPU): "
                               "Simplified leads Vanilla by 10.82 points of final training accuracy (65.05 against "
                               "54.24 %, 3 against 3 seeds)")
    assert "*warm-up 300 steps* (warmup\\_steps=300: +12.0), *standard block* (layout=standard: +6.9)" in text
    assert "Vanilla did not learn (1 of 1 seed: training accuracy 21.2 -> 20.4 %" in text
    assert "of 12 arms, 4 left the plateau of the row's own run" in text
    # the GPU arms still to run, in one line (none has a stored whole run yet)
    assert "Whole runs of its arms *fp32*, *warm-up 300 steps*, *lr 1e-3*, *He and Hofmann's recipe*, *init std " \
           "0.02*: not yet run (the plan holds them: `vixnb plan --profile budget`)." in text
    for arm in ("*warm-up 300 steps* (warmup\\_steps=300: +24.4)", "*lr 1e-3* (lr=0.001: +29.1)",
                "*init std 0.02* (init\\_std=0.02: +10.7)", "*clipping at 1* (grad\\_clip=1.0: +1.2)"):
        assert arm in text, arm
    # the warm-up read near its peak, then on to step 800; the recipe's short warm-up read well past its peak
    assert "*warm-up 300 steps*: its lead is read at steps 381–400, 81 to 100 steps after its learning rate reached " \
           "its peak at step 300; it ran on to step 800, where its last 20 steps average 52.1 %" in text
    assert "283 to 302 steps after its learning rate reached its peak at step 98. " in text
    assert "AdamW at lr 0.003 with no warm-up" in text and "the paper trained without them" in text
    assert "*warm-up 300 steps* kept learning for 500 steps at the paper's peak learning rate (52.1 % at step 800 " \
           "against 42.2 % at steps 381–400" in text
    assert "so the stall reads as the missing warm-up's" in text and "(*lr 1e-3* +29.1) avoids those steps" in text
    assert "is not a GPU's bf16" in text and "CPU seconds each" in text
    assert "../../../records/budget/measure/shaped-first-steps-vanilla_stall_w128.json" in text


def test_every_arm_a_record_holds_is_read_each_over_its_own_steps(records):
    """Another developer adds arms (He and Hofmann's recipe pieces, the warm-up run to step 800): the section names
    them from the record, reads a longer arm on the steps both ran, and tells the learning rate from the warm-up."""
    stall = copy.deepcopy(records["vanilla_stall_w128"])
    first = ("base", "seed 1", "seed 2", "fp32", "fp32 loss", "warm-up 300 steps", "LayerNorm bias", "standard block")
    stall["arms"] = {a: v for a, v in stall["arms"].items() if a in first}  # the record's first eight arms
    base, warm = stall["arms"]["base"], stall["arms"]["warm-up 300 steps"]
    warm.update(steps=400, loss=warm["loss"][:400], acc=warm["acc"][:400])  # as it was: its first 400 steps

    def arm(settings, lead, steps=400, seconds=300.0):
        made = {**copy.deepcopy(base), "settings": {**base["settings"], **settings}, "acc": [
            a + lead for a in (base["acc"] + base["acc"])[:steps]]}
        if seconds is None:
            made.pop("seconds")
        else:
            made["seconds"] = seconds
        return made

    stall["arms"].update({"lr 1e-3": arm({"lr": 0.001}, 9.0), "clip 1": arm({"grad_clip": 1.0}, 0.5, seconds=None),
                          "init std 0.02": arm({"init_std": 0.02}, 1.0),
                          "warm-up to step 800": {**copy.deepcopy(warm), "acc": warm["acc"] + [50.0] * 400,
                                                  "seconds": 410.0}})
    text = known({**records, "vanilla_stall_w128": stall})
    assert "of 11 arms, 3 left the plateau" in text
    for name in ("*lr 1e-3* (lr=0.001: +9.0)", "*clip 1* (grad\\_clip=1.0: +0.5)",
                 "*init std 0.02* (init\\_std=0.02: +1.0)", "*warm-up to step 800* (warmup\\_steps=300: +24.4)"):
        assert name in text, name
    assert "it ran on to step 800, where its last 20 steps average 50.0 % training accuracy" in text
    assert "not told apart" not in text and "the peak learning rate (*lr 1e-3* +9.0)" in text
    assert "gradient clipping (*clip 1* +0.5)" in text and "1 keep none" in text
