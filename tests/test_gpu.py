"""GPU behaviour, verified on a real GPU (`pytest -m gpu` on the lent H200); skipped where there is none."""
from __future__ import annotations

import re
import shutil
import statistics

import pytest

from conftest import FIXTURES, ROOT, by_candidate

pytestmark = pytest.mark.gpu
CUDA_FIXTURES = ["--set", f"paths.kernels={FIXTURES / 'cuda_kernels'}", "--set", "timeouts.run_s=120"]


def test_cuda_batch_failures_and_exploits(kbench):
    """A CUDA illegal memory access is a reported result; work hidden on a side stream and torch.empty
    outputs are caught; the correct candidate in the same batch still passes, timed with CUDA events,
    built for the local GPU's arch only."""
    code, doc = kbench.json("bench", "cpu/1_Add_ReLU", "--device", "cuda", *CUDA_FIXTURES)
    got = by_candidate(doc)
    assert got["correct"]["status"] == "ok", got["correct"]["message"]
    assert got["correct"]["flags"] == []
    assert got["illegal_address"]["status"] in ("cuda-error", "crash")
    assert "illegal memory access" in (got["illegal_address"]["message"] + got["illegal_address"]["stderr_tail"])
    side = got["side_stream"]           # the candidate's own clock misses the side stream; the witness does not
    assert side["status"] in ("integrity", "incorrect"), side
    assert {f["name"] for f in side["flags"]} & {"timer-tampered", "late-work"} or side["status"] == "incorrect", side
    late = got["late_device"]           # side-stream work, torch.cuda.synchronize patched out: the candidate
    #   process syncs through the C-level entry it bound first, so no work is left after "done" (late-work
    #   would be the flag if it were); its events miss the side stream: the witness and the checked timed
    #   calls see it (H200, 2026-12-02: cached-result, timer-tampered)
    assert late["status"] in ("integrity", "incorrect") and (
        {"late-work", "timer-tampered", "cached-result"} & {f["name"] for f in late["flags"]}
        or late["status"] == "incorrect"), brief(late)
    assert got["empty_output"]["status"] == "incorrect"
    wrapper = got["aten_wrapper"]       # no kernel of its own: attribution, not the ablation, catches it
    assert wrapper["status"] == "integrity" and "library-heavy" in {f["name"] for f in wrapper["flags"]}, brief(wrapper)
    assert wrapper["custom_share"] is not None and wrapper["custom_share"] < 0.1, brief(wrapper)
    assert ok_sandboxed(got["correct"])
    ok = got["correct"]
    assert ok["timing"]["clock"] == "cuda-events" and ok["timing"]["speedup"] > 0
    assert ok["custom_share"] is not None and ok["custom_share"] > 0.9, brief(ok)
    assert ok["env"]["gpu"] and ok["env"]["arch_list"] == ok["env"]["sm"]
    assert code == 1


def short_kernel_lie(kbench, name: str, canary: bool = False, extra: tuple = (), engaged: float = 0.0,
                     honest_name: str = "correct", bound: float | None = 1.6) -> dict | None:
    """A 10x lie about the CUDA event clock (fixture `name`) beside the honest kernel on cpu/1 (a 0.03 ms kernel,
    shorter than the witness resolves per call): caught (timer-tampered), or its speedup near the honest one;
    with `canary`, caught by the clock canary (evidence.check_canary); with `engaged`, the lie must have read its
    clock short, under `engaged` x the honest kernel's own time (else the fixture proves nothing: session 18's
    tracked hook claimed the honest time, its cudaEventRecord unpatched). Against the honest twin `honest_name`; returns the lie's speed over the honest
    kernel's own-clock time (`ratio`, asserted under `bound` unless that is None) and both own-clock times per
    call (`claimed`, `own`); None if caught."""
    fixtures = FIXTURES / "cuda_kernels" / "cpu" / "1_Add_ReLU"
    code, doc = kbench.json("bench", "cpu/1", "--device", "cuda", "--kernel", fixtures / f"{name}.py",
                            "--kernel", fixtures / f"{honest_name}.py", *CUDA_FIXTURES, *extra)
    got = by_candidate(doc)
    honest, lie = got[honest_name], got[name]
    for r in (honest, lie):     # what the flushes after its calls charged (judge/flush.py), for the record
        f = r["timing"].get("flush_ms") or {}
        print(r["candidate"], r["status"], "flush allow", f.get("allow"), "charged per batch",
              [b[2] for b in f.get("cand", []) if b])
    # per-call time on each one's own clock (for the honest kernel, the truth)
    own, claimed = (statistics.median(c / n for c, _, n in r["timing"]["witness_batches"]) if
                    r["timing"]["witness_batches"] else None for r in (honest, lie))
    assert honest["status"] == "ok" and not honest["flags"], brief(honest)
    assert honest["timing"]["canary_ms"]["after"], brief(honest)
    if canary:      # caught: by the canary, or by the witness first (H200 session 18: 0.06 ms a call unaccounted
        # for, with the reference timed in batches as the candidate is)
        assert lie["status"] == "integrity" and ("kbench's own fixed work" in lie["message"] or
                                                 "timer-tampered" in {f["name"] for f in lie["flags"]}), \
            (brief(lie), lie["timing"].get("canary_ms"))
    if engaged:
        assert claimed is not None, (name, "never timed", brief(lie))
        assert claimed < engaged * own, (name, "the lie did not engage", claimed, own, brief(lie))
    if lie["status"] == "integrity":          # (the witness saw it: caught is fine too)
        assert "timer-tampered" in {f["name"] for f in lie["flags"]}, brief(lie)
        return None
    assert lie["status"] == "ok", brief(lie)
    # Against the honest kernel's own clock (for an honest kernel, the truth), not its priced time: on a 0.03 ms
    # kernel the witness sometimes prices the honest one up to twice its device time (a hand-over calibrated
    # low; H200 session 18: honest 1.01x in one job, 2.39x in another, own clock 0.0217 ms both times), and the
    # lie then looked 2.4x better than an honest run that was merely priced badly.
    ratio = own / lie["timing"]["cand_ms"]
    print(f"{name}: priced {lie['timing']['cand_ms']:.4f} ms/call (claimed {claimed:.4f}) vs the honest kernel's "
          f"own {own:.4f} (priced {honest['timing']['cand_ms']:.4f}): {ratio:.2f}x faster, the lie asks 10x")
    assert bound is None or ratio < bound, (name, lie["timing"]["cand_ms"], own)
    return {"ratio": ratio, "claimed": claimed, "own": own}


def test_a_python_event_clock_patch_on_a_short_kernel_is_harmless(kbench):
    """torch.cuda.Event.elapsed_time patched in Python is not seen: the candidate process times with torch's
    C-level event functions bound before the candidate's import (candidate/clocks.py)."""
    short_kernel_lie(kbench, "event_clock")


@pytest.mark.parametrize("name", ["event_hook_short", "event_hook_inflate"])
def test_a_native_event_clock_hook_on_a_short_kernel_is_caught_by_the_clock_canary(kbench, name):
    """libcudart's cudaEventElapsedTime rewritten natively is seen by the bound event functions too, and on a
    0.03 ms kernel the witness cannot resolve it (16.7x against the honest 2.16x under this config on the H200,
    session 15: results/H200/pytest-gpu-20261204-s15-call1.txt); kbench's own canary, timed on the same
    clock before the import and in every batch, reads 10x short too, and Python cannot lengthen it (the
    inflate fixture: add_ overridden, the spin entry points replaced; add_ beat session 15's float-add canary)."""
    short_kernel_lie(kbench, name, canary=True)


@pytest.mark.parametrize("name", ["event_hook_tracked", "event_hook_spares_spin"])
def test_a_clock_hook_on_the_candidates_own_intervals_only_is_caught_by_the_spin_inside_a_call(kbench, name):
    """The exploit that beats the canary: the native hook reads short only on intervals holding the candidate's
    own launches (it tracks the events recorded around them), so kbench's canary reads true; on a 0.03 ms kernel
    the witness left it 9.9x (H100, session 32). kbench's spin inside a secret call's interval is read short with
    it (evidence.check_inside); the spares_spin variant also hooks cudaLaunchKernel to read such an interval true,
    and that call then reads long against the call after the same spin. Either way: caught, and the lie engaged
    (session 18: its record hook never installed, so it now refuses to load without it)."""
    short_kernel_lie(kbench, name, canary=True, extra=(
        "--config", ROOT / "configs" / "quick.yaml", "--set", "timing.max_rounds=30", "--set", "timing.budget_s=6",
        "--set", "timing.batch_ms=8"), engaged=0.5)


def test_work_started_ahead_on_a_side_stream_is_harmless(kbench):
    """No clock patched at all: the kernel goes to a stream that does not wait for the timed one and is joined
    back before the call returns, so with the host ahead it would run under earlier calls and the untimed L2
    flush, the call's own events holding only the join. kbench's flush fills every SM (l2flush.py): the side
    kernel cannot start beside it and runs inside the call's events (H200 session 21: its claim 0.0194 ms a call
    against the honest kernel's own 0.0216, where under torch's zero_ flush it was meant to read short). If it
    ever engages again, the witness must price it: the speed bound holds either way."""
    short_kernel_lie(kbench, "side_stream_ahead", extra=(
        "--config", ROOT / "configs" / "quick.yaml", "--set", "timing.max_rounds=30", "--set", "timing.budget_s=6",
        "--set", "timing.batch_ms=8"))


def test_a_flush_patched_out_from_python_is_harmless(kbench):
    """`Tensor.zero_` replaced at import (through getattr/setattr strings) would skip a torch flush between the
    calls of a batch; kbench's flush is its own kernel launched through the driver (l2flush.py), bound before
    the import, so the kernel runs as cold as the honest one. Written in session 19 without a GPU run."""
    got = short_kernel_lie(kbench, "skip_flush", extra=(
        "--config", ROOT / "configs" / "quick.yaml", "--set", "timing.max_rounds=30", "--set", "timing.budget_s=6",
        "--set", "timing.batch_ms=8"))
    # its own clock is honest: with the flush skipped its calls would read faster than the honest kernel's
    assert got is None or got["claimed"] > 0.85 * got["own"], got


def test_compute_bound_work_started_ahead_under_the_untimed_flush_is_priced(kbench):
    """side_stream_ahead with a compute-bound kernel: under torch's memory-bound zero_ flush it ran almost free,
    so the batch's wall did not hold it either (session 19, a strict xfail then). kbench's flush now fills every
    SM (l2flush.py): the work runs in a call's events or delays the flush, and the witness prices it. Written in
    session 19 without a GPU run."""
    # engaged: its own clock under 0.95 of the honest kernel's. Under the fenced flush (session 32, H100) it read
    # 0.71 of it (0.033 against 0.047 ms): the work that once ran under the flush's stores now holds the flush back,
    # which the timed flushes charge to its calls (0.9-1.7 ms a batch), so it no longer reads near-free as it did
    # On the H100 in session 35 it read 0.906 (0.0421 against 0.0465 ms, 2.52 ms a batch charged): engaged, by less
    got = short_kernel_lie(kbench, "heavy_ahead", honest_name="heavy", engaged=0.95, bound=None, extra=(
        "--config", ROOT / "configs" / "quick.yaml", "--set", "timing.max_rounds=30", "--set", "timing.budget_s=6",
        "--set", "timing.batch_ms=8"))
    assert got is None or got["ratio"] < 1.6, got


def test_a_native_event_clock_hook_is_caught_by_the_witness(kbench):
    """The exploit that beats the bound clocks: libcudart's cudaEventElapsedTime rewritten (native code) to
    report a tenth, on a ~3.5 ms kernel: the witness sees the hidden time."""
    code, doc = kbench.json("check", "level2/56_Matmul_Sigmoid_Sum", "--device", "cuda", "--kernel",
                            FIXTURES / "cuda_kernels" / "level2" / "56_Matmul_Sigmoid_Sum" / "event_hook_native.py",
                            "--config", ROOT / "configs" / "quick.yaml", "--set", "timeouts.run_s=300", timeout=900)
    r = doc["results"][0]
    assert r["status"] == "integrity" and "timer-tampered" in {f["name"] for f in r["flags"]}, brief(r)


def test_tf32_from_cpp_is_flagged_and_compared_at_its_precision(kbench):
    """Issue 16: TF32 switched on for cuBLAS from C++ is tf32 class (a precision error) and library-heavy; its
    speedup against eager with TF32 on is ~1x, where against fp32 eager it looks several times faster."""
    code, doc = kbench.json("check", "level2/56_Matmul_Sigmoid_Sum", "--device", "cuda", "--kernel",
                            FIXTURES / "cuda_kernels" / "level2" / "56_Matmul_Sigmoid_Sum" / "tf32_cublas.py",
                            "--config", ROOT / "configs" / "quick.yaml", "--set", "timeouts.run_s=300", timeout=900)
    r = doc["results"][0]
    names = {f["name"] for f in r["flags"]}
    assert r["status"] == "integrity" and {"precision", "library-heavy"} <= names, brief(r)
    assert r["correctness"]["precision_class"] == "tf32", brief(r)
    at = r["baselines"]["precision"]
    assert at["precision"] == "tf32" and 0.5 < at["speedup"] < 2.0, at
    assert r["timing"]["speedup"] > 2 * at["speedup"], (r["timing"]["speedup"], at)
    assert code == 1


def brief(r) -> dict:
    """What a failed assertion should print of a result (the whole record is cut short by pytest)."""
    return {k: r.get(k) for k in ("candidate", "status", "message", "custom_share", "custom_share_top")} | {
        "flags": [f["name"] for f in r["flags"]], "ablation": r["correctness"]["ablation"],
        "precision": r["correctness"]["precision_class"], "baselines": r["baselines"]}


def ok_sandboxed(r) -> bool:
    return r["env"].get("sandbox") == "seccomp" and r["timing"]["checked_calls"] > 0 and r["phases"]["load_s"] >= 0


def test_every_bundled_cuda_candidate_passes_with_no_flag_and_is_witnessed(kbench):
    """Honest kernels must never be flagged under the process model: every bundled CUDA candidate, each in
    its own sandboxed candidate process, correct, timed, its witness agreeing with its own clock."""
    code, doc = kbench.json("bench", "--all", "--device", "cuda", "--config", ROOT / "configs" / "quick.yaml",
                            "--set", "timeouts.run_s=300", timeout=3000)
    bad = {f"{r['problem']}::{r['candidate']}": (r["status"], r["message"], [f["name"] for f in r["flags"]])
           for r in doc["results"] if r["status"] != "ok" or r["flags"]}
    assert not bad, bad
    assert all(ok_sandboxed(r) for r in doc["results"])
    assert all(r["correctness"]["precision_class"] == "fp32" for r in doc["results"]
               if r["dtype"] == "float32" and r["correctness"]["precision_class"]), \
        {r["candidate"]: r["correctness"]["precision_class"] for r in doc["results"]}
    assert all(r["custom_share"] is not None and r["custom_share"] >= 0.5 for r in doc["results"]), \
        {r["candidate"]: (r["custom_share"], r["custom_share_top"]) for r in doc["results"]}
    assert code == 0


def test_a_judge_serving_many_jobs_keeps_its_device_memory(kbench, tmp_path):
    """Every job of a problem maps the same buffers (Reference.slots): the judge's reserved memory after a job
    does not grow with the jobs. Buffers shared per job stayed with the judge after their candidate process
    was killed (torch's CUDA IPC waits for a release that never comes): +9.2 GiB a job on L2/56, and on the
    80 GB H100 an honest candidate ran out of memory (session 22). L2/3's lanes are GiBs a job."""
    problem = "level2/3_ResidualAdd_RMSNorm"
    kernels = tmp_path / "kernels" / problem
    kernels.mkdir(parents=True)
    for k in range(4):
        shutil.copy(ROOT / "kernels" / problem / "fused_add_rmsnorm.py", kernels / f"sample{k}.py")
    trace = tmp_path / "trace.txt"
    code, doc = kbench.json("bench", problem, "--device", "cuda", "--config", ROOT / "configs" / "quick.yaml",
                            "--set", f"paths.kernels={tmp_path / 'kernels'}", env={"KBENCH_TRACE": str(trace)})
    assert code == 0 and len(doc["results"]) == 4, [brief(r) for r in doc["results"]]
    assert all(r["status"] == "ok" and not r["flags"] for r in doc["results"]), [brief(r) for r in doc["results"]]
    kept = [float(x) for x in re.findall(r"device cache returned: [0-9.]+ -> ([0-9.]+) GiB", trace.read_text())]
    assert len(kept) == 5, kept        # after the problem's load, then after each job
    assert kept[-1] - kept[1] < 0.5, kept
    # each job's hand-over was pinged in the timed rounds' rhythm: a reference batch beside every ping (handover.py)
    pings = [[int(x) for x in m] for m in re.findall(r"(\d+) ping batches, (\d+) reference batches", trace.read_text())]
    assert len(pings) == 4 and all(n >= 8 and beside == n for n, beside in pings), pings


def test_cuda_seed_problem_simple_candidate_is_correct(kbench):
    code, doc = kbench.json("check", "level2/101_LayoutMix_FakeInt8_Linear", "--device", "cuda")
    results = by_candidate(doc)
    assert results, "no CUDA candidates for the layout-mix problem"
    for name, r in results.items():
        assert r["status"] == "ok", f"{name}: {r['message']}"
        assert r["correctness"]["oracle_err_cand"] is not None


TRITON_GPU = {"level1/6_GELU": "triton_erf", "level1/5_RMSNorm": "triton_rows", "level1/3_Softmax": "triton_rows",
              "level2/1_Gemm_Bias_ReLU": "triton_3xtf32_relu"}


def test_bundled_triton_candidates_are_compiled_in_the_build_and_their_kernels_do_the_work(kbench):
    """Issue 18 on CUDA: each bundled Triton candidate of a GPU problem compiles (and autotunes) in the build
    process, runs from Triton's cache in the sandbox, is correct with no flag, timed, and its own kernels take
    nearly all of the device time."""
    for problem, name in TRITON_GPU.items():
        path = ROOT / "kernels" / problem / f"{name}.py"
        code, doc = kbench.json("check", problem, "--device", "cuda", "--kernel", path, "--config",
                                ROOT / "configs" / "quick.yaml", "--set", "timeouts.run_s=300", timeout=900)
        r = doc["results"][0]
        assert code == 0 and r["status"] == "ok" and r["flags"] == [], (problem, brief(r))
        assert ok_sandboxed(r) and r["timing"]["clock"] == "cuda-events" and r["timing"]["speedup"] > 0, brief(r)
        assert r["timing"]["note"] == "" and r["correctness"]["precision_class"] == "fp32", brief(r)
        assert r["custom_share"] is not None and r["custom_share"] > 0.9, brief(r)
        assert r["correctness"]["ablation"] == "output changed", brief(r)
        kernels = [x for x in r["build"]["extensions"] if x["backend"] == "triton"]
        assert kernels and r["build"]["status"] != "interpreted", r["build"]
        if name == "triton_3xtf32_relu":     # autotuned in the build: the config it chose is in the result
            tuned = [x for x in kernels if x["name"] == "linear_relu_kernel"]
            assert tuned and "BM" in tuned[0].get("config", "") and "interpreted" not in tuned[0]["config"], kernels


TRITON_CORPUS = ROOT / "tests" / "adversarial" / "triton"


def test_triton_exploits_are_caught_on_the_gpu(kbench):
    """The Triton exploit corpus compiled for the GPU: caught as under the interpreter (the kernel with Python in
    its body fails the static rule, or its compile)."""
    code, doc = kbench.json("bench", "cpu/1", "cpu/2", "--device", "cuda", "--set", f"paths.kernels={TRITON_CORPUS}",
                            "--set", "timeouts.run_s=300", timeout=1500)
    got = by_candidate(doc)
    names = lambda r: {f["name"] for f in r["flags"]}      # noqa: E731
    assert code == 1 and len(got) == 8, sorted(got)
    assert got["torch_does_it"]["status"] == "integrity" and {"no-custom-kernel", "library-heavy"} <= names(got["torch_does_it"]), \
        brief(got["torch_does_it"])                         # compiled, the launch is 6% of the call (H200, 2026-12-03)
    assert got["stale_after_six"]["status"] in ("integrity", "incorrect"), brief(got["stale_after_six"])
    assert got["half_loads"]["status"] == "integrity" and "precision" in names(got["half_loads"]), brief(got["half_loads"])
    assert got["pointer_cache"]["status"] in ("incorrect", "integrity"), brief(got["pointer_cache"])
    assert got["subclass_pointer"]["status"] == "runtime-error", brief(got["subclass_pointer"])
    numpy = got["numpy_in_kernel"]
    assert numpy["status"] != "ok" and ("triton-python" in names(numpy) or numpy["status"] == "compile-error"), brief(numpy)
    for name in ("runtime_arange", "python_list"):       # right only in the interpreter: no GPU compiles them
        assert got[name]["status"] == "compile-error", brief(got[name])


def test_a_cpu_job_on_a_gpu_host_cannot_reach_the_gpu(kbench):
    """A CPU candidate that moves its work to the host's GPU (re-enabling CUDA_VISIBLE_DEVICES at import) would
    claim the GPU's speed as a CPU speedup; it cannot run its first call."""
    kernel = FIXTURES / "gpu_host" / "cpu" / "1_Add_ReLU" / "gpu_offload.py"
    code, doc = kbench.json("check", "cpu/1_Add_ReLU", "--device", "cpu", "--kernel", kernel)
    r = doc["results"][0]
    assert r["status"] == "runtime-error" and r["timing"].get("speedup") is None, brief(r)
    assert code == 1
