"""The red-team corpus: every exploit candidate under tests/adversarial/ must be caught, with the flag for
its exploit class; the honest fixture beside them passes with no error flag."""
from __future__ import annotations

from conftest import FIXTURES, ROOT, by_candidate

ADVERSARIAL = ROOT / "tests" / "adversarial" / "kernels"

EXPECTED = {   # candidate -> (status, flags that must be raised)
    "torch_fallback": ("integrity", {"no-custom-kernel"}),
    "try_except_fallback": ("integrity", {"no-custom-kernel", "exception-handler"}),
    "reads_reference": ("integrity", {"no-custom-kernel", "introspection"}),
    "input_mutation": ("integrity", {"input-mutated"}),
    "output_alias": ("integrity", {"bad-output"}),
    "subclass_output": ("integrity", {"bad-output"}),
    "timer_tamper": ("integrity", {"timer-tampered", "monkeypatch"}),
    "background_thread": ("integrity", {"background-thread", "thread-or-stream"}),
    "empty_output": ("incorrect", set()),
    "zeros_output": ("incorrect", set()),
    "naive_sum": ("integrity", {"precision"}),
}


def test_every_exploit_is_caught(kbench):
    code, doc = kbench.json("bench", "cpu/1_Add_ReLU", "cpu/2_Row_Sum_Of_Squares",
                            "--set", f"paths.kernels={ADVERSARIAL}")
    got = by_candidate(doc)
    assert code == 1
    for name, (status, flags) in EXPECTED.items():
        r = got[name]
        raised = {f["name"] for f in r["flags"]}
        assert r["status"] == status, f"{name}: {r['status']} {r['message']}"
        assert flags <= raised, f"{name}: expected {flags}, raised {raised}"
    # pointer caching: caught either by the timed-buffer re-check or, if a trial reuses a freed address,
    # by the trials themselves; never passes
    cache = got["pointer_cache"]
    assert cache["status"] in ("integrity", "incorrect"), cache["message"]
    if cache["status"] == "integrity":
        assert "cached-result" in {f["name"] for f in cache["flags"]}
    assert set(got) == set(EXPECTED) | {"pointer_cache"}


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
