"""The L2 flush before each timed CUDA call, as kbench's own kernel: first a fence, then a store of zeros over
twice the L2. It is launched with every thread slot of every SM taken (max threads per SM / block size blocks on
each), and no block stores until every block of it is resident: so no other kernel's block runs beside the
stores, and work of the candidate's still running on another stream holds the flush back instead of hiding
under it.

Why not `buf.zero_()`: torch's fill kernel leaves most of each SM free, and it is memory-bound, so a candidate
that starts a call's compute-bound work ahead on a stream that does not wait for the timed one ran it under the
flush almost for free: neither the call's events nor the batch's wall held it (tests/fixtures/cuda_kernels/
cpu/1_Add_ReLU/heavy_ahead.py, docs/integrity.md "Untimed device work"). Why the fence: a full grid alone did
not stop it, as blocks launched ahead of the flush took their slots first and the flush's waiting blocks ran
later (lent H100, session 31: `side_stream_ahead`, its kernel on a new pool stream each call, read 10x short
and its batches' walls were shorter than the honest kernel's). With the fence, work started ahead runs inside
some call's events or between an event and the flush, and both sides time that stretch (flush_ms in a reply;
judge/flush.Flush.allow_ms says how long a candidate's flush may take before the rest is its call's).

The kernel is PTX loaded through the CUDA driver (ctypes, libcuda), with no compiler and no dispatcher: bound in
the candidate process before any candidate code exists, no `torch.library` override or `Tensor.zero_` patch
reaches it (a native hook of libcuda still could, as it could the clocks). Its fence counter is in the candidate
process's memory, where candidate code could find and write it; work that then runs beside the flush shortens the
batch's wall, so the witness is no backstop there (docs/integrity.md, "Untimed device work": open).
"""
from __future__ import annotations

import ctypes
import time

PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry kbench_l2_flush(.param .u64 p_buf, .param .u64 p_n16, .param .u64 p_count,
                                .param .u64 p_target, .param .u64 p_limit)
{
    .reg .pred %p<4>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [p_buf];
    ld.param.u64 %rd2, [p_n16];
    mov.u32 %r3, %tid.x;
    setp.ne.u32 %p2, %r3, 0;
    @%p2 bra FENCED;
    ld.param.u64 %rd8, [p_count];
    ld.param.u64 %rd9, [p_target];
    ld.param.u64 %rd10, [p_limit];
    atom.global.add.u64 %rd11, [%rd8], 1;
    mov.u64 %rd12, %globaltimer;
ARRIVE:
    ld.volatile.global.u64 %rd13, [%rd8];
    setp.eq.u64 %p3, %rd13, %rd9;
    @%p3 bra FENCED;
    mov.u64 %rd14, %globaltimer;
    sub.u64 %rd15, %rd14, %rd12;
    setp.lt.u64 %p3, %rd15, %rd10;
    @%p3 bra ARRIVE;
FENCED:
    bar.sync 0;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %nctaid.x;
    mul.wide.u32 %rd3, %r1, %r2;
    cvt.u64.u32 %rd4, %r3;
    add.u64 %rd3, %rd3, %rd4;
    mul.wide.u32 %rd5, %r4, %r2;
    mov.u32 %r5, 0;
LOOP:
    setp.ge.u64 %p1, %rd3, %rd2;
    @%p1 bra DONE;
    shl.b64 %rd6, %rd3, 4;
    add.u64 %rd7, %rd1, %rd6;
    st.global.v4.u32 [%rd7], {%r5, %r5, %r5, %r5};
    add.u64 %rd3, %rd3, %rd5;
    bra LOOP;
DONE:
    ret;
}

.visible .entry kbench_hold(.param .u64 p_cycles)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p_cycles];
    mov.u64 %rd2, %clock64;
WAIT:
    mov.u64 %rd3, %clock64;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p1, %rd4, %rd1;
    @%p1 bra WAIT;
    ret;
}
"""

# HOLD_CYCLES: a timed batch, the candidate's and the judge's reference's alike, starts with `hold` for this many
# cycles (~1 ms at 2 GHz), every thread slot of every SM taken, so that its host has queued the first call
# before the device reaches that call's start event, as it has every later call's, and the first call follows a
# full-device kernel as every later one follows the flush (judge/sides.py LEAD_SPIN says what the judge's one-SM
# spin left). Without it the first call held the host's dispatch after the context switch: on a lent H100 the A/A
# candidate's first call ran 0.02-0.13 ms over the others on Transpose and L2/56, its batches' mean per call
# 0.3-0.5% over the reference's (results/H100/aa-rounds-20261206-s25de.txt). Full occupancy, as the flush's, and
# not torch's one-SM spin: no block of work a side stream launched ahead can run beside it. 2^19 cycles (~0.26 ms)
# until session 33: the judge's host took 0.46-0.68 ms from the hold's launch to its first reference call queued
# (H100 session 32, H200 session 33), so that call held launch gaps, 0.03-0.11 ms over the others, and the A/A
# of L2/3 read 1.018 (results/H200/aa-rounds-20261207-s33.txt).
HOLD_CYCLES = 1 << 21

# FENCE_LIMIT_NS: how long a flush's block waits for the rest of its grid to become resident before it stores
# anyway. Only a deadlock needs it (a device where the grid cannot all be resident at once: DriverFlush refuses
# such a device at its start); a candidate whose work holds the SMs longer only makes its own calls slow.
FENCE_LIMIT_NS = 500_000_000


def occupancy(threads_per_sm: int, sms: int) -> tuple[int, int]:
    """(blocks, threads per block) that take every thread slot: the largest block (a multiple of 32, at most
    1024) that divides the SM's thread slots, that many per SM times the SMs."""
    block = max(b for b in range(32, 1025, 32) if threads_per_sm % b == 0)
    return sms * (threads_per_sm // block), block


class DriverFlush:
    """Callable: one flush on the current stream. Built once per process while it is still trusted."""

    def __init__(self, torch, nbytes: int):
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.grid, self.block = occupancy(getattr(props, "max_threads_per_multi_processor", 2048),
                                          props.multi_processor_count)
        self.buf = torch.empty((max(nbytes, 16) + 15) // 16 * 16, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()        # the primary context current in this thread before the driver calls
        cuda = ctypes.CDLL("libcuda.so.1")
        ptr, uint = ctypes.c_void_p, ctypes.c_uint
        cuda.cuModuleLoadData.argtypes = [ctypes.POINTER(ptr), ptr]
        cuda.cuModuleGetFunction.argtypes = [ctypes.POINTER(ptr), ptr, ctypes.c_char_p]
        self._launch = cuda.cuLaunchKernel
        self._launch.argtypes = [ptr, uint, uint, uint, uint, uint, uint, uint, ptr, ctypes.POINTER(ptr), ptr]
        self._launch.restype = ctypes.c_int
        self._module, self._fn = ctypes.c_void_p(), ctypes.c_void_p()
        ptx = ctypes.create_string_buffer(PTX.encode())
        check(cuda.cuModuleLoadData(ctypes.byref(self._module), ctypes.cast(ptx, ptr)), "cuModuleLoadData")
        check(cuda.cuModuleGetFunction(ctypes.byref(self._fn), self._module, b"kbench_l2_flush"), "cuModuleGetFunction")
        self._hold = ctypes.c_void_p()
        check(cuda.cuModuleGetFunction(ctypes.byref(self._hold), self._module, b"kbench_hold"), "cuModuleGetFunction")
        # Blocks arrived at the fence, ever; a launch's blocks wait until it equals the count its last one makes
        # (equal, not at least: a count written past it makes every flush wait FENCE_LIMIT_NS, not none).
        self.count = torch.zeros(1, dtype=torch.int64, device="cuda")
        self._target = ctypes.c_uint64(0)
        self._args = (ctypes.c_uint64(self.buf.data_ptr()), ctypes.c_uint64(self.buf.numel() // 16),
                      ctypes.c_uint64(self.count.data_ptr()), self._target, ctypes.c_uint64(FENCE_LIMIT_NS))
        self._params = params(self._args)
        self._hold_args = (ctypes.c_uint64(HOLD_CYCLES),)
        self._hold_params = params(self._hold_args)
        self._stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)   # the default stream, bound now
        t0 = time.perf_counter()
        self()
        torch.cuda.synchronize()
        if time.perf_counter() - t0 > FENCE_LIMIT_NS / 2e9:
            raise RuntimeError(f"kbench's L2 flush could not have its {self.grid} blocks of {self.block} threads "
                               "resident at once on this GPU (an SM limit or another context?): its fence timed out")

    def __call__(self) -> None:
        self._target.value += self.grid        # (read by cuLaunchKernel at the launch)
        self._run(self._fn, self._params)

    def hold(self) -> None:
        """HOLD_CYCLES of spinning on every thread slot of every SM (see HOLD_CYCLES)."""
        self._run(self._hold, self._hold_params)

    def _run(self, fn, args) -> None:
        check(self._launch(fn, self.grid, 1, 1, self.block, 1, 1, 0, self._stream, args, None), "cuLaunchKernel")


def params(args: tuple):
    """cuLaunchKernel's kernelParams: an array of pointers to the arguments (kept alive by the caller)."""
    return (ctypes.c_void_p * len(args))(*(ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args))


def check(result: int, what: str) -> None:
    if result != 0:
        raise RuntimeError(f"{what} failed: CUresult {result}")
