#!/usr/bin/env bash
# One batch of GPU work on the lent H200, run from the repo root: environment record, GPU tests,
# cold and warm `kbench check`, a parallel build of every candidate, and `kbench bench --all`.
# Writes everything under $OUT. Usage: bash scripts/h200_batch.sh [bench-config]
set -uo pipefail
OUT=${OUT:-/tmp/kbench-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=. KBENCH_CACHE_DIR=$PWD/.kbench-cache COLUMNS=160
CONFIG=${1:-configs/default.yaml}
kb() { python3 -m kernelbench_cli "$@"; }
secs() { local t0=$(date +%s.%N); "$@"; local rc=$?; echo "wall $(echo "$(date +%s.%N) - $t0" | bc) s (rc $rc): $*" | tee -a "$OUT/walltimes.txt"; }

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; nproc; } | tee "$OUT/env.txt"

rm -rf "$KBENCH_CACHE_DIR"
secs kb check level2/101_LayoutMix_FakeInt8_Linear --out "$OUT/runs" > "$OUT/check_cold.txt" 2>&1
secs kb check level2/101_LayoutMix_FakeInt8_Linear --out "$OUT/runs" > "$OUT/check_warm.txt" 2>&1
cat "$OUT/check_warm.txt"
secs kb build --all --out "$OUT/runs" --set build.jobs=16 > "$OUT/build_all.txt" 2>&1
tail -5 "$OUT/build_all.txt"
secs python3 -m pytest -m gpu -q tests/test_gpu.py > "$OUT/pytest_gpu.txt" 2>&1
tail -3 "$OUT/pytest_gpu.txt"
secs kb bench --all --config "$CONFIG" --out "$OUT/runs" --json > "$OUT/bench.json" 2> "$OUT/bench.txt"
cat "$OUT/bench.txt"
tar czf "$OUT/runs.tgz" -C "$OUT" runs && rm -rf "$OUT/runs"
