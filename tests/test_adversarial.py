"""The red-team corpus: every exploit candidate under tests/adversarial/ must be caught, with the flag for
its exploit class; the honest fixture beside them passes with no error flag."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT, by_candidate
from kernelbench_cli.judge.sampler import perf_refused

ADVERSARIAL = ROOT / "tests" / "adversarial" / "kernels"

EXPECTED = {   # candidate -> (status, flags that must be raised)
    "torch_fallback": ("integrity", {"no-custom-kernel"}),
    "try_except_fallback": ("integrity", {"no-custom-kernel", "exception-handler"}),
    "reads_reference": ("integrity", {"introspection"}),     # finds no reference here: computes honestly
    "input_mutation": ("integrity", {"input-mutated"}),
    "output_alias": ("integrity", {"bad-output"}),
    "subclass_output": ("integrity", {"bad-output"}),
    "timer_tamper": ("integrity", {"monkeypatch"}),     # and harmless: the clock was bound before the import
    "background_thread": ("integrity", {"background-thread", "thread-or-stream"}),
    "empty_output": ("incorrect", set()),
    "zeros_output": ("incorrect", set()),
    "half_inputs": ("integrity", {"precision", "generalisation"}),   # fp16 rounding: wrong on large values too
    "output_reuse": ("integrity", {"output-reused"}),
    "token_call": ("integrity", {"no-custom-kernel"}),      # by the ablation: the call count is satisfied
    "seed_replay": ("incorrect", set()),
    "shape_cache": ("incorrect", set()),
    "stale_by_one": ("incorrect", set()),
    "fork_worker": ("runtime-error", set()),
    "patch_compare": ("incorrect", {"monkeypatch"}),
    "import_problem": ("integrity", {"no-custom-kernel", "reads-problem"}),
    "exit_early": ("crash", set()),
    "precise_then_half": ("integrity", {"precision", "generalisation"}),   # fp16 rounding: wrong on large values too
    # the process model (issue 15): what only another process can stop
    "clock_hook_libc": ("integrity", {"timer-tampered"}),   # below Python: the witness catches it
    "clock_hook_modest": ("integrity", {"timer-tampered"}),     # ... lying by 1.5x, not 10x (session 28)
    "late_native_thread": ("incorrect", {"background-thread"}),
    "native_spinner": ("integrity", {"background-thread"}),
    "gc_sabotage_config": ("integrity", {"precision", "generalisation"}),   # fp16 rounding: wrong on large values too
    "harness_walk": ("integrity", {"timer-tampered"}),     # its claims forged through kbench's own object (session 31)
    "harness_walk_threads": ("integrity", {"timer-tampered"}),     # its work in threads that end after the calls (s32)
    # verdicts v2 (issue 16): attribution, the ablation's out-parameters, timed calls that are checked calls
    "aten_wrapper": ("integrity", {"library-heavy"}),
    "inplace_noop": ("integrity", {"no-custom-kernel"}),
    "call_count_stale": ("integrity", {"cached-result"}),
    # session 13: a forward that tests its kernel's result and fails under the ablation proves nothing
    "raise_on_noise": ("integrity", {"no-custom-kernel", "library-heavy"}),
    # session 23's red team: torch's work the in-process profiler cannot see; the judge samples it (session 24)
    "torch_kernels_direct": ("integrity", {"library-heavy"}),      # at::cpu:: kernels from C++
    "recording_off": ("integrity", {"library-heavy"}),             # RecordFunction off from C++
    "python_torch_unrecorded": ("integrity", {"library-heavy"}),   # ... and from Python
    # session 24: a candidate that knows when ptrace samples it; the kernel samples its timed calls (perf events)
    "tracer_aware": ("integrity", {"library-heavy"}),
    # ... and the red team's answers to it: torch's own pages mapped back over themselves from a file of its own
    "remap_identical": ("integrity", {"library-heavy"}),
    "memfd_traversal": ("integrity", {"library-heavy"}),    # ... from a memfd named into the extension cache
    # session 34's red team: its own verdict written onto the judge's channel, after the flags were raised
    "forged_verdict": ("integrity", {"protocol", "no-custom-kernel"}),
    # session 35's red team: torch in a thread started inside each call (no perf event), its own spin beside it
    "unsampled_worker": ("integrity", {"library-heavy"}),
}
if perf_refused():     # the ptrace fallback: the candidate tells its sampled calls apart (docs/integrity.md)
    EXPECTED["tracer_aware"] = ("ok", set())
HARMLESS = ("set_threads", "gc_sabotage_reference", "forge_results", "env_secret",   # must pass like `honest`
            "state_probe", "clock_swap_cpp",    # (clock_swap_cpp: the candidate process's clock was bound first)
            "batch_ahead",      # (a batch counts as its mean per call: moving time between its calls buys nothing)
            "wake_spare",       # (signals to the judge's other children, stopped spares, are refused)
            "escaped_burner",   # (its build's detached helpers are killed with the build: a subreaper's sweep)
            "squeeze_siblings",     # (another process's affinity, priority and limits are refused)
            "off_slot",     # (one slot: every core is its own; with two, test_off_slot_cores_are_seen)
            "dispatch_between_calls")   # (no op of kbench's goes through the dispatcher between a batch's calls)
HONEST_TWINS = ("naive_sum",    # honest fp32 with another summation order: no flag at all (issue 16)
                "out_param")    # honest out= kernel: its result is an argument, and the ablation sees it
SECRET = "kbench-test-secret-4f1c"      # env_secret.py answers wrong if it can read this anywhere


@pytest.mark.slow
def test_every_exploit_is_caught_or_harmless(kbench, monkeypatch):
    monkeypatch.setenv("KBENCH_TEST_SECRET", SECRET)
    code, doc = kbench.json("bench", "cpu/1_Add_ReLU", "cpu/2_Row_Sum_Of_Squares",
                            "--set", f"paths.kernels={ADVERSARIAL}")
    got = by_candidate(doc)
    assert code == 1
    wrong = {}          # every mismatch at once, with what was seen
    for name, (status, flags) in EXPECTED.items():
        r = got[name]
        raised = {f["name"] for f in r["flags"]}
        if r["status"] != status or not flags <= raised:
            wrong[name] = (r["status"], sorted(raised), r["message"][:300], r["custom_share"], r["custom_share_top"],
                           r["correctness"]["ablation"])
    assert not wrong, (sorted(wrong), wrong)
    # exit_on_noise: no-custom-kernel where its trigger fires (the default config: ok with no flag before session
    # 13's rule), library-heavy where it does not, a crash where it fires early: never ok
    eon = got["exit_on_noise"]
    assert eon["status"] == "crash" or (eon["status"] == "integrity" and {"no-custom-kernel", "library-heavy"} &
                                        {f["name"] for f in eon["flags"]}), (eon["status"], eon["flags"])
    # pointer caching: caught either by the timed-buffer re-check or, if a trial reuses a freed address,
    # by the trials themselves; never passes
    lie = got["median_lie"]      # deferred work never done (wrong), or done and seen by the witness's mean
    assert lie["status"] in ("integrity", "incorrect"), (lie["status"], lie["flags"], lie["message"][:300])
    # torch computes, a memcpy "kernel" copies: library-heavy where the copy is under half the call (the 2-core
    # box: 31% of it); on the 16-core H200 host the copy took 75% of it, so it passed as custom work. What the share rule bounds either way: a token kernel must spend as long as the
    # library does, which costs it the speed it was after (slower than eager here, since eager is that torch path)
    ident = got["identity_after_torch"]
    ident_flags = {f["name"] for f in ident["flags"]}
    assert ident["status"] == "integrity" and "library-heavy" in ident_flags or \
        ident["status"] == "ok" and ident["custom_share"] >= 0.5 and ident["timing"]["speedup"] < 1.0, \
        (ident["status"], sorted(ident_flags), ident["custom_share"], ident["timing"]["speedup"])
    # a 10x clock lie in the first calls only: caught where it reaches the second timing, else its lying round
    # is priced at what the witness allows (2.4 ms calls in batches of two at ~1.0 ms on the 2-core box: the
    # slack is large there), where unpriced it claimed a tenth. The speedup over two rounds is too noisy to
    # tell those apart; the round is not
    # finds its seeds withheld in the run's records: wrong on NaN; its crc32 of every input (its table's key) is zlib's
    # work, serial: library-heavy in wall time where the box is loaded (session 34), not on the idle 2-core box
    sib = got["sibling_seeds"]
    sib_flags = {f["name"] for f in sib["flags"]}
    assert "generalisation" in sib_flags and sib["status"] == ("integrity" if "library-heavy" in sib_flags else
                                                             "incorrect"), (sib["status"], sorted(sib_flags))
    # torch beside a spin of its own on the idle core (session 34): library-heavy in wall time; where the host is
    # too loaded for the spin to run beside torch (another job on the 2 cores) it runs after it, and pays: the
    # share's bound, a token kernel as long as the library work it hides, slower than eager (torch). The same
    # bound for torch's work run between the judge's samples (session 34's `sample_dodge`): the samples come at
    # random now, so its spins across them are its own time, and it is library-heavy (48% on the 2-core box)
    # or pays for its spins
    for name in ("parallel_pad", "sample_dodge"):
        pad = got[name]
        assert pad["status"] == "integrity" and "library-heavy" in {f["name"] for f in pad["flags"]} or \
            pad["status"] == "ok" and pad["timing"]["speedup"] < 1.0, (name, pad["status"], pad["flags"],
                                                                       pad["custom_share_top"])
    # libtorch_cpu's code copied into its own .so at build time (session 35): the bytes are torch's, library-heavy;
    # a torch build without the kernel it calls makes it raise instead
    mirror = got["torch_mirror"]
    assert mirror["status"] == "integrity" and "library-heavy" in {f["name"] for f in mirror["flags"]} and \
        "a copy of libtorch_cpu.so's code" in mirror["custom_share_top"] or \
        mirror["status"] == "runtime-error" and "no add_clamp kernel" in mirror["message"], \
        (mirror["status"], mirror["flags"], mirror["custom_share_top"], mirror["message"][:300])
    first = got["lie_then_honest"]
    assert first["status"] == "integrity" and "timer-tampered" in {f["name"] for f in first["flags"]} or \
        first["status"] == "ok" and min(first["timing"]["cand_rounds_ms"]) > 0.3 * min(got["honest"]["timing"]["cand_rounds_ms"]), \
        (first["status"], first["message"][:300], first["timing"]["cand_rounds_ms"], got["honest"]["timing"]["cand_rounds_ms"])
    # a 1.2x clock lie, under the flag rule: caught, or each batch priced at its witness less the slack, so that its
    # time is near the truth (1.2x its own clock less the slack's share: ~1.13x on cpu/1), not its clock's (1.0x)
    slight = got["clock_hook_slight"]
    t = slight["timing"]
    own = statistics.median(c / n for c, _, n in t["witness_batches"])
    assert slight["status"] == "integrity" and "timer-tampered" in {f["name"] for f in slight["flags"]} or \
        slight["status"] == "ok" and t["cand_ms"] > 1.05 * own, (slight["status"], t["cand_ms"], own, slight["message"][:300])
    # generalisation trials (issue 17): a kernel that answers the variants by another path is caught by the
    # variant ablation; its isfinite checks are aten time, library-heavy where they are over half the call
    # (the 2-core box), not where its kernel's share is 56% (the 16-core H200 host, session 15)
    vf = got["variant_fallback"]
    vf_flags = {f["name"] for f in vf["flags"]}
    assert "generalisation" in vf_flags and ("library-heavy" in vf_flags) == (vf["custom_share"] < 0.5) and \
        vf["status"] == ("integrity" if "library-heavy" in vf_flags else "incorrect"), \
        (vf["status"], sorted(vf_flags), vf["custom_share"], vf["message"][:300])
    # prefix sums of inputs seen: its shortcut answers wrong only for a timed input drawn from a pool set it has
    # met before, so where no checked call was one (two slow rounds, 3 checked calls: CI at bb2cca4) every
    # answer checked was honest and cost it ~50x (0.019x); caught whenever a checked call meets the shortcut
    pool = got["pool_prefix"]
    assert pool["status"] == "integrity" and "cached-result" in {f["name"] for f in pool["flags"]} or \
        pool["status"] == "ok" and pool["timing"]["speedup"] < 0.5, (pool["status"], pool["flags"], pool["timing"])
    cache = got["pointer_cache"]
    assert cache["status"] in ("integrity", "incorrect"), cache["message"]
    if cache["status"] == "integrity":
        assert "cached-result" in {f["name"] for f in cache["flags"]}
    assert set(got) == set(EXPECTED) | {"pointer_cache", "pool_prefix", "median_lie", "lie_then_honest", "identity_after_torch",
                                        "honest", "exit_on_noise", "variant_fallback",
                                        "clock_hook_slight", "parallel_pad", "sample_dodge", "sibling_seeds", "torch_mirror"} | \
        set(HARMLESS) | \
        set(HONEST_TWINS)
    for name in HONEST_TWINS:
        assert got[name]["status"] == "ok" and got[name]["flags"] == [], (name, got[name]["message"])
        assert got[name]["correctness"]["precision_class"] == "fp32"
    half = got["half_inputs"]["correctness"]
    assert half["precision_class"] == "fp16" and half["precision_levels"]["fp16"] > 100 * half["oracle_err_ref"]
    honest = got["honest"]
    assert honest["status"] == "ok" and honest["flags"] == [], honest["message"]
    assert honest["correctness"]["ablation"] == "output changed"
    assert got["token_call"]["correctness"]["ablation"] == "output unchanged"
    # each problem's usual fastest reference round in this run: the median over its timed jobs (one job's two
    # rounds on the 2-core box range 3-11 ms; the honest job's alone was too thin a baseline, session 11)
    fastest = {}
    for r in got.values():
        if r["timing"].get("ref_rounds_ms"):
            fastest.setdefault(r["problem"], []).append(min(r["timing"]["ref_rounds_ms"]))
    usual = {problem: statistics.median(v) for problem, v in fastest.items()}
    slow = []
    for name in HARMLESS:
        r = got[name]
        assert r["status"] == "ok" and not [f for f in r["flags"] if f["severity"] == "error"], (name, r["message"])
        assert r["env"]["threads"] == honest["env"]["threads"]          # the judge's thread count is its own
        # the reference was not slowed from inside the candidate: its fastest round is the usual one, within
        # noise (a sabotage slows every round; a busy 2-core box slows some); those that look slowed are run
        # again, and their speed is judged there
        if min(r["timing"]["ref_rounds_ms"]) >= 1.6 * usual[r["problem"]]:
            slow.append(name)
            continue
        assert best_speedup(r) < 3.0 * best_speedup(honest), (name, r["timing"], honest["timing"])
    if slow:    # two rounds can both be slow by chance (the H200 host, session 17: state_probe 1.67x the usual,
        # alone on 16 cores); a sabotage slows the reference again, so those are run again, with more rounds
        ref_slowed_again(kbench, slow)
    assert got["env_secret"]["correctness"]["passed"] == got["env_secret"]["correctness"]["trials"]
    # forged records never reach the results file: it holds exactly one record per job
    lines = (kbench.runs / doc["run_id"] / "results.jsonl").read_text().splitlines()
    assert len(lines) == len(got) and all('"forged"' not in line for line in lines)
    assert all(r["env"].get("sandbox") == "seccomp" for r in got.values() if r["status"] in ("ok", "integrity", "incorrect"))


@pytest.mark.skipif(bool(perf_refused()) or len(os.sched_getaffinity(0)) < 2,
                    reason="needs perf events (the CPU of each sample) and two CPUs")
def test_a_candidate_on_another_slots_cores_is_seen(kbench):
    """Two CPU slots of one core each: the candidate moves its thread onto the other slot's core while it is
    timed (off_slot.py); the kernel's samples of its timed calls say where they ran."""
    code, doc = kbench.json("check", "cpu/1", "--kernel", ADVERSARIAL / "cpu" / "1_Add_ReLU" / "off_slot.py",
                            "--set", "executor.workers=2")
    r = doc["results"][0]
    assert code == 1 and r["status"] == "integrity" and "off-slot-cores" in {f["name"] for f in r["flags"]}, \
        (r["status"], r["flags"], r["message"][:300])


def test_a_forged_clock_is_caught_on_a_loaded_host(kbench):
    """A host busy beside the run widens the wall witness's allowance by the pings' noise (session 31: beside the CI
    suite's own load harness_walk kept 10.47x, the allowance 27.9 ms a batch). The CPU-time witness
    (judge/handle.busy_ms) counts what the candidate's threads ran, which a busy host cannot inflate: with a spinner
    on every core throughout, it alone flags claims forged at a tenth (harness_walk), libc's clock patched to run
    10x slow (clock_hook_libc) and work moved after the calls into threads that end before the judge looks
    (harness_walk_threads), and not the honest kernel beside them. Not a 1.5x lie (clock_hook_modest): CPU time
    bounds a claim from below only, and a spinner per core stretches the wall ~2x over it (CI at 5ace0e1)."""
    from kernelbench_cli import integrity
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        kernels = [a for n in ("harness_walk", "harness_walk_threads", "clock_hook_libc", "honest")
                   for a in ("--kernel", ADVERSARIAL / "cpu" / "1_Add_ReLU" / f"{n}.py")]
        _, doc = kbench.json("check", "cpu/1", *kernels)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    got = by_candidate(doc)
    for name, r in got.items():
        t = r["timing"]
        cpu = t["cpu_busy_ms"]
        by_cpu = integrity.check_witness([c for c, _, _ in t["witness_batches"]], cpu["batches"],
                                         [n for _, _, n in t["witness_batches"]], cpu["handover"], cpu["spread"], "cpu-time")
        if name == "honest":
            assert r["status"] == "ok" and not r["flags"] and by_cpu is None, (r["status"], r["flags"], by_cpu, cpu)
        else:
            assert r["status"] == "integrity" and "timer-tampered" in {f["name"] for f in r["flags"]}, (name, r["status"], r["message"][:300])
            assert by_cpu is not None, (name, cpu, t["witness_batches"])


def best_speedup(r: dict) -> float:
    """The fastest reference round over the fastest candidate round: what a load burst in one round of a
    two-round job moves least (session 19's CI run: the honest kernel's rounds 1.77 and 16.1 ms on the busy
    2-core box made its speedup 0.63x, and a harmless exploit's 3.08x looked like 4.9 times it)."""
    return min(r["timing"]["ref_rounds_ms"]) / min(r["timing"]["cand_rounds_ms"])


def ref_slowed_again(kbench, names: list) -> None:
    """The harmless exploits `names` (all on cpu/1) whose reference looked slow, run again beside the honest
    candidates with six rounds each: each one's fastest reference round within 1.6x of the run's usual, and
    its speed near the honest kernel's."""
    kernels = [a for n in (*names, "honest", "out_param") for a in ("--kernel", ADVERSARIAL / "cpu" / "1_Add_ReLU" / f"{n}.py")]
    _, doc = kbench.json("bench", "cpu/1_Add_ReLU", *kernels, "--set", "timing.min_rounds=6", "--set", "timing.max_rounds=6")
    got = by_candidate(doc)
    usual = statistics.median(min(r["timing"]["ref_rounds_ms"]) for r in got.values())
    for name in names:
        assert min(got[name]["timing"]["ref_rounds_ms"]) < 1.6 * usual, (name, got[name]["timing"]["ref_rounds_ms"], usual)
        assert best_speedup(got[name]) < 3.0 * best_speedup(got["honest"]), (name, got[name]["timing"])


def test_honest_fixture_raises_no_flag(kbench):
    code, doc = kbench.json("check", "cpu/1", "--kernel", FIXTURES / "kernels" / "cpu" / "1_Add_ReLU" / "correct.py")
    r = doc["results"][0]
    assert code == 0 and r["status"] == "ok" and r["flags"] == []


def test_lint_flags_a_degenerate_problem_and_passes_the_bundled_ones(kbench):
    code, doc = kbench.json("lint", FIXTURES / "bad" / "degenerate.py", "cpu/1", "cpu/2", "cpu/3", "cpu/4")
    verdicts = {r["problem"]: [f["name"] for f in r["flags"]] for r in doc["results"]}
    assert verdicts.pop("bad/degenerate") == ["degenerate-problem"]
    assert all(flags == [] for flags in verdicts.values()), verdicts
    assert code == 1
    code, _ = kbench.json("lint", "cpu/1", "cpu/3")
    assert code == 0
