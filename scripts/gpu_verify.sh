#!/usr/bin/env bash
# What issue 15 still needs from a GPU, in one device call, most wanted first (session 29): the two short-kernel
# clock-lie tests at the CUDA price allowance (integrity.PRICE), the A/A, ncu and repeatability
# (bench_timing_quality.py), then `kbench build --all` and every other GPU test, cut at $LIMIT s (default 575)
# of this script so that each part's output and records (art/*-records.tgz, for scripts/price_floor.py) come back.
#   LIMIT=575 bash scripts/gpu_verify.sh        (on the device, from the repo root)
export OUT PYTHONUNBUFFERED=1 PYTHONPATH=. KBENCH_CACHE_DIR=$PWD/.kbench-cache CUDA_VISIBLE_DEVICES=0
ART=$OUT/art; mkdir -p $ART .kbench-runs
bash scripts/h200_batch.sh env
G=tests/test_gpu.py::
pt() { local name=$1 lim=$2; shift 2; t0=$SECONDS
  timeout -s INT $lim python3 -m pytest -m gpu -q -p no:cacheprovider --durations=30 --basetemp=$PWD/.kbench-runs/$name "$@" > $ART/$name.txt 2>&1
  echo "PYTEST $name rc $? in $((SECONDS-t0)) s"; tail -25 $ART/$name.txt
  (cd .kbench-runs/$name && find . -name results.jsonl | tar czf $ART/$name-records.tgz -T -); }
pt gpu-a 150 ${G}test_a_clock_hook_on_the_candidates_own_intervals_only_is_priced_at_the_witness ${G}test_work_started_ahead_on_a_side_stream_is_harmless
bash scripts/h200_batch.sh quality      # A/A, repeatability, ncu: art/quality.json, art/aa_results.json, aa_rounds
python3 scripts/price_floor.py $ART/aa_results.json .kbench-runs/gpu-a
t0=$SECONDS; python3 -m kernelbench_cli build --all --out .kbench-runs --set build.jobs=$(nproc) 2>&1 | tail -4; echo "BUILD $((SECONDS-t0)) s"
pt gpu-b $((${LIMIT:-575}-SECONDS)) ${G}test_every_bundled_cuda_candidate_passes_with_no_flag_and_is_witnessed ${G}test_a_judge_serving_many_jobs_keeps_its_device_memory ${G}test_cuda_seed_problem_simple_candidate_is_correct ${G}test_bundled_triton_candidates_are_compiled_in_the_build_and_their_kernels_do_the_work ${G}test_triton_exploits_are_caught_on_the_gpu ${G}test_a_cpu_job_on_a_gpu_host_cannot_reach_the_gpu ${G}test_a_python_event_clock_patch_on_a_short_kernel_is_harmless ${G}test_a_native_event_clock_hook_on_a_short_kernel_is_caught_by_the_clock_canary ${G}test_a_flush_patched_out_from_python_is_harmless ${G}test_compute_bound_work_started_ahead_under_the_untimed_flush_is_priced ${G}test_cuda_batch_failures_and_exploits ${G}test_a_native_event_clock_hook_is_caught_by_the_witness ${G}test_tf32_from_cpp_is_flagged_and_compared_at_its_precision
