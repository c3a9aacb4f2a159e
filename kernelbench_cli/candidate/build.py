"""The candidate's side of a build (untrusted: it imports the candidate).

    python -m kernelbench_cli.candidate build   (fd $KBENCH_FD: the socket to the parent; compiles, exits)

Candidates of the load_inline backends are imported by `sandboxed_import`, a fork of the build process under
the run-time seccomp filter, whose load_inline calls are compiled by the build process itself
(kernelbench_cli/compiler.py, trusted). Backends that compile at their first launch (Triton) are imported and
warmed up in the build process, with compilers and cache writes allowed (`build_main`).
"""
from __future__ import annotations

import faulthandler
import os
import sys
import traceback

from .. import compiler, sandbox
from ..channel import Channel, Reply
from .process import import_candidate, install_backends, one_line


def watch_opens() -> set:
    """The paths this process opens from now on (Python's audit hook; native opens are not seen)."""
    opened: set = set()
    sys.addaudithook(lambda event, args: opened.add(os.path.abspath(args[0]))
                     if event == "open" and isinstance(args[0], str) else None)
    return opened


def sandboxed_import(chan: Channel, msg: dict, parent: int) -> int:
    """The fork of a build process that imports the candidate: confined before any candidate code runs;
    each load_inline is compiled by the parent (`ask`) and loaded from the cache. Sends what it saw."""
    sandbox.set_name("kbench-import")
    sandbox.tie_to_parent(parent)

    def ask(args: dict):
        try:
            chan.send({"op": "compile", "args": args})
        except (TypeError, ValueError):
            return None, "load_inline's arguments must be plain strings, lists, dicts and booleans"
        reply, _ = chan.recv()
        return (reply["record"], "") if isinstance(reply.get("record"), dict) else (None, str(reply.get("failure")))
    interceptor = install_backends(msg, compile=False)
    interceptor.remote = ask
    if not sandbox.confine():
        print("kbench: no seccomp filter on this architecture: the build's import runs unconfined", file=sys.stderr)
    opened = watch_opens()
    module, build, failure, _ = import_candidate(msg, interceptor)
    if failure is None:
        failure = warm(module, msg, build["extensions"], check=False)      # (the checks: the parent's)
    reply = failure or Reply(op="built")
    reply.build = {"sources": read_sources(opened, msg["cache_dir"]),
                   "jit": [x for x in build["extensions"] if x.get("backend") == "triton"]}
    chan.send(reply)
    return 0


def read_sources(opened: set, cache_dir: str) -> list[str]:
    """The files the candidate's import read (by Python's audit hook), minus the interpreter's and torch's own
    files and the build cache: what a build record must check is unchanged (a candidate may load its
    sources from anywhere, e.g. a shared .cu two folders up)."""
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))       # kbench itself (e.g. backends/)
    skip = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, own,
                                                        os.path.expanduser(cache_dir), "/proc", "/sys", "/dev")}
                 | {os.path.realpath(p) + os.sep for p in sys.path if "-packages" in p})
    out = []
    for p in opened:
        real = os.path.realpath(p)
        if not real.startswith(skip) and not real.endswith(".pyc") and os.path.isfile(real) \
                and not any(part.endswith((".egg-info", ".dist-info")) for part in real.split(os.sep)):
            out.append(real)
    return sorted(out)


def build_main() -> int:
    """Import the candidate with load_inline compiling into the cache; report the BuildInfo."""
    sandbox.tie_to_parent(int(os.environ.get("KBENCH_PARENT_PID", "0")) or None)
    sandbox.drop_capabilities()
    faulthandler.enable()
    chan = Channel.from_fd(int(os.environ["KBENCH_FD"]))
    msg, _ = chan.recv()
    device = os.environ.get("KBENCH_DEVICE", "cpu")
    from ..backends import interpreted
    if any(interpreted(name, device) for name in msg.get("backends", [])):
        # Sized here, before any sandbox: counting a forward on the meta device may import dynamo, which wants a
        # writable temp dir that the sandboxed import has not. Sized there, it failed silently and every GPU-sized
        # Triton candidate was interpreted at its problem's sizes for nothing (242 s for L2/1 on the CI box).
        from ..roofline import too_big_to_interpret
        msg["too_big"] = too_big_to_interpret(msg["problem_path"], msg.get("dtype", "float32"))
    if compiler.splits(msg, device):
        return compiler.serve_build(chan, msg, device, sandboxed_import)
    # a backend that compiles at its first launch (Triton): the import and its warm-up in this process
    if device == "cpu":        # not CUDA builds: on the H200 (session 13) Triton's
        sandbox.confine_build()      # warm-up under it left its cache unwritten (the candidates' first launch
        #                              then failed); compilers and cache writes stay, sockets, ptrace do not
    opened = watch_opens()
    module, build, failure, _ = import_candidate(msg, install_backends(msg, compile=True))
    if failure is None:
        failure = warm(module, msg, build["extensions"])
        build["status"] = "failed" if failure else build["status"]
    reply = failure or Reply(op="built")
    build["sources"] = read_sources(opened, msg["cache_dir"])
    reply.build = build
    chan.send(reply)
    return 0


def warm(module, msg: dict, extensions: list, check: bool = True) -> Reply | None:
    """Backends that compile at first use (Triton on a GPU) run the candidate here, off the clock; on the CPU
    Triton's interpreted launches are recorded, and then (`check`) compiled for the GPU."""
    from ..backends import BY_NAME
    device = os.environ.get("KBENCH_DEVICE", "cpu")
    try:
        for name in msg.get("backends", []):
            BY_NAME[name].warm(module, msg, device, extensions)
            if check:
                BY_NAME[name].check(msg, device, extensions)
    except Exception as e:
        traceback.print_exc()
        return Reply(op="error", ok=False, status="compile-error", message=f"a kernel failed to compile: {one_line(e)}")
    return None


