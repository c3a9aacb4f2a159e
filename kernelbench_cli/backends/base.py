"""What a backend is (see backends/__init__.py for the registry)."""
from __future__ import annotations

import ast
import importlib
import importlib.util
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Backend:
    name: str
    devices: tuple[str, ...]                 # where its candidates run
    found: Callable[[ast.Module], bool]      # the candidate file uses it (read from the AST alone)
    hook: str = ""                           # module (under backends/) installed in the candidate process
    interpreted_on: tuple[str, ...] = ()     # devices where it runs in an interpreter: correctness, no speed
    requires: str = ""                       # a package it needs beyond kbench's own dependencies
    warms_on: tuple[str, ...] = ()           # devices where its build runs the candidate there (jit compiles)

    def missing(self) -> str:
        """Why its candidates cannot run here ("" if they can), found without importing anything."""
        if self.requires and importlib.util.find_spec(self.requires) is None:
            return f"{self.requires} is not installed (pip install {self.requires})"
        return ""

    def install(self, record, device: str, cache_dir: str) -> None:
        if self.hook:
            importlib.import_module(f"{__package__}.{self.hook}").install(record, device, cache_dir)

    def prepare(self, device: str) -> None:
        """Candidate process, before the sandbox and the candidate's import: bring up what the backend's run
        time needs that the sandbox refuses (subprocesses, file writes), without running candidate code."""
        hook = importlib.import_module(f"{__package__}.{self.hook}") if self.hook else None
        if hook is not None and hasattr(hook, "prepare"):
            hook.prepare(device)

    def warm(self, module, msg: dict, device: str, extensions: list) -> None:
        """Build process, after the import: compile what compiles at first use (raises what failed); notes go on
        the candidate's extension records."""
        if device in self.warms_on:
            importlib.import_module(f"{__package__}.{self.hook}").warm(module, msg, device, extensions)

    def check(self, msg: dict, device: str, extensions: list) -> None:
        """Build process, trusted side, after the warm-up: checks of what it recorded that run no candidate code
        here (raises what failed; Triton on the CPU: its launches compiled for a GPU, in a sandboxed process)."""
        hook = importlib.import_module(f"{__package__}.{self.hook}") if self.hook else None
        if device in self.warms_on and hasattr(hook, "check"):
            hook.check(msg, device, extensions)


def calls_named(tree: ast.Module, name: str) -> list[ast.Call]:
    """Calls of a function called `name` (plain or as an attribute), anywhere in the file."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and (n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")) == name]


def imports(tree: ast.Module, package: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == package for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == package:
            return True
    return False
