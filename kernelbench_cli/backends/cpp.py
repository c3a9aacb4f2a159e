"""C++ on the CPU through torch.utils.cpp_extension (load_inline with C++ sources only, or load()). The same
interception as the CUDA backend (candidate/loading.py); attribution by time outside aten operators."""
from __future__ import annotations

import ast

from .base import Backend, calls_named


def uses_cpp(tree: ast.Module) -> bool:
    return bool(calls_named(tree, "load_inline") or calls_named(tree, "load"))      # (CUDA ones: cuda first)


BACKEND = Backend("cpu", ("cpu",), uses_cpp, hook="extension")
