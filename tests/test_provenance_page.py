"""The provenance page (issue 18): the source hash every run records, the "code changed" flag, every stored
result, what is missing per chapter and profile with its `vixnb batch` line, and the book's totals."""
import importlib
import json
import shlex

import pytest

from vixnb import report

from vixnb.plan import plan

from vixnb.runs import make as runs
from vixnb.cli import parser
from vixnb.results import ResultsStore
from vixnb.runs import policy
from vixnb.models import facts
from vixnb.runs.spec import RunSpec

prov = importlib.import_module("vixnb.results.provenance")  # the module (the package exports its function)
TINY = dict(depth=1, dim=32, heads=2, dim_head=16, mlp_dim=64)


def test_source_hashes_cover_the_models_own_modules_and_the_engine(monkeypatch):
    vit, cpv = policy.source_today("vit", "cifar10", "{}"), policy.source_today("cpv_5_4", "cifar10", "{}")
    assert vit["engine"] == cpv["engine"] and vit["model"] != cpv["model"]
    assert all(len(h) == 12 for h in (*vit.values(), *cpv.values()))
    original = prov.module_source

    def edited(name):  # an edit of the Performer's file: only the models that use it see it
        return original(name) + ("\n# edited" if name == "vixnb.layers.performer" else "")

    monkeypatch.setattr(prov, "module_source", edited)
    monkeypatch.setattr(facts, "code_version", lambda: "edited")  # an edit is another version of the code
    facts.kept_facts.cache_clear()
    policy.source_today.cache_clear()
    try:
        assert policy.source_today("vit", "cifar10", "{}") == vit
        assert policy.source_today("cpv_5_4", "cifar10", "{}")["model"] != cpv["model"]
    finally:
        policy.source_today.cache_clear()
        facts.kept_facts.cache_clear()


def test_a_run_records_its_source_hash_and_code_changed_names_the_part():
    result = runs.run(RunSpec.of("vit", profile="smoke", **TINY), progress=False)
    config = result["config"]
    overrides = json.dumps(config["model_overrides"], sort_keys=True)
    assert result["source_hash"] == policy.source_today("vit", config["dataset"], overrides)
    assert policy.code_changed(result) is None
    assert policy.code_changed({k: v for k, v in result.items() if k != "source_hash"}) is None  # stored before
    old = {**result, "source_hash": {**result["source_hash"], "engine": "000000000000"}}
    assert policy.code_changed(old) == ("unverified: its engine code changed since it was stored and the behavioural "
                                       "probe has not run on today's code (`vixnb probe`)")
    assert policy.stale_reason(old) is None  # a flag on the page, not a reason to train again


@pytest.fixture(scope="module")
def stored_fnet(tmp_path_factory):
    """A budget plan on a store holding one run of a vix_table1 row (fnet, which keeps no weights) and a stale
    copy of another (vit, whose weights the maps chapter needs): the plan built once for the module."""
    store = ResultsStore(tmp_path_factory.mktemp("store"))
    entries = plan.build("budget", store=store)
    fnet = next(e for e in entries if e.job == "train" and e.model == "fnet" and e.dataset == "cifar10"
                and e.chapter == "vix_table1")
    vit = next(e for e in entries if e.job == "train" and e.model == "vit" and e.dataset == "cifar10"
               and e.chapter == "vix_table1")
    made = {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "commit": "0123456789abcdef",
            "finished": "2026-11-22T20:07:16Z", "profile": "budget", "seed": 0}
    for e, seconds in ((fnet, 360.0), (vit, 7200.0)):
        store.put(e.config, {"status": "done", "config": e.config, "top1": 50.0, "seconds": seconds,
                              "provenance": made})
    return store, {"budget": plan.build("budget", store=store)}


def test_every_stored_result_is_listed_with_its_provenance(stored_fnet):
    store, plans = stored_fnet
    frame = report.records.stored_results_frame(plans, store=store)
    assert list(frame.columns) == ["notebook", "model", "settings", "dataset", "profile", "protocol", "seed", "device",
                                   "torch", "commit", "date", "wall time", "status", "note"]
    fnet = frame[frame["model"] == "fnet"].iloc[0].to_dict()
    assert fnet == {"notebook": "vix_table1", "model": "fnet", "settings": "", "dataset": "cifar10",
                    "profile": "budget", "protocol": "paper", "seed": 0, "device": "NVIDIA H100 80GB HBM3",
                    "torch": "2.11.0+cu130", "commit": "0123456789", "date": "2026-11-22", "wall time": "6 min",
                    "status": "stored", "note": ""}
    vit = frame[frame["model"] == "vit"].iloc[0].to_dict()
    assert vit["wall time"] == "2.0 h" and vit["status"] == "weights wanted"  # its numbers stand (issue 36)
    assert list(frame["model"]) == ["fnet", "vit"]
    page = report.records.stored_results_frame(plans, store=store, for_page=True)
    assert list(page["run"]) == ["fnet", "vit"] and list(page.columns) == ["run", "notebook: where", "made", "status"]
    assert page.loc[1, "notebook: where"] == "vix_table1: cifar10, budget, paper, seed 0"
    assert page.loc[1, "made"] == "NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, 0123456789, 2026-11-22, 6 min"
    assert list(page["status"]) == ["stored", "weights wanted"]


def test_missing_runs_give_each_chapter_a_batch_line_that_parses(stored_fnet):
    store, plans = stored_fnet
    frame = report.records.missing_runs_frame(plans, store=store)
    left = plan.todo(plans["budget"])
    assert frame["to run"].sum() == len(left)
    row = frame[frame["notebook"] == "vix_table1"].iloc[0]
    mine = [e for e in left if e.chapter == "vix_table1"]
    assert row["to run"] == len(mine) and row["stale"] == 0  # vit wants its weights: not stale (issue 36)
    known = [e.est_gpu_minutes for e in mine if e.est_gpu_minutes == e.est_gpu_minutes]
    assert row["GPU-h"] == round(sum(known) / 60, 2) and row["no estimate"] == len(mine) - len(known)
    for command in frame["command"]:
        args = parser().parse_args(shlex.split(command)[1:])
        assert args.command == "batch" and args.profile == "budget" and len(args.chapter) == 1


def test_book_totals_add_up_the_plans(stored_fnet):
    store, plans = stored_fnet
    totals = report.records.book_totals(plans, store=store)
    entries = plans["budget"]
    assert totals["per_profile"]["budget"] == plan.counts(entries)  # the one count every page prints
    counted = plan.counts(entries)
    assert {k: v for k, v in counted.items() if k != "reasons"} == {
        "entries": len(entries), **{s: sum(e.status == s for e in entries) for s in plan.STATUSES},
        "to_run": sum(e.status in plan.TO_MAKE for e in entries),
        "gpu_hours_left": plan.totals(entries)["book"]["to_run_gpu_hours"]}
    assert counted["weights wanted"] == 1 and list(counted["reasons"].values()) == ["keeps no weights"]
    assert (totals["stored"] == 1 and totals["stale"] == 0
            and totals["missing"] == len(entries) - 2)  # vit: weights wanted


def test_batch_chapter_keeps_the_chapter_and_the_runs_its_measurements_read(stored_fnet):
    store, _ = stored_fnet
    maps = plan.build("budget", store=store, chapter=["maps"])
    chapters = {e.chapter for e in maps}
    assert "maps" in chapters and {e.job for e in maps if e.chapter != "maps"} == {"train"}
    assert {e.name for e in maps if e.chapter == "maps"} == {"maps-attention-cifar10", "maps-attribution-cifar10"}
    with pytest.raises(ValueError, match=r"chapter=\['nope'\]: not in the 'budget' plan; its chapters: "):
        plan.build("budget", store=store, chapter=["nope"])


def test_a_code_change_is_flagged_on_the_page_and_not_counted_stale(stored_fnet, monkeypatch):
    store, plans = stored_fnet
    monkeypatch.setattr(report.records.provenance, "code_changed",  # where the page looks it up
                        lambda stored: "model code changed since it was stored (test)"
                        if stored.get("config", {}).get("model") == "fnet" else None)
    frame = report.records.stored_results_frame(plans, store=store)
    fnet = frame[frame["model"] == "fnet"].iloc[0]
    assert (fnet["status"], fnet["note"]) == ("stored",
                                              "code edited since: model code changed since it was stored (test)")
    totals = report.records.book_totals(plans, store=store)  # stale means the plan's stale, on every page
    assert totals["stored"] == 1 and totals["stale"] == 0  # vit wants its weights: its numbers stand, not stale


def test_a_gpu_page_rendered_on_a_cpu_says_what_is_missing_and_how_to_make_it(stored_fnet, monkeypatch):
    store, plans = stored_fnet
    mine = [e for e in plans["budget"] if e.chapter == "vix_table1"]
    left = plan.todo(mine)
    hours = sum(e.est_gpu_minutes for e in left if e.est_gpu_minutes == e.est_gpu_minutes) / 60
    counted = report.records.page_counts("budget", "vix_table1", compute="never", store=store)
    assert {k: v for k, v in counted.items() if k not in ("profile", "chapter", "unestimated")} == plan.counts(mine)
    stored = len(mine) - len(left)
    sentence = (f"Of the {len(mine)} entries this page reads in `budget`: {stored} stored, 1 weights wanted, "
                f"{len(left) - 1} missing.")
    assert report.records.counts_sentence(counted) == sentence  # a chapter's footer prints the banner's words
    line = report.records.missing_line(counted)
    assert line.startswith(f"**{sentence}** `vixnb batch --profile budget --chapter vix_table1` makes the "
                           f"{len(left)} left on a GPU: about {hours:.1f} GPU-hours by the plan's estimate")
    done = {**counted, "stored": len(mine), "weights wanted": 0, "missing": 0, "to_run": 0}
    assert report.records.missing_line(done) == (f"**Of the {len(mine)} entries this page reads in `budget`: "
                                                 f"{len(mine)} stored.** Nothing is left for `vixnb batch` to make.")
    assert report.records.page_counts("smoke", "vix_table1", compute="never", store=store) is None  # a CPU profile
    assert report.records.counts_sentence(None).startswith("This page made the runs it reads as it ran")
    monkeypatch.setattr(report.records.provenance, "missing_line", lambda counted: f"[{counted['chapter']}]")
    assert report.records.banner("budget", compute="never", counted=counted).endswith("\n>\n> [vix_table1]")
    assert "[" not in report.records.banner("smoke", compute="missing")  # a CPU profile: nothing missing
