"""The verdict rules (``vixnb.report.claims.rules``) as ``claims.verdicts.evaluate`` applies them: a failed run, a
magnitude from a shorter protocol, times across devices or precisions and one seed's noise decide nothing."""
import pytest

from vixnb.report.claims import verdicts as C
from vixnb.report.claims import rules as V
from vixnb.report.claims.parts import AUTHORS
from vixnb.report.claims.schema import ClaimError


def record(top1, *, train_acc=None, epochs=10, device="NVIDIA H100 80GB HBM3", precision="bf16", grads=(1.0, 0.5),
           seconds=5.0):
    history = [{"epoch": e, "train_acc": train_acc if train_acc is not None else top1, "select_top1": top1,
                "seconds": seconds, "grad_norms": list(grads)} for e in range(1, epochs + 1)]
    return {"status": "done", "top1": top1, "config": {"epochs": epochs, "precision": precision},
            "provenance": {"device": device}, "history": history}


def figures(runs, dataset="cifar10", classes=10):
    """``Figures`` of ``{model: [records]}``: mean top-1, final training accuracy and epoch time, with the facts."""
    ours = V.Figures({dataset: {m: {"top1": sum(r["top1"] for r in rs) / len(rs),
                                    "train_acc_final": sum(r["history"][-1]["train_acc"] for r in rs) / len(rs),
                                    "epoch_s": rs[0]["history"][-1]["seconds"]} for m, rs in runs.items()}})
    ours.facts[dataset] = {m: {"runs": V.run_facts(rs, classes, name=m)} for m, rs in runs.items()}
    return ours


def claim(a, b, *, metric="top1", method="point_gain", op="greater", value=0.0, key="vix", **more):
    return {"id": f"{key}-rule", "section": "5.1", "text": "t", "op": op, "value": value, "method": method,
            "metric": metric, "a": a, "b": b, "dataset": "cifar10", **more}


def test_a_run_at_chance_or_with_dead_gradients_decides_nothing():
    at_chance = figures({"vil": [record(10.9, train_acc=9.83)], "vit": [record(40.0)]})
    got = C.evaluate("vix", claim("vit", "vil"), at_chance, profile="budget")
    assert got["our_verdict"] == V.FAILED == "not decided: run failed"
    assert got["why"] == "ViL: training accuracy 9.83 %, test top-1 10.90 %: at chance (10 %)"
    dead = figures({"vil": [record(30.0, grads=(0.0, 0.0))], "vit": [record(40.0)]})
    got = C.evaluate("vix", claim("vit", "vil"), dead, profile="budget")
    assert (got["our_verdict"], got["why"]) == (V.FAILED, "ViL: gradients all zero from epoch 1")
    # 12.1 % is outside the 2-point margin of chance: a run that learned a little decides
    learned = figures({"vil": [record(12.1, train_acc=12.1)], "vit": [record(40.0)]})
    assert C.evaluate("vix", claim("vit", "vil"), learned, profile="budget")["our_verdict"] == "holds"
    # a parameter count does not rest on the run: the failed run does not matter there
    assert C.evaluate("vix", claim("vit", "vil", metric="params", method="ratio", value=1.0),
                      V.Figures({"cifar10": {"vit": {"params": 2.0}, "vil": {"params": 1.0}}},
                                facts=at_chance.facts), profile="budget")["our_verdict"] == "holds"


def test_a_magnitude_needs_the_papers_epochs_a_sign_says_each_sides_fraction():
    ours = figures({"fnet": [record(30.0)], "vit": [record(40.0)]})
    about = C.evaluate("vix", claim("fnet", "vit", method="relative_gain", op="approx", value=-10.0, tolerance=30),
                       ours, profile="budget")
    assert about["our_verdict"] == V.PROTOCOL
    assert about["why"] == "a magnitude is judged only at the paper's epochs (FNet 10 of 100 epochs, ViT 10 of 40)"
    # a sign: every side at the same share of its own paper's protocol (ViT and ViL: 10 of 40 epochs each)
    both = figures({"vil": [record(30.0)], "vit": [record(40.0)]})
    sign = C.evaluate("vix", claim("vit", "vil"), both, profile="budget")
    assert (sign["our_verdict"], sign["why"], sign["seeds"]) == ("holds", "ViT 10 of 40 epochs, ViL 10 of 40", 1)
    # FNet at 10 of its 100 epochs against ViT at 10 of 40: different shares decide not even a sign (issue 56, vix 41)
    unequal = C.evaluate("vix", claim("vit", "fnet"), ours, profile="budget")
    assert (unequal["our_verdict"], unequal["why"]) == (V.PROTOCOL, "the sides ran different shares of their own "
                                                        "paper's protocol (ViT 10 of 40 epochs (25%), FNet 10 of 100 "
                                                        "(10%))")
    # both at the paper's epochs or beyond: the shares are whole
    whole = figures({"fnet": [record(30.0, epochs=100)], "vit": [record(40.0, epochs=40)]})
    assert C.evaluate("vix", claim("vit", "fnet"), whole, profile="paper")["our_verdict"] == "holds"
    # the paper's own epochs judge the magnitude
    full = figures({"fnet": [record(30.0, epochs=100)], "vit": [record(40.0, epochs=40)]})
    got = C.evaluate("vix", claim("fnet", "vit", method="relative_gain", op="approx", value=-10.0, tolerance=30),
                     full, profile="budget")
    assert (got["our_verdict"], got["why"]) == ("holds", "")


def test_times_only_within_one_device_and_precision():
    ours = figures({"exp1_simplified": [record(50.0, seconds=4.0, device="NVIDIA H200")],
                    "exp1_vanilla": [record(45.0, seconds=5.0)]})
    sign = claim("exp1_simplified", "exp1_vanilla", key="shaped", metric="epoch_s", method="ratio", op="less",
                 value=1.0)
    got = C.evaluate("shaped", sign, ours, profile="budget")
    assert got["our_verdict"] == V.DEVICE
    assert got["why"] == ("times from Simplified (exp1_simplified) on H200 bf16 against Vanilla (exp1_vanilla) on "
                          "H100 bf16")
    same = figures({"exp1_simplified": [record(50.0, seconds=4.0)], "exp1_vanilla": [record(45.0, seconds=5.0)]})
    assert C.evaluate("shaped", sign, same, profile="budget")["our_verdict"] == "holds"
    # the size of a time only at the paper's precision (the blog's fp32; ours bf16)
    about = {**sign, "method": "relative_gain", "op": "approx", "value": -12.73, "tolerance": 50}
    got = C.evaluate("shaped", about, same, profile="budget")
    assert got["our_verdict"] == V.DEVICE and got["why"].startswith("a time's size is compared only at the paper's "
                                                                    "precision (fp32); ours: bf16")
    fp32 = figures({"exp1_simplified": [record(50.0, seconds=4.0, precision="fp32")],
                    "exp1_vanilla": [record(45.0, seconds=5.0, precision="fp32")]})
    assert C.evaluate("shaped", about, fp32, profile="paper")["our_verdict"] == "holds"


@pytest.mark.parametrize("a_top1, seeds, verdict", [(40.6, 1, V.ONE_SEED), (40.6, 3, "holds"), (45.0, 1, "holds"),
                                                     (39.5, 1, V.ONE_SEED), (35.0, 1, "does not hold")])
def test_one_seed_inside_the_noise_decides_nothing(a_top1, seeds, verdict):
    ours = figures({"hybrid_vit": [record(a_top1)] * seeds, "hybrid_vip": [record(40.0)] * seeds})
    got = C.evaluate("vix", claim("hybrid_vit", "hybrid_vip"), ours, profile="budget")
    assert (got["our_verdict"], got["seeds"]) == (verdict, seeds)
    if verdict == V.ONE_SEED:
        assert got["why"].startswith("one seed, and 1 point of seed noise would turn it")
    # the paper's own reported spread replaces the 1-point default
    wide = C.evaluate("vix", claim("hybrid_vit", "hybrid_vip", spread=6.0), ours, profile="budget")
    assert wide["our_verdict"] == (V.ONE_SEED if seeds == 1 else "holds")


def test_the_page_shows_the_seeds_and_what_a_verdict_rests_on():
    ours = figures({"vit": [record(40.0)], "fnet": [record(30.0)]})
    frame = C.claims("vix", ours, profile="budget", sections=["5.1"])
    row = frame.loc["vix-5.1-fnet-vs-vit"]
    assert C.verdict_text(row) == ("-25.00: not decided: protocol (1 seed; a magnitude is judged only at the paper's "
                                   "epochs (FNet 10 of 100 epochs, ViT 10 of 40))")


def test_the_practitioners_answer_reads_the_fused_costs():
    import pandas as pd
    from vixnb.report.claims import synthesis as S

    costs = pd.DataFrame({"step ms (bf16, H100)": {S.SOFTMAX: 1.89, "Performer": 5.85, "FNet (Fourier mixing)": 0.66},
                          "peak MB (fp32, H100)": {S.SOFTMAX: 360, "Performer": 826, "FNet (Fourier mixing)": 256}})
    text = S.practitioners_answer(costs)
    assert text.startswith("At 1025 tokens (ViX on CIFAR), a fused softmax attention layer takes 1.89 ms a step "
                           "(bf16, H100) and 360 MB (fp32, H100). 1 of the 1 linear-attention mechanisms are slower: "
                           "Performer 5.85 ms. 1 of them also need more memory: Performer 826 MB. Cheaper on both "
                           "counts: FNet (Fourier mixing) 0.66 ms, 256 MB")
    assert S.practitioners_answer(pd.DataFrame()) == ""


def test_each_reason_for_not_deciding_is_explained_once_and_summaries_name_the_ones_present():
    lines = V.why_not_decided().splitlines()
    assert [line.split("*")[1] for line in lines] == list(V.NOT_DECIDED)  # one line per reason, in the rules' order
    assert lines[0] == ("- *not decided: run failed*: a run behind the figure failed: its last training accuracy and "
                        "test top-1 ended within 2 points of chance (100 / classes), or its gradients were all zero; "
                        "the verdict names the run.")
    assert "(1 point where it reports none)" in V.WHY_NOT_DECIDED[V.ONE_SEED]  # the rule's own DEFAULT_SPREAD
    frame = C.claims("vix", figures({"vit": [record(40.0)], "fnet": [record(30.0)]}), profile="budget",
                     sections=["5.1"])
    verdicts = set(frame["our verdict"])
    summary = C.claims_summary(frame)
    present = [v for v in V.NOT_DECIDED if v in verdicts]
    assert V.PROTOCOL in present and summary.endswith("\n\n" + V.why_not_decided(present))
    assert all(f"*{v}*" not in summary for v in V.NOT_DECIDED if v not in verdicts)
    assert "*" not in C.claims_summary(frame[~frame["our verdict"].isin(V.NOT_DECIDED)])  # nothing undecided: no list


def test_the_results_page_links_each_claim_to_its_row_on_its_chapter():
    from vixnb.report.claims import found as findings

    frame = C.claims("vix", figures({"vit": [record(40.0)], "fnet": [record(30.0)]}), profile="budget",
                     sections=["5.1"])
    html = C.claims_page(frame).to_html()
    assert all(f'<span id="claim-{cid}">{n}</span>' in html for n, cid in enumerate(frame.index, 1))
    rows = findings.results_frame({"vix": frame})
    assert list(rows["claim id"]) == list(frame.index)
    assert set(rows["chapter"]) == {"vix_table1"}  # the chapter whose claims_section shows §5.1 (its notebook)
    page = findings.results_table(rows).to_html()
    for cid in frame.index:
        assert f'<a href="vix_table1.html#claim-{cid}">vix_table1</a>' in page
    assert "claim id" not in page and ">vix<" not in page  # the page drops the id and the document columns


def test_the_intros_verdict_finding_gives_the_rules_own_reasons():
    import pandas as pd

    from vixnb.report.claims import found as findings

    verdicts = [C.HOLDS, C.FAILS, V.ONE_SEED, V.ONE_SEED, V.FAILED, C.NOT_RUN, C.NOT_TESTABLE]
    text = findings.verdicts_finding({"vix": pd.DataFrame({"our verdict": verdicts})}, lambda stem, text: text)
    head, *reasons = text.split("\n")
    assert head.startswith("**Our verdicts so far:** of 6 claims testable here, 1 hold and 1 do not on our runs, "
                           "1 are not yet run, and 3 have figures that decide nothing")
    # one text: the ledger's reasons (rules.WHY_NOT_DECIDED), nested under the finding, with their counts
    assert reasons == [f"  - 1 *{V.FAILED}*: {V.WHY_NOT_DECIDED[V.FAILED]}",
                       f"  - 2 *{V.ONE_SEED}*: {V.WHY_NOT_DECIDED[V.ONE_SEED]}"]
    decided = findings.verdicts_finding({"vix": pd.DataFrame({"our verdict": [C.HOLDS]})}, lambda stem, text: text)
    assert (decided.endswith("0 have figures that decide nothing (the results page, the claims ledger).")
            and "\n" not in decided)


def curve(first_acc, last_acc, first_loss, last_loss, *, top1=None, seed=0, epochs=10, precision="bf16"):
    """A done record whose training accuracy and loss go linearly from the first epoch's to the last's."""
    history = [{"epoch": e, "train_acc": first_acc + (last_acc - first_acc) * (e - 1) / (epochs - 1),
                "train_loss": first_loss + (last_loss - first_loss) * (e - 1) / (epochs - 1),
                "select_top1": top1 if top1 is not None else last_acc, "seconds": 5.0} for e in range(1, epochs + 1)]
    return {"status": "done", "top1": history[-1]["select_top1"], "history": history,
            "config": {"epochs": epochs, "precision": precision, "seed": seed}, "provenance": {"device": "GPU"}}


STALLED = dict(first_acc=21.2, last_acc=20.4, first_loss=2.07, last_loss=2.10)  # the width-128 vanilla's run
LEARNED = dict(first_acc=30.4, last_acc=64.7, first_loss=1.9, last_loss=1.0)


def stall_figures(stalled_seeds=1, fp32=()):
    ours = figures({"vit": [curve(**STALLED, seed=s) for s in range(stalled_seeds)],
                    "vil": [curve(**LEARNED, seed=s) for s in range(stalled_seeds)]})
    ours["cifar10"]["vit"]["train_acc_final"] = 20.4
    ours["cifar10"]["vil"]["train_acc_final"] = 64.7
    ours.facts["cifar10"]["vit"]["runs"] = V.run_facts([curve(**STALLED, seed=s) for s in range(stalled_seeds)], 10,
                                                       name="vit", fp32_records=fp32)
    return ours


def test_a_run_that_did_not_learn_decides_nothing_and_is_named():
    """Issue 47: a run 10 points above chance whose training accuracy went 21.2 -> 20.4 % over 10 epochs decides no
    comparison ("not decided: a run did not learn", naming it), though the "run failed" rule (chance) misses it."""
    assert V.failed_reason(curve(**STALLED), 10) == ""  # not at chance
    assert V.not_learned_reason(curve(**LEARNED)) == ""
    for metric in ("top1", "train_acc_final"):
        got = C.evaluate("vix", claim("vil", "vit", metric=metric), stall_figures(), profile="budget")
        assert got["our_verdict"] == V.NOT_LEARNED == "not decided: a run did not learn"
        assert got["why"] == "ViT: training accuracy 21.2 -> 20.4 %, loss 2.07 -> 2.10 over 10 epochs (seed 0)"
    # every seed stalls, but no fp32 run shows that the stall is the model's and recipe's: still nothing decided
    got = C.evaluate("vix", claim("vil", "vit"), stall_figures(3), profile="budget")
    assert got["our_verdict"] == V.NOT_LEARNED and got["why"].endswith("; 3 of 3 seeds")
    # three seeds and fp32 too: it decides, and says so in its own words
    shown = stall_figures(3, fp32=[curve(**STALLED, precision="fp32")])
    got = C.evaluate("vix", claim("vil", "vit"), shown, profile="budget")
    assert got["our_verdict"] == "holds" and got["seeds"] == 3
    assert got["why"].startswith("ViT did not learn in this setting (3 of 3 seeds, fp32 too (1 of 1))")
    # one of the fp32 runs learned: the stall is not the model's
    mixed = stall_figures(3, fp32=[curve(**STALLED, precision="fp32"), curve(**LEARNED, precision="fp32")])
    assert C.evaluate("vix", claim("vil", "vit"), mixed, profile="budget")["our_verdict"] == V.NOT_LEARNED


def test_a_claim_that_predicts_a_failure_is_decided_by_its_measure():
    """A run at chance (or one that did not learn) is what a claim such as "without skips the model does not train"
    predicts: the claim names it in ``predicts_failure`` and its figure decides it."""
    at_chance = figures({"fnet": [record(10.9, train_acc=9.83)], "vit": [record(40.0)]})
    plain = C.evaluate("vix", claim("fnet", "vit", op="less"), at_chance, profile="budget")
    assert plain["our_verdict"] == V.FAILED
    predicted = C.evaluate("vix", claim("fnet", "vit", op="less", predicts_failure=["fnet"]), at_chance,
                           profile="budget")
    assert predicted["our_verdict"] == "holds"
    assert predicted["why"].startswith("the claim predicts the failure of FNet: training accuracy 9.83 %")
    stalled = C.evaluate("vix", claim("vit", "vil", op="less", predicts_failure=["vit"]), stall_figures(),
                         profile="budget")
    assert stalled["our_verdict"] == "holds" and "predicts the failure of ViT" in stalled["why"]
    # a magnitude of the failed run's own measure (shaped 12: the gradient ratio below a tenth) is decided at its last
    # epoch, not held back for the paper's epochs
    vanishing = {"id": "vix-rule", "section": "5.1", "text": "t", "op": "less", "value": 0.1, "method": "value",
                 "metric": "grad_norm_first_last", "a": "fnet", "dataset": "cifar10", "predicts_failure": ["fnet"]}
    at_chance["cifar10"]["fnet"]["grad_norm_first_last"] = 1.8e-7
    got = C.evaluate("vix", vanishing, at_chance, profile="budget")
    assert got["our_verdict"] == "holds" and got["why"].endswith("decided by its measure at the last epoch (FNet 10 of "
                                                                 "100 epochs)")
    without = C.evaluate("vix", {k: v for k, v in vanishing.items() if k != "predicts_failure"}, at_chance,
                         profile="budget")
    assert without["our_verdict"] == V.FAILED
    with pytest.raises(ClaimError, match="`predicts_failure` must list runs the claim compares"):
        C.evaluate("vix", claim("vit", "fnet", predicts_failure=["vin"]), at_chance, profile="budget")


def test_a_claim_with_two_parts_is_judged_on_both():
    """"Nearly identical, the simplified ahead by a small margin": ahead (a sign) and by at most 2 points (a
    magnitude). A 10.8-point lead does not hold; at ten of the paper's epochs the magnitude is not judged, while a
    failing sign is."""
    two = dict(also=[{"op": "at_most", "value": 2}])

    def ours(a, b, epochs=10):  # three seeds each: one seed's noise is not what is tested here
        return figures({"vit": [record(a, epochs=epochs)] * 3, "vil": [record(b, epochs=epochs)] * 3})

    assert C.evaluate("vix", claim("vit", "vil", **two), ours(50.0, 39.2), profile="budget")["our_verdict"] == \
        V.PROTOCOL
    assert C.evaluate("vix", claim("vit", "vil", **two), ours(38.0, 39.2), profile="budget")["our_verdict"] == C.FAILS
    assert C.evaluate("vix", claim("vit", "vil", **two), ours(50.0, 39.2, 40), profile="paper")["our_verdict"] == \
        C.FAILS
    at_paper = C.evaluate("vix", claim("vit", "vil", **two), ours(40.5, 39.2, 40), profile="paper")
    assert at_paper["our_verdict"] == C.HOLDS and at_paper["claimed"] == "> 0 points and ≤ 2 points"


def test_a_time_is_never_undecided_by_what_a_run_learned():
    """Issue 56 (shaped 5 and 8): an epoch's time does not depend on whether the run learned; a stalled run's time
    is compared like any other (the time rules decide)."""
    ours = stall_figures()
    got = C.evaluate("vix", claim("vil", "vit", metric="epoch_s", method="ratio", op="at_most", value=1.0), ours,
                     profile="budget")
    assert got["our_verdict"] == "holds" and "did not learn" not in got["why"]


def test_times_from_two_machine_sessions_decide_nothing_and_name_them():
    """Issue 56 (shaped 8): two runs of one GPU model on two lent machines differ by a fifth in the same
    configuration's epoch time: times are compared only within one session (device, day, commit)."""
    def timed(day, commit):
        made = record(50.0, seconds=4.0)
        made["provenance"] = {"device": "NVIDIA H100 80GB HBM3", "finished": f"{day}T10:00:00Z", "commit": commit,
                              "torch": "2.11.0"}
        return made

    sign = claim("exp1_simplified", "exp1_vanilla", key="shaped", metric="epoch_s", method="ratio", op="less",
                 value=1.0)
    one = figures({"exp1_simplified": [timed("2026-11-26", "d50e197")],
                   "exp1_vanilla": [timed("2026-11-26", "d50e197")]})
    one["cifar10"]["exp1_simplified"]["epoch_s"] = 3.0
    assert C.evaluate("shaped", sign, one, profile="budget")["our_verdict"] == "holds"
    two = figures({"exp1_simplified": [timed("2026-11-25", "d5fec8a")],
                   "exp1_vanilla": [timed("2026-11-26", "d50e197")]})
    two["cifar10"]["exp1_simplified"]["epoch_s"] = 3.0
    got = C.evaluate("shaped", sign, two, profile="budget")
    assert got["our_verdict"] == V.DEVICE == "not decided: times from different machines or precisions"
    assert got["why"] == ("times from 2 machine sessions, not one: Simplified (exp1_simplified) in H100, 2026-11-25, "
                          "d5fec8a against Vanilla (exp1_vanilla) in H100, 2026-11-26, d50e197")


def test_the_figure_shown_is_the_worst_pair_on_every_bound():
    """Issue 56 (vix 23): "more, and at most a quarter more" over six pairs: the pair that fails the second bound is
    shown (1.35), not the one nearest the first (1.01)."""
    bounded = {"id": "vix-rule", "section": "5.2", "text": "t", "op": "greater", "value": 1, "method": "ratio",
               "metric": "params", "a": ["hybrid_vit", "hybrid_fnet"], "b": ["vit", "fnet"], "pairs": "zip",
               "over": "all", "also": [{"op": "at_most", "value": 1.25}], "dataset": "cifar10"}
    ours = {"cifar10": {"hybrid_vit": {"params": 101.0}, "vit": {"params": 100.0}, "hybrid_fnet": {"params": 135.0},
                        "fnet": {"params": 100.0}}}
    got = C.evaluate("vix", bounded, ours)
    assert (round(got["our_figure"], 2), got["our_verdict"]) == (1.35, C.FAILS)
    ours["cifar10"]["hybrid_fnet"]["params"] = 120.0  # both hold: the pair nearest to failing either bound
    got = C.evaluate("vix", bounded, ours)
    assert (round(got["our_figure"], 2), got["our_verdict"]) == (1.01, C.HOLDS)


def test_a_claim_about_the_authors_build_is_judged_on_it_or_says_how_ours_differs():
    """Issue 56 (vix 69 and 70): their ViL-RoPE (one_kv_head=False) has 49,152 parameters more than ViL: judged on
    their build, ours beside it; where ours cannot be built their way, "not decided: our build differs"."""
    same = {"id": "vix-rule", "section": "5.4", "text": "t", "op": "approx", "value": 1, "tolerance": 0,
            "method": "ratio", "metric": "params", "a": ["vil_rope"], "b": ["vil"], "dataset": "cifar10",
            "authors_build": {"how": "one_kv_head=False", "settings": {"vil_rope": {"mixer_options": {
                "one_kv_head": False}}}}}
    ours = V.Figures({"cifar10": {"vil_rope": {"params": 100.0}, "vil": {"params": 100.0},
                                  f"vil_rope{AUTHORS}": {"params": 149.0}}})
    got = C.evaluate("vix", same, ours, profile="budget")
    assert (got["our_verdict"], round(got["our_figure"], 2)) == (C.FAILS, 1.49)
    assert got["why"] == "judged on the authors' build (one_kv_head=False); our build: 1.00, holds"
    differs = {**same, "authors_build": {"how": "their size counts a module's output"}}
    got = C.evaluate("vix", differs, ours, profile="budget")
    assert (got["our_verdict"], got["our_figure"]) == (V.BUILD, 1.0)
    assert got["why"] == "their size counts a module's output; our build's figure: holds"
    with pytest.raises(ClaimError, match="`authors_build` applies to counted metrics"):
        C.evaluate("vix", {**same, "metric": "top1"}, ours, profile="budget")


def test_a_claim_with_a_part_stated_elsewhere_holds_only_where_both_do(monkeypatch):
    """Issue 56 (favor 1, vix 41): "the strongest link" orders the claim's figure above other claims' (``exceeds``);
    "with fewer parameters" is another claim's (``rests_on``): each part decides."""
    from vixnb import papers

    base = {"section": "s", "text": "t", "method": "correlation", "x": "gflops", "y": "train_gb",
            "models": ["vit", "vil", "fnet"], "op": "approx", "value": 0.95, "tolerance": 0.1, "dataset": "cifar10"}
    strong, weak = ({"table": "table2", "row": row, "column": "Train Mem"} for row in ("FLOPS", "θ"))
    entries = [{**base, "id": "favor-strong", "exceeds": ["favor-weak"], "printed": strong},
               {**base, "id": "favor-weak", "x": "params", "op": "at_most", "value": 0.5, "tolerance": None,
                "printed": weak},
               {**base, "id": "favor-both", "rests_on": ["favor-weak"], "printed": strong}]
    for entry in entries:
        entry.pop("tolerance") if entry["tolerance"] is None else None
    monkeypatch.setattr(papers, "claims", lambda key: entries if key == "favor" else [])
    figures_of = lambda flops, params: {"cifar10": {  # noqa: E731
        "vit": {"gflops": 1.0, "train_gb": 1.0, "params": params[0]}, "vil": {"gflops": 2.0, "train_gb": 2.1,
                                                                              "params": params[1]},
        "fnet": {"gflops": 3.0, "train_gb": flops, "params": params[2]}}}
    frame = C.claims("favor", figures_of(3.0, (3.0, 1.0, 2.0)))  # r(flops) ~1, r(params) -0.5
    assert frame.loc["favor-strong", "paper bears it out"] == "yes"  # the printed 0.85 above the printed 0.18
    assert frame.loc["favor-strong", "our verdict"] == C.HOLDS
    assert frame.loc["favor-strong", "why no verdict"] == "its ordering part holds: above each of favor-weak"
    assert frame.loc["favor-both", "our verdict"] == C.HOLDS
    frame = C.claims("favor", figures_of(3.0, (1.0, 2.0, 3.0)))  # r(params) = 1: stronger than flops', not weak
    assert frame.loc["favor-strong", "our verdict"] == C.FAILS
    assert frame.loc["favor-both", "our verdict"] == C.FAILS
    assert frame.loc["favor-both", "why no verdict"] == "its other part, favor-weak: does not hold"
    missing = figures_of(3.0, (1.0, 2.0, 3.0))
    for model in missing["cifar10"].values():
        del model["params"]
    frame = C.claims("favor", missing)
    assert frame.loc["favor-strong", "our verdict"] == frame.loc["favor-both", "our verdict"] == C.NOT_RUN
    # its own figure is shown beside what its other part waits for (the page marked it "not yet run" alone)
    assert C.verdict_text(frame.loc["favor-strong"]).startswith("1.00: not yet run (its ordering part (above each of "
                                                                 "the 1 claims it names) needs 1 of their figures")


def test_a_trend_over_layers_is_read_on_the_learned_layers():
    """Issue 56 (shaped 19): 9 of 12 layers end at their 0.5 initialisation: the trend is read on the 3 that moved,
    and a run none of whose layers moved did not learn what the claim measures."""
    from vixnb.report.records.metrics import METRICS

    def shaped(shares):
        history = [{"epoch": 1, "train_acc": 50.0, "train_loss": 1.0, "select_top1": 50.0,
                    "alpha_beta": [[s, 1 - s] for s in shares]}]
        return {"status": "done", "top1": 50.0, "history": history, "provenance": {"device": "GPU"},
                "config": {"epochs": 10, "precision": "bf16", "seed": 0, "model_overrides": {}}}

    learned = shaped([0.624, 0.59, 0.498, 0.642] + [0.5] * 8)
    metric = METRICS["identity_share_first_last"]
    assert round(metric.per_seed(learned), 1) == -1.8  # 62.4 - 64.2: layers 1, 2 and 4, never the last at 0.5
    assert metric.note([learned]) == ("layers 1, 2 and 4 of 12 moved at least 2 points of share from their "
                                      "initialisation (seed 0); the 9 others sit at it and are left out")
    flat = shaped([0.5] * 12)
    assert metric.per_seed(flat) is None
    fades = {"id": "shaped-rule", "section": "s", "text": "t", "op": "greater", "value": 0, "method": "value",
             "metric": "identity_share_first_last", "a": "exp3_simplified", "dataset": "cifar10"}
    ours = V.Figures({"cifar10": {"exp3_simplified": {}}})
    ours.facts["cifar10"] = {"exp3_simplified": {"runs": V.run_facts([flat], 10, name="exp3_simplified")}}
    got = C.evaluate("shaped", fades, ours, profile="budget")
    assert (got["our_verdict"], got["why"]) == (V.NOT_LEARNED, "Simplified (exp3_simplified): none of its 12 layers "
                                                "moved 2 points of share from its initialisation (seed 0)")


def test_one_statement_of_the_rules_on_the_intro_and_the_results_page():
    """Issue 56: the intro and the results page printed two texts of the rules, neither with "did not learn"; both
    now print ``rules_statement`` (the intro through the file ``write_contents`` writes, the page from its cell)."""
    import json

    from vixnb.book import build
    from vixnb.paths import repo_root

    text = V.rules_statement()
    for words in ("did not learn", "ended within 2 points of chance", "machine session", "same share",
                  "one seed", "authors' build", "two parts", "a time, a memory or a count does not depend on it"):
        assert words in text, words
    intro = (repo_root() / "book" / "intro.md").read_text(encoding="utf-8")
    assert f"{{include}} {build.RULES.relative_to('book').as_posix()}" in intro and "decide nothing." not in intro
    cells = json.loads((repo_root() / "notebooks" / "results.ipynb").read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells]
    assert sum("report.claims.rules_statement()" in s for s in sources) == 1
    assert not any("*not decided*" in s or "ended at chance" in s for s in sources)
