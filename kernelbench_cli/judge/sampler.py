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
import random
import secrets
import select
import struct
import threading
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
        self.pcs: list[tuple[int, int, int]] = []      # (us, thread, program counter)
        self.ticks = 0
        self.exit_status: int | None = None     # the process's, if it ended while attached (reaped here)
        self._rng = random.Random(secrets.randbits(64))
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
        now = round(time.perf_counter() * 1e6)
        self._seize_new()
        for tid in [t for t in self.tids if self._running(t)]:
            if not self._stop(tid):
                continue
            try:
                _ptrace(PTRACE_GETREGSET, tid, ctypes.c_void_p(NT_PRSTATUS), ctypes.byref(self._iov))
                self.pcs.append((now, tid, self._regs[PC_INDEX]))
            except OSError:
                pass
            try:
                _ptrace(PTRACE_CONT, tid)
            except OSError:
                self.tids.discard(tid)

    def sample_until(self, fd: int, deadline: float) -> None:
        """Sample once per PERIOD_S, at random (a fixed period is predictable: Perf), until `fd` is readable (the
        candidate's reply) or the deadline."""
        while time.perf_counter() < deadline and self.exit_status is None:
            if select.select([fd], [], [], self._rng.expovariate(1 / PERIOD_S))[0]:
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
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64), ("wakeup_events", ctypes.c_uint32),
                ("rest", ctypes.c_uint8 * 76)]


PERF_OPEN = {"x86_64": 298, "aarch64": 241}.get(platform.machine())
PERF_PAGES = 16          # ring buffer per thread (~1,300 samples), drained as samples come
PERF_ENABLE, PERF_DISABLE, PERF_PERIOD, PERF_SET_OUTPUT, PERF_ID = 0x2400, 0x2401, 0x40082404, 0x2405, 0x80082407
PERF_RECORD_MMAP, PERF_RECORD_LOST, PERF_RECORD_SAMPLE = 1, 2, 9
ARMS = 2                 # sampling events per thread, each due after its own exponential span of CPU time


def perf_refused() -> str | None:
    """Why the kernel would refuse Perf its events here (one opened on this process), or None."""
    try:
        Perf(os.getpid(), "/").close()
    except SamplingFailed as e:
        return str(e)
    return None


class Perf:
    """The kernel's sampling of the candidate's threads, invisible to it: per thread, task-clock events opened
    by the judge and read from ring buffers only the judge maps, user mode only (the program counter).

    A sample comes after an exponentially distributed span of that thread's CPU time (mean ARMS x PERIOD_S,
    ARMS events at once: one per PERIOD_S): the judge's thread wakes on each sample and draws the next span of
    the event that took it (PERF_EVENT_IOC_PERIOD restarts its count). A fixed period was predictable from the
    thread's CPU clock once one sample had been felt (a ~20 us gap in an rdtsc loop), and torch's work ran
    between samples (session 34's red team, `sample_dodge`: own code 96-97%). What remains of a span is
    memoryless, so a felt sample or a new span's interrupt says nothing of the next sample; until the judge's
    thread has drawn an event's new span (tens of us) the other events' spans run on.

    A counting event per thread keeps its CPU time and records each executable mapping made. Threads started
    later have no sampling event (the kernel maps no buffer of an inherited per-thread event), so their CPU time,
    which a second, inherited counting event per thread counts to the ns, is library time (`unsampled_ms`): a
    thread started and joined inside one call hides nothing. (It was the process's CPU time from /proc, in 10 ms
    ticks, less a tick a thread: a worker thread started per call hid in that slack, session 35.) Nothing shows in the candidate (no tracer, no stop), so the calls
    sampled are its timed calls themselves; SamplingFailed where the kernel refuses (perf_event_paranoid, a
    container's seccomp profile, locked-memory limits), and the judge falls back to Sampler."""

    def __init__(self, pid: int, own_root: str, before: list = ()):
        if PERF_OPEN is None or PC_INDEX is None:
            raise SamplingFailed(f"no perf events known for {platform.machine()}")
        self.pid, self.own_root, self.before = pid, root_of(own_root), list(before)
        self.counters: list[tuple[int, mmap.mmap]] = []
        self.arms: dict[int, int] = {}       # sampling event's id -> its fd
        self.samples, self.lost = [], 0      # (us, thread, program counter); samples the kernel could not write
        self.mapped: list[tuple[int, int]] = []     # code mapped while sampled (PERF_RECORD_MMAP)
        self.inherited: list[int] = []               # counting events its threads' new threads inherit
        self.counted0 = 0.0
        self.cpus: Counter = Counter()               # samples per CPU they were taken on
        self._rng = random.Random(secrets.randbits(64))
        self._lock, self._waker, self._thread, self._on = threading.Lock(), os.pipe(), None, False
        count = _PerfAttr(type=1, size=ctypes.sizeof(_PerfAttr), config=1, flags=1 | 32 | 64 | 256)
        everyone = _PerfAttr(type=1, size=ctypes.sizeof(_PerfAttr), config=1, flags=1 | 2 | 32 | 64)
        arm = _PerfAttr(type=1, size=ctypes.sizeof(_PerfAttr), config=1, sample_period=1_000_000,
                        sample_type=1 | 2 | 4 | 0x80 | 0x10000, flags=1 | 32 | 64, wakeup_events=1)
        # (TASK_CLOCK; counting: disabled, user mode only, a record of each executable mapping made; the same,
        #  inherited by the threads it starts, with no record;
        #  sampling: IP | TID | TIME | CPU | IDENTIFIER, a wake-up per sample)
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError as e:
            raise SamplingFailed(f"no such process ({e.strerror})") from None
        try:
            for tid in tids:
                fd = self._open(count, tid)
                if fd is None:
                    continue
                try:
                    ring = mmap.mmap(fd, (1 + PERF_PAGES) * mmap.PAGESIZE)
                except OSError as e:
                    os.close(fd)
                    raise SamplingFailed(f"perf ring buffer refused ({e.strerror})") from None
                self.counters.append((fd, ring))
                every = self._open(everyone, tid)
                if every is not None:
                    self.inherited.append(every)
                for _ in range(ARMS):
                    one = self._open(arm, tid)
                    if one is not None:
                        fcntl.ioctl(one, PERF_SET_OUTPUT, fd)
                        self.arms[struct.unpack("Q", fcntl.ioctl(one, PERF_ID, bytes(8)))[0]] = one
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _open(attr: _PerfAttr, tid: int) -> int | None:
        fd = _libc.syscall(PERF_OPEN, ctypes.byref(attr), tid, -1, -1, 8)      # PERF_FLAG_FD_CLOEXEC
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err == 3:            # ESRCH: the thread ended meanwhile
            return None
        raise SamplingFailed(f"perf events refused ({os.strerror(err)})")

    def _arm(self, fd: int) -> None:
        """A new span for the event: the kernel restarts its count from now (PERF_EVENT_IOC_PERIOD)."""
        span = max(10_000, round(self._rng.expovariate(1 / (ARMS * PERIOD_S * 1e9))))
        try:
            fcntl.ioctl(fd, PERF_PERIOD, struct.pack("Q", span))
        except OSError:         # its thread ended
            pass

    def enable(self, on: bool = True) -> None:
        if on:
            for fd in self.arms.values():
                self._arm(fd)
        for fd in [fd for fd, _ in self.counters] + self.inherited + list(self.arms.values()):
            fcntl.ioctl(fd, PERF_ENABLE if on else PERF_DISABLE, 0)
        self._on = on
        if on:
            self.counted0 = self._counted_ms(self.inherited) - self._counted_ms()
            self._thread = threading.Thread(target=self._rearm, daemon=True, name="kbench-perf")
            self._thread.start()
        else:
            self._stop()

    def _rearm(self) -> None:
        """The judge's thread: drains a ring as its samples come and re-arms the events that fired."""
        poller = select.poll()
        poller.register(self._waker[0], select.POLLIN)
        for fd, _ in self.counters:
            poller.register(fd, select.POLLIN)
        while True:
            for fd, event in poller.poll():
                if fd == self._waker[0]:
                    return
                if event & (select.POLLHUP | select.POLLERR | select.POLLNVAL):      # its thread ended
                    poller.unregister(fd)
            self.drain()

    def _stop(self) -> None:
        if self._thread is not None:
            os.write(self._waker[1], b"x")
            self._thread.join()
            self._thread = None

    def _counted_ms(self, fds: list | None = None) -> float:
        """CPU time counted by the events `fds` (the threads' own counters by default; task-clock, in ns)."""
        fds = [fd for fd, _ in self.counters] if fds is None else fds
        return sum(struct.unpack("Q", os.read(fd, 8))[0] for fd in fds) / 1e6

    def unsampled_ms(self) -> float:
        """CPU time since enable() of the threads started since (an inheriting counter's count, its threads' new
        threads included, ended ones too, less the threads' own): no event samples them."""
        return max(0.0, self._counted_ms(self.inherited) - self._counted_ms() - self.counted0)

    def drain(self) -> None:
        """Take every sample the buffers hold and free their room (data_tail); re-arm the events that fired
        (while enabled)."""
        room, fired = PERF_PAGES * mmap.PAGESIZE, set()
        with self._lock:
            for _, ring in self.counters:
                head, tail = struct.unpack_from("QQ", ring, 1024)       # data_head, data_tail
                while tail + 8 <= head:
                    kind, _, size = struct.unpack("IHH", _ring_bytes(ring, tail, 8, room))
                    if size < 8:
                        break
                    if kind == PERF_RECORD_SAMPLE and size >= 48:   # id, ip, pid and tid, time, cpu and a reserved word
                        sid, pc, _, tid, ns, cpu = struct.unpack("QQIIQI", _ring_bytes(ring, tail + 8, 36, room))
                        self.samples.append((ns // 1000, tid, pc))
                        self.cpus[cpu] += 1
                        fired.add(self.arms.get(sid, -1))
                    elif kind == PERF_RECORD_MMAP and size >= 40:        # pid, tid, addr, len, pgoff, name
                        addr, length = struct.unpack("QQ", _ring_bytes(ring, tail + 16, 16, room))
                        self.mapped.append((addr, addr + length))
                    elif kind == PERF_RECORD_LOST and size >= 24:
                        sid, lost = struct.unpack("QQ", _ring_bytes(ring, tail + 8, 16, room))
                        self.lost += lost
                        fired.add(self.arms.get(sid, -1))
                    tail += size
                struct.pack_into("Q", ring, 1032, tail)
            for fd in fired - {-1} if self._on else ():     # (spent: the same span again, known to the candidate)
                self._arm(fd)

    def pcs(self) -> list[tuple[int, int, int]]:
        self.drain()
        return self.samples

    def share(self) -> tuple[float | None, str]:
        pcs = self.pcs()
        return share(pcs, self.pid, self.own_root, self.before, round(self.unsampled_ms()), self.mapped)

    def close(self) -> None:
        self._stop()
        for fd in list(self.arms.values()) + self.inherited:
            os.close(fd)
        for fd, ring in self.counters:
            ring.close()
            os.close(fd)
        for fd in self._waker:
            os.close(fd)
        self.arms, self.counters, self.inherited, self._waker = {}, [], [], ()


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
