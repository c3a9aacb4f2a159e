"""CUDA through torch.utils.cpp_extension: load_inline with CUDA sources, or load() of a .cu file. Built in
the build process into the content-keyed cache; calls counted and ablated at the extension module's
functions; attribution by the kernel names its sources define (candidate/loading.py)."""
from __future__ import annotations

import ast

from .base import Backend, calls_named


def uses_cuda(tree: ast.Module) -> bool:
    inline = any(any(k.arg == "cuda_sources" for k in c.keywords) or len(c.args) > 2
                 for c in calls_named(tree, "load_inline"))
    return inline or any(isinstance(n, ast.Constant) and str(n.value).endswith(".cu")
                         for c in calls_named(tree, "load") for n in ast.walk(c))


BACKEND = Backend("cuda", ("cuda",), uses_cuda, hook="extension")
