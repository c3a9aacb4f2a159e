"""Shared test plumbing: run the real CLI in a subprocess, with one extension build cache per session."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
TEST_CONFIG = FIXTURES / "test.yaml"


def pytest_collection_modifyitems(config, items):
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        skip = pytest.mark.skip(reason="needs a CUDA GPU (run `pytest -m gpu` on a GPU machine)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory) -> Path:
    """One build cache for the whole session, so each distinct extension compiles once.
    Set KBENCH_CACHE_DIR yourself to keep builds across sessions while developing."""
    return Path(os.environ.get("KBENCH_CACHE_DIR") or tmp_path_factory.mktemp("kbench-builds"))


class Kbench:
    def __init__(self, cache: Path, runs: Path):
        self.cache, self.runs = cache, runs

    def __call__(self, *args, config: Path | None = TEST_CONFIG, timeout: float = 900,
                 env: dict | None = None, launcher: tuple = ("-m", "kernelbench_cli")) -> subprocess.CompletedProcess:
        """`launcher`: what python runs with the CLI's arguments (a wrapper that execs the CLI, say)."""
        cmd = [sys.executable, *launcher, *map(str, args)]
        if args and args[0] in ("check", "bench", "build", "lint"):
            cmd += ["--out", str(self.runs)]
            if "--device" not in args:
                cmd += ["--device", "cpu"]     # the CPU fixtures are C++; a GPU machine must not pick cuda
            if config is not None and "--config" not in args and "-c" not in args:
                cmd += ["--config", str(config)]
        env = dict(os.environ, KBENCH_CACHE_DIR=str(self.cache), PYTHONPATH=str(ROOT), COLUMNS="200", **(env or {}))
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)

    def json(self, *args, **kw) -> tuple[int, dict]:
        proc = self(*args, "--json", **kw)
        assert proc.stdout.strip(), f"no JSON on stdout; stderr:\n{proc.stderr[-3000:]}"
        return proc.returncode, json.loads(proc.stdout)


@pytest.fixture
def kbench(build_cache, tmp_path) -> Kbench:
    return Kbench(build_cache, tmp_path / "runs")


def by_candidate(doc: dict) -> dict:
    return {r["candidate"]: r for r in doc["results"]}
