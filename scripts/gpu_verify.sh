#!/usr/bin/env bash
# What issue 15 still needs from a GPU, in one device call, most wanted first (session 31): the environment and
# kbench's fenced flush on this GPU (its time alone and the allowance, judge/flush.py), and whether L2 lines loaded
# with an evict_last hint survive it (scripts/probe_l2_persist.py); the GPU tests named by
# $FIRST (a pytest -k expression) first; the A/A, repeatability and ncu agreement $QUALITY_RUNS times (default 1;
# SKIP_QUALITY=1 skips them, QUALITY_FIRST=1 runs them before $FIRST; art/aa_results*.json, aa_rounds*.txt,
# quality-records*.tgz), with price_floor on them; `kbench build --all` where BUILD=1; then every other GPU test
# (NO_REST=1: none; SKIP_PROBE=1: no L2 probe), cut at $LIMIT s (default 575) of this
# script so that each part's output and records (art/*-records.tgz, for scripts/price_floor.py) come back.
#   LIMIT=575 FIRST="side_stream or compute_bound" bash scripts/gpu_verify.sh   (on the device, from the repo root)
export OUT PYTHONUNBUFFERED=1 PYTHONPATH=. KBENCH_CACHE_DIR=$PWD/.kbench-cache CUDA_VISIBLE_DEVICES=0
ART=$OUT/art; mkdir -p $ART .kbench-runs
bash scripts/h200_batch.sh env
python3 -c "
import torch; from kernelbench_cli.judge.flush import Flush
f = Flush('cuda', True); print('flush grid', f.run.grid, 'x', f.run.block, 'alone ms [median, sd]', f.alone_ms, 'allow ms', f.allow_ms)"
[[ -z ${SKIP_PROBE:-} ]] && timeout 60 python3 scripts/probe_l2_persist.py   # do evict_last lines survive the flush?
pt() { local name=$1 lim=$2; shift 2; t0=$SECONDS
  timeout -s INT $lim python3 -m pytest -m gpu -q -p no:cacheprovider --durations=30 --basetemp=$PWD/.kbench-runs/$name "$@" > $ART/$name.txt 2>&1
  echo "PYTEST $name rc $? in $((SECONDS-t0)) s"; tail -25 $ART/$name.txt
  (cd .kbench-runs/$name && find . -name results.jsonl | tar czf $ART/$name-records.tgz -T -); }
quality() {
  QUALITY_RUNS=${QUALITY_RUNS:-1} bash scripts/h200_batch.sh quality   # art/quality*.json, aa_results*.json, aa_rounds*.txt
  grep -h "::\|first call" $ART/aa_rounds*.txt
  python3 scripts/price_floor.py $ART/aa_results*.json; }
[[ -z ${SKIP_QUALITY:-} && -n ${QUALITY_FIRST:-} ]] && quality
[[ -n ${FIRST:-} ]] && pt first $((${LIMIT:-575}-SECONDS)) tests/test_gpu.py -s -k "$FIRST"
[[ -z ${SKIP_QUALITY:-} && -z ${QUALITY_FIRST:-} ]] && quality
if [[ -n ${BUILD:-} ]]; then
  t0=$SECONDS; python3 -m kernelbench_cli build --all --out .kbench-runs --set build.jobs=$(nproc) 2>&1 | tail -4; echo "BUILD $((SECONDS-t0)) s"
fi
[[ -z ${NO_REST:-} ]] && pt gpu $((${LIMIT:-575}-SECONDS)) tests/test_gpu.py ${FIRST:+-k "not ($FIRST)"}
true
