"""Where a sampled program counter of a candidate's thread lies (judge/sampler.py takes the samples), and the
share of its time that its own code takes.

Each sample is one thread found running. Its place is counted as
- own: a library under the extension cache (what kbench compiled from the candidate's sources);
- glue (counted nowhere): the interpreter and its standard library's C modules, the C and C++ runtimes, OpenMP's
  runtime (its waiting threads spin there), and torch's binding and allocator layers (libtorch_python, libc10):
  what any call through torch pays, and kbench's own messages in the candidate process;
- library: everything else, torch's operators (libtorch_cpu) and the math libraries first, code in memory no
  file backs, and a file's code pages written at run time (library code copied into the candidate's own pages).
The share is of wall time (`share`): the time in which only its own code ran, over that in which its own or
library code ran.
"""
from __future__ import annotations

import os
import re
from collections import Counter

from .copies import copied

MIN_SAMPLES = 30        # own + library: fewer say nothing
REACH_US = 1500         # how far from its moment a sample stands for its thread (`_wall`)
GLUE = re.compile(r"(^|/)(python[\d.]*|libpython[\d.]*\.so.*|ld-linux[^/]*|ld-musl[^/]*|lib(c|m|dl|rt|pthread|util)"
                  r"(-[\d.]+)?\.so[\d.]*|libstdc\+\+\.so[\d.]*|libgcc_s\.so[\d.]*|lib[gi]omp[\w.-]*\.so[\d.]*"
                  r"|libc10\.so|libtorch_python\.so|libshm\.so|\[vdso\]|\[vsyscall\])$"
                  r"|/lib-dynload/[^/]+\.so$")     # (the standard library's C modules: the candidate process's messages)


def place(path: str, own_root: str) -> str:
    """own | glue | library for the file mapped at a sampled program counter ("" for anonymous memory). The
    name is the kernel's, taken as it is: a memfd's is the candidate's choice ("/memfd:x/../<cache>/..."; red
    team, session 24), and a deleted file's is no file's."""
    if not path.startswith("/") or path.startswith("/memfd:") or path.endswith(" (deleted)") or "/../" in path \
            or "\\" in path:         # (/proc writes a newline in a name as \012: not the file of that name)
        return "glue" if path in ("[vdso]", "[vsyscall]") else "library"
    if path.startswith(own_root):
        return "own" if path.endswith(".so") else "library"     # (not an object file or ninja's: main.o)
    return "glue" if GLUE.search(path) else "library"


def root_of(own_root: str) -> str:
    """The extension cache as the kernel names its files: resolved, with a trailing separator."""
    return os.path.join(os.path.realpath(own_root), "")


def share(samples: list[tuple[int, int, int]], pid: int, own_root: str, before: list, unsampled: int = 0,
          mapped: list = ()) -> tuple[float | None, str]:
    """(own / (own + library), the largest places), or (None, why), for (us, thread, program counter) samples of
    `pid`'s threads, and `unsampled` ms of CPU time in threads no event sampled (library).

    The share is of wall time, not CPU time: time in which any thread ran library code is library, time in
    which only its own code ran (and glue) is its own (`_wall`). Counted in CPU time, torch's work on one thread
    beside a spin of its own on the otherwise idle core passed as 63% custom work, at no cost in wall time
    (session 34's red team, `parallel_pad`); in wall time the spin must follow the library's work, as long as
    it, as on one core.

    Code mapped before the candidate's import (`before`, code_maps at the ready) must still be that file's,
    unwritten: the candidate's own file mapped over torch's pages, holding torch's bytes at torch's addresses,
    ran as its own, and numpy's add loop copied over an unused function of libtorch_python ran as glue (red
    team, session 24); any other mapping there, or written pages anywhere, count as library. A file of its own
    mapped executable more than once is not what the loader made of it, and counts as library too. So does
    code at addresses mapped while it was sampled (`mapped`): the places are read once, at the end, and a
    candidate mapped numpy's code there for each call and a file of its own cache over it before returning
    (red team, session 24). Own code that is a library's code byte for byte is library (judge/copies.py)."""
    maps = _maps(pid)
    times = Counter(p for _, _, p, _ in maps if place(p, own_root) == "own")
    kinds, per = Counter(library=unsampled), Counter({"[threads started since]": unsampled} if unsampled else {})
    placed = []
    for moment, tid, pc in samples:
        path, written = next(((p, w) for lo, hi, p, w in maps if lo <= pc < hi), ("", False))
        old = next((p for lo, hi, p in before if lo <= pc < hi), None)
        kind = place(path, own_root)
        why = " (code written at run time)" if written else \
            " (mapped during its calls)" if any(lo <= pc < hi for lo, hi in mapped) else \
            f" (mapped over {os.path.basename(old) or 'code'})" if old is not None and old != path else \
            " (mapped again)" if kind == "own" and times[path] > 1 else ""
        placed.append((moment, tid, pc, path, "library" if why else kind, why))
    libraries = sorted({p for _, _, p, _ in maps if place(p, own_root) == "library" and os.path.isfile(p)})
    copies = copied(pid, [pc for _, _, pc, _, kind, _ in placed if kind == "own"], libraries)
    seen = []
    for moment, tid, pc, path, kind, why in placed:
        if kind == "own" and pc in copies:
            kind, why = "library", f" ({copies[pc]})"
        kinds[kind] += 1
        seen.append((moment, tid, kind))
        if kind != "glue":
            per[(os.path.basename(path) or "[anonymous]") + why] += 1
    counted = kinds["own"] + kinds["library"]
    if counted < MIN_SAMPLES:
        return None, f"{counted} samples in compiled code (of {len(samples)}): too few to attribute"
    alone, library = _wall(seen)
    # a thread no event sampled ran library code then, as far as anyone can show: beside its own code on another
    # core that is not own time alone (red team, session 35: torch in a thread started per call, its own spin
    # meanwhile, 0.59 own)
    alone, library = max(0.0, alone - unsampled * 1000), library + unsampled * 1000
    top = ", ".join(f"{name} {n / counted:.0%}" for name, n in per.most_common(3))
    return alone / max(1, alone + library), f"{top} of {counted} samples; its own code alone in " \
                                             f"{alone / 1e3:.0f} of {(alone + library) / 1e3:.0f} ms"


def _wall(seen: list[tuple[int, int, str]]) -> tuple[float, float]:
    """(us in which its own code alone ran, us in which library code ran on any thread). Each sample stands for
    its thread's time up to half-way to that thread's samples before and after it, at most REACH_US either side
    (REACH_US / 2 past its first and last; samples come once per ms of a running thread's time, at random:
    judge/sampler.py)."""
    threads: dict[int, list] = {}
    for moment, tid, kind in sorted(seen):
        threads.setdefault(tid, []).append((moment, kind))
    edges = []
    for row in threads.values():
        for k, (t, kind) in enumerate(row):
            if kind != "glue":
                lo = t - REACH_US / 2 if k == 0 else max(t - REACH_US, (row[k - 1][0] + t) / 2)
                hi = t + REACH_US / 2 if k + 1 == len(row) else min(t + REACH_US, (t + row[k + 1][0]) / 2)
                edges += [(lo, kind, 1), (hi, kind, -1)]
    alone = library = 0.0
    running, last = Counter(), None
    for at, kind, step in sorted(edges):
        if last is not None:
            if running["library"]:
                library += at - last
            elif running["own"]:
                alone += at - last
        running[kind] += step
        last = at
    return alone, library


def code_maps(pid: int) -> list[tuple[int, int, str]]:
    """The executable mappings of `pid` as /proc/<pid>/maps lists them (cheaper than smaps): (start, end, name)."""
    out = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) >= 2 and "x" in parts[1]:
                    lo, hi = (int(v, 16) for v in parts[0].split("-"))
                    out.append((lo, hi, parts[5].rstrip("\n") if len(parts) > 5 else ""))
    except (OSError, ValueError):
        pass
    return out


def _maps(pid: int) -> list[tuple[int, int, str, bool]]:
    """The executable mappings of `pid`: (start, end, file, written). A file's code written to at run time (its
    pages made writable and changed: they are anonymous copies now) is not the file's any more: code copied
    out of a library into the candidate's own library's pages would otherwise count as its own."""
    out: list = []
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split(maxsplit=5)
                if len(head) >= 5 and "-" in head[0] and not head[0].endswith(":"):
                    if len(head[1]) == 4 and "x" in head[1]:
                        lo, hi = (int(v, 16) for v in head[0].split("-"))
                        out.append([lo, hi, head[5].rstrip("\n") if len(head) > 5 else "", False])
                    else:
                        out.append(None)
                elif head and head[0] == "Anonymous:" and out and out[-1] is not None and out[-1][2]:
                    out[-1][3] = int(head[1]) > 0
    except (OSError, ValueError):
        pass
    return [tuple(m) for m in out if m is not None]
