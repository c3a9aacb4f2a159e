"""KernelBench's own folders, unmodified: `kbench bench --problems DIR [--candidates PATTERN]`.

Problems: DIR with level subfolders (KernelBench/level1/1_Square_matrix_multiplication_.py, ...) or a flat
folder of <id>_<Name>.py files, which is one level named after the folder.

Candidates: generated files named by a pattern, e.g.
    --candidates 'gens/level_{level}_problem_{id}_sample_{sample}_kernel.py'
{level} is the number in the problem's level folder name (level1 -> 1), {id} the problem's numeric id,
{sample} any text, which becomes the candidate's name. Without {sample} the candidate is named after its
file. Without --candidates, candidates come from paths.kernels as usual.
"""
from __future__ import annotations

import dataclasses
import glob
import re
from pathlib import Path

from .catalog import Candidate, Catalog, Problem, _id_sort, read_candidate
from .errors import InputError

FIELDS = {"level": r"\d*", "id": r"\d+", "sample": r"[^/]+"}


def level_number(level: str) -> str:
    """The number in a level folder's name: level1 -> "1", L02 -> "2", cpu -> ""."""
    digits = "".join(ch for ch in level if ch.isdigit())
    return str(int(digits)) if digits else ""


def compile_pattern(pattern: str) -> tuple[str, re.Pattern]:
    """(a glob that finds the files, a regex that reads level/id/sample back out of a found path)."""
    parts = re.split(r"\{(\w+)\}", pattern)
    names = parts[1::2]
    unknown = sorted(set(names) - set(FIELDS))
    if unknown or "id" not in names:
        raise InputError(f"--candidates {pattern!r}: " + (f"unknown field {{{unknown[0]}}}" if unknown else
                         "needs {id}") + "; use {level}, {id} and {sample}, e.g. "
                         "'gens/level_{level}_problem_{id}_sample_{sample}_kernel.py'")
    glob_parts, rx_parts, seen = [], [], set()
    for i, part in enumerate(parts):
        if i % 2 == 0:
            glob_parts.append(glob.escape(part))
            rx_parts.append(re.escape(part))
        else:
            glob_parts.append("*")
            rx_parts.append(f"(?P={part})" if part in seen else f"(?P<{part}>{FIELDS[part]})")
            seen.add(part)
    return "".join(glob_parts), re.compile("".join(rx_parts))


def match_candidates(pattern: str, problems: list[Problem]) -> dict[str, list[Candidate]]:
    """{problem key: its candidates}: every file the pattern finds, mapped to the problem with its level
    number and id. Files naming no known problem are left out."""
    file_glob, rx = compile_pattern(pattern)
    by_id: dict[tuple[str, int], list[Problem]] = {}
    for p in problems:
        if p.id.isdigit():
            by_id.setdefault((level_number(p.level), int(p.id)), []).append(p)
            by_id.setdefault(("*", int(p.id)), []).append(p)
    out: dict[str, list[Candidate]] = {}
    for path in sorted(glob.glob(file_glob)):
        m = rx.fullmatch(path)
        if not m:
            continue
        fields = m.groupdict()
        level = fields.get("level")
        targets = by_id.get(("*" if level is None else level_number(level), int(fields["id"])), [])
        if level is None and len(targets) > 1:
            raise InputError(f"--candidates {pattern!r}: {path} fits problem id {fields['id']} in several levels "
                             f"({', '.join(p.key for p in targets)}); add {{level}} to the pattern")
        for problem in targets:
            cand = read_candidate(Path(path))
            if fields.get("sample") is not None:
                cand = dataclasses.replace(cand, name=fields["sample"])
            out.setdefault(problem.key, []).append(cand)
    return out


class FolderCatalog(Catalog):
    """A Catalog over a KernelBench problems folder (nested or flat), with candidates found by a pattern."""

    def __init__(self, problems_root: Path, kernels_root: Path, pattern: str | None = None):
        super().__init__(problems_root, kernels_root)
        self.pattern = pattern
        self._matched: dict[str, list[Candidate]] | None = None

    def problems(self) -> list[Problem]:
        root = self.problems_root
        if not root.is_dir():
            raise InputError(f"{root}: problems folder not found; pass a KernelBench folder (with level1/, "
                             "level2/, ... or <id>_<Name>.py files)")
        if any(p for p in root.glob("*/*.py") if not p.name.startswith("_")):
            return super().problems()
        flat = [Problem(p, root.name, p.stem) for p in root.glob("*.py") if not p.name.startswith("_")]
        if not flat:
            raise InputError(f"{root}: no problem files (expected level folders or <id>_<Name>.py files)")
        return sorted(flat, key=lambda p: (_id_sort(p.stem), p.stem))

    def candidates(self, problem: Problem) -> list[Candidate]:
        if self.pattern is None:
            return super().candidates(problem)
        if self._matched is None:
            self._matched = match_candidates(self.pattern, self.problems())
        return self._matched.get(problem.key, [])
