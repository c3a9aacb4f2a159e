"""Process hardening for kbench's own processes (Linux; ctypes only, no dependency).

- `tie_to_parent()`: die with the parent (PR_SET_PDEATHSIG) and refuse to be read or traced by peers
  (PR_SET_DUMPABLE 0: /proc/<pid>/mem, environ, cwd and ptrace need CAP_SYS_PTRACE then).
- `drop_capabilities()`: a candidate process run as root keeps uid 0 but loses every capability, so it
  cannot ptrace or read the memory of the non-dumpable reference process. Call it before any thread
  exists (capabilities are per thread).
- `confine()`: a seccomp filter on every thread (TSYNC) of a candidate process, installed after its
  buffers are mapped and before candidate code runs. It refuses, with EPERM, what would let a candidate
  act outside the calls it is timed on or touch the verdict: new processes and exec, leaving the process
  group, signals to other processes, another process's scheduling, priority, limits or pages (affinity,
  nice), unsetting the parent-death signal, ptrace and cross-process memory
  access, perf events (its own would spend the user's locked-memory budget that the judge's sampling of it
  needs: judge/sampler.py), new sockets, io_uring (which bypasses the filter), and every file-system mutation (open with a
  write flag, creat, rename, unlink, mkdir, chmod, truncate...). Threads stay allowed (torch needs them);
  the reference process watches them through /proc instead.

Why seccomp rather than Landlock or namespaces: seccomp works unprivileged on every kernel kbench meets
(3.17+), while Landlock needs an LSM that many hosts (including the CI box) do not enable, and user
namespaces are often disabled on shared GPU hosts. `confine()` returns False on an architecture whose
syscall table is not below; the result then says `sandbox: none`.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import signal
import struct

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 1, 4, 38, 24
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM, ENOSYS = 1, 38
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
CLONE_THREAD = 0x00010000

_libc = ctypes.CDLL(None, use_errno=True)

# Syscall numbers per architecture: (audit arch, table). "deny" names are refused outright; the others
# are checked on an argument (see _filter).
_X86_64 = {
    "arch": 0xC000003E, "seccomp": 317,
    "deny": dict(fork=57, vfork=58, execve=59, execveat=322, setsid=112, setpgid=109, ptrace=101,
                 process_vm_readv=310, process_vm_writev=311, tkill=200, pidfd_open=434,
                 pidfd_send_signal=424, pidfd_getfd=438, socket=41, io_uring_setup=425, io_uring_enter=426,
                 io_uring_register=427, creat=85, truncate=76, ftruncate=77, fallocate=285, rename=82,
                 renameat=264, renameat2=316, mkdir=83, mkdirat=258, rmdir=84, link=86, linkat=265,
                 unlink=87, unlinkat=263, symlink=88, symlinkat=266, chmod=90, fchmod=91, fchmodat=268,
                 chown=92, fchown=93, lchown=94, fchownat=260, mknod=133, mknodat=259, chroot=161,
                 mount=165, umount2=166, unshare=272, setns=308, open_by_handle_at=304, bpf=321,
                 init_module=175, finit_module=313, delete_module=176, kexec_load=246, reboot=169,
                 iopl=172, ioperm=173, swapon=167, swapoff=168, open_tree=428, move_mount=429, fsopen=430,
                 fsmount=432, perf_event_open=298),
    "enosys": dict(clone3=435, openat2=437),     # ENOSYS: libc falls back to clone / openat, checked below
    "clone": 56, "kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "prctl": 157,
    "open": {2: 1, 257: 2},                      # syscall -> index of its flags argument
    "self_only": dict(sched_setparam=142, sched_setscheduler=144, sched_setaffinity=203, sched_setattr=314,
                      prlimit64=302, migrate_pages=256, move_pages=279),    # first argument: a pid
    "setpriority": 141, "ioprio_set": 251,
}
_AARCH64 = {
    "arch": 0xC00000B7, "seccomp": 277,
    "deny": dict(execve=221, execveat=281, setsid=157, setpgid=154, ptrace=117, process_vm_readv=270,
                 process_vm_writev=271, tkill=130, pidfd_open=434, pidfd_send_signal=424, pidfd_getfd=438,
                 socket=198, io_uring_setup=425, io_uring_enter=426, io_uring_register=427, truncate=45,
                 ftruncate=46, fallocate=47, renameat=38, renameat2=276, mkdirat=34, linkat=37, unlinkat=35,
                 symlinkat=36, fchmod=52, fchmodat=53, fchown=55, fchownat=54, mknodat=33, chroot=51,
                 mount=40, umount2=39, unshare=97, setns=268, open_by_handle_at=265, bpf=280,
                 init_module=105, finit_module=273, delete_module=106, kexec_load=104, reboot=142,
                 swapon=224, swapoff=225, open_tree=428, move_mount=429, fsopen=430, fsmount=432,
                 perf_event_open=241),
    "enosys": dict(clone3=435, openat2=437),
    "clone": 220, "kill": 129, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "prctl": 167,
    "open": {56: 2},
    "self_only": dict(sched_setparam=118, sched_setscheduler=119, sched_setaffinity=122, sched_setattr=274,
                      prlimit64=261, migrate_pages=238, move_pages=239),
    "setpriority": 140, "ioprio_set": 30,
}
TABLES = {"x86_64": _X86_64, "aarch64": _AARCH64}


def _prctl(option: int, arg: int = 0) -> int:
    return _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0)


def set_name(name: str) -> None:
    """/proc/<pid>/comm (ps, top): which kbench process this is, whether exec'd or forked (a fork keeps its
    parent's command line)."""
    _libc.prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)          # PR_SET_NAME


def tie_to_parent(expected_parent: int | None = None) -> None:
    """Get SIGKILL when the parent dies; exit now if it already has (the fork-to-prctl window)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(PR_SET_DUMPABLE, 0)
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)


CAP_SYS_PTRACE = 19


def has_capability(cap: int) -> bool:
    """Whether this process holds `cap` in its effective set (/proc/self/status CapEff)."""
    try:
        with open("/proc/self/status") as f:
            eff = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return False
    return bool(eff >> cap & 1)


def readable_by_parent() -> None:
    """Dumpable again (core dumps off): the judge reads a CPU candidate's outputs with process_vm_readv, which on a
    non-dumpable process needs CAP_SYS_PTRACE, and a non-root user's judge has none: every honest CPU candidate was
    `bad-output` there (session 23). Only where the judge lacks it (judge/handle.py candidate_env): other processes
    of the user may then read this one (as Yama's ptrace scope allows; candidates' filters refuse process_vm_readv,
    not a read-only /proc/<pid>/mem). It holds its own code, inputs and outputs, nothing of the judge's. Never on
    CUDA: a candidate there holds IPC handles to the judge's buffers."""
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _prctl(PR_SET_DUMPABLE, 1)


@contextlib.contextmanager
def not_dumpable():
    """This process unreadable by its children (environ, memory, ptrace) for the duration; then as it was."""
    before = _libc.prctl(3, 0, 0, 0, 0)              # PR_GET_DUMPABLE
    _prctl(PR_SET_DUMPABLE, 0)
    try:
        yield
    finally:
        if before > 0:
            _prctl(PR_SET_DUMPABLE, before)


def drop_capabilities() -> None:
    """Empty the bounding, effective, permitted and inheritable sets (a no-op for an unprivileged user), and no
    real-time or raised priority within the limits either (RLIMIT_RTPRIO, RLIMIT_NICE at 0, hard): a SCHED_FIFO
    candidate thread would hold a core from the judge's threads, the sampler's among them (judge/sampler.py)."""
    import resource
    for limit in (resource.RLIMIT_RTPRIO, resource.RLIMIT_NICE):
        resource.setrlimit(limit, (0, 0))
    for cap in range(64):
        if _prctl(PR_CAPBSET_DROP, cap) != 0:
            break
    header = struct.pack("Ii", 0x20080522, 0)          # _LINUX_CAPABILITY_VERSION_3, this process
    data = bytes(24)                                    # two {effective, permitted, inheritable} u32 triples
    _libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data))


# --- classic BPF, as the kernel's seccomp_data lays it out: nr @0, arch @4, args[i] @16+8i ------------
def _stmt(code, k):
    return struct.pack("HBBI", code, 0, 0, k & 0xFFFFFFFF)


def _jump(code, k, jt, jf):
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


LD, JEQ, JSET, JGE, RET = 0x20, 0x15, 0x45, 0x35, 0x06


def _arg(i: int) -> int:
    return 16 + 8 * i     # low 32 bits (little-endian); the kernel reads pid and flags as 32-bit ints


def _filter(table: dict, pid: int) -> list[bytes]:
    deny, allow = _stmt(RET, RET_ERRNO | EPERM), _stmt(RET, RET_ALLOW)
    prog = [_stmt(LD, 4), _jump(JEQ, table["arch"], 1, 0), deny,       # foreign ABI (int 0x80): refuse
            _stmt(LD, 0), _jump(JGE, 0x40000000, 0, 1), deny]           # x32 ABI: refuse
    for nr in table["deny"].values():
        prog += [_jump(JEQ, nr, 0, 1), deny]
    for nr in table["enosys"].values():
        prog += [_jump(JEQ, nr, 0, 1), _stmt(RET, RET_ERRNO | ENOSYS)]
    # each block: if nr matches, load an argument, decide, else fall through to the next block
    prog += [_jump(JEQ, table["clone"], 0, 4), _stmt(LD, _arg(0)), _jump(JSET, CLONE_THREAD, 0, 1), allow, deny]
    # signals to this process only; the queued ones too (session 19's red team: they reached the judge)
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        prog += [_jump(JEQ, table[name], 0, 4), _stmt(LD, _arg(0)), _jump(JEQ, pid, 0, 1), allow, deny]
    prog += [_jump(JEQ, table["prctl"], 0, 4), _stmt(LD, _arg(0)), _jump(JEQ, PR_SET_PDEATHSIG, 0, 1), deny,
             allow]
    prog += _self_only(table, pid)        # scheduling, priority, limits and pages of this process only
    for nr, argi in table["open"].items():                             # read-only opens only
        prog += [_jump(JEQ, nr, 0, 4), _stmt(LD, _arg(argi)), _jump(JSET, WRITE_FLAGS, 0, 1), deny, allow]
    prog.append(allow)
    return prog


def _self_only(table: dict, pid: int) -> list[bytes]:
    """Scheduling, priority, limits and pages of this process only (0 or its pid; its other threads' ids are
    refused too, which nothing honest needs): session 23's red team pinned the judge's waiting candidate processes
    to one core at nice 19 from inside a timed call, and set limits even of a root judge (prlimit64): within one
    user the kernel allows it to any process without capabilities, as a non-root judge is."""
    deny, allow = _stmt(RET, RET_ERRNO | EPERM), _stmt(RET, RET_ALLOW)
    prog = []
    for nr in table["self_only"].values():
        prog += [_jump(JEQ, nr, 0, 5), _stmt(LD, _arg(0)), _jump(JEQ, 0, 2, 0), _jump(JEQ, pid, 1, 0), deny, allow]
    # setpriority(PRIO_PROCESS = 0, ...) and ioprio_set(IOPRIO_WHO_PROCESS = 1, ...) of itself; never a process
    # group or every process of the user
    for name, which in (("setpriority", 0), ("ioprio_set", 1)):
        prog += [_jump(JEQ, table[name], 0, 7), _stmt(LD, _arg(0)), _jump(JEQ, which, 0, 3), _stmt(LD, _arg(1)),
                 _jump(JEQ, 0, 2, 0), _jump(JEQ, pid, 1, 0), deny, allow]
    return prog


# A build process must fork compilers and write the build cache, so it keeps those; it loses what would let
# it reach other processes: sockets (the warm server: red team, session 12, a build asked it for a reference
# process with the server's capabilities), ptrace and cross-process memory, descriptors of other processes.
BUILD_DENY = ("socket", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "io_uring_setup",
              "io_uring_enter", "io_uring_register", "bpf", "mount", "umount2", "unshare", "setns", "init_module",
              "finit_module", "delete_module", "kexec_load", "reboot", "open_by_handle_at")


def _build_filter(table: dict, pid: int) -> list[bytes]:
    deny, allow = _stmt(RET, RET_ERRNO | EPERM), _stmt(RET, RET_ALLOW)
    prog = [_stmt(LD, 4), _jump(JEQ, table["arch"], 1, 0), deny, _stmt(LD, 0), _jump(JGE, 0x40000000, 0, 1), deny]
    for name in BUILD_DENY:
        prog += [_jump(JEQ, table["deny"][name], 0, 1), deny]
    # (a Triton candidate's import runs here on the CPU, beside the judge: it could pin or limit it)
    prog += _self_only(table, pid)
    prog.append(allow)
    return prog


def _install(code: bytes, table: dict) -> bool:
    buf = ctypes.create_string_buffer(code)
    prog = struct.pack("HxxxxxxP", len(code) // 8, ctypes.addressof(buf))   # struct sock_fprog
    if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
        return False
    rc = _libc.syscall(table["seccomp"], SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                       ctypes.c_char_p(prog))
    if rc != 0:
        raise OSError(ctypes.get_errno(), f"seccomp filter refused ({os.strerror(ctypes.get_errno())})")
    return True


def confine_build() -> bool:
    """The build process's filter (BUILD_DENY), inherited by the compilers it runs; False where unsupported."""
    table = TABLES.get(platform.machine())
    return table is not None and _install(b"".join(_build_filter(table, os.getpid())), table)


def confine() -> bool:
    """Install the candidate filter on every thread of this process; False where unsupported."""
    table = TABLES.get(platform.machine())
    if table is None:
        return False
    return _install(b"".join(_filter(table, os.getpid())), table)

