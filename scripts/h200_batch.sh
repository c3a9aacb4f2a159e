#!/usr/bin/env bash
# One batch of GPU work on the lent H200, run from the repo root:
#   bash scripts/h200_batch.sh [STEPS] [BENCH_ARGS...]     STEPS: comma list of env,check,build,gputest,bench
# Everything printed goes to $OUT/log.txt; the bench run's results land in $OUT/bench/<run-id>/ and its JSON
# in $OUT/bench.json; worker logs of every run are packed into $OUT/worker_logs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/kbench-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=. KBENCH_CACHE_DIR=$PWD/.kbench-cache COLUMNS=150
STEPS=${1:-env,check,build,gputest,bench}; shift || true
RUNS=/tmp/kbench-runs
exec > >(tee -a "$OUT/log.txt") 2>&1
kb() { python3 -m kernelbench_cli "$@"; }
timed() { local t0; t0=$(date +%s%N); "$@"; local rc=$?
  echo "WALL $(( ($(date +%s%N) - t0) / 1000000 )) ms (rc $rc): $*"; }
has() { [[ ",$STEPS," == *",$1,"* ]]; }

if has env; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; nproc
fi
if has check; then   # cold (empty build cache) then warm
  rm -rf "$KBENCH_CACHE_DIR"
  timed kb check level2/101_LayoutMix_FakeInt8_Linear --out $RUNS | tail -4
  timed kb check level2/101_LayoutMix_FakeInt8_Linear --out $RUNS
fi
has build && timed kb build --all --out $RUNS --set build.jobs=16 | tail -30
has gputest && timed python3 -m pytest -m gpu -q tests/test_gpu.py 2>&1 | tail -15
if has bench; then
  timed kb bench --all --out "$OUT/bench" --json "$@" > "$OUT/bench.json"
fi
tar czf "$OUT/worker_logs.tgz" -C / tmp/kbench-runs "${OUT#/}/bench" 2>/dev/null
