"""The wire between kbench's processes: one typed message each way, and tensors mapped once per job.

Messages are length-prefixed JSON over a Unix socket (file descriptors ride along with SCM_RIGHTS).
JSON, never pickle, is what a trusted process reads from an untrusted one: unpickling a candidate's
bytes would run its code in the judge. Tensors never travel in messages. The reference process maps
buffers once per job and says where they are: on the CPU a sealed memfd per tensor (the candidate
cannot shrink it under the judge), on CUDA an IPC handle made by torch.multiprocessing (pickled by the
judge, unpickled only by the candidate, which trusts the judge). Sending a CUDA tensor per call would
cost ~1 ms (the IPC handle open/close) against ~0.07 ms for a plain message; see docs/architecture.md.
"""
from __future__ import annotations

import base64
import ctypes
import dataclasses
import fcntl
import io
import json
import mmap
import os
import pickle
import socket
import struct
from dataclasses import dataclass, field

MAX_UNTRUSTED_MESSAGE = 1 << 20     # bytes a trusted reader accepts in one message from a candidate



MAX_FDS = 253     # descriptors one message can carry (the kernel's SCM_MAX_FD)

class ChannelClosed(EOFError):
    """The peer closed its end or died."""


class Channel:
    def __init__(self, sock: socket.socket, limit: int | None = None):
        self.sock, self.limit = sock, limit

    @classmethod
    def pair(cls) -> tuple["Channel", socket.socket]:
        """(our end, the socket to hand to the child as an inheritable fd)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        theirs.set_inheritable(True)
        return cls(ours), theirs

    @classmethod
    def from_fd(cls, fd: int, limit: int | None = None) -> "Channel":
        return cls(socket.socket(fileno=fd), limit)

    def send(self, msg, fds: list[int] = ()) -> None:
        data = json.dumps(msg if isinstance(msg, dict) else dataclasses.asdict(msg)).encode()
        header = struct.pack("<I", len(data))
        if fds:
            socket.send_fds(self.sock, [header], list(fds))
            self.sock.sendall(data)
        else:
            self.sock.sendall(header + data)

    def _read(self, n: int, fds: list) -> bytes:
        chunks, got = [], 0
        while got < n:
            if not fds and got == 0:
                data, new_fds, _, _ = socket.recv_fds(self.sock, n, MAX_FDS)
                fds.extend(new_fds)
            else:
                data = self.sock.recv(n - got)
            if not data:
                raise ChannelClosed("peer closed the channel")
            chunks.append(data)
            got += len(data)
        return b"".join(chunks)

    def recv(self, timeout: float | None = None) -> tuple[dict, list[int]]:
        self.sock.settimeout(timeout)
        fds: list[int] = []
        try:
            (size,) = struct.unpack("<I", self._read(4, fds))
            if self.limit is not None and size > self.limit:
                raise ValueError(f"message of {size} bytes exceeds the {self.limit}-byte limit")
            msg = json.loads(self._read(size, fds))
            if not isinstance(msg, dict):
                raise ValueError("message is not a JSON object")
        except BaseException as e:
            for fd in fds:          # (a peer's descriptors are never kept from a failed read)
                os.close(fd)
            if isinstance(e, (ConnectionResetError, BrokenPipeError)):
                raise ChannelClosed(str(e)) from None
            raise
        return msg, fds

    def close(self) -> None:
        self.sock.close()


# --- reading a frozen candidate's memory ------------------------------------------------------------

class _IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)


def read_process_memory(pid: int, address: int, nbytes: int, into_address: int) -> None:
    """Copy `nbytes` at `address` in process `pid` (a child of ours, frozen) to `into_address` here:
    process_vm_readv, so reading a CPU candidate's output costs the candidate nothing and happens while it
    cannot run. Raises OSError if the range is not mapped in that process."""
    done, chunk = 0, 1 << 30
    while done < nbytes:
        n = min(chunk, nbytes - done)
        local, remote = _IOVec(into_address + done, n), _IOVec(address + done, n)
        got = _libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got <= 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot read the candidate's output memory ({os.strerror(err)})")
        done += got


# --- typed messages ---------------------------------------------------------------------------------

def from_message(cls, msg: dict):
    """Build dataclass `cls` from a received dict, keeping only its fields and checking their JSON types
    (a peer's message is input, not trusted structure)."""
    kinds = {int: (int,), float: (int, float), str: (str,), bool: (bool,), list: (list,), dict: (dict,)}
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in msg or msg[f.name] is None:
            continue
        v = msg[f.name]
        base = f.type if isinstance(f.type, type) else {"int": int, "float": float, "str": str, "bool": bool,
                                                         "list": list, "dict": dict}.get(str(f.type).split(" ")[0])
        if base in kinds and (not isinstance(v, kinds[base]) or (base is not bool and isinstance(v, bool))):
            raise ValueError(f"{cls.__name__}.{f.name}: expected {base.__name__}, got {type(v).__name__}")
        values[f.name] = float(v) if base is float else v
    return cls(**values)


# The clock canary's lengths (CUDA, GPU cycles of a spin kernel: ~2 us to ~0.13 ms on the H200): the judge draws
# one per batch in secret, so a hook that reads short only on intervals of some length cannot spare the canary
# by its length. CANARY_PAD: an untimed spin first, so that the host has queued the timed one before the device
# reaches it (else its interval holds launch gaps: session 16 measured 0.03 ms for a 3 us canary mid-batch).
CANARY_SIZES = (1 << 12, 1 << 14, 1 << 16, 1 << 18)
CANARY_PAD = 1 << 16


@dataclass
class Reply:
    """Everything a candidate process may say, in one shape; the judge believes none of it blindly."""
    op: str = ""                 # ready | loaded | done | profiled | error
    ok: bool = True
    nonce: int = 0               # the request's: a reply written before its request cannot know it
    status: str = ""             # on error: a Result status (import-error, bad-constructor, runtime-error...)
    message: str = ""
    ms: float = 0.0              # a stand-in's own time (pings)
    canary: float = -1.0         # kbench's own fixed work after the batch, on this process's clock (clocks.py)
    times: list = field(default_factory=list)     # the candidate's own clock, per call of the batch
    flush_ms: list = field(default_factory=list)  # CUDA: each flush after a call, the same clock (op_call)
    cpu_ms: list = field(default_factory=list)    # CPU, a ping: [main thread's, all threads'] CPU ms in the calls
    each: list = field(default_factory=list)      # per call: [outputs, mismatch]; outputs: per tensor [shape,
    #                                               dtype, plain, aliases, address, stride, span bytes] (CPU: the
    #                                               judge reads the tensor from there); mismatch: why the outputs
    #                                               do not fit the output slots
    addresses: list = field(default_factory=list)  # map: [start, end) of each input slot in this process
    calls: int = 0               # calls into the candidate's compiled functions so far
    build: dict = field(default_factory=dict)
    weights: str = ""
    custom_share: float = -1.0
    top: str = ""
    sandbox: str = ""
    diag: list = field(default_factory=list)      # CUDA, a batch: [device span from before the hold to after the
    #                                               copies, host ms from receipt to: all queued, delivered, synced]
    #                                               (where a batch's time beyond its calls goes; only reported)


# --- tensors mapped once per job --------------------------------------------------------------------

@dataclass
class TensorSpec:
    shape: list
    stride: list
    offset: int                  # storage offset, in elements
    dtype: str                   # "float32", ...
    nbytes: int                  # bytes of the storage the view needs
    handle: str = ""             # CUDA: base64 of a ForkingPickler dump of the device tensor


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _storage_bytes(t) -> int:
    if t.numel() == 0:
        return t.element_size()
    span = sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1
    return (t.storage_offset() + span) * t.element_size()


class SharedTensors:
    """Judge side: device or shared-memory tensors shaped like `templates`, and the specs (plus fds on the
    CPU) that let a candidate process map the same memory. With room > 1 each tensor is the start of a
    storage `room` times its size (the layout trials' views of lane 0 need it)."""

    def __init__(self, templates: list, device: str, room: int = 1):
        import torch
        self.device, self.tensors, self.specs, self.fds, self._maps = device, [], [], [], []
        # CUDA IPC shares a whole allocator segment: the slots get a memory pool of their own, so no other
        # tensor of the judge (reference outputs, pristine inputs) can sit in memory a candidate maps.
        self.pool = torch.cuda.MemPool() if device == "cuda" else None
        for tpl in templates:
            if device == "cuda":
                with torch.cuda.use_mem_pool(self.pool):
                    n = _storage_bytes(tpl.as_strided(tpl.shape, tpl.stride(), 0)) // tpl.element_size()
                    t = torch.empty(room * n, dtype=tpl.dtype, device="cuda").as_strided(tpl.shape, tpl.stride(), 0)
                buf = io.BytesIO()
                import torch.multiprocessing  # noqa: F401  (registers torch's reductions with ForkingPickler)
                from multiprocessing.reduction import ForkingPickler
                ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(t)
                handle = base64.b64encode(buf.getvalue()).decode()
                self.specs.append(dataclasses.asdict(TensorSpec(list(t.shape), list(t.stride()), t.storage_offset(),
                                                                dtype_name(t.dtype), _storage_bytes(t), handle)))
            else:   # contiguous on the CPU: strided layouts are made by the caller as views
                spec = TensorSpec(list(tpl.shape), list(torch.empty(tpl.shape).stride()), 0, dtype_name(tpl.dtype),
                                  max(room * tpl.numel() * tpl.element_size(), 1))
                fd = os.memfd_create("kbench-slot", os.MFD_ALLOW_SEALING)
                os.ftruncate(fd, spec.nbytes)
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
                t, mm = map_cpu(fd, spec)
                self._maps.append(mm)
                self.fds.append(fd)
                self.specs.append(dataclasses.asdict(spec))
            self.tensors.append(t)

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def map_cpu(fd: int, spec: TensorSpec):
    import torch
    mm = mmap.mmap(fd, spec.nbytes)
    dtype = getattr(torch, spec.dtype)
    count = spec.nbytes // torch.empty((), dtype=dtype).element_size()
    flat = torch.frombuffer(mm, dtype=dtype, count=count) if count else torch.empty(0, dtype=dtype)
    return flat.as_strided(spec.shape, spec.stride, spec.offset), mm


def map_specs(specs: list[dict], fds: list[int], device: str) -> list:
    """Candidate side: the tensors a judge's SharedTensors describe (fds in the same order on the CPU)."""
    out, fd_iter = [], iter(fds)
    for raw in specs:
        spec = from_message(TensorSpec, raw)
        if device == "cuda":
            out.append(pickle.loads(base64.b64decode(spec.handle)))
        else:
            t, mm = map_cpu(next(fd_iter), spec)
            _KEEP.append(mm)
            out.append(t)
    return out


_KEEP: list = []     # the candidate's mappings live as long as its process
