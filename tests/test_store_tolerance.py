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
from vixnb.results import ResultsStore
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
    kinds = {
        "gone_model-cifar10-seed0-0000000000000000.json": ({**config, "model": "gone_model"},
                                                            "model 'gone_model' is not registered in this vixnb"),
        "vit-cifar10-seed0-1111111111111111.json": ({**config, "model": "vit", "mystery": 1},
                                                    "configuration key(s) mystery unknown to this vixnb"),
        "vit-cifar10-seed0-2222222222222222.json": ({**config, "model": "vit",
                                                     "engine_version": provenance_module.ENGINE_VERSION + 1},
                                                    "made by a newer vixnb (engine version "
                                                    f"{provenance_module.ENGINE_VERSION + 1}, this one has "
                                                    f"{provenance_module.ENGINE_VERSION}); upgrade vixnb to use it"),
    }
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
