"""Bad input gets one clear line naming the file (or key) and the fix, and exit code 2: no traceback."""
from __future__ import annotations

import pytest

from conftest import FIXTURES, ROOT

BAD = FIXTURES / "bad"


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith(("build", "run"))]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in proc.stderr + proc.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]


def write(tmp_path, text: str, name="cfg.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("yaml_text, needles", [
    ("trails: 5\n", ["unknown key 'trails'", "trials"]),
    ("timing:\n  budget: 3\n", ["unknown key 'timing.budget'", "budget_s"]),
    ("device: gpu\n", ["device", "'gpu'", "auto, cuda, cpu"]),
    ("dtype: float8\n", ["dtype", "float32, float16, bfloat16"]),
    ("trials: many\n", ["trials", "expected int"]),
    ("timing:\n  budget_s: -1\n", ["timing.budget_s", ">= 0"]),
    ("tolerances:\n  float32: 0\n", ["tolerances.float32", "positive"]),
    ("device: [cpu\n", ["invalid YAML"]),
])
def test_bad_config_values(kbench, tmp_path, yaml_text, needles):
    cfg = write(tmp_path, yaml_text)
    assert_one_line_error(kbench("check", "cpu/1", config=None, *["--config", cfg]), str(cfg), *needles)


def test_missing_config_file(kbench, tmp_path):
    assert_one_line_error(kbench("bench", "--all", "--config", tmp_path / "nope.yaml", config=None),
                          "nope.yaml", "config file not found")


def test_bad_set_override(kbench):
    assert_one_line_error(kbench("bench", "--all", "--set", "timing.rounds=3"), "unknown key 'timing.rounds'")


def test_missing_problem_file(kbench, tmp_path):
    assert_one_line_error(kbench("check", tmp_path / "nope.py"), "nope.py", "not found")


def test_unknown_problem_lists_close_matches(kbench):
    assert_one_line_error(kbench("check", "Add_Relu"), "unknown problem 'Add_Relu'", "1_Add_ReLU")


def test_ambiguous_problem(kbench):
    # "1" is the id of a problem in several levels
    assert_one_line_error(kbench("check", "1"), "ambiguous", "cpu/1_Add_ReLU")


def test_problem_without_get_inputs(kbench):
    assert_one_line_error(kbench("check", BAD / "no_get_inputs.py"), "no_get_inputs.py", "get_inputs")


def test_candidate_without_modelnew(kbench):
    assert_one_line_error(kbench("check", "cpu/1", "--kernel", BAD / "no_modelnew.py"),
                          "no_modelnew.py", "defines no ModelNew")


def test_candidate_with_wrong_constructor(kbench):
    """Found only when the worker constructs it; still exit 2 with one line for `check`."""
    assert_one_line_error(kbench("check", "cpu/1", "--kernel", BAD / "bad_ctor.py"),
                          "bad_ctor.py", "ModelNew(*get_init_inputs())", "same constructor arguments")


def test_missing_candidate_file(kbench, tmp_path):
    assert_one_line_error(kbench("check", "cpu/1", "--kernel", tmp_path / "gone.py"), "gone.py", "not found")


def test_bench_without_selection(kbench):
    assert_one_line_error(kbench("bench"), "--all")


def test_cuda_requested_without_gpu(kbench):
    proc = kbench("bench", "--all", "--device", "cuda", env={"CUDA_VISIBLE_DEVICES": ""})   # (GPUs hidden, if any)
    assert_one_line_error(proc, "--device cuda", "--device cpu")


def test_unknown_flag_is_a_usage_error(kbench):
    proc = kbench("bench", "--everything")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_an_unusable_out_is_one_line(kbench, tmp_path):
    from conftest import Kbench
    afile = write(tmp_path, "not a folder", "runs.txt")
    proc = Kbench(kbench.cache, afile)("check", "cpu/1")          # --out names an existing file
    assert_one_line_error(proc, str(afile), "cannot create the runs folder", "--out")


def test_a_torn_last_line_is_skipped_and_a_damaged_line_named(kbench, tmp_path):
    import json
    from kernelbench_cli.results import Result
    good = Result(problem="cpu/1_Add_ReLU", candidate="x", candidate_path="x.py", device="cpu", dtype="float32",
                  status="ok", phase="done").to_json()
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "results.jsonl").write_text(good + "\n" + good[: len(good) // 2])       # a kill mid-write
    proc = kbench("report", run / "results.jsonl", config=None)
    assert proc.returncode == 0, proc.stderr
    assert "skipped line 2, cut short" in proc.stderr and "Traceback" not in proc.stderr
    (run / "results.jsonl").write_text(good[: len(good) // 2] + "\n" + good + "\n")    # damage in the middle
    assert_one_line_error(kbench("report", run / "results.jsonl", config=None), "results.jsonl:1",
                          "not a kbench result record")
    assert json.loads(good)["status"] == "ok"


def test_a_reference_that_fails_is_named_once_for_every_candidate_of_it(kbench, tmp_path):
    """The reference's forward raises: each candidate of that problem gets the problem's error (not a crash
    of the reference process), and `check` says it in one line with exit 2."""
    problem = write(tmp_path, "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                              "        raise ValueError('broken reference')\n"
                              "def get_inputs():\n    return [torch.ones(4)]\ndef get_init_inputs():\n    return []\n",
                    name="broken_ref.py")
    kernel = ROOT / "kernels" / "cpu" / "1_Add_ReLU" / "fused.py"      # self-contained: it imports from anywhere
    copy = write(tmp_path, kernel.read_text(), name="second.py")
    proc = kbench("check", problem, "--kernel", kernel, "--kernel", copy, "--json")
    assert proc.returncode == 2, proc.stderr
    assert "broken_ref.py" in proc.stderr and "broken reference" in proc.stderr and "Traceback" not in proc.stderr
    import json
    statuses = [r["status"] for r in json.loads(proc.stdout)["results"]]
    assert statuses == ["problem-error", "problem-error"]


def test_lint_on_the_cpu_skips_a_gpu_sized_problem_with_one_line(kbench, tmp_path):
    """Sized on the meta device first: a problem whose forward would take hours here (and 16 GiB of weights)
    is skipped with a line saying why and what to do, instead of running in silence."""
    import json
    problem = write(tmp_path, "import torch\nclass Model(torch.nn.Module):\n    def __init__(self):\n"
                              "        super().__init__()\n        self.fc = torch.nn.Linear(65536, 65536)\n"
                              "    def forward(self, x):\n        return self.fc(x)\n"
                              "def get_inputs():\n    return [torch.randn(65536, 65536)]\n"
                              "def get_init_inputs():\n    return []\n", name="huge_linear.py")
    proc = kbench("lint", problem, "cpu/1", "--json", config=None)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = {r["problem"]: r for r in json.loads(proc.stdout)["results"]}
    huge = next(r for k, r in got.items() if k.endswith("huge_linear"))
    assert huge["phase"] == "skipped" and "skipped on the CPU" in huge["message"] and "--device cuda" in huge["message"]
    assert got["cpu/1_Add_ReLU"]["phase"] != "skipped"
