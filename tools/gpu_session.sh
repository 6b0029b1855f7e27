#!/usr/bin/env bash
# What a session with a lent GPU machine runs there, once per device call of about 9 minutes:
#   VIXNB_COMMIT=<commit the tree was copied from> OUT=<folder for what comes back> bash tools/gpu_session.sh [PROFILE] [BUDGET_S] [BATCH OPTIONS...]
# It installs the carried wheels (.whl/, from `bash ../shared/tools/device-wheels.sh`), extracts the carried
# CIFAR-10 archive (data/cifar10-jpeg.tar.gz), runs the dress rehearsal of what this call's batch would start
# (its models, protocols, measurements and benchmarks for a couple of steps, into a scratch store: `vixnb batch
# --rehearse` with the batch's own options and budget; the whole budget plan's rehearsal took 403 s on an H200;
# its table goes to $OUT/rehearsal.log; REHEARSE=0 skips it, on a second call), and
# then the one command for lent GPU time:
#   vixnb batch --profile PROFILE --budget BUDGET_S --pack $OUT/results.tar.gz [BATCH OPTIONS...]
# (BATCH OPTIONS, e.g. `--chapter simplified`, pick what this call runs; none: the plan's order)
# which runs the plan's missing entries in priority order (`vixnb plan`), stops a training run at an epoch
# boundary when time is up and packs what this call wrote (results, kept weights, records) and paused runs' checkpoints (under 15 MiB).
# Carry: .whl (made with `bash ../shared/tools/device-wheels.sh ptwt`: WaveMix needs ptwt; the maps study's
# captum is among the script's own wheels; the GPU image has pandas),
# data/cifar10-jpeg.tar.gz, and results/PROFILE/.checkpoints when the previous call paused a run.
# BUDGET_S counts from this script's start; the batch gets what is left after the set-up, less a minute for
# packing; if anything overruns, the results finished so far are still packed on exit.
# Afterwards, here: `tar xzf <files_at>/results.tar.gz` in the checkout's root, commit results/ (the
# checkpoints stay ignored; carry them to the next call, which resumes those runs). Do this BEFORE the next call,
# even a quick one on the still-warm machine: each call gets a fresh copy of the tree, and a run whose result is not
# in it runs again.
set -uo pipefail
start=$(date +%s)
PROFILE=${1:-budget}
BUDGET_S=${2:-540}
shift $(( $# < 2 ? $# : 2 ))
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 VIXNB_DATA=${VIXNB_DATA:-$PWD/data}
if [ -d .whl ]; then
  S=$(mktemp -d)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$S" .whl/*.whl || exit 1
  export PYTHONPATH=$S:$PWD
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
if [ ! -d "$VIXNB_DATA/cifar10/train" ] && [ -f data/cifar10-jpeg.tar.gz ]; then
  mkdir -p "$VIXNB_DATA/cifar10" && tar xzf data/cifar10-jpeg.tar.gz -C "$VIXNB_DATA/cifar10"
fi
pack() {  # the batch packs when it ends; this covers a batch that was stopped
  [ -f "$OUT/results.tar.gz" ] || python3 -c 'import sys; from vixnb.batch import pack; print(pack(sys.argv[1], sys.argv[2], since=float(sys.argv[3]))[0])' \
    "$OUT/results.tar.gz" "$PROFILE" "$start"
}
trap pack EXIT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
if [ "${REHEARSE:-1}" != 0 ]; then
  python3 -m vixnb batch --profile "$PROFILE" --rehearse --budget $(( BUDGET_S > 180 ? BUDGET_S - 120 : 60 )) "$@" 2>&1 | tee "$OUT/rehearsal.log" | tail -25
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "the rehearsal failed: see $OUT/rehearsal.log; no GPU time spent on the batch"; exit 1; }
fi
left=$(( BUDGET_S - ($(date +%s) - start) - 60 ))
timeout $(( left + 40 )) python3 -m vixnb batch --profile "$PROFILE" --budget "$left" --pack "$OUT/results.tar.gz" --pack-since "$start" "$@" 2>&1 \
  | tee "$OUT/batch.log"
