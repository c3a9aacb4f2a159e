"""Candidate backends: one module each, one registry here.

A backend module defines BACKEND, a `Backend` saying how a candidate of that kind is recognised from its
file's AST (the parent never imports candidate code), on which devices it runs, on which its times are not
speeds (an interpreter), and the module whose `install(record, device, cache_dir)` the candidate process
runs before it imports the candidate: that is where a backend's build or warm-up is intercepted, its calls
counted and its results ablated (the proof of custom work, judge/evidence.py), and its kernels named for the
attribution profile. Adding a backend is one module and one entry in REGISTRY.
"""
from __future__ import annotations

import ast

from . import cpp, cuda, triton
from .base import Backend

REGISTRY = [cuda.BACKEND, triton.BACKEND, cpp.BACKEND]      # in this order: the first one found names it
TORCH = Backend("torch", ("cpu", "cuda"), lambda tree: True)  # no compiled code found: plain PyTorch
BY_NAME = {b.name: b for b in REGISTRY + [TORCH]}


def detect(tree: ast.Module) -> tuple[str, tuple[str, ...]]:
    """(the candidate's backend, every backend it uses). A module constant BACKEND = "<name>" overrides the
    guess of the first."""
    used = tuple(b.name for b in REGISTRY if b.found(tree))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "BACKEND" for t in node.targets)
                and isinstance(node.value, ast.Constant) and node.value.value in BY_NAME):
            return node.value.value, used
    return (used[0] if used else "torch"), used


def interpreted(name: str, device: str) -> bool:
    return device in BY_NAME.get(name, TORCH).interpreted_on
