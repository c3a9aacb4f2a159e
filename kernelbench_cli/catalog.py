"""Find problems and candidates on disk and turn them into jobs, without importing any of them.

Layout: problems/<level>/<id>_<Name>.py and kernels/<level>/<id>_<Name>/<candidate>.py.
A problem name resolves from a path, a file stem ("56_Matmul_Sigmoid_Sum"), "level2/56" or
"level2/56_Matmul_Sigmoid_Sum"; an unknown or ambiguous name lists the close matches.
"""
from __future__ import annotations

import ast
import difflib
import hashlib
from dataclasses import dataclass
from pathlib import Path

from . import backends
from .errors import InputError

PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")


@dataclass(frozen=True)
class Problem:
    path: Path
    level: str      # the folder it lives in: level1, level2, cpu, ...
    stem: str       # file name without .py: 56_Matmul_Sigmoid_Sum

    @property
    def key(self) -> str:
        return f"{self.level}/{self.stem}"

    @property
    def id(self) -> str:
        return self.stem.split("_", 1)[0]


@dataclass(frozen=True)
class Candidate:
    path: Path
    name: str
    backend: str              # cuda | cpu | triton | torch (no compiled code found): backends.REGISTRY
    file_error: str = ""      # what is wrong with the file itself (e.g. no ModelNew); reported, not run
    uses: tuple = ()          # every backend the file uses (their hooks go into the candidate process)

    def runs_on(self, device: str) -> bool:
        return device in backends.BY_NAME[self.backend].devices


def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _parse(path: Path, what: str) -> ast.Module:
    try:
        return ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as e:
        raise InputError(f"{path}:{e.lineno}: syntax error in {what} file ({e.msg})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read {what} file ({e})") from None


_DIGESTS: dict[str, str] = {}


def problem_digest(path) -> str:
    """sha256 of the problem file as this kbench first read it (planning, before any candidate is built): its
    reference process executes the file only if it still reads the same (candidate/loading.import_file), so
    code that rewrote it meanwhile (a build's import: an unconfined CUDA build can write) is never run there."""
    key = str(Path(path).resolve())
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(Path(key).read_bytes()).hexdigest()
    return _DIGESTS[key]


def check_problem_file(path: Path) -> None:
    """A problem must define Model, get_inputs() and get_init_inputs() at top level."""
    problem_digest(path)
    missing = [n for n in PROBLEM_NAMES if n not in _top_level_names(_parse(path, "problem"))]
    if missing:
        raise InputError(f"{path}: problem file defines no {', '.join(missing)}; a problem needs "
                         "class Model(nn.Module), get_inputs() and get_init_inputs()")


def detect_backend(tree: ast.Module) -> str:
    """The candidate's backend (backends.REGISTRY: cuda, triton, cpu; torch if none is found)."""
    return backends.detect(tree)[0]


def read_candidate(path: Path) -> Candidate:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: candidate file not found; pass an existing .py file defining ModelNew")
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as e:
        return Candidate(path, path.stem, "torch", f"syntax error at line {e.lineno}: {e.msg}")
    error = "" if "ModelNew" in _top_level_names(tree) else \
        "defines no ModelNew; a candidate needs class ModelNew(nn.Module) taking Model's constructor arguments"
    backend, uses = backends.detect(tree)
    return Candidate(path, path.stem, backend, error, uses)


class Catalog:
    def __init__(self, problems_root: Path, kernels_root: Path):
        self.problems_root = Path(problems_root)
        self.kernels_root = Path(kernels_root)

    def problems(self) -> list[Problem]:
        if not self.problems_root.is_dir():
            raise InputError(f"{self.problems_root}: problems folder not found; run from the repo root or set "
                             "paths.problems in the config")
        found = [Problem(p, p.parent.name, p.stem) for p in self.problems_root.glob("*/*.py")
                 if not p.name.startswith("_")]
        return sorted(found, key=lambda p: (p.level, _id_sort(p.stem), p.stem))

    def resolve(self, name: str) -> Problem:
        path = Path(name)
        if path.suffix == ".py" or path.is_file():
            if not path.is_file():      # a mistyped path: the closest files beside it, or among the problems
                near = [str(p) for p in path.parent.glob("*.py")] if path.parent.is_dir() else []
                near = near or [str(p.path) for p in self.problems()]
                close = difflib.get_close_matches(str(path), near, n=3, cutoff=0.8)
                raise InputError(f"{path}: problem file not found" + (f"; did you mean {', '.join(close)}?"
                                                                      if close else ""))
            check_problem_file(path)
            return Problem(path, path.resolve().parent.name, path.stem)     # (silu.py: its folder's name, not "")
        problems = self.problems()
        level, _, rest = name.rpartition("/")
        matches = [p for p in problems if (not level or p.level == level) and rest in (p.stem, p.id)]
        if len(matches) == 1:
            check_problem_file(matches[0].path)
            return matches[0]
        if matches:
            raise InputError(f"problem '{name}' is ambiguous: {', '.join(p.key for p in matches)}; "
                             "name the level too, e.g. level2/56")
        names = [p.key for p in problems] + [p.stem for p in problems]
        close = difflib.get_close_matches(name, names, n=5, cutoff=0.4)
        hint = f"; did you mean {', '.join(close)}?" if close else "; `kbench list` shows the problems"
        raise InputError(f"unknown problem '{name}'{hint}")

    def candidates(self, problem: Problem) -> list[Candidate]:
        folder = self.kernels_root / problem.level / problem.stem
        return [read_candidate(p) for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")]


def _id_sort(stem: str) -> int:
    head = stem.split("_", 1)[0]
    return int(head) if head.isdigit() else 1 << 30
