#!/usr/bin/env bash
# The engine's GPU check (issue 37), one command of at most 6 minutes on one H100 (the phases' limits add up to
# 345 s; about 4 minutes of work):
#   OUT=<folder for what comes back> bash tools/gpu_check.sh
#   bash tools/gpu_check.sh --dry-run    # every phase on the CPU with a tiny model: the script itself, end to end
#   PHASES="1 3" OUT=... bash tools/gpu_check.sh   # only these phases (a loan's first call: about 3 minutes)
# Needs torch (and vixnb's import-time dependencies: torchvision, tqdm, PIL) and this tree; no data (every phase
# trains on the embedded synthetic set, at CIFAR-10's sizes where it times a budget run). Each phase prints a
# timestamped line; everything goes to $OUT/gpu_check.log too. Phases:
#   1. sync: torch.cuda.set_sync_debug_mode("error") over epochs 2-3 of a small graphed run (concurrent.sync_checked),
#      and of vit (dropout 0.25); then the graphed run's losses beside the eager run's.
#   2. bench: `vixnb bench train --engine` (vit, vit_small_simplified, cvt at batch 32: images/s eager, graphed,
#      4 and 8 runs at once, share of the FLOP floor, max |dw| after 100 steps eager-graphed beside eager-eager).
#   3. budget: a 10-epoch budget run of vit_small_simplified alone (target <= 10 s), 8 of them at once through
#      train_concurrently, as `vixnb batch` trains a group of small runs (target >= 6x the images/s of one; seed 0
#      equal to its run alone), and vit for 2 epochs, projected to 10 (target <= 55 s).
#   4. equivalence: vit_small_simplified (budget settings, bf16) over 3 seeds and 100 steps, each attention kernel
#      (explicit softmax, SDPA math, flash, efficient, cudnn) and torch.compile against the default execution: the
#      largest |difference| of the loss curves (tolerance 5e-2 in bf16) and the final top-1 against the seeds' spread.
set -uo pipefail
DRY=0
[[ "${1:-}" == "--dry-run" ]] && DRY=1
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}
exec > >(tee "$OUT/gpu_check.log") 2>&1
stamp() { echo "[$(date -u +%H:%M:%S)] $*"; }
PHASES=" ${PHASES:-1 2 3 4} "
for p in $PHASES; do [[ $p =~ ^[1-4]$ ]] || { echo "PHASES=\"$PHASES\": name phases 1 to 4, e.g. PHASES=\"1 3\"" >&2; exit 2; }; done
want() { if [[ $PHASES == *" $1 "* ]]; then return 0; fi; stamp "phase $1 skipped (PHASES=\"${PHASES# }\")"; return 1; }
limit() { if [[ $DRY == 1 ]]; then echo 900; else echo "$1"; fi; }  # the CPU's dry run is slower, not timed
stamp "gpu_check$([[ $DRY == 1 ]] && echo ' --dry-run (CPU, tiny models)'): $($PY -c 'import torch; print(torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")')"

if want 1; then
stamp "phase 1: sync debug mode 'error' over the steps of epochs 2-3"
timeout "$(limit 45)" $PY - "$DRY" <<'EOF' || stamp "phase 1 FAILED"
import sys
from vixnb.concurrent import sync_checked
from vixnb.profiles import run_config
from vixnb.train import train, without_timings

dry = sys.argv[1] == "1"
TINY = dict(width=16, depth=2, heads=2, patch=8)
for name, settings in (("vit_small_simplified", TINY if dry else {}),) + ((("vit", {}),) if not dry else ()):
    config = run_config(name, dataset="synthetic", profile="smoke" if dry else "budget", epochs=3,
                        batch_size=4 if dry else 64, **settings)
    config.update(train_size=(4 if dry else 64) * 20 + 3, test_size=32 if dry else 256)  # 20 full steps, a short one
    try:
        result = sync_checked(config, graphs=True)
    except Exception as e:  # a setting the model refuses is not the check's failure
        print(f"  {name}: {type(e).__name__}: {str(e)[:300]}")
        continue
    eager = train(config, progress=False, graphs=False)
    print(f"  {name}: no host sync in epochs 2-3; graphed phases {result['provenance']['execution']['cuda_graphs']}")
    for g, e in zip(without_timings(result["history"]), without_timings(eager["history"])):
        print(f"    epoch {g['epoch']}: train loss graphed {g['train_loss']:.6f} eager {e['train_loss']:.6f}, "
              f"top-1 graphed {g['select_top1']:.2f} eager {e['select_top1']:.2f}")
EOF
fi

if want 2; then
stamp "phase 2: vixnb bench train --engine (batch 32)"
if [[ $DRY == 1 ]]; then
  timeout "$(limit 100)" $PY -m vixnb bench train --engine --smoke || stamp "phase 2 FAILED"
else
  timeout "$(limit 100)" $PY -m vixnb bench train --engine --batch 32 || stamp "phase 2 FAILED"
fi
fi

if want 3; then
stamp "phase 3: budget runs at CIFAR-10's sizes (synthetic images)"
timeout "$(limit 110)" $PY - "$DRY" <<'EOF' || stamp "phase 3 FAILED"
import functools, sys, time
import vixnb.train as engine
from vixnb.concurrent import train_concurrently
from vixnb.profiles import run_config

dry = sys.argv[1] == "1"
engine.load_split = functools.lru_cache(engine.load_split)  # this script's runs share one synthetic set
TINY = dict(width=16, depth=2, heads=2, patch=8)


def config(name, epochs, seed=0):
    small = dry and name == "vit_small_simplified"
    c = run_config(name, dataset="synthetic", profile="smoke" if dry else "budget", epochs=2 if dry else epochs,
                   seed=seed, **(TINY if small else {}))
    c.update(train_size=64 if dry else 50_000, test_size=32 if dry else 10_000)
    return c


together = 2 if dry else 8
engine.train(config("vit_small_simplified", 1), progress=False)  # data, kernels, allocator: warm
t = time.perf_counter()
alone = engine.train(config("vit_small_simplified", 10), progress=False)
solo = time.perf_counter() - t
print(f"  vit_small_simplified 10 epochs alone: {solo:.1f} s (target <= 10 s); "
      f"graphed {alone['provenance']['execution']['cuda_graphs']}")
t = time.perf_counter()
outcomes = train_concurrently([{"config": config("vit_small_simplified", 10, seed)} for seed in range(together)])
took = time.perf_counter() - t
failed = [o for o in outcomes if isinstance(o, Exception)]
same = all(engine.without_timings(o["history"]) == engine.without_timings(alone["history"])
           for o in outcomes[:1] if not isinstance(o, Exception))
print(f"  {together} at once: {took:.1f} s, {together * solo / took:.2f}x the images/s of one (target >= 6x for 8); "
      f"seed 0 {'equals' if same else 'DIFFERS from'} its run alone"
      + (f"; {len(failed)} failed: {failed[0]!r}" if failed else ""))
if not dry:
    t = time.perf_counter()
    vit = engine.train(config("vit", 2), progress=False)
    seconds = [h["seconds"] + h["eval_seconds"] for h in vit["history"]]
    print(f"  vit 2 epochs: {time.perf_counter() - t:.1f} s (epochs {seconds[0]:.1f} s, {seconds[1]:.1f} s); "
          f"10 epochs projected {seconds[0] + 9 * seconds[1]:.1f} s (target <= 55 s)")
EOF
fi

if want 4; then
stamp "phase 4: attention kernels and torch.compile against the default execution (3 seeds, 100 steps)"
timeout "$(limit 90)" $PY - "$DRY" <<'EOF' || stamp "phase 4 FAILED"
import sys
import torch
from vixnb.bench.equivalence import equivalence_lines, execution_equivalence
from vixnb.profiles import run_config

dry = sys.argv[1] == "1"
bs, epochs, steps = (4, 2, 5) if dry else (64, 4, 25)  # the dry run: 10 steps (the CPU suite checks 100)
configs = []
for seed in range(3):
    c = run_config("vit_small_simplified", dataset="synthetic", profile="smoke" if dry else "budget", epochs=epochs,
                   batch_size=bs, augment=False, seed=seed, **(dict(width=16, depth=2, heads=2, patch=8) if dry else {}))
    c.update(train_size=bs * steps, test_size=32 if dry else 1024)
    configs.append(c)
kernels = ("explicit", "math", "flash") + (("efficient", "cudnn") if torch.cuda.is_available() else ())
choices = {f"attention {k}": {"attention": k} for k in kernels}
if not dry:  # compiling takes minutes on a CPU
    choices["torch.compile"] = {"compile": True}
rows = execution_equivalence(configs, choices)
print("\n".join(equivalence_lines(rows, epochs * steps, tolerance=1e-4 if dry else 5e-2)))
EOF
fi
stamp "gpu_check done"
