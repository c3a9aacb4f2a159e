"""Standalone GPU smoke check for candidate kernels, independent of the kbench pipeline.

Used while developing kernels on the lent GPU before (and as a cross-check of) `kbench check`:
  python3 scripts/gpu_smoke.py PROBLEM.py CANDIDATE.py [CANDIDATE.py ...]
Prints, per candidate: max abs error over 3 fresh-input trials, relative L2 error of the fp32
reference and of the candidate against a float64 run of the reference, and median device times
(CUDA events, L2 flushed before each sample) of eager vs candidate.
"""
import importlib.util
import statistics
import sys
import time

import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rel_err(x, oracle):
    return ((x.double() - oracle).norm() / oracle.norm()).item()


def device_ms(fn, args, flush, samples=30):
    for _ in range(3):
        fn(*args)
    times = []
    for _ in range(samples):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main(problem_path, cand_paths):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    prob = load(problem_path, "problem")
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, device="cuda")
    with torch.device("cuda"):
        torch.manual_seed(0)
        ref = prob.Model(*prob.get_init_inputs())
    ref_ms = None
    for path in cand_paths:
        t0 = time.time()
        cmod = load(path, "cand")
        build_s = time.time() - t0
        with torch.device("cuda"):
            torch.manual_seed(0)
            cand = cmod.ModelNew(*prob.get_init_inputs())
        cand.load_state_dict(ref.state_dict())
        max_abs, e_ref, e_cand = 0.0, 0.0, 0.0
        for trial in range(3):
            torch.manual_seed(100 + trial)
            inputs = [x.cuda() for x in prob.get_inputs()]
            with torch.no_grad():
                out_c = cand(*[x.clone() for x in inputs])
                out_r = ref(*[x.clone() for x in inputs])
                if trial == 0:
                    ref64 = ref.double()
                    oracle = ref64(*[x.double() for x in inputs])
                    ref.float()
                    e_ref, e_cand = rel_err(out_r, oracle), rel_err(out_c, oracle)
                    del oracle, ref64
            torch.cuda.synchronize()
            max_abs = max(max_abs, (out_c - out_r).abs().max().item())
        ok = torch.allclose(out_c, out_r, atol=1e-4, rtol=1e-4)
        with torch.no_grad():
            if ref_ms is None:
                ref_ms = device_ms(ref, inputs, flush)
            cand_ms = device_ms(cand, inputs, flush)
        print(f"{path}: build/import {build_s:.1f}s allclose={ok} max_abs={max_abs:.2e} "
              f"oracle_rel_err ref={e_ref:.2e} cand={e_cand:.2e} (x{e_cand / max(e_ref, 1e-30):.1f}) "
              f"eager={ref_ms * 1e3:.1f}us cand={cand_ms * 1e3:.1f}us speedup={ref_ms / cand_ms:.2f}x",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
