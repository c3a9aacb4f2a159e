"""The trusted half of a build: load_inline's arguments, recorded by the candidate's sandboxed import, are
checked and compiled here, in a process that never runs candidate code.

A build process imports torch, then forks the import (candidate/build.py `sandboxed_import`): that child
closes every descriptor but its socket to this one, installs the run-time seccomp filter (no fork, exec,
file writes, signals to others, sockets) and imports the candidate. Each load_inline it makes becomes one
message here; this process checks the arguments (plain data, an identifier for a name, compiler flags from
an allow-list: no flag may name a program, a plugin or a file to write, and none may carry spaces or ninja's
`$`, which would add arguments or build rules), compiles them into the content-keyed cache with torch's own
load_inline, without loading the result (a library's constructors would run here), and answers with the
extension's record; the child then loads it from the cache as the run-time process does. So the candidate's
import can no longer write files (the problem, kbench's own sources, other candidates' builds, Inductor's
cache), start processes or signal anything, and the record of what was built is this process's, not the
candidate's (session 20: before, the whole import ran with write access, under a light filter on the CPU and
none on a GPU).

Triton on the CPU: the import's interpreted warm-up records each kernel's launches and this process compiles
them for a GPU in a sandboxed check of its own (backends/triton_check.py). On a GPU, Triton compiles at the
first launch, which must run the candidate's code with a compiler beside it: CUDA builds stay one process
(SPLIT_DEVICES below; docs/architecture.md).
"""
from __future__ import annotations

import gc
import os
import re
import socket
import sys
import time

from . import sandbox
from .channel import Channel, ChannelClosed, Reply

# Where a candidate's import runs in the sandbox and compiles here. CUDA: the import may touch the device,
# which the sandbox refuses until the device is up, and Triton must compile cubins into its cache there.
SPLIT_DEVICES = ("cpu",)
MAX_BUILD_MESSAGE = 64 << 20     # one load_inline's sources, or the import's final report

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_PLAIN = re.compile(r"[A-Za-z0-9_+=.,:-]+")             # no space, quote, $, /, @ or newline
_PATH = re.compile(r"[A-Za-z0-9_+=.,:/-]+")
# -f options by name: GCC has hundreds and some read or write files named in them or beside the source
# (-fplugin, -fdump-*, -fprofile-*, -fmodule-mapper with -fmodules-ts writes a module wherever its map says,
# -fcompare-debug= reruns the compiler with any flag: session 21's red team), so a prefix deny-list was not enough.
_F_OPTS = (r"fast-math|unsafe-math-optimizations|associative-math|reciprocal-math|finite-math-only|math-errno"
           r"|trapping-math|signed-zeros|rounding-math|signaling-nans|cx-limited-range|excess-precision=(fast|standard)"
           r"|fp-contract=(fast|on|off)|unroll-loops|unroll-all-loops|peel-loops|tree-vectorize|tree-loop-vectorize"
           r"|tree-slp-vectorize|vect-cost-model(=(unlimited|dynamic|cheap|very-cheap))?|openmp|openmp-simd|pic|PIC"
           r"|strict-aliasing|omit-frame-pointer|inline|inline-functions|inline-small-functions|prefetch-loop-arrays"
           r"|visibility=(default|hidden)|visibility-inlines-hidden|exceptions|rtti|permissive|diagnostics-color"
           r"|max-errors=\d+|builtin|stack-protector|stack-protector-strong|semantic-interposition|plt"
           r"|optimize-sibling-calls|ipa-pta|split-loops|loop-interchange|align-loops(=\d+)?|align-functions(=\d+)?"
           r"|align-jumps(=\d+)?|gcse|schedule-insns|schedule-insns2|tree-loop-distribution|threadsafe-statics"
           r"|var-tracking|lto-odr-type-merging|common|char8_t|concepts|coroutines|constexpr-depth=\d+"
           r"|template-depth=\d+|constexpr-ops-limit=\d+|abi-version=\d+|sized-deallocation")
_C_FLAGS = re.compile(r"-O[0-3sgz]?|-Ofast|--?std=[\w+]+|-D[A-Za-z_]\w*(=[\w.+-]*)?|-U[A-Za-z_]\w*|-m[\w.=+-]+"
                      rf"|-f(no-)?({_F_OPTS})|-W[\w=+-]+|-g|-g[0-3]|-ggdb|-w|-pthread|-pipe")
_C_DENY = ("-Wl", "-Wp", "-Wa")
_NVCC_FLAGS = re.compile(r"-O[0-3]|--?use_fast_math|--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)|-lineinfo"
                         r"|--generate-line-info|--?expt-relaxed-constexpr|--?expt-extended-lambda|--?extended-lambda"
                         r"|--?std=[\w+]+|-D[A-Za-z_]\w*(=[\w.+-]*)?|-U[A-Za-z_]\w*|-res-usage|--resource-usage"
                         r"|-G|-g|--?maxrregcount=\d+|-arch=\w+|--gpu-architecture=\w+|-code=[\w,]+"
                         r"|-gencode=arch=\w+,code=\w+|--generate-code=arch=\w+,code=\w+|--?threads=\d+"
                         r"|--default-stream=(per-thread|legacy|null)|--?restrict|-Xptxas=[\w.,=+-]+"
                         r"|--ptxas-options=[\w.,=+-]+|-v")
_NVCC_NEXT = {"-Xptxas": _PLAIN, "--ptxas-options": _PLAIN, "-maxrregcount": re.compile(r"\d+"),
              "--maxrregcount": re.compile(r"\d+"), "-t": re.compile(r"\d+"), "--threads": re.compile(r"\d+"),
              "--default-stream": re.compile(r"per-thread|legacy|null"), "-arch": re.compile(r"\w+"),
              "-gencode": re.compile(r"arch=\w+,code=\w+")}
_LD_FLAGS = re.compile(r"-l[\w.+-]+|-L[\w./+-]+|-Wl,-rpath,[\w./+-]+|-Wl,--(no-)?as-needed|-pthread|-fopenmp|-s")
ALLOWED = ("extra_cflags: -O*, -std=, -D/-U, -m*, the -f options of code generation and math (-ffast-math, "
           "-funroll-loops, -fopenmp, -fno-strict-aliasing, ...), -W (no -Wl/-Wp/-Wa), -g, "
           "-w, -pthread, -fopenmp; extra_cuda_cflags: those nvcc options, --use_fast_math, -lineinfo, -arch/-gencode, "
           "--maxrregcount, -Xptxas, -Xcompiler with C flags; extra_ldflags: -l, -L, -Wl,-rpath")


def _c_flag(flag: str) -> bool:
    return bool(_PLAIN.fullmatch(flag) and _C_FLAGS.fullmatch(flag)) and not flag.startswith(_C_DENY)


def _cuda_flags(flags: list) -> str | None:
    """The first nvcc flag outside the allow-list (None: all fit). -Xcompiler / --compiler-options pass C flags
    to the host compiler: each of those is checked as a C flag."""
    it = iter(flags)
    for flag in it:
        host = re.fullmatch(r"(-Xcompiler|--compiler-options)(=(.*))?", flag)
        if host:
            value = host.group(3) if host.group(2) else next(it, "")
            if not value or not all(_c_flag(f) for f in value.split(",")):
                return f"{flag} {value}".strip()
        elif flag in _NVCC_NEXT:
            value = next(it, "")
            if not _NVCC_NEXT[flag].fullmatch(value):
                return f"{flag} {value}".strip()
        elif not (_PLAIN.fullmatch(flag) and _NVCC_FLAGS.fullmatch(flag)):
            return flag
    return None


def _strings(value, what: str, single: bool = False) -> str | None:
    """Why `value` is not a string or a list of strings (None if it is)."""
    if value is None or isinstance(value, str) and single:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return None
    return f"{what} must be {'a string or ' if single else ''}a list of strings"


def check_args(a: dict) -> str | None:
    """Why these load_inline arguments are not built here (None: they are)."""
    from .candidate.loading import RECIPE
    if (unknown := sorted(set(a) - set(RECIPE))):
        # (no_implicit_headers let a source start with a line of its own, e.g. a C++ module declaration;
        # keep_intermediates and with_sycl change what torch writes: session 21's red team)
        return f"load_inline argument {unknown[0]!r} is not one kbench builds with (it uses torch's default)"
    name = a.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return f"name {name!r} is not a Python identifier"
    for field in ("cpp_sources", "cuda_sources"):
        if (why := _strings(a.get(field), field, single=True)):
            return why
    if a.get("sycl_sources") or a.get("extra_sycl_cflags"):
        return "SYCL sources are not built by kbench"
    functions = a.get("functions")
    names = list(functions) if isinstance(functions, dict) else [functions] if isinstance(functions, str) else functions
    if functions is not None and not (isinstance(names, list) and all(isinstance(f, str) and _NAME.fullmatch(f)
                                                                      for f in names)):
        return "functions must name C++ identifiers"
    if isinstance(functions, dict) and not all(isinstance(d, str) for d in functions.values()):
        return "functions' docstrings must be strings"
    for field in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths"):
        if (why := _strings(a.get(field), field)):
            return why
    for flag in a.get("extra_cflags") or []:
        if not _c_flag(flag):
            return f"extra_cflags {flag!r} is not a flag kbench compiles with"
    if (flag := _cuda_flags(a.get("extra_cuda_cflags") or [])) is not None:
        return f"extra_cuda_cflags {flag!r} is not a flag kbench compiles with"
    for flag in a.get("extra_ldflags") or []:
        if not _LD_FLAGS.fullmatch(flag):
            return f"extra_ldflags {flag!r} is not a flag kbench links with"
    for path in a.get("extra_include_paths") or []:
        if not _PATH.fullmatch(path):
            return f"extra_include_paths {path!r} is not a plain path"
    for field in ("with_cuda", "is_python_module", "with_pytorch_error_handling", "use_pch"):
        if a.get(field) is not None and not isinstance(a.get(field), bool):
            return f"{field} must be True, False or None"
    return None


class Compiler:
    """Builds checked load_inline arguments into the cache; `extensions` is the build's record of them."""

    def __init__(self, cache_root: str, verbose: bool):
        import inspect
        from pathlib import Path

        from .candidate.loading import _cpp_extension
        self.cpp = _cpp_extension()
        self.original = self.cpp.load_inline
        self.signature = inspect.signature(self.original)
        self.root, self.verbose = Path(cache_root).expanduser(), verbose
        self.extensions: list[dict] = []
        self.failure: str | None = None

    def compile(self, args: dict) -> dict:
        """The reply to one load_inline: {"record": ...} once built (or found built), else {"failure": why}."""
        from .candidate.loading import _build_lock, extension_key, extension_record
        why = check_args(args) if isinstance(args, dict) else "arguments are not a mapping"
        if why is None:
            try:
                bound = self.signature.bind(**args)
            except TypeError as e:
                why = f"load_inline: {e}"
        if why is not None:
            why = f"extension {args.get('name') if isinstance(args, dict) else '?'!r}: {why} ({ALLOWED})"
            self.failure = self.failure or why
            return {"failure": why}
        bound.apply_defaults()
        a = bound.arguments
        key = extension_key(a)
        build_dir = self.root / f"{a['name']}-{key}"
        record = extension_record(a, key, (build_dir / "kbench.ok").exists())
        self.extensions.append(record)
        if record["cached"]:
            return {"record": record}
        build_dir.mkdir(parents=True, exist_ok=True)
        a.update(build_directory=str(build_dir), verbose=self.verbose)
        if "use_pch" in a:
            a["use_pch"] = False          # (torch writes the header's PCH beside its own headers)
        start, load = time.perf_counter(), self.cpp._import_module_from_library
        self.cpp._import_module_from_library = lambda *_: None      # built, never loaded here
        try:
            with _build_lock(build_dir):
                self.original(**a)
        except Exception as e:         # compiler or linker output
            self.failure = self.failure or f"{type(e).__name__}: {e}"
            return {"failure": str(e)}
        finally:
            self.cpp._import_module_from_library = load
            record["seconds"] = round(time.perf_counter() - start, 3)
        (build_dir / "kbench.ok").touch()
        return {"record": record}


def splits(msg: dict, device: str) -> bool:
    return device in SPLIT_DEVICES


def serve_build(chan: Channel, msg: dict, device: str, sandboxed_import) -> int:
    """The build process: fork `sandboxed_import` (candidate/build.py), compile what it asks for, send the
    BuildInfo."""
    from .candidate.process import build_status
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            gc.freeze()            # the parent's objects: never collected here (their fds are closed below)
            os.closerange(3, theirs.fileno())
            os.closerange(theirs.fileno() + 1, 1 << 16)
            code = sandboxed_import(Channel(theirs), msg, os.getppid())
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    theirs.close()
    if device == "cpu":
        sandbox.confine_build()       # the compilers: no sockets, ptrace or namespaces (sandbox.BUILD_DENY)
    start, compiler = time.perf_counter(), Compiler(msg["cache_dir"], msg.get("verbose", False))
    inner = Channel(ours, limit=MAX_BUILD_MESSAGE)
    said = None
    try:
        while True:
            req, _ = inner.recv()
            if req.get("op") != "compile":
                said = req
                break
            inner.send(compiler.compile(req.get("args")))
    except (ChannelClosed, OSError, ValueError, RecursionError):     # (a malformed message: the import's own end)
        pass
    inner.close()
    _, status = os.waitpid(pid, 0)
    jit = _jit_records(said)
    failure = compiler.failure
    if failure is None and said is not None and said.get("ok") is True:
        failure = _checks(msg, device, jit)
    exts = compiler.extensions + jit
    build = {"extensions": exts, "status": build_status(exts, failure, interpreted=device == "cpu"),
             "seconds": round(time.perf_counter() - start, 3), "log": (failure or "")[-4000:],
             "sources": _sources(said)}
    if failure:
        name = exts[-1]["name"] if exts else "?"
        reply = Reply(op="error", ok=False, status="compile-error",
                      message=failure.splitlines()[0][:300] if failure.startswith(("extension ", "a kernel "))
                      else f"extension '{name}' failed to build (compiler output in the log)")
    elif said is None:
        how = f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else \
            f"exited with code {os.WEXITSTATUS(status)}"
        reply = Reply(op="error", ok=False, status="crash", message=f"the candidate's import {how} without a result")
    elif said.get("ok") is True and said.get("op") == "built":
        reply = Reply(op="built")
    else:
        status = said.get("status") if said.get("status") in CHILD_STATUSES else "import-error"
        reply = Reply(op="error", ok=False, status=status, message=str(said.get("message") or "")[:400])
    reply.build = build
    chan.send(reply)
    return 0


CHILD_STATUSES = ("import-error", "missing-modelnew", "compile-error")     # what the import may say of itself


def _checks(msg: dict, device: str, jit: list) -> str | None:
    """The backends' checks of what the import recorded (Triton on the CPU: its launches compiled for a GPU,
    in a sandboxed process of their own); the first failure, or None."""
    from .backends import BY_NAME
    try:
        for name in msg.get("backends", []):
            BY_NAME[name].check(msg, device, jit)
    except Exception as e:
        return f"a kernel failed to compile: {type(e).__name__}: {e}"[:2000]
    return None


def _jit_records(said) -> list[dict]:
    """The Triton kernels the import registered, with the launches its warm-up made (the candidate's claim:
    what it leaves out goes unchecked here, and its run-time launches are its own kernels again)."""
    build = said.get("build") if isinstance(said, dict) else None
    jit = build.get("jit") if isinstance(build, dict) else None
    if not isinstance(jit, list):
        return []
    keep = ("name", "key", "functions", "kernels", "launches", "cached", "seconds")
    return [dict({k: r[k] for k in keep if k in r}, backend="triton") for r in jit[:200]
            if isinstance(r, dict) and isinstance(r.get("name"), str)]


def _sources(said) -> list[str]:
    """The files the import read (a claim of the candidate's: it only decides when its own build is redone;
    build.record_build hashes only regular files, of a bounded size)."""
    build = said.get("build") if isinstance(said, dict) else None
    sources = build.get("sources") if isinstance(build, dict) else None
    return [s for s in sources if isinstance(s, str)][:10000] if isinstance(sources, list) else []
