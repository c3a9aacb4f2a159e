"""Candidate-process side of the cpp_extension backends (cuda, cpu): the load_inline interceptor is the
record itself (candidate/loading.BuildInterceptor), installed for every candidate."""
from __future__ import annotations


def install(record, device: str, cache_dir: str) -> None:
    record.install()
