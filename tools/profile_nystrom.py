"""Where the Nystrom mixer's time goes on a GPU, and which evaluation of it is fastest (issue 4's target:
no slower than 2x the fused softmax, forward + backward, 64 x 1025 tokens, dim 128, 4 heads of 32).

Times every variant with the timing code of ``vixnb bench mixers`` (``vixnb.bench.bench_mixer``), checks
that the variants compute the same function as the reference convolution path (fp32, fresh random input),
and prints the CUDA kernels that take the most time for the conv and toeplitz residual paths (bf16).
Usage: ``python tools/profile_nystrom.py [out.json] [--kernels]`` on a machine with a GPU; out.json is in the
format of ``results/bench/`` (``vixnb.bench.write``)."""
import sys

import torch

from vixnb.layers import build
from vixnb.bench import bench_mixer, benchmark_record, write
from vixnb.models import paper_mixers

PAPER = dict(paper_mixers()["vin"][1])
VARIANTS = [
    ("softmax (fused)", "softmax", {}),
    ("softmax (materialised)", "softmax", {"fused": False}),
    ("nystrom: default", "nystrom", {**PAPER}),
    ("nystrom: autograd pinv backward", "nystrom", {**PAPER, "pinv_backward": "autograd"}),
    ("nystrom: toeplitz residual", "nystrom", {**PAPER, "res_conv_impl": "toeplitz"}),
    ("nystrom: conv residual", "nystrom", {**PAPER, "res_conv_impl": "conv"}),
    ("nystrom: no residual (lower bound)", "nystrom", {**PAPER, "residual": False}),
    ("nystrom: unfused order, toeplitz", "nystrom", {**PAPER, "fused": False}),
    ("nystrom: compiled pinv", "nystrom", {**PAPER, "compile_pinv": True}),
    ("nystrom: compiled pinv (reduce-overhead)", "nystrom", {**PAPER, "compile_pinv": "reduce-overhead"}),
]
# whole mixers through torch.compile (``vixnb bench mixers --compile``), the fused softmax too for a fair ratio
COMPILED = [("softmax (fused), torch.compile", "softmax", {}),
            ("nystrom: default, torch.compile", "nystrom", {**PAPER})]
TIMED_COMPILE_MODES = ("default", "reduce-overhead")  # reduce-overhead: CUDA graphs, no launches to pay per kernel
CFG = dict(tokens=1025, dim=128, heads=4, dim_head=32, batch=64)


def agreement(device):
    """max |variant - conv path| / max |conv path| in fp32 on one fresh random batch."""
    x = torch.randn(CFG["batch"], CFG["tokens"], CFG["dim"], device=device)
    torch.manual_seed(0)
    shape = {k: CFG[k] for k in ("dim", "heads", "dim_head")}
    ref = build("nystrom", **shape, **PAPER, res_conv_impl="conv").to(device)
    with torch.no_grad():
        ref_out = ref(x)
    errs = {}
    for label, mixer, opts in VARIANTS:
        if mixer != "nystrom" or not opts.get("residual", True):
            continue
        m = build(mixer, **shape, **opts).to(device)
        m.load_state_dict(ref.state_dict())
        with torch.no_grad():
            errs[label] = ((m(x) - ref_out).abs().max() / ref_out.abs().max()).item()
    return errs


def kernel_table(opts, device, rows=12):
    m = build("nystrom", **{k: CFG[k] for k in ("dim", "heads", "dim_head")}, **opts).to(device)
    x = torch.randn(CFG["batch"], CFG["tokens"], CFG["dim"], device=device, requires_grad=True)
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = m(x)
        out.float().sum().backward()
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    return prof.key_averages().table(sort_by="cuda_time_total", row_limit=rows)


def main():
    device = "cuda"
    rows = []
    errors = agreement(device)
    for dtype in ("bf16", "fp32"):
        runs = [(label, mixer, opts, False) for label, mixer, opts in VARIANTS]
        runs += [(label + ("" if mode == "default" else f" ({mode})"), mixer, opts, mode)
                 for mode in TIMED_COMPILE_MODES for label, mixer, opts in COMPILED]
        for label, mixer, opts, compiled in runs:
            row = bench_mixer(label, mixer, opts, device=device, dtype=dtype, warmup=10, steps=30, compile=compiled,
                              **CFG)
            rows.append({k: row.get(k) for k in ("mechanism", "dtype", "ms", "ms_min", "peak_mb", "status", "aten_ops",
                                                 "aten_ops_compute")})
    for dtype in ("bf16", "fp32"):
        of_dtype = [r for r in rows if r["dtype"] == dtype]
        fused = next(r["ms"] for r in of_dtype if r["mechanism"] == "softmax (fused)")
        print(f"--- {dtype}: forward + backward, {CFG}")
        for r in of_dtype:
            r["x_fused_softmax"] = r["ms"] / fused if r["ms"] else None
            print(f"{r['mechanism']:<52}{r['ms'] or float('nan'):>9.3f} ms"
                  f"{r['x_fused_softmax'] or float('nan'):>7.2f}x fused"
                  f"{r['peak_mb'] or float('nan'):>10.1f} MiB")
    print("relative error vs conv path (fp32):", errors)
    extra = {"config": CFG, "relative_error_vs_conv_path_fp32": errors}
    if "--kernels" in sys.argv:
        for impl in ("conv", "toeplitz"):
            table = kernel_table({**PAPER, "res_conv_impl": impl}, device)
            extra[f"kernels_{impl}_bf16"] = table
            print(f"--- CUDA kernels, nystrom res_conv_impl={impl}, bf16, 5 steps\n{table}")
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    if paths:  # the format of results/bench/ (vixnb.bench.write), which the efficiency chapter reads
        write(paths[0], benchmark_record("nystrom-variants", rows, device=device, dtype=None, extra=extra,
                                         command="python tools/profile_nystrom.py " + " ".join(sys.argv[1:])))


if __name__ == "__main__":
    main()
