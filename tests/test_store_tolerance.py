"""The store tolerates what it cannot use: a result of an unregistered model, an unknown configuration key, a
newer engine version, a file that is not JSON, a folder where a file should be. Each is listed once as "not used:
<why>", plan and batch go on with the rest, and nothing is deleted or changed."""
import hashlib
import inspect
import json
import re
from pathlib import Path

import pytest

from vixnb.runs import spec as runspec
import importlib
provenance_module = importlib.import_module("vixnb.results.provenance")  # the module (the package exports its function)
from vixnb.cli import main
from vixnb.results import ResultsStore, StoreError
from vixnb.results.store import result_path
from vixnb.runs.policy import unusable
from vixnb.runs.spec import OPTIONAL_CONFIG_KEYS

REPO_RESULTS = Path(__file__).resolve().parents[1] / "results" / "budget"


def _store_hash(root):
    """SHA-256 over every path and file of the store but its cache (``.cache/``: counts kept between runs)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if ".cache" not in path.relative_to(root).parts:
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes() if path.is_file() else b"<folder>")
    return digest.hexdigest()


@pytest.fixture
def unusable_store(isolated_results):
    """A budget store holding one stored result as vixnb wrote it and one unusable file of each kind:
    ``{file name: what "not used" says}``."""
    real = next(p for p in sorted(REPO_RESULTS.glob("*.json")))
    result = json.loads(real.read_text())
    folder = isolated_results / "budget"
    folder.mkdir(parents=True)
    (folder / real.name).write_text(real.read_text())
    config = result["config"]
    kinds = [({**config, "model": "gone_model"}, "model 'gone_model' is not registered in this vixnb"),
             ({**config, "model": "vit", "mystery": 1}, "configuration key(s) mystery unknown to this vixnb"),
             ({**config, "model": "vit", "engine_version": provenance_module.ENGINE_VERSION + 1},
              f"made by a newer vixnb (engine version {provenance_module.ENGINE_VERSION + 1}, this one has "
              f"{provenance_module.ENGINE_VERSION}); upgrade vixnb to use it")]
    kinds = {result_path(cfg).split("/")[1]: (cfg, why) for cfg, why in kinds}  # each named as its config says
    for name, (cfg, _) in kinds.items():
        (folder / name).write_text(json.dumps({**result, "config": cfg}))
    (folder / "vit-cifar10-seed0-3333333333333333.json").write_text("{ not json")
    (folder / "vit-cifar10-seed0-4444444444444444.json").mkdir()
    return {**{n: why for n, (_, why) in kinds.items()}, "vit-cifar10-seed0-3333333333333333.json": "not JSON",
            "vit-cifar10-seed0-4444444444444444.json": "not a file"}


def test_the_store_names_each_unusable_file_and_reads_the_rest(unusable_store, isolated_results):
    before = _store_hash(isolated_results)
    store = ResultsStore()
    _full(store, unusable_store)
    assert len(store.results("budget", unusable=unusable)) == 1  # the one usable result, and only it
    assert _store_hash(isolated_results) == before


def _full(store, expected):
    """The whole reasons ``unusable_files`` gives, checked to begin with the expected ones."""
    found = {path.split("/", 1)[1]: why for path, why in store.unusable_files("budget", unusable=unusable)}
    assert set(found) == set(expected)
    assert all(found[n].startswith(why) for n, why in expected.items()), found
    return found


def test_plan_lists_each_unusable_file_once_and_goes_on(unusable_store, isolated_results, capsys):
    before = _store_hash(isolated_results)
    assert main(["plan", "--profile", "budget", "--json"]) == 0
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == len(unusable_store)
    for name, why in unusable_store.items():
        assert sum(f"vixnb: not used: budget/{name}: {why}" in line for line in lines) == 1, (name, err)
    entries = json.loads(out)
    assert not any(e["status"] == "stale" and e["model"] == "vit" for e in entries)  # a newer engine's is not stale
    assert _store_hash(isolated_results) == before  # nothing deleted, moved or rewritten
    assert main(["batch", "--profile", "budget", "--dry-run", "--max-jobs", "1"]) == 0
    assert "not used: budget/gone_model" in capsys.readouterr().err
    assert _store_hash(isolated_results) == before
    assert len(ResultsStore().results("budget", unusable=unusable)) == 1  # the one usable result, and only it


def test_the_optional_configuration_keys_are_those_run_config_writes():
    source = inspect.getsource(runspec.run_config)
    top_level = re.findall(r'^ {8}\*\*\(\{"(\w+)":', source, flags=re.MULTILINE)  # the returned dict's own keys
    assert set(top_level) == set(OPTIONAL_CONFIG_KEYS)
    assert unusable({"status": "done", "top1": 1.0, "config": runspec.run_config("vit", allow_resize=True,
                                                                                  grad_norm_every=2)}) is None


# ----- issue 48, class 5: derived files are used when sound, else named once and worked around -------------------

def _fresh_process():
    from vixnb.errors import said_clear
    from vixnb.models import facts

    facts.kept_facts.cache_clear()
    said_clear()


@pytest.mark.parametrize("ledger", ["{not json", '["a list"]', '{"budget/x": "not an entry"}'])
def test_a_damaged_probe_ledger_is_named_once_and_the_plan_goes_on(isolated_results, capsys, ledger):
    """A damaged results/probe-ledger.json stopped `vixnb plan` (exit 2, a bare JSON error)."""
    from vixnb.runs.policy import read_ledger

    isolated_results.mkdir(parents=True, exist_ok=True)
    (isolated_results / "probe-ledger.json").write_text(ledger)
    before = _store_hash(isolated_results)
    _fresh_process()
    assert read_ledger(isolated_results) == {} and read_ledger(isolated_results) == {}
    err = capsys.readouterr().err
    assert err.count("probe-ledger.json cannot be read") == 1 and "vixnb probe" in err
    assert main(["plan", "--profile", "smoke", "--json"]) == 0
    assert _store_hash(isolated_results) == before


def test_kept_facts_of_the_wrong_shape_are_computed_again_and_named(tmp_path, monkeypatch, capsys):
    """The model-facts cache with wrong types crashed the plan, though it is a cache only."""
    from vixnb.models import facts
    from vixnb.runs.policy import architecture_today

    monkeypatch.setenv("VIXNB_CACHE", str(tmp_path))
    _fresh_process()
    architecture_today.cache_clear()
    truth = architecture_today("vit", "cifar10", "{}")
    kept = json.loads((tmp_path / facts.FACTS_FILE).read_text())
    for entry in kept["facts"].values():
        entry["value"] = "not a fact"  # the recorded shape no longer fits
    (tmp_path / facts.FACTS_FILE).write_text(json.dumps(kept))
    _fresh_process()
    architecture_today.cache_clear()
    assert architecture_today("vit", "cifar10", "{}") == truth
    assert "kept model facts are not of the shape they were written with" in capsys.readouterr().err


def test_a_cache_folder_that_is_a_file_is_said_once(tmp_path, monkeypatch, capsys):
    """VIXNB_CACHE pointing at a file kept nothing and said nothing."""
    from vixnb.runs.policy import architecture_today

    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("VIXNB_CACHE", str(tmp_path / "a-file"))
    _fresh_process()
    architecture_today.cache_clear()
    architecture_today("vit", "cifar10", "{}")
    architecture_today.cache_clear()
    architecture_today("vit", "cifar10", json.dumps({"depth": 2}))
    err = capsys.readouterr().err
    assert err.count("is a file, not a folder: no model fact is kept") == 1


def test_a_lock_that_is_a_folder_is_named_and_the_run_goes_on(isolated_results, capsys):
    store = ResultsStore(isolated_results)
    config = runspec.run_config("fnet", profile="smoke")
    store.lock_path(config).mkdir(parents=True)
    _fresh_process()
    assert store.lock_held(config) is False
    with store.lock(config) as waited:
        assert waited is False
    assert "cannot be used as a lock" in capsys.readouterr().err


# ----- issue 57, class 4: one validation of a store file, used by every reader ------------------------------------

def _impossible(result):
    """``{file name: (record or bytes or a link's target, what "not used" says)}``: files of a budget store each of
    which a reader must refuse, named as their configuration gives (each another seed), but for the misplaced."""
    from vixnb.results.store import result_path

    def seed(n, **change):
        config = {**result["config"], "seed": n}
        return result_path(config).split("/")[1], {**result, "config": config, **change}

    prov = result["provenance"]
    cases = [seed(1, top1=150.0), seed(2, top5=-5.0), seed(3, seconds=-1.0),
             seed(4, provenance={**prov, "finished": "2099-01-01T00:00:00Z"}),
             seed(5, provenance={**prov, "finished": "yesterday"}), seed(6, source_hash="abc"), seed(7, transfer=[1]),
             seed(8, params_paper="12"), seed(9, history=[{"epoch": 1, "select_top1": 101.0}])]
    whys = ["top1 is 150.0, not a share in percent", "top5 is -5.0, not a share in percent",
            "seconds is -1.0, not a number of seconds", "its provenance's finished 2099-01-01T00:00:00Z is later than "
            "now", "its provenance's finished 'yesterday' is not a date", "source_hash is a str, not a dict",
            "transfer is a list, not a dict", "params_paper is '12', not a whole number >= 0",
            "epoch 1's select_top1 is 101.0, not a share in percent"]
    out = {name: (record, why) for (name, record), why in zip(cases, whys)}
    key = result_path(result["config"]).rsplit("-", 1)[1]
    out[result_path(result["config"]).replace(key, "0123456789abcdef.json").split("/")[1]] = \
        (result, "it holds a different configuration than its name says")  # a copy under another name
    smoke = {**result, "config": {**result["config"], "profile": "smoke"}}
    out[result_path(smoke["config"]).split("/")[1]] = (smoke, "its config's profile is 'smoke', and it is in the "
                                                              "folder of 'budget'")
    name, twice = seed(10)
    out[name] = (json.dumps(twice).replace('"top1":', '"top1": 99.0, "top1":', 1).encode(),
                 "the key 'top1' is given twice")
    out[seed(11)[0]] = (Path("nothing-here.json"), "a link to nothing")
    out[seed(12)[0]] = (Path(seed(12)[0]), "a loop of links")
    out["x\nvixnb: not used: forged.json"] = (result, "it holds a different configuration than its name says")
    return out


def test_a_misnamed_or_impossible_result_is_listed_once_and_shown_nowhere(isolated_results):
    """Class 4 (the store believed a file's name and folder, and any value that parses): a result whose key or
    profile does not match its place, a share in percent outside 0-100, negative seconds, a date in the future or
    not a date, a key given twice, a field of the wrong type, a link to nothing or a loop: each is listed once as
    not used, with why (a name that holds a newline printed on one line), and the listing, ``get`` and results.csv go
    on with the rest (`vixnb plan` prints the same list, once each: ``test_plan_lists_each_unusable_file...``)."""
    from vixnb.report.claims.found import runs_table

    real = next(p for p in sorted(REPO_RESULTS.glob("fnet-*.json")))
    result = json.loads(real.read_text())
    folder = isolated_results / "budget"
    folder.mkdir(parents=True)
    (folder / real.name).write_text(real.read_text())
    bad = _impossible(result)
    for name, (content, _) in bad.items():
        if isinstance(content, Path):
            (folder / name).symlink_to(content)
        else:
            (folder / name).write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    before = _store_hash(isolated_results)
    store = ResultsStore()
    found = {path.split("/", 1)[1]: why for path, why in store.unusable_files("budget", unusable=unusable)}
    assert set(found) == set(bad)
    assert all(found[n].startswith(why) for n, (_, why) in bad.items()), found
    assert [r["config"] for r in store.results("budget", unusable=unusable)] == [result["config"]]
    assert list(runs_table("budget", store=store)["file"]) == [f"budget/{real.name}"]  # results.csv: once
    with pytest.raises(StoreError, match="top1 is 150.0, not a share in percent"):
        store.get({**result["config"], "seed": 1})
    from vixnb.errors import printable  # what `vixnb plan` prints each with (test_plan_lists_each_unusable_file...)

    assert printable("budget/x\nvixnb: not used: forged.json") == "budget/x\\nvixnb: not used: forged.json"
    assert _store_hash(isolated_results) == before
