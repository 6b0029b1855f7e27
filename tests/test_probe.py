"""The behavioural probe decides whether a stored result is still current when its code changed (issue 36): a
refactor leaves every stored result current; a change of the numbers marks exactly the runs it touches."""
import json
import shutil
from pathlib import Path

import pytest

import vixnb
from vixnb.runs import spec as runspec
from vixnb.results import ResultsStore, config_key
from vixnb.runs import probe as probing
from vixnb.runs.policy import code_changed

REPO = Path(__file__).resolve().parents[1]
STORED = sorted((REPO / "results" / "budget").glob("*.json"))


def _tree(tmp_path, name, edits):
    """A copy of today's package with ``edits`` (``[(file, old, new)]``, each found exactly once) made."""
    root = tmp_path / name
    shutil.copytree(Path(vixnb.__file__).parent, root / "vixnb", ignore=shutil.ignore_patterns("__pycache__"))
    for file, old, new in edits:
        path = root / "vixnb" / file
        text = path.read_text()
        assert text.count(old) == 1, f"{file}: {old!r} is not there once; update this test's edit"
        path.write_text(text.replace(old, new))
    return root


def test_refactors_leave_each_models_stored_result_current_and_numeric_changes_mark_the_runs_they_touch(tmp_path):
    results = {p.name: json.loads(p.read_text()) for p in STORED}
    assert len(results) >= 25
    # one result of each model (its first), which tells whether a change reaches that model's runs as well as all of
    # them would, in a third of the time; every stored result is probed at its own commit and today's by
    # test_every_stored_result_is_made_the_same_by_its_commits_code_and_todays
    names_by_model = {}
    for n in sorted(results):
        names_by_model.setdefault(results[n]["config"]["model"], n)
    names = sample = sorted(names_by_model.values())
    assert len(sample) >= 10
    configs = [results[n]["config"] for n in names]

    def changed(root, among=names):
        """The results among ``among`` whose digest with the package at ``root`` differs from today's."""
        index = [names.index(n) for n in among]
        after = probing.digests([configs[i] for i in index], root)
        return {names[i] for i, b in zip(index, after) if today[i] != b}

    today = probing.digests(configs, _tree(tmp_path, "today", []))
    assert all("digest" in d for d in today), today
    refactor = _tree(tmp_path, "refactor", [
        ("data.py", "def normalize(images, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)):",
         "def normalize(images, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)):  # a comment\n    pixels = images"),
        ("models/vit_small.py", "self.pos_embedding = nn.Parameter(torch.randn(1, tokens, width) * 0.02)",
         "# where the tokens are\n        self.pos_embedding = nn.Parameter(torch.randn(1, tokens, width) * 0.02)"),
        ("engine/optimizers.py", "def adamw(params, config):\n",
         "def adamw(parameters, config):\n    params = parameters\n"),
    ])
    assert changed(refactor) == set()
    vit_small = {n for n in names if n.startswith("vit_small_")}
    init = _tree(tmp_path, "init", [("models/vit_small.py", "torch.randn(1, tokens, width) * 0.02)",
                                     "torch.randn(1, tokens, width) * 0.05)")])
    assert vit_small & set(sample) and changed(init, sample) == vit_small & set(sample)
    std = _tree(tmp_path, "std", [("data.py", "std=(0.5, 0.5, 0.5)):", "std=(0.25, 0.25, 0.25)):")])
    assert changed(std, sample) == set(sample)
    beta2 = _tree(tmp_path, "beta2", [("engine/optimizers.py", 'betas=tuple(config["betas"])',
                                       'betas=(config["betas"][0], 0.98)')])
    assert changed(beta2, sample) == {n for n in sample if results[n]["config"]["betas"][1] != 0.98}
    dropout = changed(_tree(tmp_path, "dropout",
                            [("models/vix.py", "channels=3, dropout=0.0,", "channels=3, dropout=0.1,")]),
                      sample)
    # the ViX family's default: every ViX run that does not set its own dropout, and nothing else
    vix = {n for n in names if not n.startswith("vit_small_")}
    own = {n for n in vix if "dropout" in results[n]["config"]["model_overrides"]}
    assert dropout and dropout <= vix - own and "fnet" in {n.split("-")[0] for n in dropout}


def test_the_ledger_decides_a_changed_results_status(monkeypatch):

    store = ResultsStore()
    config = runspec.run_config("fnet", profile="smoke")
    stored = {"config": config, "source_hash": {"model": "000000000000", "engine": "000000000000"}}
    assert code_changed(stored, store.root).startswith("unverified: its model and engine code changed")
    rel = f"smoke/{config_key(config)}"
    from vixnb.runs.policy import config_overrides_json, source_today

    entry = {"code": source_today("fnet", config["dataset"], config_overrides_json(config)), "equal": True, "why": ""}
    store.root.mkdir(parents=True, exist_ok=True)
    probing.ledger_path(store).write_text(json.dumps({rel: entry}))
    assert code_changed(stored, store.root) is None
    probing.ledger_path(store).write_text(json.dumps({rel: {**entry, "equal": False, "why": "the probe differs"}}))
    assert code_changed(stored, store.root) == "the probe differs"
    probing.ledger_path(store).write_text(json.dumps({rel: {**entry, "code": {"model": "x", "engine": "y"}}}))
    assert code_changed(stored, store.root).startswith("unverified")  # probed on other code than today's


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git history (a clone)")
def test_the_probe_reads_a_commits_code_and_says_unverified_where_it_cannot():
    with probing.code_at("0" * 40) as missing:
        assert missing is None
    with probing.code_at("HEAD") as head:
        assert (head / "vixnb" / "engine" / "train.py").is_file()


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the git history (a clone)")
def test_every_stored_result_is_made_the_same_by_its_commits_code_and_todays(monkeypatch):
    """What CI runs on every stored result (``vixnb probe --all --check``): the probe at each result's commit and
    at HEAD agree bitwise; a commit this clone lacks (a shallow clone) leaves its results unverified, never stale."""
    monkeypatch.setenv("VIXNB_RESULTS", str(REPO / "results"))
    entries = probing.probe_store(ResultsStore(), "budget", only_changed=False, write=False)
    assert len(entries) == len(STORED)
    assert [e["file"] for e in entries.values() if e["equal"] is False] == []
    assert all(e["equal"] or "not in this clone" in e["why"] for e in entries.values())
