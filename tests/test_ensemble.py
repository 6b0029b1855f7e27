"""Seeds trained as one vectorised ensemble (vixnb.engine.ensemble) equal separate runs of those seeds: histories,
metrics, best epoch and weights; protocol `fixed`; BatchNorm; refusals; the caller's RNG; pause and resume."""
import math
import re

import pytest
import torch
from torch import nn

from vixnb.engine import train as engine
from vixnb.engine.ensemble import Ensemble, can_ensemble, check_members, member_shape, member_state
from vixnb.engine.train import train_ensemble
from vixnb.models import registry
from vixnb.runs.spec import run_config
from vixnb.engine.train import without_timings

# small smoke models: 8 x 8 tokens (patch 4, or a hybrid stem of stride 4), width 32, one block
TINY = dict(patch_size=4, dim=32, heads=2, dim_head=16, mlp_dim=64)
SMALL = {"fnet": TINY, "hybrid_vil": dict(TINY, patch_size=1, stem_stride=4), "mlp_mixer": dict(patch_size=4, dim=32),
         "vil": TINY}
SEEDS = [0, 1, 2]
NUMBERS = ("epoch", "train_loss", "train_acc", "select_top1", "select_top5")
EXTRA_PROVENANCE = {"execution", "ensemble_seeds", "ensemble_exact", "ensemble_note"}


def _configs(model, seeds=SEEDS, **options):
    """Smoke configs of three epochs of two batches (the smoke profile's 8 training images in batches of 4)."""
    options = {"batch_size": 4, **options}
    return [run_config(model, profile="smoke", seed=s, epochs=3, **SMALL.get(model, {}), **options) for s in seeds]


def _separate(configs, tmp_path):
    """Each config trained on its own by the engine; its final checkpoint kept (``s<seed>.pt``)."""
    runs = [engine.train(c, progress=False, checkpoint=tmp_path / f"s{c['seed']}.pt") for c in configs]
    return runs, [torch.load(tmp_path / f"s{c['seed']}.pt", weights_only=True) for c in configs]


def _assert_same_run(separate, member):
    assert set(member) == set(separate)
    assert len(member["history"]) == len(separate["history"])
    for a, b in zip(separate["history"], member["history"]):
        assert set(a) == set(b)
        assert (a["stage"], a["phase"], a["stop"]) == (b["stage"], b["phase"], b["stop"])
        for key in NUMBERS:
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-5), key
    for key in {"top1", "top5", "final_top1", "val_top1", "val_top5"} & set(separate):
        assert member[key] == pytest.approx(separate[key], rel=1e-4, abs=1e-5), key
    for key in ("status", "best_epoch", "epochs_run", "params_paper", "params_true", "size_mb", "architecture"):
        assert member[key] == separate[key], key
    assert set(member["provenance"]) == set(separate["provenance"]) | EXTRA_PROVENANCE
    assert member["provenance"]["seed"] == separate["provenance"]["seed"]


def _assert_same_weights(separate_state, member_weights, separate_adam=None):
    """Every tensor within rel 1e-4 / abs 1e-5 of the separate run's, except, given the separate run's AdamW state
    (``separate_adam``: {name: exp_avg_sq}), elements whose gradient stayed below float32 rounding noise
    (sqrt(v) < 1e-7, far under AdamW's eps 1e-8 x step scale): AdamW's normalised step turns that noise into
    updates of up to lr in either run (a bias a following LayerNorm cancels, e.g. MLP-Mixer's token-mixing
    output bias, has a gradient of exactly zero but for rounding)."""
    assert member_weights.keys() == separate_state.keys()
    noise, total = 0, 0
    for name, expected in separate_state.items():
        got = member_weights[name]
        if not expected.is_floating_point():
            assert torch.equal(got, expected), name
            continue
        off = ~torch.isclose(got, expected, rtol=1e-4, atol=1e-5)
        if off.any():
            assert separate_adam is not None and name in separate_adam, name
            assert (separate_adam[name][off].sqrt() < 1e-7).all(), name
            noise += int(off.sum())
        total += expected.numel()
    assert noise <= total // 100


def _adam_second_moments(checkpoint, config):
    names = [n for n, _ in engine.build_model(config)[0].named_parameters()]
    return {n: checkpoint["optimizer"]["state"][i]["exp_avg_sq"] for i, n in enumerate(names)}


@pytest.mark.parametrize("model", ["fnet", "hybrid_vil", "mlp_mixer"])
def test_an_ensemble_equals_separate_runs_of_its_seeds(model, tmp_path):
    configs = _configs(model)
    assert can_ensemble(configs[0]) == (True, None)
    runs, states = _separate(configs, tmp_path)
    members = train_ensemble(configs, progress=False, checkpoint=tmp_path / "ensemble.pt")
    saved = torch.load(tmp_path / "ensemble.pt", weights_only=True)
    assert saved["seeds"] == SEEDS and len(members) == len(SEEDS)
    for i, (run, member, state, config) in enumerate(zip(runs, members, states, configs)):
        _assert_same_run(run, member)
        assert member["provenance"]["execution"]["mode"] == "ensemble" and member["provenance"]["ensemble_exact"]
        assert member["provenance"]["execution"]["members"] == 3
        adam = _adam_second_moments(state, config)
        _assert_same_weights(state["model"], member_state(saved["model"], i), adam)  # final weights
        _assert_same_weights(state["best_state"], member_state(saved["best_state"], i), adam)  # selected weights


def test_convmixer_a_cxv_batchnorm_baseline_ensembles_exactly_under_adamw(tmp_path):
    """The `cxv` paper's ConvMixer (BatchNorm after every conv) under AdamW alone (its Table 3 control; DualOpT runs
    are refused: each member would switch at its own epoch): members equal separate runs, running statistics
    included, to float noise (~1e-4 in a weight after three epochs). (torchvision's ResNet-18 does not: on the CPU its
    members drift from their separate runs by ~1e-4 of the loss in the first epoch and ~1 % after three, float
    differences of the batched convolutions amplified by BatchNorm over 16 images; `vixnb batch` trains the cxv runs
    separately, see the next test.)"""
    configs = _configs("convmixer_16", seeds=[0, 1], optimizer="adamw", dropout=0.0)  # its 0.5 is drawn per member
    assert can_ensemble(configs[0]) == (True, None)
    assert not can_ensemble(run_config("convmixer_16", profile="smoke"))[0]  # the protocol's DualOpT
    assert not can_ensemble(run_config("wavemix_5", profile="smoke", optimizer="adamw"))[0]  # dropout 0.5
    runs, states = _separate(configs, tmp_path)
    members = train_ensemble(configs, progress=False, checkpoint=tmp_path / "ensemble.pt")
    saved = torch.load(tmp_path / "ensemble.pt", weights_only=True)
    for i, (run, member, state) in enumerate(zip(runs, members, states)):
        _assert_same_run(run, member)
        weights = member_state(saved["model"], i)  # running statistics included; float noise of ~1e-4 at most
        assert all(torch.allclose(weights[k].float(), v.float(), atol=1e-3) for k, v in state["model"].items())


def test_the_batch_trains_every_cxv_run_on_its_own_in_auto_mode():
    from vixnb.plan import plan
    from vixnb.plan.batch import jobs_from_plan

    entries = [e for e in plan.build("budget") if e.paper == "cxv" and e.job == "train"]
    jobs = jobs_from_plan(entries, ensemble="auto")
    assert jobs and all(len(job.entries) == 1 for job in jobs)


def test_fixed_protocol_selects_each_member_on_validation_and_tests_it_once(tmp_path):
    configs = _configs("vil", seeds=[0, 1], protocol="fixed")
    runs, states = _separate(configs, tmp_path)
    members = train_ensemble(configs, progress=False)
    for run, member in zip(runs, members):
        _assert_same_run(run, member)
        assert "val_top1" in member and member["provenance"]["protocol"] == "fixed"


def toy_bn(*, image_size, num_classes, channels, **config):
    """Conv (no bias: BatchNorm would cancel it) + BatchNorm2d + a linear head; ignores the smoke overrides."""
    return nn.Sequential(nn.Conv2d(channels, 8, 3, stride=2, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, num_classes))


@pytest.fixture
def batchnorm_model(monkeypatch):
    """``toy_bn`` registered for this test only."""
    monkeypatch.setitem(registry.MODELS, "toy_bn", toy_bn)
    monkeypatch.setitem(registry.CFGS, "toy_bn", {"paper": "vix", "label": "Toy BN"})
    return "toy_bn"


def test_batchnorm_running_statistics_follow_each_member_exactly(batchnorm_model, tmp_path):
    """Under vmap with stacked buffers, BatchNorm normalises each member by its own batch statistics and updates
    its own running mean / variance / batch count, as a separate run does: supported, exactly."""
    configs = _configs(batchnorm_model)
    assert can_ensemble(configs[0]) == (True, None)
    runs, states = _separate(configs, tmp_path)
    members = train_ensemble(configs, progress=False, checkpoint=tmp_path / "ensemble.pt")
    saved = torch.load(tmp_path / "ensemble.pt", weights_only=True)
    for i, (run, member, state) in enumerate(zip(runs, members, states)):
        _assert_same_run(run, member)
        mine = member_state(saved["model"], i)
        assert int(mine["1.num_batches_tracked"]) == 3 * 2  # 3 epochs of 2 batches
        assert not torch.equal(mine["1.running_mean"], torch.zeros(8))
        _assert_same_weights(state["model"], mine)  # running statistics included, no exceptions
    means = saved["model"]["1.running_mean"]
    assert not torch.allclose(means[0], means[1])  # each member's own statistics


@pytest.mark.parametrize("options, word", [({"optimizer": "dualopt"}, "optimizer"),
                                           ({"randaugment": [1, 5]}, "randaugment"),
                                           ({"post_train_epochs": 1}, "post_train_epochs"),
                                           ({"amp_loss_only": True}, "amp_loss_only"), ({"compile": True}, "compile")])
def test_settings_an_ensemble_cannot_reproduce_are_refused_with_the_reason(options, word):
    ok, reason = can_ensemble(run_config("fnet", profile="smoke", **options))
    assert not ok and word in reason
    with pytest.raises(ValueError, match=word):
        train_ensemble(_configs("fnet", seeds=[0, 1], **options), progress=False)


def test_members_may_differ_only_in_their_own_settings_and_initial_values():
    base = dict(profile="smoke", **TINY)
    with pytest.raises(ValueError, match="configs differ in epochs"):
        train_ensemble([run_config("fnet", seed=0, **base), run_config("fnet", seed=1, epochs=5, **base)])
    with pytest.raises(ValueError, match="forwards differ"):  # a setting of the forward, not of the initial values
        train_ensemble([run_config("fnet", seed=0, **base), run_config("fnet", seed=1, **{**base, "mlp_dim": 32})])
    with pytest.raises(ValueError, match="repeat a run"):
        train_ensemble(_configs("fnet", seeds=[1, 1]))
    # the blog's alpha/beta schemes set initial values only (ShapedAttention.init_only): one shape
    schemes = [run_config("vit_small_simplified", profile="smoke", alpha_beta=a, **BLOG_TINY)
               for a in ("uniform", "identity", "dynamic")]
    assert check_members(schemes) == [0, 0, 0]
    assert len({member_shape(c) for c in schemes}) == 1
    assert member_shape(schemes[0]) != member_shape(run_config("vit_small_vanilla", profile="smoke", **BLOG_TINY))


@pytest.mark.filterwarnings("ignore:There is a performance drop")  # fused attention under vmap on a CPU
def test_dropout_is_refused_for_exactness_and_drawn_per_member_when_not_exact():
    config = run_config("vit", profile="smoke", **TINY)
    assert config["model_overrides"]["dropout"] == 0.25  # the authors' protocol
    ok, reason = can_ensemble(config)
    assert not ok and "dropout" in reason and "exact=False" in reason
    assert can_ensemble(config, exact=False) == (True, None)
    with pytest.raises(ValueError, match="dropout"):
        train_ensemble([config, {**config, "seed": 1}], progress=False)

    # two members with the same weights: in training mode their outputs differ (own masks), in eval mode not
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = engine.build_model(config)[0]
        ensemble = Ensemble([model, model], randomness="different")
        x = torch.randn(4, 3, 32, 32)
        with torch.no_grad():
            trained, evaluated = ensemble.train().shared(x), ensemble.train(False).shared(x)
    assert not torch.allclose(trained[0], trained[1]) and torch.equal(evaluated[0], evaluated[1])

    members = train_ensemble([{**config, "epochs": 1}, {**config, "epochs": 1, "seed": 1}], progress=False, exact=False)
    assert [m["provenance"]["ensemble_exact"] for m in members] == [False, False]
    assert "not equal to separate runs" in members[0]["provenance"]["ensemble_note"]


def test_stochastic_depth_and_attention_dropout_count_as_dropout():
    """CCT draws random numbers in training outside ``nn.Dropout``: stochastic depth (``DropPath``) and dropout on
    its attention weights. An exact ensemble refuses it; with own draws per member it runs."""
    config = run_config("cct", profile="smoke")
    ok, reason = can_ensemble(config)
    assert not ok and "self_attn" in reason
    no_attn = run_config("cct", profile="smoke", depth=2, mixer_options={"attn_dropout": 0.0})  # DropPath 0, 0.1
    ok, reason = can_ensemble(no_attn)
    assert not ok and "drop_path" in reason
    quiet = run_config("cct", profile="smoke", depth=1, mixer_options={"attn_dropout": 0.0})  # one layer: p = 0
    assert can_ensemble(quiet) == (True, None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = engine.build_model(config)[0]
        out = Ensemble([model, model], randomness="different").train().shared(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 2, 10)


def test_the_callers_rng_state_is_left_as_it_was():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    members = train_ensemble([{**c, "epochs": 1} for c in _configs("fnet", seeds=[0, 1])], progress=False, exact=False)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert members[0]["provenance"]["ensemble_exact"]  # no dropout: exact=False changes nothing


def _numbers(results):
    return [without_timings(r["history"]) for r in results]


def test_a_deadline_pauses_at_an_epoch_boundary_and_the_next_call_resumes(tmp_path, monkeypatch):
    configs = _configs("fnet", seeds=[0, 1])
    reference = train_ensemble(configs, progress=False)
    # epoch 1: its check, start and end read 0 s (time left); before epoch 2: past the deadline
    clock = iter([0.0, 0.0, 0.0] + [1000.0] * 10)
    monkeypatch.setattr(engine, "now", lambda: next(clock))
    ckpt = tmp_path / "ensemble.pt"
    with pytest.raises(engine.TrainingPaused, match="paused after epoch 1 of 3"):
        train_ensemble(configs, progress=False, checkpoint=ckpt, deadline=10.0)
    assert ckpt.exists() and [len(h) for h in torch.load(ckpt, weights_only=True)["history"]] == [1, 1]
    resumed = train_ensemble(configs, progress=False, checkpoint=ckpt)
    assert _numbers(resumed) == _numbers(reference)
    assert [r["top1"] for r in resumed] == [r["top1"] for r in reference]


def test_a_checkpoint_of_other_seeds_is_refused(tmp_path):
    ckpt = tmp_path / "ensemble.pt"
    train_ensemble([{**c, "epochs": 1} for c in _configs("fnet", seeds=[0, 1])], progress=False, checkpoint=ckpt)
    with pytest.raises(ValueError, match=r"not of this ensemble of seeds \[0, 2\] \(it holds \[0, 1\]\)"):
        train_ensemble(_configs("fnet", seeds=[0, 2]), progress=False, checkpoint=ckpt)


def test_a_member_whose_loss_stops_being_finite_stops_alone_and_the_others_train_on(tmp_path):
    configs = _configs("fnet", seeds=[0, 1])
    blown = {**configs[1], "lr": 1e30}  # its first step sends its weights past float32
    alone = engine.train(configs[0], progress=False)
    outcomes = train_ensemble([configs[0], blown], progress=False, checkpoint=tmp_path / "ensemble.pt")
    assert isinstance(outcomes[1], FloatingPointError)
    assert re.match(r"fnet seed 1: loss became (nan|inf) at epoch 1, step \d; no result stored", str(outcomes[1]))
    _assert_same_run(alone, outcomes[0])  # the other member trains on, as its separate run
    assert len(outcomes[0]["history"]) == 3


def test_a_non_finite_loss_names_the_members_seed(monkeypatch):
    import vixnb.engine.ensemble as ensemble_module

    monkeypatch.setattr(ensemble_module, "normalize", lambda x: torch.full(x.shape, float("nan")))
    outcomes = train_ensemble(_configs("fnet", seeds=[0, 1]), progress=False)
    assert [str(o) for o in outcomes] == [f"fnet seed {s}: loss became nan at epoch 1, step 1; no result stored. Try a "
                                          "lower learning rate (--lr) or fp32 precision (--precision fp32)."
                                          for s in (0, 1)]


BLOG_TINY = dict(width=16, depth=2, heads=2, patch=8, schedule="cosine",
                 augment={"hflip": True, "vflip": True, "rotate": 15}, grad_norm_every=1)


@pytest.mark.filterwarnings("ignore:There is a performance drop")  # fused attention under vmap on a CPU
def test_the_blog_protocol_in_an_ensemble_equals_separate_runs(tmp_path):
    """Cosine schedule (one lr for all), flips and rotations (each member from its own generator, seeded as its
    separate run's), per-layer gradient norms every step, alpha / beta, and each member's kept weights."""
    configs = _configs("vit_small_simplified", seeds=[0, 1], **BLOG_TINY)
    assert can_ensemble(configs[0]) == (True, None)
    runs, states = _separate(configs, tmp_path)
    members = train_ensemble(configs, progress=False, checkpoint=tmp_path / "ensemble.pt", with_weights=True)
    for run, member, state, config in zip(runs, members, states, configs):
        # the key bias has a gradient of zero but for rounding (softmax ignores a constant per row): AdamW noise
        _assert_same_weights(state["best_state"], member.pop("best_state"), _adam_second_moments(state, config))
        _assert_same_run(run, member)
        for a, b in zip(run["history"], member["history"]):
            assert b["lr"] == a["lr"]
            assert len(b["grad_norms"]) == 2 and len(b["alpha_beta"]) == 2
            assert b["grad_norms"] == pytest.approx(a["grad_norms"], rel=1e-4, abs=1e-5)
            for got, expected in zip(b["alpha_beta"], a["alpha_beta"]):
                assert got == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert members[0]["history"][0]["grad_norms"] != members[1]["history"][0]["grad_norms"]  # each member its own


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_run_ensemble_keeps_each_members_weights():
    """Each member's selected weights (equal to its separate run's: the test above) stored beside its result."""
    from vixnb.runs.make import run_ensemble
    from vixnb.results import ResultsStore

    configs = [{**c, "epochs": 1} for c in _configs("vit_small_simplified", seeds=[0, 1], **BLOG_TINY)]
    store = ResultsStore()
    stored = run_ensemble(configs, progress=False, keep_weights="store")
    again = train_ensemble(configs, progress=False, with_weights=True)  # deterministic on the CPU
    kept = [store.load_weights(c) for c in configs]
    for config, result, member, state in zip(configs, stored, again, kept):
        assert result["weights"]["file"] == f"weights/{store.path(config).stem}.pt"
        assert state.keys() == member["best_state"].keys()
        assert all(v.dtype == torch.float16 and torch.equal(v, member["best_state"][k].half())
                   for k, v in state.items())
    assert not torch.equal(kept[0]["pos_embedding"], kept[1]["pos_embedding"])  # each member its own
    assert run_ensemble(configs, progress=False, keep_weights="store") == stored  # kept: nothing to train
    store.weights_path(configs[0]).unlink()
    assert run_ensemble(configs, progress=False, keep_weights="store")[1] == stored[1]  # member 0 trained again, alone
    assert store.weights_path(configs[0]).exists()


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_an_augmented_ensemble_resumes_exactly(tmp_path, monkeypatch):
    configs = _configs("vit_small_simplified", seeds=[0, 1], **BLOG_TINY)
    reference = train_ensemble(configs, progress=False)
    clock = iter([0.0, 0.0, 0.0] + [1000.0] * 10)
    monkeypatch.setattr(engine, "now", lambda: next(clock))
    ckpt = tmp_path / "ensemble.pt"
    with pytest.raises(engine.TrainingPaused, match="paused after epoch 1 of 3"):
        train_ensemble(configs, progress=False, checkpoint=ckpt, deadline=10.0)
    assert len(torch.load(ckpt, weights_only=True)["augment_rng"]) == 2
    assert _numbers(train_ensemble(configs, progress=False, checkpoint=ckpt)) == _numbers(reference)


# ----- runs of one shape with their own settings ------------------------------------------------------------------

#: three members of one shape, each with its own seed, learning rate, warm-up, weight decay and clipping (and for the
#: blog's model, its own alpha/beta scheme): each must be its separate run
MEMBER_SETTINGS = [dict(seed=0, lr=3e-3), dict(seed=1, lr=1e-3, warmup_steps=3, grad_clip=0.5, weight_decay=0.1),
                   dict(seed=2, lr=2e-3, warmup_steps=5, grad_clip=1.0, alpha_beta="identity")]


def _member_configs(**options):
    return [run_config("vit_small_simplified", profile="smoke", epochs=3, batch_size=4, **BLOG_TINY, **settings,
                       **options) for settings in MEMBER_SETTINGS]


@pytest.fixture
def float64():
    """The engine in float64 for this test (initial values still drawn in float32: ``train.build_model``)."""
    from vixnb.models import default_dtype

    with default_dtype(torch.float64):
        yield


def _losses(result):
    return [h["train_loss"] for h in result["history"]] + [h["select_loss"] for h in result["history"]]


@pytest.mark.filterwarnings("ignore:There is a performance drop")
@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "graphed-path"])
def test_members_with_their_own_settings_equal_their_runs_in_float64(float64, graphs):
    configs = _member_configs()
    assert len({member_shape(c) for c in configs}) == 1 and check_members(configs) == [0, 1, 2]
    alone = [engine.train(c, progress=False, with_weights=True) for c in configs]
    members = train_ensemble(configs, progress=False, with_weights=True, graphs=graphs)
    for run, member, config in zip(alone, members, configs):
        assert member["provenance"]["execution"]["mode"] == ("graphed ensemble" if graphs else "ensemble")
        assert max(abs(a - b) for a, b in zip(_losses(run), _losses(member))) < 1e-10
        for a, b in zip(run["history"], member["history"]):
            assert b["grad_norms"] == pytest.approx(a["grad_norms"], rel=1e-10, abs=1e-12)
            cosine = 0.5 * (1 + math.cos(math.pi * (a["epoch"] - 1) / 3))
            assert b["lr"] == a["lr"] == pytest.approx(config["lr"] * cosine)
        for name, tensor in run["best_state"].items():  # the selected weights, and they load into a solo model
            assert torch.allclose(member["best_state"][name], tensor, rtol=1e-8, atol=1e-10), name
        solo = engine.build_model(config)[0]
        solo.load_state_dict(member["best_state"])


@pytest.mark.filterwarnings("ignore:There is a performance drop")
def test_members_with_their_own_settings_stay_within_float32s_own_spread():
    """In float32 a member strays from its run by rounding only: no further than the probe's tolerance, made from the
    same run's float32 and float64 losses (``engine.modes``)."""
    from vixnb.engine.modes import TOLERANCE_FACTOR
    from vixnb.models import default_dtype

    configs = _member_configs()
    alone = [engine.train(c, progress=False) for c in configs]
    with default_dtype(torch.float64):
        exact = [engine.train(c, progress=False) for c in configs]
    members = train_ensemble(configs, progress=False)
    for run, precise, member in zip(alone, exact, members):
        spread = max(abs(a - b) for a, b in zip(_losses(run), _losses(precise)))
        gap = max(abs(a - b) for a, b in zip(_losses(run), _losses(member)))
        assert 0 < spread and gap <= TOLERANCE_FACTOR * spread
