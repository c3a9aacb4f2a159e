"""Compile a Triton candidate's kernels for a GPU on a machine without one (the build process's check of
interpreted candidates): `python -m kernelbench_cli.backends.triton_check` with a JSON job on stdin
({candidate_path, cache_dir, arch, kernels: [{name, launches: [{signature, constexprs, options}]}]}); prints
one JSON line {errors: [...], notes: {kernel: what was checked}}. Runs without TRITON_INTERPRET, so the
candidate's @triton.jit functions are real JITFunctions; its compiled extensions load from the build cache.
"""
from __future__ import annotations

import json
import sys


def main() -> int:
    job = json.loads(sys.stdin.read())
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.errors import CompilationError

    from ..candidate.loading import BuildInterceptor, import_file
    BuildInterceptor(job["cache_dir"], False, compile=False).install()     # load_inline: from the cache only
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
            try:
                triton.compile(ASTSource(fn, launch["signature"], launch["constexprs"]), target=target,
                               options=launch["options"])
                done += 1
            except (CompilationError, RuntimeError, TypeError, ValueError, AssertionError) as e:
                errors.append(f"{k['name']}: {type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}")
                break
        notes[k["name"]] = f"compiled for sm_{job['arch']}: {done} of {len(k['launches'])} launch signature(s)"
    print(json.dumps({"errors": errors, "notes": notes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
