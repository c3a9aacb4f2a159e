"""Does L2 data a kernel loads with an `evict_last` cache hint survive kbench's flush (docs/integrity.md, "Untimed
device work", session 31's review)? If it does, a candidate could keep its weights in L2 from call to call while
each call still follows a flush, and honest kernels that load with such hints (CUTLASS, FlashAttention) are timed
partly warm. For a buffer of a third of the L2: a read's time warm (no flush between), cold (kbench's flush
between), and after the flush when every read loads with `L2::evict_last` (and, for the control, `evict_normal`).
If evict_last after the flush reads near warm, the flush does not clear such lines. Run on a GPU, from the repo:
  PYTHONPATH=. python3 scripts/probe_l2_persist.py
Run in sessions 32 (H100) and 33 (H200) with a defective warm figure (launch latency in it); fixed in session 33."""
from __future__ import annotations

import ctypes
import statistics

import torch

from kernelbench_cli.l2flush import DriverFlush, check, params

PTX = r"""
.version 7.4
.target sm_80
.address_size 64

.visible .entry kb_read(.param .u64 p_buf, .param .u64 p_n16, .param .u64 p_out, .param .u32 p_last)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<14>;
    ld.param.u64 %rd1, [p_buf];
    ld.param.u64 %rd2, [p_n16];
    ld.param.u64 %rd8, [p_out];
    ld.param.u32 %r9, [p_last];
    createpolicy.fractional.L2::evict_last.b64 %rd10, 1.0;
    createpolicy.fractional.L2::evict_normal.b64 %rd11, 1.0;
    setp.ne.u32 %p2, %r9, 0;
    selp.b64 %rd12, %rd10, %rd11, %p2;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd3, %r1, %r2;
    cvt.u64.u32 %rd4, %r3;
    add.u64 %rd3, %rd3, %rd4;
    mul.wide.u32 %rd5, %r4, %r2;
    mov.u32 %r10, 0;
LOOP:
    setp.ge.u64 %p1, %rd3, %rd2;
    @%p1 bra DONE;
    shl.b64 %rd6, %rd3, 4;
    add.u64 %rd7, %rd1, %rd6;
    ld.global.L2::cache_hint.v4.u32 {%r5, %r6, %r7, %r8}, [%rd7], %rd12;
    xor.b32 %r10, %r10, %r5;
    xor.b32 %r10, %r10, %r8;
    add.u64 %rd3, %rd3, %rd5;
    bra LOOP;
DONE:
    setp.ne.u32 %p3, %r10, 305419896;
    @%p3 bra END;
    st.global.u32 [%rd8], %r10;
END:
    ret;
}
"""


class Reader:
    def __init__(self, buf: torch.Tensor, flush: DriverFlush):
        cuda = ctypes.CDLL("libcuda.so.1")
        ptr = ctypes.c_void_p
        cuda.cuModuleLoadData.argtypes = [ctypes.POINTER(ptr), ptr]
        cuda.cuModuleGetFunction.argtypes = [ctypes.POINTER(ptr), ptr, ctypes.c_char_p]
        self.module, self.fn = ptr(), ptr()
        ptx = ctypes.create_string_buffer(PTX.encode())
        check(cuda.cuModuleLoadData(ctypes.byref(self.module), ctypes.cast(ptx, ptr)), "cuModuleLoadData")
        check(cuda.cuModuleGetFunction(ctypes.byref(self.fn), self.module, b"kb_read"), "cuModuleGetFunction")
        self.out = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.last = ctypes.c_uint32(0)
        self.args = (ctypes.c_uint64(buf.data_ptr()), ctypes.c_uint64(buf.numel() // 16),
                     ctypes.c_uint64(self.out.data_ptr()), self.last)
        self.params = params(self.args)
        self.flush = flush

    def __call__(self, last: bool) -> None:
        self.last.value = int(last)
        self.flush._run(self.fn, self.params)       # the flush's grid and stream: every SM, the default stream


def timed(before, fn, runs: int = 30) -> float:
    """The median of fn's interval (us), each run after `before`: device work that keeps the host ahead, so the
    interval holds the read alone and not the launch latency of a ctypes launch (session 32/33: a "warm" read
    timed on an idle device read 14-21 us, slower than the same read after a flush, 5-7 us)."""
    out = []
    for _ in range(runs):
        before()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out[3:]) * 1e3


def main() -> None:
    props = torch.cuda.get_device_properties(0)
    l2 = props.L2_cache_size
    flush = DriverFlush(torch, 2 * l2)
    buf = torch.randint(0, 1 << 30, ((l2 // 3) // 4,), dtype=torch.int32, device="cuda")
    read = Reader(buf, flush)
    print(f"{props.name}: L2 {l2 >> 20} MiB, buffer {buf.numel() * 4 >> 20} MiB")
    for last in (False, True):
        name = "evict_last" if last else "evict_normal"
        read(last)
        warm = timed(flush.hold, lambda: read(last))     # a spin, no memory touched: the lines stay in L2
        cold = timed(flush, lambda: read(last))          # kbench's flush, then the read
        print(f"  {name:13s} warm {warm:8.2f} us   after kbench's flush {cold:8.2f} us   ({cold / warm:.2f}x warm)")
    print("evict_last lines survive the flush if its 'after flush' reads near its warm time while evict_normal's do not")


if __name__ == "__main__":
    main()
