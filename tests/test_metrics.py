"""vixnb.report.records.metrics: the one table of our metrics, read by the claims ledger, the statistics over seeds and
the per-seed comparisons."""
import math

from vixnb import papers, report
from vixnb.report.records import metrics as M
from vixnb.record_kinds import KINDS
from vixnb.report.records.metrics import RUN_STATISTICS

# two hand-made training records (seeds) of one configuration; the second has no stage, phase or transfer
SEED_A = {"status": "done", "top1": 60.0, "top5": 90.0, "best_epoch": 2, "gpu_gb_reserved": 1.5,
          "transfer": {"top1": 20.0}, "history": [
              {"epoch": 1, "stage": "main", "phase": "adamw", "train_acc": 30.0, "select_top1": 40.0,
               "select_loss": 1.5, "seconds": 9.0, "eval_seconds": 3.0},
              {"epoch": 2, "stage": "main", "phase": "sgd", "train_acc": 50.0, "select_top1": 60.0,
               "select_loss": 1.0, "seconds": 4.0, "eval_seconds": 1.0},
              {"epoch": 3, "stage": "post", "phase": "sgd", "train_acc": 55.0, "select_top1": 58.0,
               "select_loss": 1.25, "seconds": 6.0, "eval_seconds": 2.0, "alpha_beta": [[3.0, 1.0], [1.0, 1.5]],
               "grad_norms": [2.0, 0.5]}]}  # the gradient ratio is read at the last epoch
SEED_B = {"status": "done", "top1": 70.0, "top5": 80.0, "best_epoch": 1, "gpu_gb_reserved": 2.5, "history": [
    {"epoch": 1, "train_acc": 45.0, "select_top1": 70.0, "select_loss": 0.5, "seconds": 5.0, "eval_seconds": 2.0},
    {"epoch": 2, "train_acc": 65.0, "select_top1": 66.0, "select_loss": 0.75, "seconds": 3.0, "eval_seconds": 1.0,
     "alpha_beta": [[3.0, 1.0], [1.0, 3.0]], "grad_norms": [1.0, 4.0]}]}

#: metric -> (its figure of SEED_A, of SEED_B)
PER_SEED = {"top1": (60.0, 70.0), "top5": (90.0, 80.0), "top1_mean": (60.0, 70.0),
            "train_acc_final": (55.0, 65.0), "train_acc_final_std": (55.0, 65.0), "epoch_s": (5.0, 3.0),
            "grad_norm_first_last": (4.0, 0.25), "identity_share_first_last": (35.0, 50.0), "run_gpu_gb": (1.5, 2.5),
            "top1_main": (60.0, 70.0), "top1_adamw": (40.0, 70.0), "test_s": (1.5, 1.0), "test_loss": (1.0, 0.5),
            "top1_last": (58.0, 66.0), "top1_transfer": (20.0, None)}
#: metric -> its figure over both seeds
OVER_SEEDS = {"top1": 70.0, "top5": 80.0, "top1_mean": 65.0, "train_acc_final": 60.0,
              "train_acc_final_std": math.sqrt(50.0), "epoch_s": 4.0, "grad_norm_first_last": 2.125,
              "identity_share_first_last": 42.5, "run_gpu_gb": 2.0, "top1_main": 70.0, "top1_adamw": 70.0,
              "test_s": 1.25, "test_loss": 0.75, "top1_last": 62.0, "top1_transfer": 20.0}


def test_every_metric_the_claims_name_is_in_the_table():
    named = {claim[field] for key in papers.list_papers() for claim in papers.claims(key)
             for field in ("metric", "x", "y") if claim.get(field)}
    assert named and named <= set(M.METRICS), sorted(named - set(M.METRICS))


def test_each_metric_says_what_decides_it_and_where_it_comes_from():
    for key, metric in M.METRICS.items():
        assert metric.label and metric.unit and metric.source, key
        assert metric.decided_by in (M.MODEL, M.STEP, M.EPOCHS), key
        from_runs = metric.origin == "runs"
        assert from_runs == (metric.per_seed is not None) == (metric.over_seeds is not None), key
        assert (metric.column is not None) == (metric.origin == "counted" or metric.origin in KINDS), key
    assert M.MODEL_METRICS == ("params", "size_mb", "gflops")
    assert set(M.STEP_METRICS) == {"gpu_gb", "gpu_gb_fused", "train_gb", "train_gb_fused", "epoch_s",
                                   "run_gpu_gb", "train_step_ms", "ms_per_image", "infer_gb",
                                   "test_s", "latency_ms"}
    # a measure of trained weights depends on the epochs they were trained
    assert M.METRICS["class_token_entropy"].decided_by == M.EPOCHS and \
        M.METRICS["class_token_entropy"].origin == "attention_maps"
    assert M.metric_label("top1") == "top-1" and M.metric_label("macs_g") == "macs_g"
    assert M.metric_unit("epoch_s") == "s" and M.metric_unit("macs_g") == ""


def test_the_page_headings_of_the_per_seed_figures():
    assert {key: heading for key, (heading, _) in M.PER_SEED.items()} == {
        "top1": "best test top-1 (%)", "train_acc_final": "final train acc. (%)",
        "top1_main": "best test top-1 before post-training (%)",
        "top1_adamw": "best test top-1 of the AdamW phase (%)"}


def test_each_per_seed_figure_and_statistic_on_hand_made_records():
    assert set(PER_SEED) == set(OVER_SEEDS) == set(M.SEED_METRICS) == set(RUN_STATISTICS)
    for key, (a, b) in PER_SEED.items():
        assert (M.METRICS[key].per_seed(SEED_A), M.METRICS[key].per_seed(SEED_B)) == (a, b), key
    for key, expected in OVER_SEEDS.items():
        assert RUN_STATISTICS[key]([SEED_A, SEED_B]) == expected, key
        assert report.records.seed_statistic(key, [SEED_A, {"status": "not yet run"}, SEED_B]) == expected, key
    assert RUN_STATISTICS["train_acc_final_std"]([SEED_A]) is None
    assert RUN_STATISTICS["top1_transfer"]([SEED_B]) is None
    frame = report.records.compare_pairs([("b − a", "b", "a")], {"a": [SEED_A], "b": [SEED_B]},
                                         metrics=("top1_main", "top1_adamw"))
    assert frame.loc[("b − a", "best test top-1 of the AdamW phase (%)"), "a − b"] == "+30.00"
    assert frame.loc[("b − a", "best test top-1 before post-training (%)"), "a − b"] == "+10.00"
