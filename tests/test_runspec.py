"""One run identity (``vixnb.runs.spec``): a frozen ``RunSpec`` whose config, key and path are the ones the store has
always used, and the plan's typed entries that the batch pickles."""
import dataclasses
import pickle

import pytest

from vixnb.plan import plan
from vixnb.plan.entries import BenchEntry, MeasureEntry, TrainEntry
from vixnb.results.store import config_key
from vixnb.runs.spec import run_config
from vixnb.record_kinds import Request
from vixnb.results import ResultsStore
from vixnb.runs.spec import FrozenSettings, Keep, RunSpec, result_path


def test_a_spec_is_the_config_key_and_path_the_store_has_always_used(tmp_path):
    spec = RunSpec.of("fnet", dataset="cifar10", profile="budget", seed=2, epochs=3, randaugment=[1, 5])
    config = run_config("fnet", dataset="cifar10", profile="budget", seed=2, epochs=3, randaugment=[1, 5])
    assert spec.config == config
    assert spec.key == config_key(config)
    assert spec.path == f"budget/fnet-cifar10-seed2-{config_key(config)}.json" == result_path(config)
    store = ResultsStore(tmp_path)
    assert store.path(config) == tmp_path / spec.path
    assert RunSpec.of("fnet", profile="budget", seed=2, epochs=3, randaugment=[1, 5], keep="store").key == spec.key


def test_a_spec_cannot_be_changed_and_survives_pickling():
    spec = RunSpec.of("vit", profile="smoke", augment={"hflip": True}, keep=Keep.STORE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 1
    with pytest.raises(TypeError):
        spec.settings["augment"] = None
    spec.settings["augment"]["vflip"] = True  # a copy: the spec's own stays as made
    assert spec.settings["augment"] == {"hflip": True}
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and hash(again) == hash(spec) and again.config == spec.config and again.keep is Keep.STORE
    assert list(FrozenSettings({"b": 1, "a": 2})) == ["b", "a"]  # the order given (commands show it)


def test_keep_names_the_parameter_and_its_values():
    assert Keep.of("local") is Keep.LOCAL and Keep.of(Keep.NONE) is Keep.NONE and Keep.STORE == "store"
    with pytest.raises(ValueError, match=r"keep_weights='yes': use one of 'no', 'store', 'local'"):
        RunSpec.of("vit", keep="yes")


def test_the_plan_entries_are_typed_and_the_batch_pickles_them():
    entries = plan.build("smoke", only=["fnet"])
    train = next(e for e in entries if isinstance(e, TrainEntry))
    assert train.job == "train" and train.key == train.spec.key and train.path == train.spec.path
    assert train.command == (
        "vixnb train fnet --dataset synthetic --profile smoke --seed 0")  # the smoke profile's data
    back = pickle.loads(pickle.dumps(train))
    assert back.to_dict() == train.to_dict() and back.config == train.config
    measure = MeasureEntry(chapter="c", paper="vix", name="m", profile="budget", path="budget/measure/m.json",
                           request=Request("speed", paper="vix", chapter="vix", dataset="cifar10"), nominal_minutes=4)
    bench = BenchEntry(chapter="c", paper="vix", name="b", profile="budget", path="bench/b.json", request=Request("b"))
    assert pickle.loads(pickle.dumps(measure)).request == measure.request
    assert [e.job for e in (measure, bench)] == ["measure", "bench"]
    assert measure.estimate(gpu=None) == (4.0, "nominal (no stored timing)")
    assert measure.to_dict()["keep_weights"] == "no" and measure.to_dict()["model"] is None


def test_a_kept_run_says_so_in_its_command():
    entry = TrainEntry(chapter="c", paper="vix", name="vit", profile="budget",
                       spec=RunSpec.of("vit", profile="budget", keep=Keep.LOCAL))
    assert entry.command.endswith("--seed 0 --keep-weights local") and entry.to_dict()["keep_weights"] == "local"
    entry.keeping(Keep.STORE, "cifar10")
    assert entry.command.endswith("--seed 0 --keep-weights") and entry.keep_weights is Keep.STORE
