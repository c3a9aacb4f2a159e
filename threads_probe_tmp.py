# which threads appear in a CPU process on a GPU host, and when (diagnostic, not committed)
import os, sys, importlib.util
import torch
def th():
    return {t: open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")}
torch.ones(1 << 20).mul_(2).sum()
a = th()
print("CUDA_VISIBLE_DEVICES", repr(os.environ.get("CUDA_VISIBLE_DEVICES")))
print("is_available", torch.cuda.is_available(), "new:", {k: v for k, v in th().items() if k not in a})
try:
    import triton
    from triton.runtime import driver
    print("triton", triton.__version__)
    print("after triton import new:", {k: v for k, v in th().items() if k not in a})
except Exception as e:
    print("triton:", e)
