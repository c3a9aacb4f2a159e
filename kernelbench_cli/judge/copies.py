"""Own code that is a library's code, byte for byte (judge/places.py asks, for the program counters sampled in
the candidate's own extension).

"Own" is a place: a `.so` under the extension cache, built by kbench's compiler from the candidate's sources. The
sources can carry another file's bytes: session 35's red team put libtorch_cpu's whole code into its extension
(`asm(".incbin ...")`, the trusted compiler reads the file) and called torch's fused add-clamp loop at its address
in the copy: ok, no flag, 0.95 own, 1.37x. The import can paste the bytes into the source as well, so no source
rule closes it; the bytes do. For each distinct sampled pc, the WINDOW bytes around it (read from the candidate's
memory: a file read by the name /proc gives was another file's, or none, where the name held a newline) are looked up in the executable segments of the library files mapped in the candidate process:
every 16-byte gram at an 8-byte step of the library is hashed (torch, in chunks), filtered through a bitmap of
the window's grams at every byte offset, and each exact gram hit is grown byte by byte into the longest run the
library and the window share there; a window half covered by such runs is a copy. A piece of a copy at least 23
bytes long holds one such gram whatever its alignment, so a copy cut into pieces joined by jumps is found too
while its pieces are that long.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import random
import struct
import warnings

import torch

from ..channel import read_process_memory

WINDOW, GRAM, MAX_PCS = 64, 16, 8192
COPIED = 0.75                   # of a window's bytes in runs the library holds: a copy (cut into pieces, too)
CHUNK = 1 << 23                 # library words hashed at a time (64 MB)
BITS = (1 << 24) - 1            # the filter's bitmap, 16 MB
M1, M2 = -7046029254386353131, 0x2545F4914F6CDD1D       # odd multipliers of a gram's two words (wrapping)


def _signed(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def _hash(a: int, b: int) -> int:
    return _signed(a * M1 + b * M2)


def _file_maps(pid: int) -> list[tuple[int, int, int, str]]:
    """(start, end, file offset, file) of `pid`'s executable file mappings."""
    out = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and "x" in parts[1] and parts[5].startswith("/"):
                    lo, hi = (int(v, 16) for v in parts[0].split("-"))
                    out.append((lo, hi, int(parts[2], 16), parts[5].rstrip("\n")))
    except (OSError, ValueError):
        pass
    return out


def _windows(pid: int, pcs: list[int]) -> dict[int, bytes]:
    """The WINDOW bytes around each pc as mapped in `pid` (process_vm_readv: what runs, whatever the file on disk
    holds now or its name says), within the mapping that holds the pc; none where they cannot be read."""
    maps, out = _file_maps(pid), {}
    buf = ctypes.create_string_buffer(WINDOW)
    for pc in pcs:
        for lo, hi, _, _ in maps:
            if lo <= pc < hi and hi - lo >= WINDOW:
                try:
                    read_process_memory(pid, max(lo, min(pc - WINDOW // 2, hi - WINDOW)), WINDOW,
                                        ctypes.addressof(buf))
                    out[pc] = buf.raw
                except OSError:
                    pass
                break
    return out


def _code_segments(path: str) -> list[tuple[int, int]]:
    """(file offset, size) of an ELF file's executable PT_LOAD segments."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:
                return []
            phoff, (phentsize, phnum) = struct.unpack_from("<Q", head, 32)[0], struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except (OSError, struct.error):
        return []
    segments = []
    for i in range(phnum):
        kind, flags, offset, _, _, size = struct.unpack_from("<IIQQQQ", table, i * phentsize)
        if kind == 1 and flags & 1 and size:
            segments.append((offset, size))
    return segments


def copied(pid: int, pcs: list[int], libraries: list[str]) -> dict[int, str]:
    """{pc: why it is not its own code} for those of `pcs` whose WINDOW bytes around them are in one of
    `libraries`' code, byte for byte, or could not be read, or were not looked at (beyond MAX_PCS distinct pcs, a
    random MAX_PCS are: red team, session 35, filled the first by address with a sled of its own)."""
    distinct = list(set(pcs))
    random.shuffle(distinct)
    windows = _windows(pid, distinct[:MAX_PCS])
    unread = {pc: "code the judge could not read" for pc in distinct[:MAX_PCS] if pc not in windows}
    unread.update({pc: "code the judge did not look at" for pc in distinct[MAX_PCS:]})
    grams: dict[int, list[tuple[int, int]]] = {}
    for pc, data in windows.items():
        for off in range(WINDOW - GRAM + 1):
            if len(set(data[off:off + GRAM])) >= 4:         # (not padding: a run of nops or zeros is anyone's)
                a, b = struct.unpack_from("<qq", data, off)
                grams.setdefault(_hash(a, b), []).append((pc, off))
    found: dict[int, str] = unread
    if not grams:
        return found
    wanted = torch.tensor(sorted(grams), dtype=torch.int64)
    bitmap = torch.zeros(BITS + 1, dtype=torch.bool)
    bitmap[wanted & BITS] = True
    for path in libraries:
        for seg_offset, size in _code_segments(path):
            try:
                with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    _scan(mm, seg_offset, size, grams, wanted, bitmap, windows, found, os.path.basename(path))
            except (OSError, ValueError):
                continue
    return found


def _scan(mm, seg_offset: int, size: int, grams: dict, wanted, bitmap, windows: dict, found: dict, name: str) -> None:
    """The grams of one code segment at an 8-byte step, chunk by chunk (a gram may span two chunks: each chunk
    reads one word past its end); a window is a copy where the library holds runs covering COPIED of it."""
    covered: dict[int, bytearray] = {}
    start = (seg_offset + 7) // 8 * 8
    words = (seg_offset + size - start) // 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # (a read-only buffer: torch warns, and only reads it)
        for first in range(0, max(0, words - 1), CHUNK):
            count = min(CHUNK + 1, words - first)
            w = torch.frombuffer(mm, dtype=torch.int64, count=count, offset=start + 8 * first)
            h = w[:-1] * M1
            h += w[1:] * M2
            near = bitmap[h & BITS].nonzero().flatten()
            hits = near[torch.isin(h[near], wanted)]
            for j in hits.tolist():
                at = start + 8 * (first + j)
                for pc, off in grams.get(int(h[j]), ()):
                    _cover(mm, at, windows[pc], off, covered.setdefault(pc, bytearray(WINDOW)))
            del w, h
    for pc, marks in covered.items():
        if pc not in found and sum(marks) >= COPIED * WINDOW:
            found[pc] = f"a copy of {name}'s code"


def _cover(mm, at: int, window: bytes, off: int, marks: bytearray) -> None:
    """Marks the window's bytes in the longest run around its gram at `off` that the library holds around `at`."""
    if mm[at:at + GRAM] != window[off:off + GRAM]:
        return                                          # (a hash collision)
    lo, hi = off, off + GRAM
    while lo > 0 and at - (off - lo) - 1 >= 0 and mm[at - (off - lo) - 1] == window[lo - 1]:
        lo -= 1
    while hi < WINDOW and at + (hi - off) < len(mm) and mm[at + (hi - off)] == window[hi]:
        hi += 1
    marks[lo:hi] = b"\x01" * (hi - lo)
