"""Develop the L2/56 wgmma candidate on the GPU: build variants, check odd shapes and the full shape against
fp64, time against eager with CUDA events. A development aid, not a verdict (kbench check gives that).

    python3 scripts/dev_kernel_56.py [--variants cl1,cl2,cl4,cl2-tf32only] [--iters 20]

A variant is clN (CLUSTER = N) with an optional change: -pipe (PIPELINE = True: the next stage's fragment split
while this stage's wgmmas run), -grouped (a stage's four bf16 wgmmas, then its four tf32 ones, instead of
alternating kinds), or an ablation, timed but not expected to be right: -tf32only (the bf16
correction wgmmas left out: is the kernel tensor-bound?), -corronly (the tf32 ones left out).

Each variant runs in its own process with a timeout, so a hang (a barrier that never completes) is reported
instead of stalling the session. Prints one line per check and a summary per variant.
"""
import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILE = ROOT / "kernels" / "level2" / "56_Matmul_Sigmoid_Sum" / "wgmma.py"


_ISSUE = """                wgmma_bf16(part, cr[kk], make_desc(sc + kk * 32), kk > 0);   // [W_lo, W] . [x, x_lo]
                wgmma_tf32(part, hi[kk], make_desc(sx + kk * 32), 1);        // W_hi . x_hi
            }"""
ABLATIONS = {
    "tf32only": ("wgmma_bf16(part, cr[kk], make_desc(sc + kk * 32), kk > 0);", ""),
    "corronly": ("wgmma_tf32(part, hi[kk], make_desc(sx + kk * 32), 1);", ""),
    # the four bf16 wgmmas, then the four tf32 ones (one change of kind per stage instead of eight)
    "grouped": (_ISSUE, """                wgmma_bf16(part, cr[kk], make_desc(sc + kk * 32), kk > 0);
            }
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                wgmma_tf32(part, hi[kk], make_desc(sx + kk * 32), 1);
            }"""),
}
TIMING_ONLY = {"tf32only", "corronly"}


def _load(variant, verbose):
    cluster, _, ablation = variant.partition("-")
    src = FILE.read_text()
    src = re.sub(r"^CLUSTER = \d+", f"CLUSTER = {int(cluster[2:])}", src, count=1, flags=re.M)
    if ablation == "pipe":
        src = re.sub(r"^PIPELINE = \w+", "PIPELINE = True", src, count=1, flags=re.M)
    elif ablation:
        old, new = ABLATIONS[ablation]
        assert old in src, ablation
        src = src.replace(old, new).replace('name=f"l2_56_', f'name=f"dev_{ablation}_l2_56_')
        if ablation == "tf32only":   # the tf32 wgmma now starts each stage's tile
            src = src.replace("wgmma_tf32(part, hi[kk], make_desc(sx + kk * 32), 1);",
                              "wgmma_tf32(part, hi[kk], make_desc(sx + kk * 32), kk > 0);")
    if verbose:   # register use and spills from ptxas
        src = src.replace('["-O3", "-gencode', '["-O3", "-Xptxas=-v", "-gencode').replace("verbose=False", "verbose=True")
    ns = {"__name__": f"dev56_{variant}"}
    exec(compile(src, str(FILE), "exec"), ns)
    return ns


def _ref64(x, w, b):
    return torch.sigmoid(x.double() @ w.double().T + b.double()).sum(1, keepdim=True)


def _run_variant(variant, iters):
    global torch
    import torch
    t0 = time.perf_counter()
    ns = _load(variant, verbose=True)
    timing_only = variant.partition("-")[2] in TIMING_ONLY
    print(f"[{variant}] build/load {time.perf_counter() - t0:.1f} s", flush=True)
    fn = ns["_ext"].linear_sigmoid_rowsum
    pad = ns["_pad_cols"]
    torch.manual_seed(0)
    ok = True
    for (M, N, K) in [] if timing_only else [(3, 200, 100), (130, 300, 64), (1, 1, 4), (128, 1000, 1000), (257, 129, 36), (64, 4096, 2048)]:
        x = torch.randn(M, K, device="cuda")
        w = torch.randn(N, K, device="cuda") / K ** 0.5
        b = torch.randn(N, device="cuda")
        got = fn(pad(x, 4), pad(w, 4), b)
        torch.cuda.synchronize()
        ref = _ref64(x, w, b)
        err = ((got.double() - ref).abs() / ref.abs().clamp_min(1e-6)).max().item()
        good = err < 1e-5
        ok &= good
        print(f"[{variant}] shape M={M} N={N} K={K}: max rel err {err:.2e} {'ok' if good else 'WRONG'}", flush=True)
    # full problem shape, nn.Linear init as in the problem
    M, N, K = 128, 32768, 32768
    lin = torch.nn.Linear(K, N).cuda()
    x = torch.rand(M, K, device="cuda")
    with torch.no_grad():
        w, b = lin.weight, lin.bias
        ref = _ref64(x, w, b)
        torch.backends.cuda.matmul.allow_tf32 = False
        eager = torch.sigmoid(x @ w.T + b).sum(1, keepdim=True)
        got = fn(x, w, b)
        torch.cuda.synchronize()
        rel = lambda y: ((y.double() - ref).norm() / ref.norm()).item()
        e_ref, e_got = rel(eager), rel(got)
        print(f"[{variant}] full shape: norm rel err vs fp64 eager {e_ref:.2e} candidate {e_got:.2e} "
              f"(ratio {e_got / e_ref:.2f}); max abs {(got.double() - ref).abs().max().item():.2e}", flush=True)
        ok &= e_got <= 2 * e_ref or timing_only
        x2 = x.clone()
        x2[5, 17] = float("inf")
        x2[9, 3] = float("nan")
        ref2 = torch.sigmoid(x2 @ w.T + b).sum(1, keepdim=True)
        got2 = fn(x2, w, b)
        same = torch.allclose(got2, ref2, rtol=1e-5, atol=1e-5, equal_nan=True)
        ok &= same or timing_only
        print(f"[{variant}] non-finite rows: {'ok' if same else 'WRONG'} ({got2[5].item()}, {ref2[5].item()}; "
              f"{got2[9].item()}, {ref2[9].item()})", flush=True)

        def timed(f):
            for _ in range(3):
                f()
            torch.cuda.synchronize()
            ts = []
            for _ in range(iters):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                f()
                e.record()
                e.synchronize()
                ts.append(s.elapsed_time(e))
            ts.sort()
            return ts[len(ts) // 2]
        te = timed(lambda: torch.sigmoid(x @ w.T + b).sum(1, keepdim=True))
        tc = timed(lambda: fn(x, w, b))
    print(f"[{variant}] time: eager {te:.3f} ms, candidate {tc:.3f} ms, speedup {te / tc:.2f}x; "
          f"W at {4 * N * K / tc / 1e9:.2f} TB/s; {'ALL OK' if ok else 'FAILED'}", flush=True)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="cl2,cl2-pipe,cl1-pipe")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=240)
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one is not None:
        sys.exit(_run_variant(a.one, a.iters))
    env = dict(os.environ, TORCH_CUDA_ARCH_LIST=os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0"))
    variants = a.variants.split(",")
    # build every variant at once (compiles in parallel), then run them one at a time (clean timings)
    builds = [subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT / 'scripts')!r}); "
                                f"import dev_kernel_56 as d; d._load({c!r}, verbose=True)"], env=env) for c in variants]
    for p in builds:
        p.wait()
    rc = 0
    for c in variants:
        try:
            r = subprocess.run([sys.executable, __file__, "--one", c, "--iters", str(a.iters)], env=env,
                               timeout=a.timeout)
            rc |= r.returncode
            print(f"[{c}] exit {r.returncode}", flush=True)
        except subprocess.TimeoutExpired:
            print(f"[{c}] TIMED OUT after {a.timeout} s (hang?)", flush=True)
            rc |= 1
    sys.exit(rc)


if __name__ == "__main__":
    main()
