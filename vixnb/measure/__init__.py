"""Efficiency measurements by a named protocol: parameters, FLOPs, training and inference memory,
throughput, and the token-mixer scaling sweep. Measuring functions return records (dicts) and format
nothing; the command line's text tables are in ``vixnb.cli.tables``, the pages' in ``vixnb.report.cost``.

The protocol is that of the `favor` paper (Nauen et al., "Which Transformer to Favor"; reproduction notes
section 4), re-implemented here with ``torch.utils.flop_counter`` and no third-party counter:

- **Parameters** (``vixnb.models.counting``) under both conventions (``count_params``: "paper" = torchsummary's Total
  params, "true" = every parameter; the favor paper's theta is the trainable count) and the papers'
  **Size (MB)** (``summary_size_mb``).
- **FLOPs** (``flops``) of one image, eval mode, fp32, counted from shapes on the ``meta`` device (nothing is
  computed). ``matmul_flops`` is ``torch.utils.flop_counter``'s count of matrix products and convolutions,
  which follows **FLOPs = 2 x MACs**; ``macs`` is half of it. ``extra_op_flops`` adds the favor paper's
  per-operation costs (softmax 5 per element, GELU 8, exp/log 20, FFT 5 N log2 N for complex and
  2.5 N log2 N for real transforms), counted by a ``TorchDispatchMode`` that sees every aten call inside the
  model, the softmax inside fused attention kernels included. ``flops = matmul_flops + extra_op_flops`` (our
  headline). The favor paper's own counter (fvcore) counts **one FLOP per MAC** and also charges
  element-wise ops (add/mul/div 1, pow 3, sigmoid 22, layer norm 5, mean/sum ~1 per input element);
  ``favor_flops = macs + extra_op_flops + elementwise_flops`` approximates their convention, and it is the
  one their fit RAM[GB] ~ 25.43 GFLOPs + 25.50 uses.
- **The `cxv` paper's MACs** (``paper_macs``): what its "MACs" column counts, the Linear and convolution layers
  alone (forward hooks, one image, on ``meta``); the attention's matrix products, which ``flops`` counts, are not
  in it (ViT-10/4: 1.34 G paper MACs, about 4.0 G true MACs).
- **Training memory** (``memory``): ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` over one
  forward + backward + AdamW step (the second of two, so optimizer state exists), from a reset of the
  peak statistics with the weights already on the device. ``path="authors"`` is the authors' execution
  path (softmax attention materialised through ``nn.Softmax``, Nystrom's three softmax matrices formed,
  fp32 forward, ``torch.optim.AdamW`` defaults); ``path="fused"`` is ours (``scaled_dot_product_attention``,
  fused AdamW on CUDA). Reserved memory is the figure closest to an nvidia-smi reading (which adds the
  CUDA context, about 0.5 GB).
- **Inference memory** (``memory``): peak allocated after a reset, one no-grad forward at batch 1/32/64/128.
- **Throughput** (``throughput``): the favor paper's memory-fit batch search (probe memory against batch
  size, fit a line, try the power-of-two batch sizes that fit), ``iters`` no-grad forwards per batch size
  timed with CUDA events, the best images/s reported with its batch size.
- **Scaling sweep** (``sweep``): forward + backward time and memory of every token mixer against the number
  of tokens, fused and materialised softmax included, and ``crossovers`` where a mechanism becomes cheaper
  than softmax attention.

``measure`` / ``measure_model`` / ``measure_many`` (``per_model``) put every figure of a model in one record;
``save_measurements`` / ``load_measurements`` (``storage``) keep records in the results store.

On a CPU the same functions run and say what they could not measure: memory figures carry the status
``"skipped: CUDA memory statistics need a GPU"`` and CPU timings (``time.perf_counter``, a fixed small batch)
are labelled as such. Out of memory is a recorded outcome (``{"status": "oom", ...}``), never a crash; on a
CPU a budget guard skips, before running, any step whose shape-based estimate exceeds
``$VIXNB_CPU_BUDGET_GB`` (default 4) or ``$VIXNB_CPU_BUDGET_GFLOP`` (default 100), read when a measurement
runs (``flops.cpu_budget``) -- a 16384-token materialised softmax is skipped, not run. Every record carries
the device, dtype, batch size, torch version and commit. Measuring leaves the caller's RNG state as it was
(random numbers come from seed 0 inside ``runtime.local_rng``).

Command line: ``vixnb measure MODEL [MODEL ...] [--dataset D] [--json]``. Default batch size: 64 on a GPU
(the ViX paper's Figure 4), 4 on a CPU.
"""
from ..models.counting import count_params, input_size_of, summary_size_mb
from .flops import CONVENTIONS, OpCosts, budget_status, count_ops, cpu_budget, estimate, flops, paper_macs
from .frames import FAVOR_GFLOPS_COLUMN, crossover_frame, records_frame, short_status, summary_row
from .memory import inference_memory, training_memory
from .per_model import PROTOCOL, gpu_memory_column, measure, measure_many, measure_model
from .runtime import (CPU_MEMORY_NOTE, DTYPES, GB, MB, PATHS, as_dtype, dtype_name, execution_path, is_oom,
                      local_rng, oom_record, provenance, resolve_device, torch_threads)
from .storage import jsonable, load_measurements, measurement_path, save_measurements
from .sweep import (FUSED_SOFTMAX, MATERIALISED_SOFTMAX, SHAPE_METRICS, crossovers, metric_value, scaling_sweep,
                    sweep_mechanisms, sweep_row)
from .throughput import batch_candidates, fit_line, throughput

__all__ = [
    "CONVENTIONS", "CPU_MEMORY_NOTE", "DTYPES", "FAVOR_GFLOPS_COLUMN", "FUSED_SOFTMAX", "GB", "MATERIALISED_SOFTMAX",
    "MB", "OpCosts", "PATHS", "PROTOCOL", "SHAPE_METRICS", "as_dtype", "batch_candidates", "budget_status",
    "count_ops", "count_params", "cpu_budget", "crossover_frame", "crossovers", "dtype_name", "estimate",
    "execution_path", "fit_line", "flops", "gpu_memory_column", "inference_memory", "input_size_of", "is_oom",
    "jsonable", "load_measurements", "local_rng", "measure", "measure_many", "measure_model", "measurement_path",
    "metric_value", "oom_record", "paper_macs", "provenance", "records_frame", "resolve_device", "save_measurements",
    "scaling_sweep", "short_status", "summary_row", "summary_size_mb", "sweep_mechanisms", "sweep_row",
    "throughput", "torch_threads", "training_memory",
]
