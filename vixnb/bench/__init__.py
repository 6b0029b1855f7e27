"""Benchmarks that print ratios measured in one run: ``vixnb bench mixers``, ``vixnb bench train`` and
``vixnb bench fill``, and the benchmarks stored in the results store (``results/bench/``) that the efficiency
chapter shows.

``bench_mixers(...)`` (``mixers``) times forward + backward of every token mixer of
``measure.sweep_mechanisms`` (labels and options as in the efficiency chapter's scaling sweep) in the ViX
paper configuration (1025 tokens, dim 128, 4 heads of 32, batch 64 by default) against the materialised
softmax measured in the same run (``ratio_vs_materialized_softmax`` is time / reference time,
``memory_ratio_vs_materialized_softmax`` the same for memory). Each mechanism is one ``measure.sweep_row``
(``bench_mixer``).

What is measured (``measure.sweep_row``):
- time: median over ``steps`` timed steps after ``warmup`` untimed ones; CUDA events on a GPU,
  ``time.perf_counter`` on a CPU. bf16/fp16 run under ``torch.autocast`` (parameters stay fp32).
- memory on CUDA: ``torch.cuda.max_memory_allocated`` during the timed steps minus what was allocated
  before them (parameters and the input excluded), in MiB (``peak_mb``).
- memory on CPU: PyTorch keeps no statistics for CPU allocations, so each mechanism runs in a fresh
  Python process (``isolate=True``, the default on CPU) and the figure is the growth of that process's
  peak resident set size (``ru_maxrss``) over its resident size just before the first step, in MiB. It
  includes allocator caching and is coarser than the CUDA figure; with ``isolate=False`` it is not measured
  (``None``; the row's ``estimate_gb`` is the shape-based estimate the scaling sweep uses on a CPU).
  The benchmark runs what it is asked to: no CPU budget guard.

``bench_train(...)`` (``training``) compares training images/s of our engine's path with a straightforward
reference loop. ``bench_fill(...)`` (``fill``) compares one seed's step with several seeds trained as one
vmapped ensemble and with the compiled step, and records per model which won (``fill_winner``). ``stored``
keeps runs (``benchmark_record``, ``save``/``write``, ``load``, ``newest``) and reads them back as page tables
(``stored_table``). Benchmarks leave the caller's RNG state and thread count
as they were. Their text tables are the command line's (``vixnb.cli.tables``).
"""
from .mixers import REFERENCE, bench_mixer, bench_mixers, compile_mode, dispatched_ops, operator_table, with_ratios
from .fill import bench_fill, fill_winner
from .stored import (benchmark_record, fill_frame, load, mixers_frame, newest, save, stored_path, stored_table,
                     train_frame, variants_frame, write)
from .training import bench_train

__all__ = ["REFERENCE", "bench_fill", "bench_mixer", "bench_mixers", "bench_train", "benchmark_record",
           "fill_frame", "fill_winner",
           "compile_mode", "dispatched_ops", "load", "mixers_frame", "newest", "operator_table", "save",
           "stored_path", "stored_table", "train_frame", "variants_frame", "with_ratios", "write"]
