#!/usr/bin/env bash
# What a session with a lent GPU machine runs there, once per device call of about 9 minutes:
#   VIXNB_COMMIT=<commit the tree was copied from> OUT=<folder for what comes back> bash tools/gpu_session.sh [PROFILE] [BUDGET_S] [BATCH OPTIONS...]
#   bash tools/gpu_session.sh --dry-run [BATCH OPTIONS...]   # the same on the CPU: smoke profile, a scratch store, the
#                                                            # probe and a short batch, end to end (no GPU needed)
# One process trains on the GPU: after the set-up (the carried wheels, .whl/ from `bash ../shared/tools/device-wheels.sh`,
# and the carried CIFAR-10 archive, data/cifar10-jpeg.tar.gz), the one command for lent GPU time is
#   vixnb batch --profile PROFILE --budget LEFT --executor inline --probe $OUT/engine_choice.json --order claims
#               --pack $OUT/results.tar.gz [BATCH OPTIONS...]
# which runs every job in its own process (one CUDA context; each dataset loaded once). It starts with the engine probe
# (at most 90 s, `vixnb.engine.modes`): every mode (eager, graphed, ensemble, graphed ensemble, streams) trains 20 steps
# of the first runs in float32 and is compared with eager, within float32's own rounding (float64 against float32,
# measured there); the modes that pass are timed, and the batch trains every job in the fastest that passed. A failed
# check switches its mode off and is named in the log and in $OUT/engine_choice.json; it never stops training (eager is
# never off). Then the plan's missing entries, decisions per GPU-minute first (BATCH OPTIONS, e.g.
# `--chapter simplified`, pick them); runs of one shape train as one ensemble; a run stops at an epoch boundary when
# time is up. `tools/gpu_check.sh` is the long diagnostic, run only with time left; it gates nothing.
# Every phase writes a UTC timestamp to $OUT/session.log (the one log that comes back); the batch's table ends with
# `trained N s of M s`, M counted from this script's start.
# What comes back: the results, kept weights, records and paused runs' checkpoints written in this call, in parts
# of at most 16 MiB ($OUT/results.tar.gz, or results.tar.gz.part1of3 ...; at most 6, with the log and
# engine_choice.json the 7th and 8th files), so that a paused run's checkpoint of up to about 60 MiB travels; a run
# whose checkpoint is larger starts only if its whole estimate fits (otherwise it is skipped: "needs N minutes in one
# call").
# Carry: .whl (made with `bash ../shared/tools/device-wheels.sh ptwt`: WaveMix needs ptwt; the maps study's
# captum is among the script's own wheels; the GPU image has pandas),
# data/cifar10-jpeg.tar.gz, and results/PROFILE/.checkpoints when the previous call paused a run.
# BUDGET_S counts from this script's start; the batch gets what is left after the set-up, less 40 s for packing;
# if anything overruns, `timeout` stops the batch (it stops at an epoch boundary, keeping the checkpoint, and packs).
# Afterwards, here: `vixnb unpack <files_at>/results.tar.gz*` in the checkout's root (it never replaces a result
# here silently: a differing one is kept beside it and both are named), commit results/ (the checkpoints stay
# ignored; carry them to the next call, which resumes those runs) and the probe's engine_choice.json beside the
# session's note (`vixnb plan` refits its estimates from the runs' provenance). Do this BEFORE the next call, even a
# quick one on the still-warm machine: each call gets a fresh copy of the tree, and a run whose result is not in it
# runs again.
set -uo pipefail
start=$(date +%s)
DRY=0
if [[ "${1:-}" == "--dry-run" ]]; then  # the CPU's rehearsal of this script: a scratch store, synthetic data
  DRY=1
  shift
  set -- smoke "${DRY_BUDGET_S:-300}" --chapter simplified --max-jobs 2 --probe-steps 8 "$@"
  OUT=${OUT:-$(mktemp -d)}
  export VIXNB_RESULTS=${VIXNB_RESULTS:-$(mktemp -d)/results}
  mkdir -p "$VIXNB_RESULTS"
fi
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
  ls "$OUT"/results.tar.gz* >/dev/null 2>&1 || ${PYTHON:-python3} -c 'import sys; from vixnb.plan.batch import pack; print(pack(sys.argv[1], sys.argv[2], since=float(sys.argv[3]))[0])' \
    "$OUT/results.tar.gz" "$PROFILE" "$start" >>"$LOG" 2>&1
}
trap pack EXIT
if [[ $DRY == 1 ]]; then
  phase "dry run on the CPU: profile $PROFILE, results in a scratch store"
else
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$LOG"
fi
PY=${PYTHON:-python3}
left=$(( BUDGET_S - ($(date +%s) - start) - 40 ))
phase "batch (engine probe first): $left s"
timeout -s TERM $(( left + 30 )) $PY -m vixnb batch --profile "$PROFILE" --budget "$left" --executor inline \
  --probe "$OUT/engine_choice.json" --order claims --pack "$OUT/results.tar.gz" --pack-since "$start" \
  --clock-from "$start" "$@" 2>&1 | tee -a "$LOG"
phase "batch ended with ${PIPESTATUS[0]}"
