"""Compile a Triton candidate's kernels for a GPU on a machine without one (the build process's check of
interpreted candidates): `python -m kernelbench_cli.backends.triton_check` with a JSON job on stdin
({candidate_path, cache_dir, arch, kernels: [{name, launches: [{signature, constexprs, options}]}]}); prints
one JSON line {errors: [...], notes: {kernel: what was checked}}. Runs without TRITON_INTERPRET, so the
candidate's @triton.jit functions are real JITFunctions; its compiled extensions load from the build cache.

It imports the candidate, so it runs in the run-time sandbox (sandbox.confine: no fork, exec or file
writes), installed once what needs those is done: ptxas's version (a subprocess) is asked first and
handed to Triton as a fixed answer, Triton's cache is kept in memory, and the compile stops at PTX (LLVM
runs in this process; ptxas would be a subprocess). What it checks is what the frontend and LLVM refuse.
"""
from __future__ import annotations

import json
import sys


class MemoryCache:
    """Triton's cache manager, in memory (nothing is written); the paths it hands out exist nowhere, so the
    compiled kernel's last step (reading them back) fails after every stage has run."""

    def __init__(self, key, override=False, dump=False):
        self.key, self.files = key, {}

    def get_file(self, filename):
        return None

    def put(self, data, filename, binary=True) -> str:
        self.files[filename] = data
        return f"/nonexistent/kbench-memory-cache/{self.key}/{filename}"

    def get_group(self, filename):
        return None

    def put_group(self, filename, group):
        self.files[filename] = group


STAGES_RUN: list = []


def _to_ptx(backend=None, stages=None, *_):
    """Triton's stage hook: every stage is recorded as it finishes; the last, ptxas's cubin, is left out.
    Called bare, it names itself for the compile's cache key (key, hash)."""
    if stages is None:
        return "kbench-to-ptx", "kbench-to-ptx"
    stages.pop("cubin", None)
    for ext, fn in list(stages.items()):
        stages[ext] = (lambda e, f: lambda src, meta: (STAGES_RUN.append(e), f(src, meta))[1])(ext, fn)


def main() -> int:
    job = json.loads(sys.stdin.read())
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import get_ptxas_version
    from triton.compiler import ASTSource
    from triton.compiler.errors import CompilationError

    from .. import sandbox
    from ..candidate.loading import BuildInterceptor, import_file
    knobs.nvidia.mock_ptx_version = get_ptxas_version(job["arch"])
    knobs.cache.manager_class = MemoryCache
    knobs.runtime.add_stages_inspection_hook = _to_ptx
    BuildInterceptor(job["cache_dir"], False, compile=False).install()     # load_inline: from the cache only
    if not sandbox.confine():
        print("kbench: no seccomp filter on this architecture: the compile check runs unconfined", file=sys.stderr)
    module = import_file(job["candidate_path"], "kbench_candidate")
    target = GPUTarget("cuda", job["arch"], 32)
    errors, notes = [], {}
    for k in job["kernels"]:
        fn = getattr(module, k["name"], None)
        while fn is not None and not isinstance(fn, triton.runtime.jit.JITFunction):
            fn = getattr(fn, "fn", None)      # autotune / heuristics wrappers
        if fn is None:
            notes[k["name"]] = "not checked: not a module-level kernel of the candidate file"
            continue
        done = 0
        for launch in k["launches"]:
            STAGES_RUN.clear()
            try:
                try:
                    triton.compile(ASTSource(fn, launch["signature"], launch["constexprs"]), target=target,
                                   options=launch["options"])
                except OSError:
                    if STAGES_RUN[-1:] != ["ptx"]:
                        raise RuntimeError("the compile stopped before PTX") from None
                done += 1
            except (CompilationError, RuntimeError, TypeError, ValueError, AssertionError) as e:
                errors.append(f"{k['name']}: {type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}")
                break
        notes[k["name"]] = f"compiled for sm_{job['arch']}: {done} of {len(k['launches'])} launch signature(s), to PTX"
    print(json.dumps({"errors": errors, "notes": notes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
