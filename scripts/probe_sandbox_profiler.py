"""Does the CUDA profiler see kernels inside the candidate sandbox (sandbox.confine)? Three fresh processes:
plain; confined first; profiled once before confining, then confined. Each prints the CUDA kernel events one
profiled call shows, and the launch cost (us) before and after.  Usage: python3 scripts/probe_sandbox_profiler.py"""
import subprocess
import sys

CHILD = r"""
import sys, time, torch
from kernelbench_cli import sandbox
from torch.autograd import profiler
mode = sys.argv[1]
x = torch.randn(1 << 20, device="cuda"); torch.cuda.synchronize()
def launch_us():
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(2000): x.add_(0)
    torch.cuda.synchronize(); return (time.perf_counter() - t) / 2000 * 1e6
def profiled():
    try:
        with profiler.profile(use_cpu=False, use_device="cuda", use_kineto=True) as p:
            torch.relu(x); torch.cuda.synchronize()
        return sum(1 for e in p.function_events if e.device_type == torch.autograd.DeviceType.CUDA)
    except Exception as e:
        return f"raised {type(e).__name__}: {e}"
before = launch_us()
if mode == "warm":
    print("pre-confine events", profiled())
if mode != "plain":
    print("confined", sandbox.confine())
print(mode, "events", profiled(), "launch us before %.2f after %.2f" % (before, launch_us()))
"""
for mode in ("plain", "confined", "warm"):
    r = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120)
    print(r.stdout.strip())
    print("\n".join(line for line in r.stderr.splitlines() if "CUPTI" in line or "rror" in line)[-800:])
