"""Target program for Nsight Compute in scripts/bench_timing_quality.py: builds (from kbench's cache) and
runs one candidate's forward on fresh inputs, 3 warm-up calls then N profiled calls.

    python3 scripts/ncu_target.py PROBLEM.py CANDIDATE.py [N]
Prints the candidate's CUDA kernel names on the first line ("KERNELS a|b") so the caller can filter.
"""
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernelbench_cli.correctness import construct, make_inputs  # noqa: E402
from kernelbench_cli.candidate.loading import BuildInterceptor, import_file  # noqa: E402


def main(problem_path: str, cand_path: str, n: int) -> None:
    interceptor = BuildInterceptor(os.environ.get("KBENCH_CACHE_DIR", "~/.cache/kbench/builds"))
    interceptor.install()
    cand_mod = import_file(cand_path, "kbench_candidate")
    problem = import_file(problem_path, "kbench_problem")
    names = sorted({k for ext in interceptor.extensions for k in ext["kernels"]})
    print("KERNELS " + "|".join(names), flush=True)
    ref = construct(problem.Model, problem.get_init_inputs(), "cuda", torch.float32, 1234)
    cand = construct(cand_mod.ModelNew, problem.get_init_inputs(), "cuda", torch.float32, 1234)
    ref_sd = ref.state_dict()         # the reference's weights, when the candidate keeps its parameter names
    if ref_sd.keys() == cand.state_dict().keys():
        cand.load_state_dict(ref_sd)
    inputs = make_inputs(problem, 1, "cuda", torch.float32)
    with torch.no_grad():
        for _ in range(3 + n):
            cand(*inputs)
            torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 10)
