#!/usr/bin/env bash
# What a session with a lent GPU machine runs there, once per device call of about 9 minutes:
#   VIXNB_COMMIT=<commit the tree was copied from> OUT=<folder for what comes back> bash tools/gpu_session.sh [PROFILE] [BUDGET_S] [BATCH OPTIONS...]
# One process trains on the GPU: after the set-up (the carried wheels, .whl/ from `bash ../shared/tools/device-wheels.sh`,
# and the carried CIFAR-10 archive, data/cifar10-jpeg.tar.gz), the one command for lent GPU time is
#   vixnb batch --profile PROFILE --budget LEFT --executor inline --gpu-check --pack $OUT/results.tar.gz [BATCH OPTIONS...]
# which runs every job in its own process (one CUDA context; each dataset loaded once), first a check of at most
# 30 s of the models this call will start on the GPU-only paths (autocast, fused AdamW, attention kernels), then
# the plan's missing entries in priority order (BATCH OPTIONS, e.g. `--chapter simplified`, pick them), stopping a
# run at an epoch boundary when time is up. The dress rehearsal is not run here: it runs on a CPU before a loan
# (CI runs it; `vixnb batch --rehearse` with this call's options rehearses exactly what it would start).
# Every phase writes a UTC timestamp to $OUT/session.log (the one log that comes back); the batch's table ends with
# `trained N s of M s`, M counted from this script's start.
# What comes back: the results, kept weights, records and paused runs' checkpoints written in this call, in parts
# of at most 16 MiB ($OUT/results.tar.gz, or results.tar.gz.part1of3 ...; at most 7, the log is the 8th file), so
# that a paused run's checkpoint of up to about 60 MiB travels; a run whose checkpoint is larger starts only if its
# whole estimate fits (otherwise it is skipped: "needs N minutes in one call").
# Carry: .whl (made with `bash ../shared/tools/device-wheels.sh ptwt`: WaveMix needs ptwt; the maps study's
# captum is among the script's own wheels; the GPU image has pandas),
# data/cifar10-jpeg.tar.gz, and results/PROFILE/.checkpoints when the previous call paused a run.
# BUDGET_S counts from this script's start; the batch gets what is left after the set-up, less 40 s for packing;
# if anything overruns, `timeout` stops the batch (it stops at an epoch boundary, keeping the checkpoint, and packs).
# Afterwards, here: `vixnb unpack <files_at>/results.tar.gz*` in the checkout's root (it never replaces a result
# here silently: a differing one is kept beside it and both are named), commit results/ (the checkpoints stay
# ignored; carry them to the next call, which resumes those runs). Do this BEFORE the next call, even a quick one on
# the still-warm machine: each call gets a fresh copy of the tree, and a run whose result is not in it runs again.
set -uo pipefail
start=$(date +%s)
PROFILE=${1:-budget}
BUDGET_S=${2:-540}
shift $(( $# < 2 ? $# : 2 ))
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
LOG="$OUT/session.log"
phase() { echo "[$(date -u +%H:%M:%S)] $* (+$(( $(date +%s) - start )) s)" | tee -a "$LOG"; }
export PYTHONUNBUFFERED=1 VIXNB_DATA=${VIXNB_DATA:-$PWD/data}
phase "start: profile $PROFILE, budget $BUDGET_S s"
if [ -d .whl ]; then
  S=$(mktemp -d)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$S" .whl/*.whl || exit 1
  export PYTHONPATH=$S:$PWD
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
phase "wheels installed"
if [ ! -d "$VIXNB_DATA/cifar10/train" ] && [ -f data/cifar10-jpeg.tar.gz ]; then
  mkdir -p "$VIXNB_DATA/cifar10" && tar xzf data/cifar10-jpeg.tar.gz -C "$VIXNB_DATA/cifar10"
fi
phase "data extracted"
pack() {  # the batch packs when it ends; this covers a batch that could not
  ls "$OUT"/results.tar.gz* >/dev/null 2>&1 || python3 -c 'import sys; from vixnb.plan.batch import pack; print(pack(sys.argv[1], sys.argv[2], since=float(sys.argv[3]))[0])' \
    "$OUT/results.tar.gz" "$PROFILE" "$start" >>"$LOG" 2>&1
}
trap pack EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$LOG"
left=$(( BUDGET_S - ($(date +%s) - start) - 40 ))
phase "batch: $left s"
timeout -s TERM $(( left + 30 )) python3 -m vixnb batch --profile "$PROFILE" --budget "$left" --executor inline --gpu-check \
  --pack "$OUT/results.tar.gz" --pack-since "$start" --clock-from "$start" "$@" 2>&1 | tee -a "$LOG"
phase "batch ended with ${PIPESTATUS[0]}"
