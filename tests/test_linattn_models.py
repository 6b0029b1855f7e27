"""Paper `linattn`: ViT-B/16 and its Linformer and Performer forms, the warm start from a ViT checkpoint
(``vixnb.transfer``), and the engine's runs that start from another run's weights."""
import json

import pytest
import torch

import vixnb
from vixnb import papers
from vixnb.layers.performer import FastAttention
from vixnb.models.counting import count_params
from vixnb.models.vix import B16_KERNELS
from vixnb.runs.asked import chapter_settings, table_runs
from vixnb.runs.spec import RunSpec, run_config
from vixnb.results import ResultsStore, config_key
from vixnb.engine import train as engine
from vixnb.runs import make as training_runs

#: the smoke profile's tiny config of the same code (the chapter's `profile_settings`)
TINY = dict(input_size=32, patch_size=4, depth=2, dim=64, heads=4, dim_head=16, mlp_dim=128)


def _meta(name, **settings):
    with torch.device("meta"):
        return vixnb.create_model(name, dataset="cifar10", **settings)


def test_vit_b16_has_the_true_count_of_table_1_and_the_linear_forms_add_only_their_own():
    vit = _meta("vit_b16_224")
    assert count_params(vit, "true") == 85_806_346
    # Linformer: E and F of 197 x 128 per layer are new parameters; Performer: none (features are a buffer)
    assert count_params(_meta("vil_b16_224"), "true") == 85_806_346 + 12 * 2 * 197 * 128
    for kernel in B16_KERNELS:
        assert count_params(_meta("vip_b16_224", kernel=kernel), "true") == 85_806_346
    assert count_params(_meta("vil_b16_224", linformer_k=64), "true") == 85_806_346 + 12 * 2 * 197 * 64
    # Table 1's other reading, 12 heads of width 128: q, k, v maps 768 -> 1536 with bias, output 1536 -> 768
    wide = 85_806_346 + 12 * (768 * 3 * 64 * 12 + 3 * 64 * 12 + 64 * 12 * 768)
    assert wide == 114_145_546
    assert count_params(_meta("vit_b16_224", dim_head=128), "true") == wide
    assert count_params(_meta("vil_b16_224", dim_head=128), "true") == wide + 12 * 2 * 197 * 128
    for kernel in B16_KERNELS:
        assert count_params(_meta("vip_b16_224", kernel=kernel, dim_head=128), "true") == wide
    patch = vit.to_patch_embedding[0]
    assert isinstance(patch, torch.nn.Conv2d) and patch.kernel_size == (16, 16) and patch.stride == (16, 16)
    assert vit.pos_embedding.shape == (1, 197, 768)


def test_a_batch_of_one_cifar_image_is_resized_to_224_inside_the_model(monkeypatch):
    model = vixnb.create_model("vit_b16_224", dataset="cifar10", depth=1).eval()
    seen = []
    monkeypatch.setattr(model.to_patch_embedding[0], "forward",
                        lambda x, f=model.to_patch_embedding[0].forward: seen.append(x.shape) or f(x))
    with torch.no_grad():
        out = model(torch.randn(1, 3, 32, 32))
    assert out.shape == (1, 10) and seen == [(1, 3, 224, 224)]
    assert _meta("vit_b16_224", **TINY).resize_to is None  # the tiny config takes 32 px as it is


def test_unknown_kernel_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"kernel='softmax': choose one of favor\+, relu, exp"):
        vixnb.create_model("vip_b16_224", dataset="cifar10", kernel="softmax", **TINY)


@pytest.mark.parametrize("kernel", ["relu-deterministic", "exp-deterministic"])
def test_deterministic_features_are_positive_and_finite_in_bf16(kernel):
    fast = FastAttention(dim_head=64, kernel=kernel)
    g = torch.Generator().manual_seed(0)
    # queries and keys 8 times a unit normal (a trained ViT's reach): exp of the unshifted EXP features would reach
    # e^13 and its products e^26 per term; shifted by their maximum they stay in (0, 1] in bf16
    q, k = ((8 * torch.randn(1, 12, 197, 64, generator=g)).bfloat16() for _ in range(2))
    qf, kf = fast.features(q, k)
    assert qf.dtype == kf.dtype == torch.bfloat16
    for f in (qf, kf):
        assert torch.isfinite(f).all() and (f > 0).all()
    out = fast(q, k, torch.randn(1, 12, 197, 64, generator=g).bfloat16())
    assert torch.isfinite(out).all()


def _tiny(name, seed=0, **settings):
    torch.manual_seed(seed)
    return vixnb.create_model(name, dataset="cifar10", **TINY, **settings)


@pytest.mark.parametrize("name,settings", [("vil_b16_224", {}), ("vip_b16_224", {"kernel": "favor+"}),
                                           ("vip_b16_224", {"kernel": "relu"}), ("vip_b16_224", {"kernel": "exp"})])
def test_transfer_report_is_complete_and_q_k_v_match_the_vit(name, settings):
    vit, target = _tiny("vit_b16_224"), _tiny(name, seed=1, **settings)
    report = vixnb.transfer(vit.state_dict(), target)
    assert isinstance(report, vixnb.TransferReport)
    # every tensor of both sides is in the report, once
    assert sorted(report.loaded + report.new) == sorted(target.state_dict())
    assert not report.unused
    new_kinds = {n.rsplit(".", 1)[-1] for n in report.new}
    assert new_kinds == ({"proj_k", "proj_v"} if name == "vil_b16_224" else {"projection", "calls_since_redraw"})
    assert report.counts() == {"loaded": len(report.loaded), "new": len(report.new), "unused": 0}
    x = torch.randn(2, 65, 64)
    for vit_layer, layer in zip(vit.transformer.layers, target.transformer.layers):
        ours, theirs = layer[0].fn, vit_layer[0].fn
        expected = theirs.to_qkv(x).chunk(3, dim=-1)
        for got, want in zip((ours.to_q(x), ours.to_k(x), ours.to_v(x)), expected):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(ours.to_out(x), theirs.to_out(x), rtol=0, atol=0)
    for key in ("cls_token", "pos_embedding", "to_patch_embedding.0.weight", "mlp_head.1.weight"):
        assert torch.equal(target.state_dict()[key], vit.state_dict()[key])


def test_transfer_lists_a_shape_mismatch_as_new_and_unused_and_joins_q_k_v_back():
    vit = _tiny("vit_b16_224")
    wide = vixnb.create_model("vit_b16_224", dataset="cifar10", **{**TINY, "input_size": 64})  # 257 positions
    report = vixnb.transfer(vit.state_dict(), wide)
    assert "pos_embedding" in report.new and "pos_embedding" in report.unused
    row = next(r for r in report.rows if r["tensor"] == "pos_embedding" and r["status"] == "new")
    assert "(1, 65, 64)" in row["note"]
    back = _tiny("vit_b16_224", seed=3)
    report = vixnb.transfer(_tiny("vip_b16_224", seed=2, kernel="exp").state_dict(), back)
    assert not report.new and sorted(report.unused) == [n for n in sorted(report.unused) if "fast_attention" in n]
    assert "TransferReport: " in str(report) and "loaded" in report.summary()


# ---- the engine: a run from another run's weights (smoke profile, the chapter's tiny models)

def _book():
    return papers.book_chapter("linattn", "linattn")


def test_chapter_settings_name_the_source_run_as_the_chapter_makes_it():
    runs = {row: settings for row, _, settings, _ in table_runs("linattn", _book(), "test", "smoke")}
    source = runs["vipa_checkpoint"]["init_from"]
    assert source["run"] == "vit_scratch" and source["model"] == "vit_b16_224"
    assert source["settings"] == {**runs["vit_scratch"]}  # the scratch ViT, tiny as the chapter makes it
    config = run_config("vip_b16_224", profile="smoke", **runs["vipa_checkpoint"])
    vit = run_config("vit_b16_224", profile="smoke", **runs["vit_scratch"])
    assert config["init_from"]["key"] == config_key(vit)
    assert chapter_settings("linattn", {"init_from": "vit_scratch"}, {"depth": 2})["init_from"]["settings"] == \
        {"depth": 2}


def test_init_from_names_a_run_of_the_paper_or_says_which_exist():
    with pytest.raises(ValueError,
                       match=r"init_from='nope': not a run of vixnb/papers/linattn.yaml; its runs: .*vit_scratch"):
        run_config("vil_b16_224", profile="smoke", init_from="nope")
    with pytest.raises(ValueError, match="starts from another run itself"):
        run_config("vil_b16_224", profile="smoke", init_from="vil_checkpoint")
    assert "init_from" not in run_config("vil_b16_224", profile="smoke")  # identities of other runs unchanged


def test_a_warm_started_run_trains_its_source_keeps_it_locally_and_records_the_transfer(monkeypatch):
    # the tiny ViT's weights as large as ViT-B/16's: over the cap
    monkeypatch.setattr(training_runs, "WEIGHTS_LIMIT_MB", 0.01)
    runs = {row: settings for row, _, settings, _ in table_runs("linattn", _book(), "test", "smoke")}
    options = dict(profile="smoke", epochs=1)
    result = training_runs.run(RunSpec.of("vil_b16_224", **options, **runs["vil_checkpoint"]))
    assert result["status"] == "done"
    transfer = result["transfer"]
    assert transfer["source"] == "vit_scratch" and transfer["counts"]["unused"] == 0
    assert set(transfer["new"]) == {f"transformer.layers.{i}.0.fn.{p}" for i in range(2) for p in ("proj_k", "proj_v")}
    assert 0 <= transfer["top1"] <= 100 and transfer["loss"] > 0
    store = ResultsStore()
    # the source is the row's own run (the profile's epochs), not one of the warm start's length
    source = training_runs.run(RunSpec.of("vit_b16_224", profile="smoke", **runs["vit_scratch"]), compute="never")
    assert source["status"] == "done" and source["weights"]["file"].startswith(".weights-local/")
    assert store.weights_path(source["config"], local=True).is_file()
    # the stored transfer record is plain JSON, and every history entry has the test loss and pass time
    stored = json.loads(store.path(result["config"]).read_text())
    assert stored["transfer"]["top1"] == transfer["top1"]
    assert all(h["select_loss"] > 0 and h["eval_seconds"] > 0 for h in stored["history"])
    trained = []
    monkeypatch.setattr(training_runs, "train", lambda *a, **k: trained.append(1))
    again = training_runs.run(RunSpec.of("vil_b16_224", **options, **runs["vil_checkpoint"]))
    assert again["transfer"] == transfer and not trained  # stored: nothing trains again


def test_a_warm_start_without_its_source_under_never_is_not_yet_run():
    runs = {row: settings for row, _, settings, _ in table_runs("linattn", _book(), "test", "smoke")}
    record = training_runs.run(RunSpec.of("vip_b16_224", profile="smoke", **runs["viprelu_checkpoint"]),
                               compute="never")
    assert record["status"] == "not yet run"


def test_warm_start_runs_are_never_ensembled():
    from vixnb.engine.ensemble import can_ensemble

    runs = {row: settings for row, _, settings, _ in table_runs("linattn", _book(), "test", "smoke")}
    ok, why = can_ensemble(run_config("vil_b16_224", profile="smoke", **runs["vil_checkpoint"]))
    assert not ok and why.startswith("init_from")


def test_a_stored_source_is_not_trained_again_for_its_weights_and_a_changed_source_makes_warm_starts_stale(monkeypatch):
    monkeypatch.setattr(training_runs, "WEIGHTS_LIMIT_MB", 0.01)  # kept locally, as ViT-B/16's
    runs = {row: settings for row, _, settings, _ in table_runs("linattn", _book(), "test", "smoke")}
    options = dict(profile="smoke")
    warm = training_runs.run(RunSpec.of("vip_b16_224", **options, **runs["viprelu_checkpoint"]))
    source = training_runs.run(RunSpec.of("vit_b16_224", **options, **runs["vit_scratch"]), compute="never")
    assert warm["transfer"]["source_weights_sha256"] == source["weights"]["sha256"]
    store = ResultsStore()
    store.weights_path(source["config"], local=True).unlink()  # another machine: the local weights are not there
    trained = []
    real = engine.train
    monkeypatch.setattr(training_runs, "train", lambda *a, **k: trained.append(a[0]["model"]) or real(*a, **k))
    assert training_runs.run(RunSpec.of("vit_b16_224", **options, **runs["vit_scratch"]))["status"] == "done" and \
        not trained
    assert "stale" not in training_runs.run(RunSpec.of("vip_b16_224", **options, **runs["viprelu_checkpoint"]),
                                            compute="never")
    # the source trained again (other weights): its stored warm starts say so, and "missing" makes them again
    path = store.path(source["config"])
    record = json.loads(path.read_text())
    record["weights"]["sha256"] = "0" * 64
    path.write_text(json.dumps(record))
    stale = training_runs.run(RunSpec.of("vip_b16_224", **options, **runs["viprelu_checkpoint"]), compute="never")
    assert stale["stale"] == "made from other weights of 'vit_scratch' than those stored now"


def test_a_warm_start_source_is_never_ensembled_and_train_needs_its_weights(tmp_path):
    from vixnb.runs.make import can_ensemble_run as can_ensemble

    runs = {row: settings for row, _, settings, _ in table_runs("linattn", _book(), "test", "smoke")}
    ok, why = can_ensemble(run_config("vit_b16_224", profile="smoke", **runs["vit_scratch"]))
    assert not ok and "warm starts begin from each seed's weights" in why
    assert can_ensemble(run_config("vit_b16_224", profile="smoke", lr=3e-4, **TINY))[0]  # the sweep's other runs may
    # but not its lr 1e-3 run, the source of the Adam-default reading's warm starts
    assert not can_ensemble(run_config("vit_b16_224", profile="smoke", lr=1e-3, **TINY))[0]
    config = run_config("vil_b16_224", profile="smoke", **runs["vil_checkpoint"])
    with pytest.raises(ValueError, match=r"init_from 'vit_scratch' needs the source's weights"):
        engine.train(config, progress=False, checkpoint=tmp_path / "run.pt")
