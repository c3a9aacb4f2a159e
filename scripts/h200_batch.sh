#!/usr/bin/env bash
# One batch of GPU work on the lent H200, run from the repo root:
#   bash scripts/h200_batch.sh STEPS [BENCH_ARGS...]
# STEPS, comma-separated: env, check (cold then warm), calibrate, build (with the GPU tests alongside),
# bench, quality (scripts/bench_timing_quality.py), gate (baseline save / rerun / slowed rerun).
# Output: $OUT/log.txt (everything printed), $OUT/bench.json, $OUT/bench.html, $OUT/bench/<run>/results.jsonl,
# $OUT/quality.json, $OUT/gate.txt, $OUT/ceilings.json.
set -uo pipefail
OUT=${OUT:-$(mktemp -d)}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=. KBENCH_CACHE_DIR=$PWD/.kbench-cache COLUMNS=170
STEPS=${1:-env,calibrate,build,bench}; shift || true
RUNS=$PWD/.kbench-runs
CEIL="--set paths.ceilings=$PWD/.kbench-ceilings"
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
  timed kb check level2/101_LayoutMix_FakeInt8_Linear --out "$RUNS" | tail -4
  timed kb check level2/101_LayoutMix_FakeInt8_Linear --out "$RUNS"
fi
if has calibrate; then
  timed kb calibrate $CEIL --out "$RUNS" && cp .kbench-ceilings/*.json "$OUT/ceilings.json"
fi
if has build; then
  timed python3 -m pytest -m gpu -q tests/test_gpu.py > "$OUT/pytest_gpu.txt" 2>&1 &
  tests_pid=$!
  timed kb build --all --out "$RUNS" --set build.jobs=16 | tail -8
  # wait for the tests only: a bare `wait` would also wait for the tee behind `exec >` and never return
  wait "$tests_pid"; tail -25 "$OUT/pytest_gpu.txt"
fi
if has bench; then
  timed kb bench --all --out "$OUT/bench" $CEIL --json --html "$OUT/bench.html" "$@" > "$OUT/bench.json"
fi
if has quality; then
  timed python3 scripts/bench_timing_quality.py --out "$RUNS/quality" \
    --aa level1/5_RMSNorm level1/8_Transpose level2/3_ResidualAdd_RMSNorm level2/56_Matmul_Sigmoid_Sum \
    --repeat level1/8_Transpose=kernels/level1/8_Transpose/tiled64.py \
    --ncu level1/8_Transpose=kernels/level1/8_Transpose/tiled64.py -- --set timing.budget_s=6
  cp "$RUNS/quality/timing_quality.json" "$OUT/quality.json"
fi
if has gate; then   # issue 5's GPU check on three problems: unchanged rerun passes, a slowed candidate fails
  G="level1/5_RMSNorm level1/8_Transpose level2/3_ResidualAdd_RMSNorm"
  timed kb bench $G --out "$RUNS/gate" --config configs/ci.yaml --json > "$RUNS/gate-base.json"
  base=$(python3 -c "import json;print(json.load(open('$RUNS/gate-base.json'))['run_id'])")
  kb baseline save "$RUNS/gate/$base" --out "$RUNS/gate" 2>&1 | tail -2
  timed kb bench $G --out "$RUNS/gate" --config configs/ci.yaml --baseline auto --fail-on-regression 2>&1 | tee "$OUT/gate.txt" | tail -20
  slow=kernels/level1/8_Transpose/tiled64.py; cp $slow $RUNS/slow.bak
  printf '\n_fwd = ModelNew.forward\nModelNew.forward = lambda self, *a: (_fwd(self, *a), _fwd(self, *a))[1]  # deliberately 2x slower\n' >> $slow
  timed kb bench $G --out "$RUNS/gate" --config configs/ci.yaml --baseline auto --fail-on-regression 2>&1 | tee -a "$OUT/gate.txt" | tail -20
  cp $RUNS/slow.bak $slow; cp results/baselines/*.json "$OUT/" 2>/dev/null
fi
