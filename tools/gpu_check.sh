#!/usr/bin/env bash
# The engine's GPU check (issue 37), one command of at most 6 minutes on one H100 (about 4 minutes of work):
#   OUT=<folder for what comes back> bash tools/gpu_check.sh
# Needs torch (and vixnb's import-time dependencies: torchvision, tqdm, PIL) and this tree; no data (every phase
# trains on the embedded synthetic set, at CIFAR-10's sizes where it times a budget run). Each phase prints a
# timestamped line; everything goes to $OUT/gpu_check.log too. Phases:
#   1. sync: torch.cuda.set_sync_debug_mode("error") over epochs 2-3 of a small graphed run (concurrent.sync_checked),
#      and of vit (dropout 0.25); then the graphed run's losses beside the eager run's.
#   2. bench: `vixnb bench train --engine` (vit, vit_small_simplified, cvt at batch 32: images/s eager, graphed,
#      4 and 8 runs at once, share of the FLOP floor, max |dw| after 100 steps eager-graphed beside eager-eager).
#   3. budget: a 10-epoch budget run of vit_small_simplified alone (target <= 10 s), 8 of them at once (target >= 6x
#      the images/s of one), and vit for 2 epochs, projected to 10 (target <= 55 s).
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
exec > >(tee "$OUT/gpu_check.log") 2>&1
stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }
stamp "gpu_check: $(python3 -c 'import torch; print(torch.__version__, torch.cuda.get_device_name())')"

stamp "phase 1: sync debug mode 'error' over the steps of epochs 2-3"
timeout 120 python3 - <<'EOF' || stamp "phase 1 FAILED"
import torch
from vixnb.concurrent import sync_checked
from vixnb.profiles import run_config
from vixnb.train import train, without_timings

for name, settings in (("vit_small_simplified", {}), ("vit", {})):  # vit has dropout 0.25
    config = run_config(name, dataset="synthetic", profile="budget", epochs=3, batch_size=64, **settings)
    config.update(train_size=64 * 20 + 17, test_size=256)  # 20 full steps and a short one an epoch
    try:
        result = sync_checked(config)
    except Exception as e:  # a setting the model refuses is not the check's failure
        print(f"  {name} {settings}: {type(e).__name__}: {str(e)[:300]}")
        continue
    eager = train(config, progress=False, graphs=False)
    print(f"  {name} {settings}: no host sync in epochs 2-3; graphed phases {result['provenance']['execution']['cuda_graphs']}")
    for g, e in zip(without_timings(result["history"]), without_timings(eager["history"])):
        print(f"    epoch {g['epoch']}: train loss graphed {g['train_loss']:.6f} eager {e['train_loss']:.6f}, "
              f"top-1 graphed {g['select_top1']:.2f} eager {e['select_top1']:.2f}")
EOF

stamp "phase 2: vixnb bench train --engine (batch 32)"
timeout 150 python3 -m vixnb bench train --engine --batch 32 || stamp "phase 2 FAILED"

stamp "phase 3: budget runs at CIFAR-10's sizes (synthetic images)"
timeout 150 python3 - <<'EOF' || stamp "phase 3 FAILED"
import functools, time
import torch
import vixnb.train as engine
from vixnb.concurrent import train_concurrently
from vixnb.profiles import run_config

engine.load_split = functools.lru_cache(engine.load_split)  # this script's runs share one synthetic set


def config(name, epochs, seed=0):
    c = run_config(name, dataset="synthetic", profile="budget", epochs=epochs, seed=seed)
    c.update(train_size=50_000, test_size=10_000)
    return c


engine.train(config("vit_small_simplified", 1), progress=False)  # data, kernels, allocator: warm
t = time.perf_counter()
alone = engine.train(config("vit_small_simplified", 10), progress=False)
solo = time.perf_counter() - t
print(f"  vit_small_simplified 10 epochs alone: {solo:.1f} s (target <= 10 s); "
      f"graphed {alone['provenance']['execution']['cuda_graphs']}")
t = time.perf_counter()
outcomes = train_concurrently([{"config": config("vit_small_simplified", 10, seed)} for seed in range(8)])
together = time.perf_counter() - t
failed = [o for o in outcomes if isinstance(o, Exception)]
print(f"  8 at once: {together:.1f} s, {8 * solo / together:.2f}x the images/s of one (target >= 6x)"
      + (f"; {len(failed)} failed: {failed[0]!r}" if failed else ""))
t = time.perf_counter()
vit = engine.train(config("vit", 2), progress=False)
seconds = [h["seconds"] + h["eval_seconds"] for h in vit["history"]]
print(f"  vit 2 epochs: {time.perf_counter() - t:.1f} s (epochs {seconds[0]:.1f} s, {seconds[1]:.1f} s); "
      f"10 epochs projected {seconds[0] + 9 * seconds[1]:.1f} s (target <= 55 s)")
EOF
stamp "gpu_check done"
