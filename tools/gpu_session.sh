#!/usr/bin/env bash
# What a session with a lent GPU machine runs there, from a copy of the checkout's root (no git history):
#   VIXNB_COMMIT=<commit the tree was copied from> OUT=<folder for what comes back> bash tools/gpu_session.sh STEP...
# Steps, run in the order given, each under the time left before BUDGET_S seconds (default 540) are up:
#   nystrom     tools/profile_nystrom.py, `vixnb bench mixers` (bf16, fp32, bf16 compiled, bf16 CUDA graphs) -> $OUT/*.json
#   benchtrain  `vixnb bench train`                                                                  -> $OUT/train.json
#   train       `vixnb train MODEL --profile budget` for the Table 1 models (MODELS, default all twelve), PARALLEL
#               (default 6) at a time on the one GPU: these small models leave it mostly idle, so runs share it well
#   gpumem      the ViX chapter's GPU-memory column (batch 64, both paths); WITH_GPUMEM=1 runs it beside `train`
#   measure     the efficiency chapter's GPU measurements in the budget profile (timings: run it alone)
# The benchmark JSON files carry their provenance and belong in results/bench/ (the efficiency chapter reads them).
# The results store (results/budget/*.json, without checkpoints) comes back as $OUT/results-budget.tar.gz; the
# session unpacks it into the checkout and commits it (provenance inside each file). A run cut off by the time
# limit is lost with its machine, so give each call runs that finish inside it.
# The CIFAR-10 copy is read from data/cifar10/{train,test}/ (extracted from data/cifar10-jpeg.tar.gz if needed).
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 VIXNB_DATA=${VIXNB_DATA:-$PWD/data} PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
deadline=$(( $(date +%s) + ${BUDGET_S:-540} ))
left() { echo $(( deadline - $(date +%s) )); }
log() { echo "[gpu_session $(date -u +%H:%M:%S), $(left) s left] $*"; }
# results only: checkpoints (up to ~130 MB for the MLP Mixers) exceed what a lent machine may send back
pack() { [ -d results/budget ] && tar czf "$OUT/results-budget.tar.gz" --exclude=.checkpoints results/budget && log "packed results/budget"; }
trap pack EXIT

if [ ! -d "$VIXNB_DATA/cifar10/train" ] && [ -f data/cifar10-jpeg.tar.gz ]; then
  mkdir -p "$VIXNB_DATA/cifar10" && tar xzf data/cifar10-jpeg.tar.gz -C "$VIXNB_DATA/cifar10"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"

nystrom() {
  # commit it as results/bench/nystrom-variants-N.json, N one more than the last: the efficiency chapter shows the newest
  log "profile_nystrom"; timeout $(( $(left) - 10 )) python3 tools/profile_nystrom.py "$OUT/nystrom-variants.json"
  for dt in bf16 fp32; do
    log "bench mixers $dt"
    timeout $(( $(left) - 10 )) python3 -m vixnb bench mixers --dtype $dt --warmup 10 --steps 30 --json "$OUT/mixers-$dt.json"
  done
  log "bench mixers bf16, torch.compile"
  timeout $(( $(left) - 10 )) python3 -m vixnb bench mixers --dtype bf16 --compile --warmup 10 --steps 30 --json "$OUT/mixers-bf16-compiled.json"
  log "bench mixers bf16, torch.compile mode reduce-overhead (CUDA graphs)"
  timeout $(( $(left) - 10 )) python3 -m vixnb bench mixers --dtype bf16 --compile reduce-overhead --warmup 10 --steps 30 \
    --mixers "softmax (fused)" nystrom --json "$OUT/mixers-bf16-cudagraphs.json"
}

benchtrain() {
  log "bench train"; timeout $(( $(left) - 10 )) python3 -m vixnb bench train --save "$OUT/train.json"
}

gpumem() {  # memory only (per-process allocator statistics): may share the GPU with training runs
  log "ViX chapter: training memory at batch 64, every model, both paths"
  timeout $(( $(left) - 15 )) python3 -c '
from vixnb import papers, report
models = papers.table_models("vix", "table1")
record = report.gpu_memory(models, paper="vix", dataset="cifar10", profile="budget", compute="always")
print(record["rows"] if record else "not measured (no GPU)")'
}

train() {
  local models=${MODELS:-$(python3 -c 'from vixnb import papers; print(" ".join(papers.table_models("vix", "table1")))')}
  log "train (budget) $models, ${PARALLEL:-6} at a time"
  [ -n "${WITH_GPUMEM:-}" ] && { gpumem > "$OUT/gpumem.txt" 2>&1 & }
  printf '%s\n' $models | timeout $(( $(left) - 20 )) xargs -P "${PARALLEL:-6}" -I{} \
    sh -c 'python3 -m vixnb train {} --profile budget --json > "$0/train-{}.log" 2>&1; echo "{}: $(tail -n 1 "$0/train-{}.log")"' "$OUT"
  pkill -TERM -f "vixnb train" && sleep 3  # runs cut off by the time limit
  wait  # the background gpumem step, if any
  mkdir -p "$OUT/train" && mv "$OUT"/train-*.log "$OUT/train/" 2>/dev/null
  (cd "$OUT/train" && tar czf ../train-logs.tar.gz . ) && rm -rf "$OUT/train"
}

measure() {
  log "measure (budget)"
  timeout $(( $(left) - 15 )) python3 - <<'PY'
from vixnb import papers
from vixnb.report import cost
measured = cost.measure_or_load(papers.table_models("vix", "table1"), profile="budget", compute="always", iters=10)
print(measured["source"], measured["device"], len(measured["records"]), "records,", len(measured["sweep"]), "sweep rows")
PY
}

for step in "$@"; do
  case $step in
    nystrom|benchtrain|train|gpumem|measure) [ "$(left)" -gt 30 ] && $step || log "skipped $step: no time left" ;;
    *) echo "unknown step $step (nystrom, benchtrain, train, gpumem, measure)" >&2; exit 2 ;;
  esac
done
log "done"
