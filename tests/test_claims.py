"""vixnb.report.claims: the claims of the paper files, evaluated on the papers' printed tables and on ours."""
from pathlib import Path

import pytest
import yaml

from vixnb import papers, report
from vixnb.escape import html_text
from vixnb.report.claims import schema as S
from vixnb.report.claims import verdicts as C
from vixnb.report.claims import ours as L
from vixnb.report.claims import rules as V
from vixnb.models import model_cfg
from vixnb.runs.asked import row_runs, run_of
from vixnb.results import ResultsStore

REPO_RESULTS = Path(__file__).resolve().parents[1] / "results"
T1 = papers.table("vix", "table1")["rows"]
T2 = papers.table("vix", "table2")["rows"]
FIXTURE_KEY = "shaped"  # a paper key without a paper file of its own: the fixture file stands in for it


def top1(model, table=T1):
    return table[model]["top1"]


# --------------------------------------------------------------------------------------------------
# a small paper file written for the test


@pytest.fixture
def paper_file(tmp_path, monkeypatch):
    """``write(claims, tables=...)`` writes a paper file for FIXTURE_KEY and makes ``papers`` read it."""
    path = tmp_path / f"{FIXTURE_KEY}.yaml"
    real = papers.paper_file
    monkeypatch.setattr(papers, "paper_file", lambda key: path if key == FIXTURE_KEY else real(key))
    papers.load.cache_clear()

    def write(claim_list, tables=None):
        tables = tables or {"t1": {"caption": "Table 1: toy", "dataset": "cifar10", "rows": {
            "vit": {"top1": 50.0, "gpu_gb": 10.0}, "vin": {"top1": 60.0, "gpu_gb": 4.0},
            "vip": {"top1": 55.0, "gpu_gb": 2.0}, "hybrid_vit": {"top1": 70.0, "gpu_gb": 10.5},
            "hybrid_vin": {"top1": 66.0, "gpu_gb": 4.2}}}}
        path.write_text(yaml.safe_dump({"title": "Toy paper", "tables": tables, "claims": claim_list}, sort_keys=False),
                        encoding="utf-8")
        papers.load.cache_clear()
        return FIXTURE_KEY

    yield write
    papers.load.cache_clear()


def claim(**fields):
    base = {"id": "toy-1", "section": "1", "text": "a claim", "table": "t1"}
    return {**base, **fields}


# --------------------------------------------------------------------------------------------------
# the paper side: figures computed from the printed tables


def paper_row(key, claim_id, ours=None):
    return C.claims(key, ours).loc[claim_id]


def test_relative_gain_from_table1():
    row = paper_row("vix", "vix-5.1-vin-vs-vit")
    assert row["paper figure"] == pytest.approx((65.06 - 56.81) / 56.81 * 100)
    assert row["paper bears it out"] == "yes"  # 14.52 % is within 16 ± 4
    assert "as points the paper's figure would be 8.25" in row["reading"]


def test_relative_gain_that_the_paper_does_not_bear_out():
    row = paper_row("vix", "vix-5.1-vil-vs-vit")
    assert row["paper figure"] == pytest.approx((57.45 - 56.81) / 56.81 * 100)
    assert row["paper bears it out"] == "no"


def test_point_gain_on_tiny_imagenet():
    row = paper_row("vix", "vix-5.1-tiny-fnet-vs-mixer")
    assert row["paper figure"] == pytest.approx(22.75 - 18.47)
    row = paper_row("vix", "vix-5.2-hybrid-vin-over-hybrid-vit")
    assert row["paper figure"] == pytest.approx(75.26 - 73.94) and row["paper bears it out"] == "no"
    assert "as relative % the paper's figure would be 1.79" in row["reading"]


def test_mean_over_zipped_pairs():
    plain = ["vit", "vip", "vil", "vin", "fnet", "mlp_mixer"]
    gains = [(top1(f"hybrid_{m}") - top1(m)) / top1(m) * 100 for m in plain]
    row = paper_row("vix", "vix-5.2-hybrid-gain-mean")
    assert row["paper figure"] == pytest.approx(sum(gains) / 6)
    assert row["paper bears it out"] == "yes"
    points = sum(top1(f"hybrid_{m}") - top1(m) for m in plain) / 6
    assert f"as points the paper's figure would be {points:.2f}" in row["reading"]


def test_all_pairs_shows_the_worst_pair():
    row = paper_row("vix", "vix-5.1-xformers-third-gpu")  # every X-former under a third of ViT's GPU memory
    assert row["paper figure"] == pytest.approx(5.0 / 14.1)  # ViP: the farthest from < 1/3
    assert row["paper bears it out"] == "no"  # ViP 0.355 and ViN 0.340 are above a third
    assert "paper: ViP vs ViT" in row["reading"]


def test_cross_pairs():
    row = paper_row("vix", "vix-5.2-fig4-hybrids-beat-linear")
    assert row["paper figure"] == pytest.approx(top1("hybrid_vil") - top1("vin"))  # 63.17 - 65.06
    assert row["paper bears it out"] == "no"
    assert "all 16 pairs" in row["reading"]


def test_largest_pair():
    row = paper_row("vix", "vix-abstract-gpu-up-to-7x")
    assert row["paper figure"] == pytest.approx(14.1 / 2.2) and row["paper bears it out"] == "yes"


def test_printed_correlation_and_not_testable_claims():
    frame = C.claims("favor", {})
    row = frame.loc["favor-corr-flops-train-memory"]
    assert row["paper figure"] == 0.85 and row["paper bears it out"] == "yes"
    assert frame.loc["favor-corr-ffwd-time-ft-time", "paper figure"] == 0.81
    assert frame.loc["favor-ram-fit", "paper figure"] == 25.43
    assert frame.loc["favor-ram-fit", "our verdict"] == "not testable here"
    assert "batch size" in frame.loc["favor-ram-fit", "why no verdict"]
    # computed from Table 1's printed differences (the mean over its 19 rows), ours not testable
    assert frame.loc["favor-pipeline-gain", "paper figure"] == pytest.approx(1.3516, abs=1e-4)
    assert frame.loc["favor-pipeline-gain", "paper bears it out"] == "yes"
    assert frame.loc["favor-pipeline-gain", "our verdict"] == "not testable here"


def test_the_favor_claims_read_its_printed_tables():
    frame = C.claims("favor", {})
    # Table 1: the accuracy columns agree with the printed differences; Poly-SA's +6.86 leads EViT (delete)'s +2.89;
    # the unmarked rows lose at most 0.06 (ViT-S, DeiT III)
    assert frame.loc["favor-pipeline-gain-from-columns", "paper figure"] == pytest.approx(1.3516, abs=1e-4)
    assert frame.loc["favor-pipeline-highest-poly-sa", "paper figure"] == pytest.approx(6.86 - 2.89)
    assert frame.loc["favor-pipeline-losses-explained", "paper figure"] == pytest.approx(-0.06)
    # Table 2: of the theoretical metrics' cells, only FLOPs with fine-tuning time (0.72) is not weak
    weak = frame[frame.index.str.startswith(("favor-corr-flops-f", "favor-corr-params-"))]
    assert len(weak) == 7 and weak["our verdict"].tolist() == ["not yet run"] * 7
    assert {i for i, v in weak["paper bears it out"].items() if v == "no"} == {"favor-corr-flops-ft-time"}
    assert weak.loc["favor-corr-params-ft-time", "paper figure"] == 0.05


def test_the_favor_figure_3_findings_are_entered_as_not_testable():
    frame = C.claims("favor", {})
    claims = {c["id"]: c for c in papers.claims("favor")}
    assert (claims["favor-accuracy-per-parameter"]["value"], claims["favor-accuracy-per-parameter-larger"]["value"]) \
        == (4.0e-8, "1/2")
    for cid in ("favor-accuracy-per-parameter", "favor-accuracy-per-parameter-larger"):
        assert frame.loc[cid, "our verdict"] == "not testable here" and \
            "ImageNet-1k" in frame.loc[cid, "why no verdict"]


def test_the_favor_figure_3_findings_are_the_texts(paper_text):
    text = " ".join(paper_text("favor").split())
    assert "accuracy per parameter remains relatively constant at about $4 \\times 10^{-8}" in text
    assert "this value is approximately halved for larger models" in text


@pytest.mark.parametrize("key", [k for k in papers.list_papers() if papers.claims(k)])
def test_every_claim_of_every_paper_file_evaluates_on_the_papers_tables(key):
    frame = C.claims(key, {})
    questions = C.claims(key, {}, questions=True)  # our own questions: apart, in no count of the paper's claims
    assert list(frame.columns) == S.COLUMNS and len(frame) == sum(not c.get("question") for c in papers.claims(key)) > 0
    assert len(frame) + len(questions) == len(papers.claims(key)) and not set(frame.index) & set(questions.index)
    assert frame.index.is_unique and all(i.startswith(f"{key}-") for i in frame.index)
    for claim_id, row in frame.iterrows():
        assert row["paper bears it out"] in ("yes", "no", "—"), claim_id
        if row["paper bears it out"] != "—":
            assert isinstance(row["paper figure"], float), claim_id
        assert row["our verdict"] in ("not yet run", "not testable here"), claim_id
        assert row["reading"] and row["claimed"], claim_id


def test_claim_list_covers_every_paper_file():
    listed = L.claim_list()
    for key in papers.list_papers():
        ids = {c["id"] for c in papers.claims(key)}
        assert set(listed.loc[listed["paper"] == key, "id"]) == ids
    assert list(listed["paper"].unique()) == \
        [k for k in papers.DOCUMENTS if k in papers.list_papers() and papers.claims(k)]


# --------------------------------------------------------------------------------------------------
# our side: verdicts on small fixtures


def test_holds_does_not_hold_and_not_yet_run(paper_file):
    key = paper_file([claim(id="toy-gain", method="relative_gain", metric="top1", a="vin", b="vit", op="approx",
                            value=20, tolerance=5)])
    assert paper_row(key, "toy-gain")["paper figure"] == pytest.approx(20.0)
    row = paper_row(key, "toy-gain", {"vin": {"top1": 66.0}, "vit": {"top1": 55.0}})
    assert row["our figure"] == pytest.approx(20.0) and row["our verdict"] == "holds" and row["why no verdict"] == ""
    row = paper_row(key, "toy-gain", {"vin": {"top1": 55.0}, "vit": {"top1": 55.0}})
    assert row["our figure"] == 0.0 and row["our verdict"] == "does not hold"
    row = paper_row(key, "toy-gain", {"vit": {"top1": 55.0}, "vin": {"top1": None}})
    assert row["our figure"] is None and row["our verdict"] == "not yet run"
    assert row["why no verdict"] == "missing: top-1 of ViN"
    row = paper_row(key, "toy-gain", None)
    assert row["our verdict"] == "not yet run" and row["why no verdict"] == "missing: top-1 of ViT, ViN"


def test_approximate_against_bound_claims(paper_file):
    key = paper_file([
        claim(id="toy-approx", method="ratio", metric="gpu_gb", a="vin", b="vit", op="approx", value="1/3",
              tolerance="1/12"),
        claim(id="toy-less", method="ratio", metric="gpu_gb", a="vin", b="vit", op="less", value="1/3"),
        claim(id="toy-at-most", method="ratio", metric="gpu_gb", a="vin", b="vit", op="at_most", value=0.4),
        claim(id="toy-greater", method="point_gain", metric="top1", a="vin", b="vit", op="greater", value=10),
        claim(id="toy-at-least", method="point_gain", metric="top1", a="vin", b="vit", op="at_least", value=10),
    ])
    frame = C.claims(key, {"vit": {"gpu_gb": 9.0, "top1": 50.0}, "vin": {"gpu_gb": 3.6, "top1": 60.0}})
    assert frame.loc["toy-approx", "claimed"] == "ratio ≈ 1/3 (± 1/12)"
    assert frame.loc["toy-less", "claimed"] == "ratio < 1/3"
    assert frame.loc["toy-greater", "claimed"] == "> 10 points"
    # printed: 4 / 10 = 0.4 and 60 - 50 = 10
    assert frame["paper figure"].tolist() == pytest.approx([0.4, 0.4, 0.4, 10.0, 10.0])
    assert frame["paper bears it out"].tolist() == ["yes", "no", "yes", "no", "yes"]
    # ours: 3.6 / 9 = 0.4 and 10 points
    assert frame["our verdict"].tolist() == ["holds", "does not hold", "holds", "does not hold", "holds"]
    frame = C.claims(key, {"vit": {"gpu_gb": 9.0, "top1": 50.0}, "vin": {"gpu_gb": 4.0, "top1": 61.0}})
    assert frame.loc["toy-approx", "our figure"] == pytest.approx(4 / 9)
    assert frame.loc["toy-approx", "our verdict"] == "does not hold"  # 0.444 is more than 1/12 from 1/3
    assert frame.loc["toy-greater", "our verdict"] == "holds"


def test_lists_of_pairs(paper_file):
    key = paper_file([
        claim(id="toy-zip-mean", method="point_gain", metric="top1", a=["hybrid_vit", "hybrid_vin"], b=["vit", "vin"],
              pairs="zip", over="mean", op="approx", value=13, tolerance=1),
        claim(id="toy-zip-all", method="point_gain", metric="top1", a=["hybrid_vit", "hybrid_vin"], b=["vit", "vin"],
              pairs="zip", over="all", op="greater", value=7),
        claim(id="toy-cross-all", method="point_gain", metric="top1", a=["hybrid_vit", "hybrid_vin"],
              b=["vit", "vin", "vip"], pairs="cross", over="all", op="greater", value=0),
        claim(id="toy-broadcast-min", method="ratio", metric="gpu_gb", a="vit", b=["vin", "vip"], over="min",
              op="at_least", value=2),
    ])
    frame = C.claims(key, {"vit": {"top1": 50.0, "gpu_gb": 8.0}, "vin": {"top1": 60.0, "gpu_gb": 4.0},
                           "vip": {"top1": 58.0, "gpu_gb": 2.0}, "hybrid_vit": {"top1": 59.0},
                           "hybrid_vin": {"top1": 70.0}})
    # printed: (70 - 50 + 66 - 60) / 2 = 13; pairs 20 and 6; hybrids vs plain all above; min(10/4, 10/2) = 2.5
    assert frame.loc["toy-zip-mean", "paper figure"] == pytest.approx(13.0)
    assert frame.loc["toy-zip-all", "paper figure"] == pytest.approx(6.0)  # Hybrid ViN vs ViN, below 7
    assert frame.loc["toy-zip-all", "paper bears it out"] == "no"
    assert frame.loc["toy-cross-all", "paper figure"] == pytest.approx(66.0 - 60.0)
    assert frame.loc["toy-broadcast-min", "paper figure"] == pytest.approx(2.5)
    # ours: (9 + 10) / 2 = 9.5; pairs 9 and 10; Hybrid ViT 59 < ViN 60; min(8/4, 8/2) = 2
    assert frame.loc["toy-zip-mean", "our figure"] == pytest.approx(9.5)
    assert frame.loc["toy-zip-mean", "our verdict"] == "does not hold"
    assert frame.loc["toy-zip-all", "our figure"] == pytest.approx(9.0)
    assert frame.loc["toy-zip-all", "our verdict"] == "holds"
    assert frame.loc["toy-cross-all", "our figure"] == pytest.approx(-1.0)
    assert frame.loc["toy-cross-all", "our verdict"] == "does not hold"
    assert "ours: Hybrid ViT vs ViN" in frame.loc["toy-cross-all", "reading"]
    assert frame.loc["toy-broadcast-min", "our figure"] == pytest.approx(2.0)
    assert frame.loc["toy-broadcast-min", "our verdict"] == "holds"
    assert "the mean over the 2 pairs" in frame.loc["toy-zip-mean", "reading"]


def test_ours_per_dataset_or_flat(paper_file):
    tables = {"t1": {"caption": "Table 1: toy", "dataset": "cifar10", "rows": {"vit": {"top1": 50.0},
                                                                              "vin": {"top1": 60.0}}},
              "t2": {"caption": "Table 2: toy", "dataset": "tiny-imagenet", "rows": {"vit": {"top1": 20.0},
                                                                                     "vin": {"top1": 30.0}}}}
    key = paper_file([claim(id="toy-c10", method="point_gain", metric="top1", a="vin", b="vit", op="greater", value=0),
                      claim(id="toy-tiny", table="t2", method="point_gain", metric="top1", a="vin", b="vit",
                            op="greater", value=0)], tables=tables)
    frame = C.claims(key, {"cifar10": {"vit": {"top1": 50.0}, "vin": {"top1": 51.0}}})
    assert frame.loc["toy-c10", "our verdict"] == "holds"
    assert frame.loc["toy-tiny", "our verdict"] == "not yet run"
    frame = C.claims(key, {"vit": {"top1": 50.0}, "vin": {"top1": 40.0}})  # flat: the same figures for both
    assert frame["our verdict"].tolist() == ["does not hold", "does not hold"]


def test_correlation_over_models(paper_file):
    tables = {"t1": {"caption": "Table 1: toy", "columns": ["y"], "rows": {"x": [0.9]}}}
    key = paper_file([{"id": "toy-r", "section": "2", "text": "x and y correlate", "printed":
                       {"table": "t1", "row": "x", "column": "y"}, "method": "correlation", "x": "gflops",
                       "y": "train_gb", "models": ["vit", "vin", "vip"], "dataset": "cifar10", "op": "approx",
                       "value": 0.9, "tolerance": 0.1}], tables=tables)
    ours = {"vit": {"gflops": 1.0, "train_gb": 2.0}, "vin": {"gflops": 2.0, "train_gb": 4.0},
            "vip": {"gflops": 3.0, "train_gb": 6.0}}
    row = paper_row(key, "toy-r", ours)
    assert row["paper figure"] == 0.9 and row["paper bears it out"] == "yes"
    assert row["our figure"] == pytest.approx(1.0) and row["our verdict"] == "holds"
    ours["vip"]["train_gb"] = 0.0
    row = paper_row(key, "toy-r", ours)
    assert row["our figure"] == pytest.approx(-0.5) and row["our verdict"] == "does not hold"
    del ours["vin"]["gflops"]
    row = paper_row(key, "toy-r", ours)
    assert row["our verdict"] == "not yet run" and row["why no verdict"] == "missing: GFLOPs of ViN"


def test_correlation_computed_from_a_table(paper_file):
    rows = {"vit": {"gflops": 1.0, "train_gb": 1.0}, "vin": {"gflops": 2.0, "train_gb": 3.0},
            "vip": {"gflops": 3.0, "train_gb": 2.0}}
    key = paper_file([claim(id="toy-r", method="correlation", x="gflops", y="train_gb", models=["vit", "vin", "vip"],
                            op="at_least", value=0.4)],
                     tables={"t1": {"caption": "Table 1: toy", "dataset": "cifar10", "rows": rows}})
    row = paper_row(key, "toy-r", rows)
    assert row["paper figure"] == pytest.approx(0.5) and row["paper bears it out"] == "yes"
    assert row["our figure"] == pytest.approx(0.5) and row["our verdict"] == "holds"


# --------------------------------------------------------------------------------------------------
# malformed claims name the paper file and the claim


@pytest.mark.parametrize("bad, message", [
    ({"op": "about"}, "`op` must be one of"),
    ({"tolerance": None}, "needs a `tolerance`"),
    ({"a": "nope"}, "model 'nope' is not in t1"),
    ({"metric": "size_mb"}, "t1 prints no 'size_mb'"),
    ({"method": "difference"}, "`method` must be one of"),
    ({"value": "a third"}, "`value` must be a number"),
    ({"a": ["vin", "vip"], "b": ["vit", "hybrid_vit"]}, "`pairs` must be one of"),
    ({"a": ["vin", "vip"], "b": ["vit"], "over": None}, "`over` must be one of"),
    ({"a": ["vin", "vip"], "b": ["vit", "hybrid_vit", "hybrid_vin"], "pairs": "zip", "over": "all"}, "same length"),
    ({"table": "t9"}, "no table 't9'"),
    ({"metirc": "top1"}, "unknown field(s) metirc"),
])
def test_malformed_claim_names_the_file_and_the_claim(paper_file, bad, message):
    good = claim(id="toy-bad", method="relative_gain", metric="top1", a="vin", b="vit", op="approx", value=20,
                 tolerance=5)
    entry = {k: v for k, v in {**good, **bad}.items() if v is not None}
    key = paper_file([entry])
    with pytest.raises(S.ClaimError) as err:
        C.claims(key, {})
    assert f"vixnb/papers/{FIXTURE_KEY}.yaml, claim 'toy-bad'" in str(err.value) and message in str(err.value)
    assert isinstance(err.value, papers.PaperFileError)


def test_duplicate_ids_are_an_error(paper_file):
    entry = claim(id="toy-twice", method="point_gain", metric="top1", a="vin", b="vit", op="greater", value=0)
    key = paper_file([entry, entry])
    with pytest.raises(S.ClaimError, match=r"shaped\.yaml, claim 'toy-twice': the id is used twice"):
        C.claims(key, {})


# --------------------------------------------------------------------------------------------------
# our figures from the results store


def test_ours_from_an_empty_store_is_not_yet_run():
    sections = ["abstract", "5.1", "5.2"]  # the Table 1-2 chapter's claims
    ours, records = L.ours_from_store("vix", "budget", sections=sections)  # conftest: an empty store per test
    assert set(ours) == {"cifar10", "tiny-imagenet"}
    assert set(ours["cifar10"]) == set(papers.table_models("vix", "table1"))
    # parameters and Size (MB) are counted on the models as built; nothing else exists without a run
    assert all(set(figures) == {"params", "size_mb"} for figures in ours["cifar10"].values())
    assert ours["cifar10"]["vit"] == {"params": 530442.0, "size_mb": pytest.approx(209.39, abs=0.005)}
    assert records and all(r["status"] == "not yet run" for r in records)
    frame = C.claims("vix", ours, sections=sections)
    counted = {c["id"] for c in papers.claims("vix") if c.get("metric") in ("params", "size_mb")
               and c["section"] in sections}
    assert set(frame.loc[sorted(counted), "our verdict"]) <= {"holds", "does not hold"}
    assert set(frame.drop(index=sorted(counted))["our verdict"]) == {"not yet run"}


def test_ours_from_the_committed_budget_store():
    store = ResultsStore(REPO_RESULTS)
    if not (REPO_RESULTS / "budget" / "measure" / "vix-gpu-memory-cifar10-b64.json").exists():
        pytest.skip("the committed budget results are not in this checkout")
    memory = store.load_record("measure", "vix-gpu-memory-cifar10-b64", profile="budget")["rows"]
    sections = ["abstract", "5.1", "5.2"]  # the Table 1-2 chapter's claims
    ours, records = L.ours_from_store("vix", "budget", store=store, sections=sections)
    c10 = ours["cifar10"]
    def current(config):  # a stored run of the row's run as asked today (any seed): an earlier reading's is not
        model, settings = row_runs("vix", "budget").get(config["model"], (None, None))
        asked = run_of(model, settings, dataset="cifar10", profile="budget").config if model else {}
        return {k: v for k, v in config.items() if k != "seed"} == {k: v for k, v in asked.items() if k != "seed"}

    stored_runs = {r["config"]["model"]: r for r in store.results("budget") if r["config"]["dataset"] == "cifar10"
                   and model_cfg(r["config"]["model"])["paper"] == "vix" and current(r["config"])}
    assert "hybrid_vip" not in stored_runs  # its stored run read the Performer's key stabiliser per head (issue 55)
    for model in papers.table_models("vix", "table1"):
        assert c10[model]["gpu_gb"] == memory[model]["GPU GB reserved, authors (fp32)"]
        if model in stored_runs:
            assert c10[model]["top1"] == stored_runs[model]["top1"]
            assert c10[model]["params"] == T1[model]["params"]  # our models count as the paper does
        else:
            assert "top1" not in c10[model]
    done = [r for r in records if r.get("status") == "done"]
    assert len(done) == len(stored_runs) and any("rows" in r for r in records)
    frame = C.claims("vix", ours, sections=sections)
    third = (max(memory[m]["GPU GB reserved, authors (fp32)"] for m in ("vip", "vil", "vin"))
             / memory["vit"]["GPU GB reserved, authors (fp32)"])
    assert frame.loc["vix-5.1-xformers-third-gpu", "our figure"] == pytest.approx(third)
    assert frame.loc["vix-5.1-xformers-third-gpu", "our verdict"] == ("holds" if third < 1 / 3 else "does not hold")
    # told where the figures come from: ten-epoch runs judge a comparison of two of our runs and say so, decide no
    # absolute accuracy figure, and decide the memory claim as before
    budget = C.claims("vix", ours, sections=sections, profile="budget")
    assert budget.loc["vix-5.1-xformers-third-gpu", "our verdict"] == \
        frame.loc["vix-5.1-xformers-third-gpu", "our verdict"]
    claim_of = {c["id"]: S.parse_claim("vix", c) for c in papers.claims("vix")}
    accuracy = [i for i in budget.index if claim_of[i].get("metric") in ("top1", "top5")
                and frame.loc[i, "our figure"] is not None]
    assert accuracy and budget.loc[accuracy, "our figure"].tolist() == frame.loc[accuracy, "our figure"].tolist()
    for i in accuracy:  # the stored runs' own epochs against each side's protocol (FNet's is 100, ViT's 40)
        sign = claim_of[i]["method"] in C.RELATIVE_METHODS and not V.is_magnitude(claim_of[i])
        if budget.loc[i, "our verdict"] == V.FAILED:
            continue
        assert budget.loc[i, "our verdict"] in ((frame.loc[i, "our verdict"], V.ONE_SEED) if sign else (V.PROTOCOL,)), i
        assert budget.loc[i, "seeds"] == 1
        if not sign:
            assert budget.loc[i, "why no verdict"].startswith("a magnitude is judged only at the paper's epochs ("), i
    assert budget.loc["vix-5.1-fnet-vs-vit", "why no verdict"] == (
        "a magnitude is judged only at the paper's epochs (FNet 10 of 100 epochs, ViT 10 of 40)")
    if "vin" not in stored_runs:
        assert frame.loc["vix-5.1-vin-vs-vit", "our verdict"] == "not yet run"
        assert frame.loc["vix-5.1-vin-vs-vit", "why no verdict"] == "missing: top-1 of ViN"
    fnet = (stored_runs["fnet"]["top1"] - stored_runs["vit"]["top1"]) / stored_runs["vit"]["top1"] * 100
    assert frame.loc["vix-5.1-fnet-vs-vit", "our figure"] == pytest.approx(fnet)
    assert set(frame.loc[frame.index.str.contains("tiny"), "our verdict"]) == {"not yet run"}
    assert {"vix-5.1-vin-vs-vit", "vix-5.2-hybrid-vin-gain"} <= set(frame.index)
    assert any(i.startswith("vix-5.2-fig4") for i in frame.index)  # "5.2" takes "5.2 (Figure 4)" too
    assert not any(i.startswith(("vix-5.3", "vix-5.4")) for i in frame.index)
    with pytest.raises(ValueError,
                       match=r"sections=\['9.9'\]: paper 'vix' makes no claim there; its sections: abstract, 5.1"):
        C.claims("vix", ours, sections=["9.9"])


def test_claims_reading_several_tables_and_none():
    """A claim may read two tables of one dataset (Table 6 beside Table 1), or only name the dataset of ours where
    the paper prints no figure (Table 6 has no parameter counts)."""
    frame = C.claims("vix", {"vit_rope": {"top1": 70.0, "params": 530442.0}, "vit": {"top1": 60.0, "params": 530442.0}},
                     sections=["5.4"])
    rope = frame.loc["vix-5.4-rope-more-accurate"]
    assert rope["paper figure"] == pytest.approx(55.88 - 57.45) and \
        rope["paper bears it out"] == "no"  # ViL, the worst pair
    assert rope["our verdict"] == "not yet run" and "ViP-RoPE" in rope["why no verdict"]
    params = frame.loc["vix-5.4-rope-same-params"]
    assert params["paper figure"] is None and params["paper bears it out"] == "—"
    assert "prints none of the numbers" in params["reading"]


def test_favor_correlation_from_the_committed_budget_store(monkeypatch):
    store = ResultsStore(REPO_RESULTS)
    if store.load_record("measure", "vix-gpu-memory-cifar10-b64", profile="budget") is None:
        pytest.skip("the committed budget results are not in this checkout")
    ours, _ = L.ours_from_store("favor", "budget", store=store)
    c10 = ours["cifar10"]
    assert all(isinstance(c10[m]["gflops"], float) and c10[m]["gflops"] > 0 for m in c10)
    frame = C.claims("favor", ours)
    import statistics
    models = papers.table_models("vix", "table1")
    r = statistics.correlation([c10[m]["gflops"] for m in models], [c10[m]["train_gb"] for m in models])
    assert frame.loc["favor-corr-flops-train-memory", "our figure"] == pytest.approx(r)
    # its second part, "the strongest link", needs the correlations of the efficiency record, not stored yet
    assert frame.loc["favor-corr-flops-train-memory", "our verdict"] == "not yet run"
    assert frame.loc["favor-corr-flops-train-memory", "why no verdict"].startswith(
        "its ordering part (above each of the 7 claims it names) needs 6 of their figures, not yet run: "
        "favor-corr-flops-ft-time")
    assert frame.loc["favor-corr-ft-time-train-memory", "our verdict"] == "not yet run"  # no efficiency record


def test_ledger_and_summary():
    pages = L.ledger("smoke", count_flops=False)
    assert list(pages) == [k for k in papers.DOCUMENTS if k in papers.list_papers() and papers.claims(k)]
    frame = pages["vix"]["frame"]
    line = report.claims.claims_summary(frame)
    verdicts = frame["our verdict"].value_counts()
    assert line.startswith(f"{len(frame)} claims.") and f"{verdicts['not yet run']} not yet run" in line
    html = report.claims.claims_page(frame, caption="vix").to_html()
    assert "white-space: normal" in html and "(§5.1)" in html
    # a claim not yet run is one mark in the page's table (the caption counts them; the plan says what to run),
    # while the frame keeps what is missing
    assert "· marks" in html or "not yet run, so not shown: ours" in html
    assert frame["why no verdict"].str.contains("missing: top-1 of").any()
    readings = report.claims.claims_readings(frame).splitlines()
    assert len(readings) == len(frame) and readings[0].startswith("1. ")


#: (the reading first entered, its second reading, whether the paper's tables bear out each): the sentences the
#: audit found to support two readings
TWO_READINGS = [("cxv", "cxv-5.2-procedure-gain", "cxv-5.2-procedure-gain-post-training-alone", ("yes", "no")),
                ("cxv", "cxv-4.2-beats-resnets-cifar10", "cxv-4.2-beats-resnets-cifar10-every", ("yes", "no")),
                ("cxv", "cxv-4.2-beats-resnets-tiny", "cxv-4.2-beats-resnets-tiny-every", ("yes", "yes")),
                ("linattn", "linattn-viprelu-fastest-test", "linattn-viprelu-fastest-test-checkpoint", ("no", "yes"))]


@pytest.mark.parametrize("key, first, second, borne_out", TWO_READINGS)
def test_a_sentence_with_two_readings_shows_both_on_the_ledger(key, first, second, borne_out):
    frame = L.ledger("smoke", count_flops=False)[key]["frame"]
    assert tuple(frame.loc[[first, second], "paper bears it out"]) == borne_out
    assert second in frame.loc[first, "reading"] and first in frame.loc[second, "reading"]  # each names the other
    html = report.claims.claims_page(frame).to_html()
    for claim_id in (first, second):
        # escaped (pandas writes ' as &#39;): text of a paper file is never markup
        assert html_text(frame.loc[claim_id, "claim"], quote=False).replace("'", "&#39;") in html
    readings = report.claims.claims_readings(frame)
    assert second in readings and first in readings


def test_the_second_readings_figures_as_the_audit_computed_them():
    cxv, linattn = C.claims("cxv"), C.claims("linattn")
    assert cxv.loc["cxv-5.2-procedure-gain", "paper figure"] == pytest.approx(
        ((92.26 - 89.56) + (94.46 - 91.42) + (91.40 - 86.99)) / 3)
    assert cxv.loc["cxv-5.2-procedure-gain-post-training-alone", "paper figure"] == pytest.approx(
        (0.28 + 2.25 + 3.24) / 3)
    assert cxv.loc["cxv-4.2-beats-resnets-cifar10-every", "paper figure"] == pytest.approx(
        (86.99 - 87.97) / 87.97 * 100)
    assert linattn.loc["linattn-viprelu-fastest-test-checkpoint", "paper figure"] == pytest.approx(35.28 / 35.43)


def test_the_b_side_may_read_a_metric_of_its_own(paper_file):
    rows = {"a": {"top1": 92.0, "top1_main": 90.0}, "b": {"top1": 95.0, "top1_main": 91.0}}
    tables = {"t1": {"caption": "Table 1: toy", "dataset": "cifar10", "rows": rows}}
    key = paper_file([claim(id="toy-b", method="point_gain", metric="top1", metric_b="top1_main", a=["a", "b"],
                            b=["a", "b"], pairs="zip", over="mean", op="approx", value=3, tolerance=0.5)], tables)
    row = paper_row(key, "toy-b", {"a": {"top1": 80.0, "top1_main": 79.0}, "b": {"top1": 81.0, "top1_main": 80.0}})
    assert row["paper figure"] == pytest.approx(3.0) and row["paper bears it out"] == "yes"
    assert row["our figure"] == pytest.approx(1.0) and row["our verdict"] == "does not hold"
    assert "top-1 before post-training (b)" in row["reading"]
    key = paper_file([claim(id="toy-b", method="value", metric="top1", metric_b="top1_main", a="a", op="greater",
                            value=0)], tables)
    with pytest.raises(S.ClaimError, match="`metric_b` .* applies to `point_gain`"):
        C.claims(key, {})


def test_the_ledger_page_runs_in_the_smoke_profile(tmp_path):
    import nbformat

    from vixnb.book.execute import notebook_path, run_notebook

    out = run_notebook(notebook_path("claims"), profile="smoke", output=tmp_path / "claims.ipynb", progress=False)
    nb = nbformat.read(str(out), as_version=4)
    text = "".join(str(o.get("data", {}).get("text/markdown", "")) + str(o.get("data", {}).get("text/html", ""))
                   for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    for key in papers.list_papers():
        if papers.claims(key):
            # each paper's table and readings fold under a summary line; our questions stand apart (questions_section)
            n = sum(not c.get("question") for c in papers.claims(key))
            assert f"(`{key}`)" in text and f"How each of the {n} claims was read" in text
    assert "not yet run" in text and "Smoke profile" in text


def test_which_profile_decides_which_claim():
    def claim(metric, method="value", b=None):
        return {"id": "shaped-x", "section": "s", "text": "t", "op": "greater", "value": 0, "method": method,
                "metric": metric, "a": "exp1_vanilla", **({"b": b} if b else {}), "dataset": "cifar10"}

    note = C.protocol_note
    for profile in (None, "paper"):
        assert note("shaped", claim("train_acc_final"), profile) == (True, "")
    # a pipeline check's page gives no verdict at all (issue 29), even where the figure is an exact count
    assert note("shaped", claim("params"), "smoke") == (False, "smoke profile: a pipeline check on synthetic images")
    assert note("shaped", claim("params"), "budget") == (True, "")  # counted on the model: exact on a GPU profile
    assert note("shaped", claim("epoch_s"), "smoke") == (False, "smoke profile: a pipeline check on synthetic images")
    assert note("shaped", claim("epoch_s"), "budget") == (True, "")  # an epoch's time does not depend on their number
    # an absolute figure of a shorter protocol decides nothing; the sign of a comparison of two runs of it does,
    # giving each side's fraction of the paper's epochs; its magnitude does not
    assert note("shaped", {**claim("train_acc_final"), "value": 5}, "budget") == (
        False, "a magnitude is judged only at the paper's epochs (Vanilla (exp1_vanilla) 10 of 50 epochs)")
    assert note("shaped", claim("train_acc_final", "point_gain", "exp1_simplified"), "budget") == (
        True, "Vanilla (exp1_vanilla) 10 of 50 epochs, Simplified (exp1_simplified) 10 of 50")
    assert note("shaped", {**claim("train_acc_final", "point_gain", "exp1_simplified"), "op": "approx", "value": 2,
                 "tolerance": 1},
                "budget")[0] is False
    # each side's own protocol: the vix paper trains FNet 100 epochs, ViT 40
    fnet = {**claim("top1", "point_gain", "vit"), "id": "vix-x", "a": "fnet"}
    assert note("vix", fnet, "budget") == (True, "FNet 10 of 100 epochs, ViT 10 of 40")
    assert note("shaped", claim("train_acc_final", "point_gain", "exp1_simplified"), "smoke")[0] is False
    # the linattn report trains 10 epochs: the budget profile is its protocol's length
    linattn = {**claim("top1"), "id": "linattn-x", "a": "vit_scratch"}
    assert note("linattn", linattn, "budget") == (True, "")
    assert C.undecided_reason("shaped", {**claim("train_acc_final"), "value": 5}, "budget") == \
        "a magnitude is judged only at the paper's epochs (Vanilla (exp1_vanilla) 10 of 50 epochs)"


def test_the_ledger_summary_counts_each_papers_verdicts_and_its_tables_fold():
    import pandas as pd

    from vixnb.report.claims.verdicts import FAILS, HOLDS, NOT_RUN, PAPER_NO, PAPER_YES
    from vixnb.report.claims.rules import FAILED, ONE_SEED

    frame = pd.DataFrame({"paper bears it out": [PAPER_YES, PAPER_YES, PAPER_NO, PAPER_YES, PAPER_YES],
                          "our verdict": [HOLDS, FAILS, FAILED, ONE_SEED, NOT_RUN]})
    overview = report.claims.claims_overview({"vix": {"frame": frame}})
    row = overview.loc[papers.load("vix")["title"]]
    assert row.to_dict() == {"claims": 5, "paper's tables: bear out / do not": "4 / 1", "ours: hold": 1,
                             "do not hold": 1, "not decided": 2, "not yet run / not testable": "1 / 0"}
    folded = report.claims.collapsible("The 5 claims <of vix>", "<table></table>").data
    assert folded == "<details><summary>The 5 claims &lt;of vix&gt;</summary>\n<table></table>\n</details>"


def test_a_question_of_ours_is_listed_apart_from_the_papers_claims():
    """Issue 47: "the same correlation, with our fused attention" is our question, not a claim of the favor paper:
    it is in no count of the paper's claims, and is answered yes / no apart from them."""
    paper, ours = C.claims("favor", {}), C.claims("favor", {}, questions=True)
    assert "favor-corr-flops-train-memory-fused" not in paper.index
    assert list(ours.index) == ["favor-corr-flops-train-memory-fused"]
    assert C.QUESTION_WORDS == {C.HOLDS: "yes", C.FAILS: "no"}
