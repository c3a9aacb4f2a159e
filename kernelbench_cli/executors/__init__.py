"""Where jobs run. Both executors take the same planned jobs and append each Result to the run store the
moment it arrives; they differ only in where the isolated worker processes are started:

  local.py          this host: a build pool plus one worker slot per GPU (--gpus) or per CPU worker
                    (--workers); a job starts as soon as its candidate is built
  ray_executor.py   a Ray cluster (--executor ray): builds as CPU tasks, jobs as GPU tasks; each task
                    runs the same isolated worker subprocess, so isolation is unchanged

`config.executor` selects one; `executor.execute` (the pipeline's entry point) calls `run_jobs`.
"""
from __future__ import annotations


def run_jobs(jobs, cfg, device: str, store, console, build_only: bool = False, on_result=None) -> list:
    if cfg.executor.kind == "ray":
        from .ray_executor import execute_ray
        return execute_ray(jobs, cfg, device, store, console, build_only=build_only, on_result=on_result)
    from .local import execute_local
    return execute_local(jobs, cfg, device, store, console, build_only=build_only, on_result=on_result)
