import os

import pytest


@pytest.fixture(autouse=True)
def isolated_results(tmp_path, monkeypatch):
    """Every test gets its own results store, so nothing reads or writes the repository's results/."""
    monkeypatch.setenv("VIXNB_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


SMOKE_BOOK_TESTS = "test_book.py"  # the tests that build the smoke book (every chapter run on the CPU)


@pytest.fixture(autouse=True, scope="session")
def session_cache(tmp_path_factory):
    """The cache folder (``$VIXNB_CACHE``: the models' kept facts) of this session, shared by its tests and the
    processes they start, never the user's own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VIXNB_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="session")
def smoke_book(tmp_path_factory):
    """The smoke book built once per session (every chapter run on the CPU, papermill through ``vixnb book``), in a
    temporary book root with a temporary results store: ``{"root", "html"}``. tests/test_book.py checks the build;
    other tests read its executed chapters (``smoke_book_built``) instead of running a chapter again."""
    from vixnb.book.build import build_book, copy_book_sources

    root = copy_book_sources(tmp_path_factory.mktemp("book"))
    with pytest.MonkeyPatch.context() as mp:  # the chapters' smoke runs go to a temporary results store too
        mp.setenv("VIXNB_RESULTS", str(tmp_path_factory.mktemp("results")))
        html = build_book("smoke", clean=True, book_root=root, jobs=2)  # two kernels on two cores
    return {"root": root, "html": html}


def smoke_book_built(request):
    """Whether this session builds the smoke book (it runs tests/test_book.py), so that a test may read a chapter
    executed there rather than run it again."""
    return any(item.path.name == SMOKE_BOOK_TESTS for item in request.session.items)


@pytest.fixture
def paper_dir(tmp_path, monkeypatch):
    """Paper files read from a temporary folder (a copy of the package's ``papers/``)."""
    import shutil
    from importlib import resources

    from vixnb import papers

    folder = tmp_path / "papers"
    shutil.copytree(resources.files("vixnb").joinpath("papers"), folder)
    monkeypatch.setattr(papers, "paper_file", lambda key: folder / f"{key}.yaml")
    papers.load.cache_clear()
    yield folder
    papers.load.cache_clear()


def source_document(key):
    """The text of paper ``key``'s source document (``vixnb.papers.DOCUMENTS``) from the shared folder beside the
    checkout. Where that folder is absent (a clone on its own) the test is skipped, except under CI (``CI`` set and
    not empty, 0 or false), where a transcription test that cannot read its document fails: a CI without the
    documents must not go green silently."""
    from pathlib import Path

    from vixnb.papers import DOCUMENTS

    path = Path(__file__).resolve().parents[2] / "shared" / "seeds" / DOCUMENTS[key]
    if not path.exists():
        why = f"the source document of paper {key!r} ({path.name}) is not in shared/seeds beside the checkout"
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"{why}; CI must have shared/ beside the clone")
        pytest.skip(why)
    return path.read_text(encoding="utf-8")


@pytest.fixture
def paper_text():
    """``paper_text(key)``: ``source_document(key)``."""
    return source_document


@pytest.fixture
def torchsummary_report():
    """``torchsummary_report(model)``: (Total params, Estimated Total Size (MB)) as torchsummary 1.5.1's ``summary``
    prints them for the model's ``default_cfg`` input on the CPU, with the softmax materialised as the authors ran
    it; the test is skipped where torchsummary is not installed."""
    import contextlib
    import io
    import re

    torchsummary = pytest.importorskip("torchsummary")
    from vixnb import layers

    def report(model):
        out = io.StringIO()
        with layers.fused_attn(model, False), contextlib.redirect_stdout(out):
            torchsummary.summary(model, tuple(model.default_cfg["input_size"]), device="cpu")
        text = out.getvalue()
        params = int(re.search(r"Total params: ([\d,]+)", text).group(1).replace(",", ""))
        return params, float(re.search(r"Estimated Total Size \(MB\): ([\d.]+)", text).group(1))

    return report


@pytest.fixture
def crash_after_checkpoint(monkeypatch):
    """A function that, once called, makes the training engine raise the exception class it returns right after
    every checkpoint it saves (a crash at each epoch boundary, the checkpoint on disk)."""
    from vixnb.engine import train as engine

    class Crash(Exception):
        pass

    real = engine.save_checkpoint

    def save_then_crash(path, state):
        real(path, state)
        raise Crash

    def install():
        monkeypatch.setattr(engine, "save_checkpoint", save_then_crash)
        return Crash

    return install


def seeded_model(name, dataset="cifar10", **overrides):
    """``vixnb.create_model`` with the weights drawn from seed 0, the caller's RNG left as it was (the family tests'
    ``fresh``)."""
    import torch

    import vixnb

    with torch.random.fork_rng():
        torch.manual_seed(0)
        return vixnb.create_model(name, dataset=dataset, **overrides)

# ----- the test tiers ------------------------------------------------------------------------------------------
# `make test` (the edit-test loop: at most 5 minutes on two cores after the install) runs `pytest -m "not slow"`;
# `make test-all` (CI) runs everything. A test is slow where it took 2 s or more on the project's 2-core machine
# (measured on the whole suite), or builds a book, or installs packages. Listed here, in one place, by file and
# test function (every parametrisation of it); a listed name that no longer exists fails the collection.
ALL = "every test of the file"
SLOW = {
    "test_engine_speed.py": {  # about 5 s each on two cores
        "test_the_engine_gives_the_bits_it_gave_before",  # about 6 s: the pinned commit's engine in its own process
        "test_host_reads_grow_with_epochs_not_steps",
        "test_runs_at_once_each_give_their_solo_run_bitwise",
        "test_dualopt_randaugment_and_post_training_give_the_bits_they_gave_before",
    },
    # whole files: the book builds
    "test_book.py": ALL,
    "test_rehearsal.py": {
        # about ten minutes in CI before its jobs stopped listing the 60,000 CIFAR-10 files each (4 s a job on a
        # loaded machine, 0.4 s now) and its ensemble stopped being two ViT-B/16 runs; 392 s before a CPU
        # rehearsal built its models with two blocks (profiles.REHEARSAL_CPU_DEPTH), 194-246 s since
        "test_the_budget_plan_rehearses_on_this_cpu_and_leaves_results_alone",
        "test_the_rehearsal_runs_every_model_protocol_and_record_kind_of_the_plan",
    },
    "test_published_book.py": ALL,
    "test_chapters.py": ALL,  # about 45 s alone; the whole suite reads the smoke book's copy instead
    "test_modes.py": {
        "test_a_failed_check_switches_its_mode_off_and_the_batch_trains_in_another_saying_why",  # the probe: ~20 s
        "test_the_session_script_runs_the_probe_and_a_short_batch_on_the_cpu",  # the probe and a batch: ~40 s
        "test_the_plans_estimates_refit_from_a_gpus_probe_of_the_modes",  # a copy of the store, two plans: ~15 s
    },
    "test_loan.py": {
        "test_timeout_on_a_batch_stops_its_local_job_and_keeps_its_checkpoint",  # about 30 s: waits for the timeout
        "test_a_run_whose_checkpoint_cannot_travel_needs_its_whole_time_in_one_call",
        "test_the_gpu_check_script_runs_phases_1_and_3_on_the_cpu_and_says_pass_or_fail",  # about 15 s
        "test_timeout_on_a_rehearsal_ends_its_job_and_removes_its_scratch_store",  # about 40 s
    },
    "test_probe.py": {
        # ~50 s on one core: six trees, one stored result of each model
        "test_refactors_leave_each_models_stored_result_current_and_numeric_changes_mark_the_runs_they_touch",
        "test_every_stored_result_is_made_the_same_by_its_commits_code_and_todays",  # CI's probe: ~40 s on one core
    },
    "test_pack.py": {
        "test_a_40_mib_checkpoint_travels_in_parts_and_comes_back_byte_for_byte",  # about 3 s: 40 MiB through gzip
    },
    "test_leftovers.py": {
        "test_sigterm_ends_vixnb_run_as_ctrl_c_does",  # about 6 s: starts `vixnb run` and its kernel, then stops them
    },
    "test_runtime.py": {
        "test_install_cell_installs_vixnb_into_a_fresh_venv_and_keeps_its_torch",
        "test_a_chapter_opened_as_on_colab_shows_the_stored_results_of_its_release",  # installs vixnb, runs a chapter
    },
    "test_analysis_maps.py": {
        "test_attention_maps_of_every_family",
    },
    "test_attention.py": {
        "test_bench_mixers_small",
    },
    "test_attribution.py": {
        "test_attribution_measures_is_json_ready",
        "test_grad_cam_reads_the_stem_or_the_tokens_and_gives_image_sized_maps",
    },
    "test_bench.py": {
        "test_bench_fill_measures_one_seed_and_an_ensemble_in_one_run_and_names_the_winner",
        "test_bench_mixers_can_time_compiled_mixers",
        "test_bench_mixers_json_holds_rows_and_provenance",
        "test_benchmarks_keep_the_rng_state_and_the_thread_count",
    },
    "test_blog_protocol.py": {
        "test_alpha_beta_recorded_for_shaped_layers_only",
        "test_augmentation_only_in_training_batches_and_from_the_runs_own_generator",
        "test_cosine_learning_rates_per_epoch_are_exact",
    },
    "test_claims.py": {
        "test_ledger_and_summary",
        "test_ours_from_an_empty_store_is_not_yet_run",
        "test_ours_from_the_committed_budget_store",
        "test_the_ledger_page_runs_in_the_smoke_profile",
    },
    "test_cli.py": {
        "test_bench_train_prints_ratios_measured_in_one_run",
        "test_missing_data_error_names_the_download_flag",
        "test_models_imports_neither_matplotlib_nor_pandas",
        "test_models_table",
        "test_train_json_last_line",
    },
    "test_cxv_ablations.py": {
        "test_ablation_trains_one_cpu_step",
        "test_defaults_keep_every_model_exactly",
        "test_every_ablation_builds_the_other_models",
        "test_extra_residual_adds_no_module_and_changes_the_function",
        "test_pos_learned_adds_one_parameter",
    },
    "test_cxv_paper.py": {
        "test_a_capped_dualopt_run_records_why_it_switched",
        "test_every_plan_command_parses_back_to_its_run",  # about 10 s: every entry of the budget plan
    },
    "test_data.py": {
        "test_synthetic_is_learnable_by_a_small_cnn",
        "test_synthetic_size_gives_a_prefix",
    },
    "test_ensemble.py": {
        "test_a_deadline_pauses_at_an_epoch_boundary_and_the_next_call_resumes",
        "test_an_augmented_ensemble_resumes_exactly",
        "test_an_ensemble_equals_separate_runs_of_its_seeds",
        "test_batchnorm_running_statistics_follow_each_member_exactly",
        "test_convmixer_a_cxv_batchnorm_baseline_ensembles_exactly_under_adamw",
        "test_dropout_is_refused_for_exactness_and_drawn_per_member_when_not_exact",
        "test_fixed_protocol_selects_each_member_on_validation_and_tests_it_once",
        "test_the_blog_protocol_in_an_ensemble_equals_separate_runs",
        "test_the_callers_rng_state_is_left_as_it_was",
    },
    "test_family_cvt.py": {
        "test_forward_backward",
        "test_params_match_tables_3_and_4",
        "test_size_mb_matches_tables_3_and_4",
        "test_table4_is_table3_plus_the_200_class_head",
    },
    "test_family_cxv.py": {
        "test_paper_count_on_cifar10",
    },
    "test_family_cxv_baselines.py": {
        "test_counts_on_cifar10",
    },
    "test_family_cxv_transformers.py": {
        "test_one_training_step_at_smoke_depth",
    },
    "test_faults.py": {
        "test_a_chapter_interrupted_midway_leaves_the_store_consistent",
        "test_a_checkpoint_of_another_architecture_is_set_aside",
        "test_a_full_disk_names_the_path_the_bytes_needed_and_free",
        "test_batch_keeps_an_earlier_checkpoint_when_its_job_fails",
        "test_plain_papermill_with_a_misspelt_parameter_fails_in_the_notebook",  # starts two kernels
    },
    "test_shaped_chapter.py": {
        "test_first_steps_are_the_engines_own_steps_and_a_record_keeps_its_arms_in_order",  # about 10 s: 16 arms
    },
    "test_maps_study.py": {
        "test_plan_keeps_the_weights_of_the_study_runs_and_measures_after_them",
        "test_study_record_measures_trained_runs_and_marks_the_rest",
    },
    "test_measure.py": {
        "test_cli_json",
        "test_measure_imports_neither_report_nor_the_command_line",
        "test_measure_is_json_serialisable_with_provenance",
        "test_measure_reports_both_parameter_conventions",
        "test_measuring_keeps_the_global_rng_state",
        "test_nystrom_counts_on_the_meta_device",
    },
    "test_models.py": {
        "test_torchsummary_agrees_with_our_count_and_the_paper",
    },
    "test_notebooks.py": {
        "test_a_failed_run_keeps_the_previous_executed_copy",
    },
    "test_papers.py": {
        "test_the_paper_file_is_read_on_first_use_not_at_import",
    },
    "test_plan_batch.py": {
        "test_a_failed_job_is_marked_failed_and_leaves_the_store_clean",
        "test_an_ensemble_job_stores_every_member_as_its_separate_run",
        "test_budget_pauses_at_an_epoch_boundary_and_resumes_to_identical_metrics",
        "test_local_executor_runs_two_smoke_jobs_end_to_end",
        "test_plan_levels_then_cheaper_first",
        "test_the_plan_completes_whole_chapters_cheapest_first",  # 20-35 s: three plans of the whole book
        "test_plan_json_and_totals",  # about 20 s
    },
    "test_provenance_page.py": {
        "test_a_run_records_its_source_hash_and_code_changed_names_the_part",
    },
    "test_store_and_train.py": {
        "test_resume_after_kill_gives_identical_metrics",
        "test_resume_through_the_dualopt_switch_and_post_training",
        "test_training_is_deterministic_on_cpu",
        "test_two_processes_writing_the_same_run_leave_one_whole_file",
    },
    "test_weak_cases.py": {
        "test_a_rehearsal_that_reaches_nothing_says_why",  # about 15 s: the budget plan, three times
    },
    "test_store_tolerance.py": {
        "test_plan_lists_each_unusable_file_once_and_goes_on",  # about 10 s: the budget plan, twice
    },
    "test_model_inputs.py": {
        "test_every_registered_model_refuses_another_image_size_naming_both",  # about 2.5 s: every model on meta
    },
}


def pytest_collection_modifyitems(config, items):
    seen = {}
    for item in items:
        file, name = item.path.name, getattr(item, "originalname", item.name)
        seen.setdefault(file, set()).add(name)
        listed = SLOW.get(file)
        if listed == ALL or (listed and name in listed):
            item.add_marker(pytest.mark.slow)
    stale = sorted(f"{file}::{name}" for file, names in SLOW.items() if names != ALL and file in seen
                   for name in names - seen[file] if _whole_file_collected(config, file))
    if stale:
        raise pytest.UsageError(f"tests/conftest.py SLOW names tests that do not exist: {', '.join(stale)}; "
                                "remove or rename them")


def _whole_file_collected(config, file):
    """Whether ``file`` was collected without a -k or node-id selection (so every test of it was seen)."""
    if config.getoption("keyword") or config.getoption("markexpr") not in ("", "not slow", "slow"):
        return False
    return not any("::" in str(arg) for arg in config.args)


def _torch_state():
    """The process-wide torch settings a test could leave changed behind the next one's back (threads, modes on the
    dispatch stack such as a FlopCounterMode never exited, anomaly detection, the profiler, determinism)."""
    import torch
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return {"threads": torch.get_num_threads(), "grad": torch.is_grad_enabled(),
            "default dtype": torch.get_default_dtype(), "anomaly": torch.is_anomaly_enabled(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "dispatch modes": len(_get_current_dispatch_mode_stack()),
            "function modes": torch._C._len_torch_function_stack(),
            "profiler": torch.autograd.profiler._is_profiler_enabled, **_signal_state()}


def _signal_state():
    """How this process and the processes it starts take SIGINT and SIGTERM: the handlers (a child inherits one set
    to ignore) and the blocked signals (a child inherits the mask: a batch started by a later test would never see its
    Ctrl-C)."""
    import signal

    state = {"SIGINT handler": signal.getsignal(signal.SIGINT), "SIGTERM handler": signal.getsignal(signal.SIGTERM),
             "blocked signals": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))}
    try:  # what the kernel holds (a library may set a disposition Python's getsignal does not see): Linux
        status = dict(line.split(":", 1) for line in open("/proc/thread-self/status").read().splitlines()
                      if ":" in line)
        state.update({key: status[key].strip() for key in ("SigIgn", "SigBlk")})
    except OSError:
        pass
    return state


@pytest.fixture(autouse=True)
def torch_state_kept():
    """Every test leaves torch's process-wide settings and the process's signal handling as it found them: nothing
    changes global state behind the caller's back (a mode left on, one thread left set, slows every later test; a
    signal left blocked reaches no batch a later test starts)."""
    if "torch" not in __import__("sys").modules:
        yield
        return
    before = _torch_state()
    yield
    after = _torch_state()
    assert after == before, f"the test changed process-wide state: {before} -> {after}"
