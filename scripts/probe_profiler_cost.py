"""What the custom-kernel profile (candidate/attribution.py _cuda_share) costs on this GPU, and what it leaves behind:
the wall time of a first, second and third profiler session in one process (as candidate/attribution.py _cuda_share),
the roofline's first FLOP count, and the host launch cost of a tiny kernel before and after profiling (CUPTI
left subscribed would slow every later launch, which would bias a timing run after it).

    python3 scripts/probe_profiler_cost.py            (on the GPU host; prints one line per measure)
"""
from __future__ import annotations

import statistics
import time

import torch


def launch_us(x, n: int = 3000) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def session_s(x) -> float:
    t0 = time.perf_counter()
    with torch.autograd.profiler.profile(use_cpu=False, use_device="cuda", use_kineto=True) as prof:
        x.add_(1)
        torch.cuda.synchronize()
    sum(e.device_time_total for e in prof.function_events)     # as candidate/attribution.py _cuda_share
    return time.perf_counter() - t0


def main() -> None:
    t0 = time.perf_counter()
    torch.cuda.init()
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    print(f"cuda init + first kernel: {time.perf_counter() - t0:.3f} s")
    from kernelbench_cli import roofline
    t0 = time.perf_counter()
    roofline.count(torch.nn.Linear(64, 64).cuda(), [torch.randn(8, 64, device="cuda")], None)
    print(f"roofline.count, first use: {time.perf_counter() - t0:.3f} s")
    before = [launch_us(x) for _ in range(7)]
    sessions = [session_s(x) for _ in range(3)]
    after = [launch_us(x) for _ in range(7)]
    print("profiler sessions (s): " + ", ".join(f"{s:.3f}" for s in sessions))
    print(f"launch cost before profiling: {statistics.median(before):.2f} us, after: {statistics.median(after):.2f} us "
          f"(ratio {statistics.median(after) / statistics.median(before):.3f})")


if __name__ == "__main__":
    main()
