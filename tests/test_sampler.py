"""The judge's outside view of where a CPU candidate's time goes (judge/sampler.py): real child processes,
really attached with ptrace; the whole pipeline's use of it is in the exploit corpus (test_adversarial.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kernelbench_cli.judge.places import code_maps, place, share
from kernelbench_cli.judge.sampler import Perf, Sampler, perf_refused, process_cpu_ms

TORCH_LOOP = "import torch, sys; x = torch.randn(256, 256); print('up', flush=True)\nwhile True: (x @ x).relu_()"
PYTHON_LOOP = "import sys; print('up', flush=True)\nwhile True: sum(range(1000))"


def _child(code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.stdout.readline().strip() == b"up"
    return proc


def _tracer(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("TracerPid:")).split()[1])


def _sample(pid: int, own_root, seconds: float, before=()) -> Sampler:
    r, w = os.pipe()        # never written: sample for the whole time
    try:
        with Sampler(pid, str(own_root), before) as sampler:
            assert _tracer(pid) == os.getpid()
            sampler.sample_until(r, time.perf_counter() + seconds)
    finally:
        os.close(r)
        os.close(w)
    return sampler


def _perf(pid: int, own_root, seconds: float) -> Perf:
    perf = Perf(pid, str(own_root))
    try:
        perf.enable()
        time.sleep(seconds)
        perf.enable(False)
        perf.pcs_seen = perf.pcs()
        perf.result = perf.share()
    finally:
        perf.close()
    return perf


@pytest.mark.parametrize("how", ["perf", "ptrace"])
@pytest.mark.parametrize("code, expect", [(TORCH_LOOP, "library"), (PYTHON_LOOP, "glue")], ids=["torch", "python"])
def test_the_sampler_finds_where_a_process_runs_and_lets_it_go(tmp_path, code, expect, how):
    proc = _child(code)
    try:
        if how == "perf":
            if perf_refused():
                pytest.skip(f"the kernel refuses perf events here ({perf_refused()}); the judge uses ptrace")
            perf = _perf(proc.pid, tmp_path, 0.4)
            pcs, (share, top) = perf.pcs_seen, perf.result
        else:
            sampler = _sample(proc.pid, tmp_path, 0.4)
            pcs, (share, top) = sampler.pcs, sampler.share()
        assert len(pcs) >= 50, len(pcs)
        if expect == "library":        # torch's matmul: libtorch_cpu (or the BLAS it links), never own code
            assert share == 0.0 and "libtorch_cpu" in top and "threads started" not in top, top
        else:                          # the interpreter is glue: nothing to attribute
            assert share is None and "too few" in top, top
        assert _tracer(proc.pid) == 0 and proc.poll() is None     # detached, and still running
        before = process_cpu_ms(proc.pid)
        time.sleep(0.2)
        assert process_cpu_ms(proc.pid) > before                       # ... not left stopped
    finally:
        proc.kill()
        proc.wait()


def test_places_of_sampled_code(tmp_path):
    own = tmp_path / "cache"
    (own / "ext-abc").mkdir(parents=True)
    assert place(str(own / "ext-abc" / "ext.so"), os.path.join(os.path.realpath(own), "")) == "own"
    root = os.path.join(os.path.realpath(own), "")
    for glue in ("/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/python3.11", "/x/libpython3.11.so.1.0",
                 "/site-packages/torch/lib/libgomp-a34b3233.so.1", "/site-packages/torch/lib/libc10.so",
                 "/site-packages/torch/lib/libtorch_python.so", "[vdso]", "/lib/ld-linux-x86-64.so.2"):
        assert place(glue, root) == "glue", glue
    for library in ("/site-packages/torch/lib/libtorch_cpu.so", "/site-packages/numpy/core/_multiarray_umath.so",
                    "", "/memfd:code (deleted)", str(tmp_path / "elsewhere" / "ext.so"),
                    str(own) + "-sibling/ext.so", f"/memfd:x/..{root}ext-abc/jit (deleted)",
                    f"{root}ext-abc/ext.so (deleted)", f"{root}../elsewhere/ext.so",
                    f"{root}ext-abc/nl\\012x/ext.so"):     # (red team, session 35: a newline in the name)
        assert place(library, root) == "library", library


# The child rewrites (with the same bytes) every page of the interpreter's code: that code is now written.
WRITTEN_LOOP = """import ctypes, os, sys
if len(sys.argv) > 1:      # the judge's baseline first
    print('up', flush=True)
    sys.stdin.readline()
libc = ctypes.CDLL(None)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
for line in list(open('/proc/self/maps')):
    p = line.split()
    if len(p) > 5 and p[1] == 'r-xp' and os.path.basename(p[5]).startswith(('python', 'libpython')):
        lo, hi = (int(v, 16) for v in p[0].split('-'))
        assert libc.mprotect(lo, hi - lo, 7) == 0
        for page in range(lo, hi, 4096):
            ctypes.memmove(page, ctypes.string_at(page, 8), 8)
        libc.mprotect(lo, hi - lo, 5)
print('up', flush=True)
while True: sum(range(1000))"""


@pytest.mark.parametrize("baseline", [False, True], ids=["written", "written-after-the-baseline"])
def test_code_written_at_run_time_is_not_its_files(tmp_path, baseline):
    """Library code copied into the candidate's own library's pages would count as its own: a file's code
    pages written at run time count as library code wherever they are (here the interpreter's, glue before).
    Also where that code was mapped before the import, whose place is otherwise kept (red team, session 24:
    numpy's add loop copied over a function of libtorch_python ran as glue)."""
    if baseline:
        proc = subprocess.Popen([sys.executable, "-c", WRITTEN_LOOP, "wait"], stdout=subprocess.PIPE,
                                stdin=subprocess.PIPE)
        assert proc.stdout.readline().strip() == b"up"
        before = code_maps(proc.pid)
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
    else:
        proc, before = _child(WRITTEN_LOOP), ()
    try:
        if baseline:
            assert proc.stdout.readline().strip() == b"up"
        sampler = _sample(proc.pid, tmp_path, 0.4, before)
        share, top = sampler.share()
        assert share == 0.0 and "code written at run time" in top, top
    finally:
        proc.kill()
        proc.wait()


THREADED_LOOP = """import threading, torch
x = torch.randn(256, 256)
print('up', flush=True)
while True:
    t = threading.Thread(target=lambda: [(x @ x).relu_() for _ in range(20)])
    t.start()
    t.join()"""


def test_work_in_threads_started_after_the_events_counts_as_library(tmp_path):
    """No event covers a thread started after the events were opened (a thread started and joined inside one
    call): its CPU time, the process's less what the events counted, is library time."""
    if perf_refused():
        pytest.skip(f"the kernel refuses perf events here ({perf_refused()})")
    proc = _child(THREADED_LOOP)
    try:
        share, top = _perf(proc.pid, tmp_path, 0.6).result
        assert share is not None and share < 0.1 and "[threads started since]" in top, top
    finally:
        proc.kill()
        proc.wait()


PERF_IN_SANDBOX = """import sys
from kernelbench_cli import sandbox
from kernelbench_cli.judge.sampler import perf_refused
before = perf_refused()
if not sandbox.confine():
    print("unsupported"); sys.exit()
print(before is None, "|", perf_refused())"""


def test_a_confined_candidate_cannot_open_perf_events():
    """Its own perf buffers would spend the user's locked-memory budget, and a judge refused its events falls
    back to ptrace, which a candidate can tell (docs/integrity.md)."""
    if perf_refused():
        pytest.skip(f"the kernel refuses perf events here ({perf_refused()})")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", PERF_IN_SANDBOX], capture_output=True, text=True, timeout=120,
                          cwd=root, env=dict(os.environ, PYTHONPATH=root))
    if proc.stdout.strip() == "unsupported":
        pytest.skip("no seccomp filter for this machine")
    assert proc.stdout.strip() == "True | perf events refused (Operation not permitted)", (proc.stdout, proc.stderr)


MAPPING_LOOP = """import mmap, sys
f = open(sys.executable, 'rb')
print('up', flush=True)
while True:
    mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE).close()
    sum(range(10000))"""


def test_code_mapped_while_sampled_is_library(tmp_path):
    """The places are read once, after the samples: a candidate mapped numpy's code at an address for each call
    and a file of its own cache over it before returning (red team, session 24). The kernel records every
    executable mapping a sampled thread makes, and samples there are library whatever is mapped at the end."""
    if perf_refused():
        pytest.skip(f"the kernel refuses perf events here ({perf_refused()})")
    proc = _child(MAPPING_LOOP)
    try:
        perf = Perf(proc.pid, str(tmp_path))
        try:
            perf.enable()
            time.sleep(0.3)
            perf.enable(False)
            perf.drain()
            mapped = perf.mapped
        finally:
            perf.close()
        assert len(mapped) > 10 and all(hi - lo == 4096 for lo, hi in mapped), mapped[:3]
    finally:
        proc.kill()
        proc.wait()
    lo, hi, path = next(m for m in code_maps(os.getpid()) if m[2] and place(m[2], str(tmp_path) + "/") == "glue")
    samples = [(ms * 1000, 1, lo) for ms in range(40)]
    assert share(samples, os.getpid(), str(tmp_path) + "/", [], 0, [(lo, hi)]) == \
        (0.0, f"{os.path.basename(path)} (mapped during its calls) 100% of 40 samples; its own code alone in 0 of 40 ms")
    assert share(samples, os.getpid(), str(tmp_path) + "/", [], 0, [])[0] is None      # glue, unmapped


SPIN_C = "void spin(double s) { volatile double a = 1; for (long i = 0; i < (long)(s * 4e8); ++i) a = a * 1.0000001; }"
BESIDE_LOOP = """import ctypes, sys, threading, torch
own = ctypes.CDLL(sys.argv[1])
own.spin.argtypes = [ctypes.c_double]
x = torch.randn(256, 256)
def pad():
    while True: own.spin(0.05)
threading.Thread(target=pad, daemon=True).start()
print('up', flush=True)
while sys.argv[2] == 'beside': (x @ x).relu_()
threading.Event().wait()"""


@pytest.mark.parametrize("how", ["perf", "ptrace"])
def test_its_own_code_beside_torchs_on_another_core_is_not_custom_work(tmp_path, how):
    """Session 34's red team (`parallel_pad`): torch's work on one thread, a spin of its own code on the otherwise
    idle core: counted in CPU time, own code half the time (63% with a longer spin) at no cost in wall time. The
    share is of wall time: a ms in which any thread ran library code is library. The spin alone is its own."""
    if how == "perf" and perf_refused():
        pytest.skip(f"the kernel refuses perf events here ({perf_refused()}); the judge uses ptrace")
    cache = tmp_path / "cache" / "ext-pad"
    cache.mkdir(parents=True)
    (tmp_path / "spin.c").write_text(SPIN_C)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(cache / "pad.so"), str(tmp_path / "spin.c")], check=True)
    for mode, low, high in (("beside", 0.0, 0.25), ("alone", 0.9, 1.0)):
        proc = subprocess.Popen([sys.executable, "-c", BESIDE_LOOP, str(cache / "pad.so"), mode],
                                stdout=subprocess.PIPE, env=dict(os.environ, OMP_NUM_THREADS="1"))
        assert proc.stdout.readline().strip() == b"up"
        try:
            got = _perf(proc.pid, tmp_path / "cache", 0.6).result if how == "perf" else \
                _sample(proc.pid, tmp_path / "cache", 0.6).share()
        finally:
            proc.kill()
            proc.wait()
        assert got[0] is not None and low <= got[0] <= high and "pad.so" in got[1], (mode, got)


COPY_C = """asm(".pushsection .text\\n.balign 4096\\n.globl copy_start\\ncopy_start:\\n.incbin \\"%s\\",%d,65536\\n.popsection\\n");
extern char copy_start[];
char* copy_at(void) { return copy_start; }
void spin(double s) { volatile double a = 1; for (long i = 0; i < (long)(s * 4e8); ++i) a = a * 1.0000001; }"""
COPY_LOOP = """import ctypes, sys, torch
own = ctypes.CDLL(sys.argv[1])
own.copy_at.restype = ctypes.c_void_p
print(own.copy_at(), ctypes.cast(own.spin, ctypes.c_void_p).value, flush=True)
sys.stdin.readline()"""


def test_own_code_that_is_a_librarys_code_byte_for_byte_is_found(tmp_path):
    """Session 35's red team put libtorch_cpu's code into its own extension (.incbin) and ran torch's loop from the
    copy, as its own. 64 KB of libtorch_cpu's code embedded in a .so of its own the same way: every pc in the copy
    is found in libtorch_cpu, a pc in its own compiled function is not."""
    import random
    import torch
    from kernelbench_cli.judge.copies import _code_segments, copied
    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    offset, size = _code_segments(lib)[0]
    start = offset + size // 2 // 4096 * 4096           # somewhere in the middle of its code
    (tmp_path / "copy.c").write_text(COPY_C % (lib, start))
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(tmp_path / "copy.so"), str(tmp_path / "copy.c")],
                   check=True)
    proc = subprocess.Popen([sys.executable, "-c", COPY_LOOP, str(tmp_path / "copy.so")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        base, spin = map(int, proc.stdout.readline().split())
        inside = [base + 64 + random.randrange(65536 - 128) for _ in range(20)]
        found = copied(proc.pid, inside + [spin + 8], [lib])
    finally:
        proc.kill()
        proc.wait()
    padding = [pc for pc in inside if pc not in found]      # (only a window of nops or zeros may go unmatched)
    assert len(padding) <= 2 and set(found.values()) == {"a copy of libtorch_cpu.so's code"}, (found, padding)
    assert spin + 8 not in found
