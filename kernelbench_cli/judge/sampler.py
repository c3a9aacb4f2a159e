"""Attribution seen from outside the candidate process (CPU): where its running threads are, sampled for the judge.

The in-process attribution (candidate/attribution.py) counts what torch's profiler records, from inside the
process it measures: torch work that the profiler does not record (kernels called from C++ without the
dispatcher, RecordFunction switched off from C++ or Python) was the candidate's own there (session 23's red
team). Here the program counters come from the kernel, and their places from /proc/<pid>/maps, which the kernel
writes; nothing in the candidate's reach changes what a sample says.

- Perf (first choice): a task-clock perf event per thread of the candidate, one sample per ms of its CPU time,
  open through the timed phase (judge/evidence.py `sampled`). The candidate cannot see it, so the calls sampled
  are its timed calls themselves.
- Sampler (where the kernel refuses perf events to this process: perf_event_paranoid, a container's seccomp
  profile): ptrace. The judge stops each running thread every ms (PTRACE_SEIZE + PTRACE_INTERRUPT: the
  permission it already holds to read the outputs with process_vm_readv) and reads its program counter, while
  the candidate repeats its forward in a call of its own. A candidate can tell such calls apart (TracerPid in
  /proc/self/status): docs/integrity.md, known gaps.

Where each sample lies, and the share it gives: judge/places.py.
"""
from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import platform
import select
import struct
import time
from collections import Counter

from .places import root_of, share

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_CONT, PTRACE_DETACH, PTRACE_GETREGSET, PTRACE_SEIZE, PTRACE_INTERRUPT = 7, 17, 0x4204, 0x4206, 0x4207
PTRACE_EVENT_STOP, NT_PRSTATUS, WALL = 128, 1, 0x40000000
# The program counter in NT_PRSTATUS's registers (struct user_regs_struct / user_pt_regs), in 8-byte words.
PC_INDEX = {"x86_64": 16, "aarch64": 32}.get(platform.machine())

PERIOD_S = 0.001
class _IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class SamplingFailed(Exception):
    pass


def _ptrace(request: int, tid: int, addr=None, data=None) -> None:
    if _libc.ptrace(request, tid, addr, data) == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class Sampler:
    """ptrace attachment to every thread of `pid` (a child of this process); use as a context manager."""

    def __init__(self, pid: int, own_root: str, before: list = ()):
        if PC_INDEX is None:
            raise SamplingFailed(f"no program counter known for {platform.machine()}")
        self.pid, self.own_root, self.before = pid, root_of(own_root), list(before)
        self.tids: set[int] = set()
        self.pcs: list[tuple[int, int]] = []      # (tick, program counter)
        self.ticks = 0
        self.exit_status: int | None = None     # the process's, if it ended while attached (reaped here)
        self._regs = (ctypes.c_uint64 * 68)()
        self._iov = _IOVec(ctypes.cast(self._regs, ctypes.c_void_p), ctypes.sizeof(self._regs))

    def __enter__(self) -> "Sampler":
        try:
            self._seize_new()
        except BaseException:
            self.detach()
            raise
        if not self.tids:
            raise SamplingFailed("no thread could be attached")
        return self

    def __exit__(self, *exc) -> None:
        self.detach()

    def _seize_new(self) -> None:
        try:
            listed = {int(t) for t in os.listdir(f"/proc/{self.pid}/task")}
        except OSError:
            return
        for tid in listed - self.tids:
            try:
                _ptrace(PTRACE_SEIZE, tid)
            except OSError as e:
                if e.errno == 3:      # ESRCH: gone meanwhile
                    continue
                raise SamplingFailed(f"cannot attach to the candidate process ({e.strerror})") from None
            self.tids.add(tid)

    def _running(self, tid: int) -> bool:
        try:
            with open(f"/proc/{self.pid}/task/{tid}/stat", "rb") as f:
                return f.read().rpartition(b")")[2][1:2] == b"R"
        except OSError:
            return False

    def _stop(self, tid: int) -> bool:
        """Interrupt `tid` and wait for that stop, passing on any signal met first; False if it is gone."""
        try:
            _ptrace(PTRACE_INTERRUPT, tid)
        except OSError:
            self.tids.discard(tid)
            return False
        for _ in range(64):
            try:
                _, status = os.waitpid(tid, WALL)
            except ChildProcessError:
                self.tids.discard(tid)
                return False
            if not os.WIFSTOPPED(status):          # it ended
                self.tids.discard(tid)
                if tid == self.pid:
                    self.exit_status = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                return False
            if status >> 16 == PTRACE_EVENT_STOP:
                return True
            try:                                   # a signal on its way in: deliver it, our stop comes next
                _ptrace(PTRACE_CONT, tid, None, ctypes.c_void_p(os.WSTOPSIG(status)))
            except OSError:
                self.tids.discard(tid)
                return False
        return False

    def tick(self) -> None:
        """One sample of every thread found running."""
        self.ticks += 1
        self._seize_new()
        for tid in [t for t in self.tids if self._running(t)]:
            if not self._stop(tid):
                continue
            try:
                _ptrace(PTRACE_GETREGSET, tid, ctypes.c_void_p(NT_PRSTATUS), ctypes.byref(self._iov))
                self.pcs.append((self.ticks, self._regs[PC_INDEX]))
            except OSError:
                pass
            try:
                _ptrace(PTRACE_CONT, tid)
            except OSError:
                self.tids.discard(tid)

    def sample_until(self, fd: int, deadline: float) -> None:
        """Sample every PERIOD_S until `fd` is readable (the candidate's reply) or the deadline."""
        while time.perf_counter() < deadline and self.exit_status is None:
            if select.select([fd], [], [], PERIOD_S)[0]:
                return
            self.tick()

    def detach(self) -> None:
        for tid in list(self.tids):
            if self._stop(tid):
                try:
                    _ptrace(PTRACE_DETACH, tid)
                except OSError:
                    pass
        self.tids.clear()

    def share(self) -> tuple[float | None, str]:
        return share(self.pcs, self.pid, self.own_root, self.before)


class _PerfAttr(ctypes.Structure):       # struct perf_event_attr, its first 128 bytes (PERF_ATTR_SIZE_VER7)
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64), ("rest", ctypes.c_uint8 * 80)]


PERF_OPEN = {"x86_64": 298, "aarch64": 241}.get(platform.machine())
PERF_PAGES = 32          # ring buffer per thread: ~5,400 samples, drained after every batch (`drain`)
PERF_ENABLE, PERF_DISABLE, PERF_RECORD_MMAP, PERF_RECORD_LOST, PERF_RECORD_SAMPLE = 0x2400, 0x2401, 1, 2, 9


def perf_refused() -> str | None:
    """Why the kernel would refuse Perf its events here (one opened on this process), or None."""
    try:
        Perf(os.getpid(), "/").close()
    except SamplingFailed as e:
        return str(e)
    return None


class Perf:
    """The kernel's sampling of the candidate's threads, invisible to it: a task-clock event per thread (one
    sample per ms of that thread's CPU time, user mode: its program counter), opened by the judge, read from
    ring buffers only the judge maps. Threads started later have no event (the kernel maps no buffer of an
    inherited per-thread event), so their CPU time, the process's less what the events counted, is counted
    as library time (`unsampled_ms`): a thread started and joined inside one call hides nothing. Nothing shows in the candidate (no tracer,
    no stop), so the calls sampled can be its timed calls themselves; SamplingFailed where the kernel refuses
    (perf_event_paranoid, a container's seccomp profile, locked-memory limits), and the judge falls back to
    Sampler. The buffers are drained after each batch, while the candidate is frozen (no writer), so none
    fills: a full buffer drops new samples, and a candidate honest for its first seconds would be all they
    held."""

    def __init__(self, pid: int, own_root: str, before: list = ()):
        if PERF_OPEN is None or PC_INDEX is None:
            raise SamplingFailed(f"no perf events known for {platform.machine()}")
        self.pid, self.own_root, self.before = pid, root_of(own_root), list(before)
        self.events: list[tuple[int, mmap.mmap]] = []
        self.samples, self.lost = [], 0      # (ms taken in, program counter); samples the kernel could not write
        self.mapped: list[tuple[int, int]] = []     # code mapped while sampled (PERF_RECORD_MMAP)
        self.cpu0, self.counted0 = 0.0, 0.0
        self.cpus: Counter = Counter()               # samples per CPU they were taken on
        attr = _PerfAttr(type=1, size=ctypes.sizeof(_PerfAttr), config=1, sample_period=1_000_000,
                         sample_type=1 | 2 | 4 | 0x80, flags=1 | 32 | 64 | 256)
        # (TASK_CLOCK; IP | TID | TIME | CPU; disabled, user mode only, a record of each executable mapping made)
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError as e:
            raise SamplingFailed(f"no such process ({e.strerror})") from None
        try:
            for tid in tids:
                fd = _libc.syscall(PERF_OPEN, ctypes.byref(attr), tid, -1, -1, 8)      # PERF_FLAG_FD_CLOEXEC
                if fd < 0:
                    err = ctypes.get_errno()
                    if err == 3:
                        continue
                    raise SamplingFailed(f"perf events refused ({os.strerror(err)})")
                try:
                    ring = mmap.mmap(fd, (1 + PERF_PAGES) * mmap.PAGESIZE)
                except OSError as e:
                    os.close(fd)
                    raise SamplingFailed(f"perf ring buffer refused ({e.strerror})") from None
                self.events.append((fd, ring))
        except BaseException:
            self.close()
            raise

    def enable(self, on: bool = True) -> None:
        for fd, _ in self.events:
            fcntl.ioctl(fd, PERF_ENABLE if on else PERF_DISABLE, 0)
        if on:
            self.cpu0, self.counted0 = process_cpu_ms(self.pid), self._counted_ms()

    def _counted_ms(self) -> float:
        """CPU time of the threads with events (task-clock counts while enabled, in ns)."""
        return sum(struct.unpack("Q", os.read(fd, 8))[0] for fd, _ in self.events) / 1e6

    def unsampled_ms(self) -> float:
        """The process's CPU time since enable() that no event counted: threads it started since (beyond the
        clock's 10 ms ticks, one per thread)."""
        extra = process_cpu_ms(self.pid) - self.cpu0 - (self._counted_ms() - self.counted0)
        return max(0.0, extra - 10.0 * (len(self.events) + 1))

    def drain(self) -> None:
        """Take every sample the buffers hold and free their room (data_tail); call while nothing of the
        candidate runs."""
        room = PERF_PAGES * mmap.PAGESIZE
        for _, ring in self.events:
            head, tail = struct.unpack_from("QQ", ring, 1024)       # data_head, data_tail
            while tail + 8 <= head:
                kind, _, size = struct.unpack("IHH", _ring_bytes(ring, tail, 8, room))
                if size < 8:
                    break
                if kind == PERF_RECORD_SAMPLE and size >= 40:      # ip, pid and tid, time, cpu and a reserved word
                    pc, _, ns, cpu = struct.unpack("QQQI", _ring_bytes(ring, tail + 8, 28, room))
                    self.samples.append((ns // 1_000_000, pc))
                    self.cpus[cpu] += 1
                elif kind == PERF_RECORD_MMAP and size >= 40:        # pid, tid, addr, len, pgoff, name
                    addr, length = struct.unpack("QQ", _ring_bytes(ring, tail + 16, 16, room))
                    self.mapped.append((addr, addr + length))
                elif kind == PERF_RECORD_LOST and size >= 24:
                    self.lost += struct.unpack("Q", _ring_bytes(ring, tail + 16, 8, room))[0]
                tail += size
            struct.pack_into("Q", ring, 1032, tail)

    def pcs(self) -> list[tuple[int, int]]:
        self.drain()
        return self.samples

    def share(self) -> tuple[float | None, str]:
        pcs = self.pcs()
        return share(pcs, self.pid, self.own_root, self.before, round(self.unsampled_ms()), self.mapped)

    def close(self) -> None:
        for fd, ring in self.events:
            ring.close()
            os.close(fd)
        self.events = []


def process_cpu_ms(pid: int) -> float:
    """User + system CPU time of every thread `pid` has had, ended ones included (/proc/<pid>/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        return (int(fields[11]) + int(fields[12])) * 1e3 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _ring_bytes(ring: mmap.mmap, pos: int, n: int, room: int) -> bytes:
    """`n` bytes at position `pos` of a perf ring buffer's data (after its first page), wrapping at `room`."""
    at = pos % room
    first = ring[mmap.PAGESIZE + at:mmap.PAGESIZE + min(room, at + n)]
    return first + ring[mmap.PAGESIZE:mmap.PAGESIZE + n - len(first)]
