#!/usr/bin/env bash
# What issue 15 still needs from a GPU, in one device call, most wanted first (session 30): the A/A twice
# (bench_timing_quality.py through h200_batch.sh quality, QUALITY_RUNS=2), whose rounds now carry the reference's
# host lead (first_rest_ms "ref"[2]: over the lead's ~0.26 ms, its first call waited for the host: session 30's
# misses were that first call, +0.03-0.07 ms on Transpose), then `kbench build --all` and every GPU test, cut at
# $LIMIT s (default 575) of this script so that each part's output and records (art/*-records.tgz, for
# scripts/price_floor.py) come back. A second call with SKIP_QUALITY=1 runs the tests alone.
#   LIMIT=575 bash scripts/gpu_verify.sh        (on the device, from the repo root)
export OUT PYTHONUNBUFFERED=1 PYTHONPATH=. KBENCH_CACHE_DIR=$PWD/.kbench-cache CUDA_VISIBLE_DEVICES=0
ART=$OUT/art; mkdir -p $ART .kbench-runs
bash scripts/h200_batch.sh env
pt() { local name=$1 lim=$2; shift 2; t0=$SECONDS
  timeout -s INT $lim python3 -m pytest -m gpu -q -p no:cacheprovider --durations=30 --basetemp=$PWD/.kbench-runs/$name "$@" > $ART/$name.txt 2>&1
  echo "PYTEST $name rc $? in $((SECONDS-t0)) s"; tail -25 $ART/$name.txt
  (cd .kbench-runs/$name && find . -name results.jsonl | tar czf $ART/$name-records.tgz -T -); }
if [[ -z ${SKIP_QUALITY:-} ]]; then
  QUALITY_RUNS=2 bash scripts/h200_batch.sh quality   # art/quality-{1,2}.json, aa_results-{1,2}.json, aa_rounds-{1,2}.txt
  grep -h "::\|first call" $ART/aa_rounds-*.txt
  python3 scripts/price_floor.py $ART/aa_results-*.json
fi
t0=$SECONDS; python3 -m kernelbench_cli build --all --out .kbench-runs --set build.jobs=$(nproc) 2>&1 | tail -4; echo "BUILD $((SECONDS-t0)) s"
pt gpu $((${LIMIT:-575}-SECONDS)) tests/test_gpu.py
