"""Integrity: the candidate is untrusted. Every verdict kbench can raise is registered here once, with its
severity and the exploit it stops; static (AST) rules run without importing the candidate, runtime checks
run in the reference process on what it observed of the candidate process (never on what that process
says about itself).

Severity "error" fails the job like an incorrect result; "warning" is reported for review only.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .results import Flag


@dataclass(frozen=True)
class Check:
    severity: str
    stops: str     # the exploit class this verdict exists for


REGISTRY: dict[str, Check] = {
    # runtime, correctness phase
    "no-custom-kernel": Check("error", "torch fallback, try/except fallback, subclassing Model: the forward "
                                       "never called the candidate's compiled functions"),
    "bad-output": Check("error", "lazy/subclass tensors, outputs aliasing inputs or parameters, wrong dtype/device"),
    "input-mutated": Check("error", "zeroing or editing the inputs so a reference run on them would agree"),
    "output-reused": Check("error", "calls return the same storage: a caller holding one result sees it overwritten "
                                    "by the next"),
    "precision": Check("error", "lower precision inside (TF32, fp16) that allclose alone lets through"),
    "generalisation": Check("error", "right on the problem's own inputs, wrong on others: negative values, NaN/Inf, "
                                     "ties (judge/generalise.py; the class and its seed are in the detail)"),
    "specialised": Check("warning", "wrong on a generalisation class the policy only reports (layout, shapes)"),
    "trivial-inputs": Check("warning", "a problem whose inputs a trivial transform answers (ReLU on torch.rand: the "
                                       "identity), so kernels wrong elsewhere pass it"),
    "background-thread": Check("error", "threads the candidate started (Python or native) still alive after "
                                        "forward returned: work outside the timed call"),
    "degenerate-problem": Check("warning", "a problem where zeros, a constant or an input-independent output "
                                           "passes: verdicts on it prove little"),
    # runtime, timing phase
    "cached-result": Check("error", "returning results cached by pointer or content instead of computing"),
    "late-work": Check("error", "kernels still running on the device after the candidate said a call was done "
                                "(side streams, skipped synchronisation)"),
    "timer-tampered": Check("error", "a candidate-reported time the reference process's witness clock cannot "
                                     "support: patched clocks or events, work before or after the timed span"),
    "protocol": Check("error", "a candidate process that broke the message protocol (malformed or oversized replies)"),
    "impossible-speed": Check("error", "a time under the roofline floor: faster than this device can move the bytes "
                                       "or do the FLOPs the problem needs"),
    "suspicious-speed": Check("warning", "(CPU) under a roofline floor measured on a shared machine: worth a look "
                                         "at what it skips"),
    "library-heavy": Check("error", "most of the time in library code (aten, cuBLAS, cuDNN, MKL/oneDNN), not the "
                                    "candidate's: a thin wrapper around torch, an identity kernel after torch"),
    "off-slot-cores": Check("error", "(CPU) timed calls sampled on cores outside the job's slot: a candidate that "
                                     "re-pinned its threads onto the cores another job is timed on"),
    "unattributed": Check("warning", "the profiler failed in the candidate process, so library-heavy could not be "
                                     "judged (a candidate breaking it evades only the attribution, not the ablation)"),
    # static (AST) rules
    "exception-handler": Check("warning", "try/except around the forward: a silent fallback path"),
    "thread-or-stream": Check("warning", "creating threads, processes or CUDA streams"),
    "monkeypatch": Check("error", "assigning to torch/time/timing attributes"),
    "introspection": Check("error", "gc/inspect/sys.modules/frame access to reach the reference or the harness"),
    "reads-problem": Check("error", "reading the problem module or the harness's own objects"),
    "process-exit": Check("error", "os._exit / sys.exit to leave before the verdict"),
    "file-write": Check("warning", "writing files (results can be smuggled between runs)"),
    "triton-python": Check("error", "a @triton.jit kernel body running plain Python (numpy, a helper, interpreter "
                                    "internals): the CPU interpreter runs it, a GPU could never compile it"),
}


def flag(name: str, detail: str) -> Flag:
    return Flag(name, REGISTRY[name].severity, detail)


# --- static rules ------------------------------------------------------------------------------------

PATCHED_ROOTS = {"torch", "time", "timeit", "triton", "kernelbench_cli", "builtins"}
INTROSPECTION = {("gc", "get_objects"), ("gc", "get_referrers"), ("gc", "get_referents"), ("sys", "_getframe"),
                 ("inspect", "currentframe"), ("inspect", "stack"), ("inspect", "getouterframes"),
                 ("sys", "modules")}
THREADS = {("threading", "Thread"), ("threading", "Timer"), ("multiprocessing", "Process"),
           ("concurrent", "futures"), ("cuda", "Stream"), ("cuda", "ExternalStream"), ("_thread", "start_new_thread")}
HARNESS_NAMES = {"kbench_problem", "kernelbench_cli", "__main__"}


def _dotted(node: ast.AST) -> list[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return parts[::-1]


def _pairs(parts: list[str]):
    return set(zip(parts, parts[1:]))


def rule_monkeypatch(tree):
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            parts = _dotted(t)
            if isinstance(t, ast.Attribute) and parts and parts[0] in PATCHED_ROOTS:
                yield node.lineno, f"assigns {'.'.join(parts)}"
        if isinstance(node, ast.Call) and _dotted(node.func)[-1:] == ["setattr"] and node.args:
            target = _dotted(node.args[0])
            if target and target[0] in PATCHED_ROOTS:
                yield node.lineno, f"setattr on {'.'.join(target)}"


def rule_introspection(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            hit = _pairs(_dotted(node)) & INTROSPECTION
            if hit:
                yield node.lineno, f"uses {'.'.join(sorted(hit)[0])}"
        elif isinstance(node, ast.ImportFrom) and (node.module or "") in ("gc", "inspect"):
            yield node.lineno, f"imports from {node.module}"
        elif isinstance(node, ast.Attribute) and node.attr in ("f_back", "f_globals", "f_locals", "__globals__"):
            yield node.lineno, f"frame/globals access .{node.attr}"


def rule_reads_problem(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in HARNESS_NAMES:
            yield node.lineno, f"refers to {node.value!r}"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for n in names:
                if n.split(".")[0] in ("kernelbench_cli", "kbench_problem"):
                    yield node.lineno, f"imports {n}"


def rule_process_exit(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = _dotted(node.func)
            if parts[-2:] in (["os", "_exit"], ["sys", "exit"], ["os", "kill"], ["os", "abort"]):
                yield node.lineno, f"calls {'.'.join(parts)}"


def rule_thread_or_stream(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = _dotted(node.func)
            hit = _pairs(parts) & THREADS
            if hit or parts[-1:] in (["Thread"], ["Stream"], ["ThreadPoolExecutor"], ["ProcessPoolExecutor"]):
                yield node.lineno, f"creates {'.'.join(parts)}"


def rule_exception_handler(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Try) and sub.handlers:
                    yield sub.lineno, "try/except inside ModelNew"


def rule_file_write(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = _dotted(node.func)
            if parts[-1:] in (["write_text"], ["write_bytes"], ["save"]) and parts[:1] != ["self"]:
                yield node.lineno, f"calls {'.'.join(parts)}"
            elif parts == ["open"] and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                    and any(m in str(node.args[1].value) for m in "wax+"):
                yield node.lineno, f"opens a file for writing (mode {node.args[1].value!r})"


KERNEL_BUILTINS = {"range", "len", "min", "max", "isinstance", "print", "int", "float", "bool", "abs", "tuple",
                   "zip", "enumerate"}     # what Triton's frontend accepts in a kernel body besides tl.*


def _bound_imports(tree) -> dict[str, str]:
    """name -> the module (or module.attr) it is bound to by an import anywhere in the file."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                bound[a.asname or a.name] = f"{node.module or ''}.{a.name}"
    return bound


def _jit_kernels(tree) -> tuple[dict, list]:
    """The functions the file makes Triton kernels (decorated with, or passed by name to, a `...jit`), and the
    lines where `jit` is applied to something that is not a function of the file (its body cannot be read)."""
    defs = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    kernels, opaque = {}, []
    for f in defs.values():
        if any(_dotted(d.func if isinstance(d, ast.Call) else d)[-1:] == ["jit"] for d in f.decorator_list):
            kernels[f.name] = f
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func)[-1:] == ["jit"] and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id in defs:
                kernels[arg.id] = defs[arg.id]
            else:
                opaque.append(node.lineno)
    return kernels, opaque


def rule_triton_python(tree):
    """Inside a kernel: calls only to Triton (tl.*, the file's other kernels, a few builtins the frontend
    takes) and methods of its own values; no other module, no plain function, no `.handle` or `_private`."""
    bound = _bound_imports(tree)
    if not any(m.split(".")[0] == "triton" for m in bound.values()):
        return
    kernels, opaque = _jit_kernels(tree)
    for line in opaque:
        yield line, "jit applied to a function built at run time (its kernel body cannot be checked)"
    triton_names = {n for n, m in bound.items() if m.split(".")[0] == "triton"}
    other_modules = set(bound) - triton_names
    plain = {f.name for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.ClassDef)) and f.name not in kernels}
    for k in kernels.values():
        local = {a.arg for a in k.args.args + k.args.kwonlyargs} | \
            {n.id for n in ast.walk(k) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for node in (n for stmt in k.body for n in ast.walk(stmt)):
            if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                yield node.lineno, f"kernel {k.name} defines a function inside it"
            elif isinstance(node, ast.Attribute) and (node.attr == "handle" or node.attr.startswith("_")):
                yield node.lineno, f"kernel {k.name} reads .{node.attr} (interpreter internals)"
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
                if node.id in other_modules:
                    yield node.lineno, f"kernel {k.name} uses {node.id} ({bound[node.id]}), not Triton"
                elif node.id in plain:
                    yield node.lineno, f"kernel {k.name} uses {node.id}, a plain Python function or class"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                name = node.func.id
                if name not in local and name not in kernels and name not in triton_names \
                        and name not in KERNEL_BUILTINS and name not in other_modules and name not in plain:
                    yield node.lineno, f"kernel {k.name} calls {name}, not a Triton function"


STATIC_RULES = {"monkeypatch": rule_monkeypatch, "introspection": rule_introspection,
                "reads-problem": rule_reads_problem, "process-exit": rule_process_exit,
                "thread-or-stream": rule_thread_or_stream, "exception-handler": rule_exception_handler,
                "file-write": rule_file_write, "triton-python": rule_triton_python}


def static_flags(source: str, filename: str = "<candidate>") -> list[Flag]:
    """Run every AST rule over a candidate's source; one flag per rule, listing the lines it fired on."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError:
        return []
    flags = []
    for name, rule in STATIC_RULES.items():
        hits = sorted(set(rule(tree)))
        if hits:
            flags.append(flag(name, "; ".join(f"line {ln}: {what}" for ln, what in hits[:5])))
    return flags


# --- runtime checks ----------------------------------------------------------------------------------

# The witness: the reference process's clock from handing a batch of n calls over to receiving the reply and seeing
# the device idle. What it measures beyond the candidate's own claims is the hand-over (calibrated before any
# candidate code ran, on a stand-in: messages, signals, flushes, output copies) and noise. A claim is refused when the
# median unexplained time per call exceeds
#     WITNESS_RATIO x claimed + (WITNESS_HANDOVER x hand-over + max(WITNESS_MARGIN_MS, WITNESS_NOISE x noise)) / n
# which bounds how much of a call a candidate can hide, whatever clock it patched. Batches
# (judge/sides.calls_per_batch) spread the hand-over's noise (~0.1 ms on the H200) over n calls. The hand-over term
# absorbs the stand-in's model error: honest H200 kernels showed 0.08-0.16 ms per call more than the stand-in
# (results/H200/witness-20261201.txt), so today's bound on the H200 is ~0.15-0.25 ms per call: a lie that large is
# caught (a clock 10x slow on kernels from ~0.3 ms), a smaller one is not yet. On a 2-core CPU box, before the slots
# pinned their threads (cpus.py, session 27), honest sub-ms calls showed up to ~0.5x of a call unaccounted for, and
# the ratio was 0.6: a clock lying by 1.5x passed unpriced (clock_hook_modest). Pinned, the 53 honest jobs there (0.13-25
# ms calls, results/cpu/witness-margin-20261207-s28.txt) needed no share beyond the slack but two (0.07, 0.035): a
# quarter of a call leaves room for a loaded box while a lie must stay under ~1.25x not to be flagged; priced below
# (PRICE). "cpu-time" (the CPU-time witness): the same quarter (a serial kernel beside load needed 0.19).
WITNESS_RATIO = {"cuda": 0.10, "cpu": 0.25, "cpu-time": 0.25}
WITNESS_HANDOVER = 0.5
WITNESS_MARGIN_MS = 0.05
WITNESS_NOISE = 4.0


def check_witness(reported: list[float], witness: list[float], sizes: list[int], handover_ms: float,
                  spread_ms: float, device: str = "cuda") -> Flag | None:
    """Per witnessed batch of n calls: its claimed total, the witness, n. The hand-over and its noise are per batch,
    so spread over n calls each. device "cpu-time": the witness is the CPU-time witness's (judge/handle.busy_ms)."""
    if not reported:
        return None
    per_call = sorted((w - handover_ms - r) / n for r, w, n in zip(reported, witness, sizes))
    med = per_call[len(per_call) // 2]
    claimed = sorted(r / n for r, n in zip(reported, sizes))[len(reported) // 2]
    n = sorted(sizes)[len(sizes) // 2]
    ratio, slack = WITNESS_RATIO.get(device, 0.10), (WITNESS_HANDOVER * handover_ms + max(WITNESS_MARGIN_MS, WITNESS_NOISE * spread_ms)) / n
    allowed = ratio * claimed + slack
    # Two more rules, as a lie in a minority of batches leaves the median honest while the speedup (a
    # geometric mean over rounds, one batch each) takes them in (red team, session 9: a lie in 2 of 5
    # batches, 2.5x for a 0.93x kernel): the mean over batches, and the count of batches over twice their own
    # allowance. Both let the same few batches be outliers (a tenth, at least one): the mean leaves out the
    # batches with the most excess per call, so one descheduled batch on a busy CPU box (~105 ms in a CI run) does
    # not flag an honest kernel, and a lie confined to that many batches stays bounded (~1.3x through the geomean);
    # more over-twice batches than that is a pattern, not a descheduled core.
    outliers = max(1, len(sizes) // 10)
    excess = [(w - handover_ms - r) / k for r, w, k in zip(reported, witness, sizes)]     # per call
    kept = sorted(range(len(sizes)), key=lambda i: excess[i])
    kept = kept[:-outliers] if len(kept) > outliers else kept
    calls = sum(sizes[i] for i in kept)
    mean = sum(excess[i] * sizes[i] for i in kept) / calls
    mean_claimed = sum(reported[i] for i in kept) / calls
    over = [e for e, r, k in zip(excess, reported, sizes) if e > 2 * (ratio * r / k + slack)]
    why, allowed_mean = "", ratio * mean_claimed + slack
    if len(over) > outliers:
        why = f"; {len(over)} of {len(sizes)} batches over twice their allowance"
        med, claimed, allowed = max(over), mean_claimed, allowed_mean
    elif mean > allowed_mean:
        why = " (the mean over batches)"
        med, claimed, allowed = mean, mean_claimed, allowed_mean
    if med > allowed:
        seen = "its CPU time, counted by the kernel, came to" if device == "cpu-time" else "the witness saw"
        return flag("timer-tampered", f"the candidate reported {claimed:.4f} ms per call but {seen} "
                                      f"{med + claimed + handover_ms / n:.4f} ms ({handover_ms / n:.4f} ms of it "
                                      f"hand-over, batches of {n}): {med:.4f} ms per call unaccounted for "
                                      f"(allowed {allowed:.4f}){why}")
    return None


# Pricing: each batch costs at least its witness less the hand-over and an allowance per batch. On CUDA the allowance
# is absolute, not a share of the hand-over, which grows with the batch (a flush and an output copy per call) while
# what it fails to model does not; or the hand-over's noise in sd, where larger, up to `cap`. A clock lying on a
# kernel shorter than the flag rule resolves hides at most that / n per call. 0.5 ms left a 10x lie on a 0.026 ms
# kernel at 1.65x (H100, session 28): 0.35 ms since. In session 30 the H100's hand-over noise was 0.1-0.9 ms, and
# twice it let that lie keep 1.73x: once, 1.37x (honest CUDA kernels moved 0-2.5%, ~0.03 ms ones up to 10%:
# docs/architecture.md). The cap: a host made noisy during the pings (another candidate's build beside them) widens no
# lie's allowance past it. On the CPU the flag rule's slack, no share of the call (clock_hook_slight;
# results/cpu/witness-margin-20261207-s28.txt: honest jobs moved 0.0-1.3%).
PRICE = {"cuda": dict(handover=0.0, floor=0.35, noise=1.0, cap=0.5),
         "cpu": dict(handover=WITNESS_HANDOVER, floor=WITNESS_MARGIN_MS, noise=WITNESS_NOISE, cap=float("inf"))}


def price_allowance(handover_ms: float, spread_ms: float, device: str = "cuda", floor: float | None = None,
                    noise: float | None = None) -> float:
    """What a batch's wall may exceed the hand-over by, unpriced (PRICE); `floor`, `noise`: what-ifs (scripts)."""
    p = PRICE.get(device, PRICE["cuda"])
    noisy = min((p["noise"] if noise is None else noise) * spread_ms, p["cap"])
    return p["handover"] * handover_ms + max(p["floor"] if floor is None else floor, noisy)


def witnessed_per_call(reported_ms: float, wall_ms: float, n: int, handover_ms: float, spread_ms: float,
                       device: str = "cuda", floor: float | None = None, noise: float | None = None) -> float:
    """One batch's per-call time for the timing: the candidate's own figure, or, where the witness says more went by,
    the wall less the hand-over and the allowance: a lie the flag rule misses or forgives as an outlier is priced."""
    least = (wall_ms - handover_ms - price_allowance(handover_ms, spread_ms, device, floor, noise)) / n
    return max(reported_ms / n, least)


def check_late_work(busy: int, probed: int, worst_ms: float, idle_ms: float) -> Flag | None:
    if not busy:
        return None
    return flag("late-work", f"after {busy} of {probed} call(s) the device was still busy with the candidate's "
                             f"work (probe up to {worst_ms:.3f} ms, idle {idle_ms:.3f} ms)")


# The ceilings are what torch's own copy and GEMM reach (H200: 4.0 TB/s of 4.8, 741-791 of 989 bf16 TFLOP/s),
# so a very good kernel may beat them a little: only a time a third under the floor is impossible.
IMPOSSIBLE_MARGIN = 0.75


def check_speed(speedup: float | None, floor_ms: float | None = None, cand_ms: float | None = None,
                device: str = "cuda") -> Flag | None:
    """Under the roofline floor (with IMPOSSIBLE_MARGIN) is an error on CUDA, with the numbers; on the CPU,
    whose ceilings come from a shared, busy machine, a warning. No rule on the speedup alone: "over 10x the
    reference" flagged an honest fused layout kernel at 14x, and honest kernels must never be flagged."""
    if floor_ms is not None and cand_ms is not None and cand_ms < floor_ms * (IMPOSSIBLE_MARGIN if device == "cuda" else 1):
        name = "impossible-speed" if device == "cuda" else "suspicious-speed"
        return flag(name, f"{cand_ms:.4f} ms per call is under the roofline floor {floor_ms:.4f} ms (minimum bytes at "
                          "the measured bandwidth, FLOPs at the measured peak)")
    return None


def check_custom_share(share: float | None, minimum: float, device: str, top: str) -> Flag | None:
    """Attribution (candidate/attribution.py): under `minimum` of the time in the candidate's own code. A
    candidate that passes it spends at least as long in its own code as in library calls, so whatever it
    hands to a library buys it at most half the library's speed."""
    if share is None or share < 0 or share >= minimum:
        return None
    where = "GPU time in its own kernels" if device == "cuda" else "its time in its own code alone (no library on any thread)"
    return flag("library-heavy", f"{share:.0%} of {where} (minimum {minimum:.0%}: custom_share in the config, "
                                 f"CUSTOM_SHARE in the problem); top: {top}")


# Attribute macros that may sit between __global__ and the kernel's name, each with a parenthesised argument.
_KERNEL_ATTRS = re.compile(r"\b__(?:launch_bounds|cluster_dims|maxnreg|grid_constant)__\s*\((?:[^()]|\([^()]*\))*\)")


def kernel_names(cuda_sources: list[str]) -> set[str]:
    """__global__ function names in the candidate's CUDA sources (profiler kernel names contain them)."""
    names = set()
    for src in cuda_sources:
        src = _KERNEL_ATTRS.sub(" ", src)
        names.update(m.group(1) for m in re.finditer(r"__global__\b[^;{()]*?\b(\w+)\s*\(", src))
    return names
