#!/usr/bin/env bash
# A short H200 check of this session's fixes (issue 15/16): the CUDA profiler inside the sandbox (attribution of
# an aten-only extension and of an honest kernel), and the warm check's wall time with inputs made on the device.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} KBENCH_CACHE_DIR=$PWD/.kbench-cache TORCH_CUDA_ARCH_LIST=9.0
kb() { python3 -m kernelbench_cli "$@"; }
FIX="--set paths.kernels=tests/fixtures/cuda_kernels"
F=tests/fixtures/cuda_kernels/cpu/1_Add_ReLU
kb build level1/6_GELU --set build.jobs=8 > /dev/null 2>&1 &
kb build cpu/1_Add_ReLU --device cuda $FIX --set build.jobs=8 > /dev/null 2>&1
wait
show='import json,sys; r=json.load(sys.stdin)["results"][0]; print(r["candidate"], r["status"], r["custom_share"], r["custom_share_top"], [f["name"] for f in r["flags"]], r["phases"].get("profile_s"))'
for k in aten_wrapper correct; do kb check cpu/1 --device cuda --kernel $F/$k.py $FIX --json 2>/dev/null | python3 -c "$show"; done
for i in 1 2 3; do
  t0=$(date +%s%N); KBENCH_TRACE=${OUT:-/tmp}/check$i.trace kb check level1/6_GELU --config configs/quick.yaml > /dev/null 2>&1
  echo "warm check level1/6_GELU quick.yaml: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
done
python3 scripts/trace_summary.py ${OUT:-/tmp}/check3.trace | head -45
