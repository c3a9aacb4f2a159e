"""GPU behaviour, verified on a real GPU (`pytest -m gpu` on the lent H200); skipped where there is none."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, by_candidate

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
    side = got["side_stream"]
    assert side["status"] == "integrity" and "side-stream" in {f["name"] for f in side["flags"]}, side
    assert got["empty_output"]["status"] == "incorrect"
    ok = got["correct"]
    assert ok["timing"]["clock"] == "cuda-events" and ok["timing"]["speedup"] > 0
    assert ok["custom_share"] is not None and ok["custom_share"] > 0.9
    assert ok["env"]["gpu"] and ok["env"]["arch_list"] == ok["env"]["sm"]
    assert code == 1


def test_cuda_seed_problem_simple_candidate_is_correct(kbench):
    code, doc = kbench.json("check", "level2/101_LayoutMix_FakeInt8_Linear", "--device", "cuda")
    results = by_candidate(doc)
    assert results, "no CUDA candidates for the layout-mix problem"
    for name, r in results.items():
        assert r["status"] == "ok", f"{name}: {r['message']}"
        assert r["correctness"]["oracle_err_cand"] is not None
