"""Where a cached torch.compile of a problem's reference spends its time, in a fresh process with dynamo and
inductor already imported (as the judge does them): the harness-overhead target of issue 15 counts this
compile. Run twice: the first fills Inductor's cache (reported, not profiled), the second is the cached case.

    python3 scripts/probe_compile.py level1/6_GELU --device cuda [--cache-dir DIR]
"""
import argparse
import cProfile
import importlib
import io
import os
import pstats
import subprocess
import sys
import time


def child(problem: str, device: str) -> None:
    import torch
    t = time.perf_counter()
    for name in ("torch._dynamo", "torch._inductor.compile_fx"):
        importlib.import_module(name)
    print(f"import dynamo + inductor: {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))      # the repo root
    from kernelbench_cli.judge.process import prewarm_compile     # what the judge pays ahead
    prewarm_compile(device)
    print(f"the judge's pre-warm (source hashes{', vector ISA' if device == 'cpu' else ''}): "
          f"{time.perf_counter() - t:.2f} s")
    path = os.path.join("problems", problem if problem.endswith(".py") else problem + ".py")
    spec = importlib.util.spec_from_file_location("problem", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    fn = torch.compile(model)
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    with torch.no_grad():
        fn(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()
    prof.disable()
    print(f"compile + first call: {time.perf_counter() - t:.2f} s")
    out = io.StringIO()
    st = pstats.Stats(prof, stream=out)
    st.sort_stats("tottime").print_stats(15)
    st.sort_stats("cumulative").print_stats(r"(codecache|async_compile|triton|cpu_vec_isa|subprocess)", 20)
    st.print_callers(r"(_register_to_dispatcher|wakeup)")     # who pays what is left
    print("\n".join(line[:200] for line in out.getvalue().splitlines() if line.strip()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("problems", nargs="+")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.problems[0], a.device)
    for p in a.problems:
        for k, what in enumerate(("cold (fills the cache)", "cached")):
            t = time.perf_counter()
            r = subprocess.run([sys.executable, __file__, p, "--device", a.device, "--child"], capture_output=True,
                               text=True)
            print(f"## {p} {what}: process {time.perf_counter() - t:.2f} s (rc {r.returncode})")
            lines = r.stdout.splitlines() if k else r.stdout.splitlines()[:2]
            print("\n".join(lines) + (r.stderr[-800:] if r.returncode else ""))


if __name__ == "__main__":
    main()
