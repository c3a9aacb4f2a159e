"""Run jobs on a Ray cluster (`--executor ray [--ray-address ADDR]`, `pip install 'kbench[ray]'`).

Builds are CPU tasks; a job is a task holding one GPU (num_gpus=1; one CPU on the CPU backend), so Ray
spreads jobs over every GPU of every node and never puts two on one GPU. Each task runs the same two
process kinds as the local executor (a build process, or a reference process that judges the job in a
candidate process of its own: orchestrate/judges.py) and returns the Result as a dict; the driver waits on whichever task ends first (ray.wait), appends its Result to the run store at
once and, when a build ends, submits that candidate's jobs. Tasks are never retried: if a node or a Ray
worker dies mid-job, that job gets a `crash` Result naming Ray's error and the run goes on.

Files: a task reads the problem and candidate from the same path if its node has it (one host, or a
shared filesystem); otherwise the driver's copy is written to the node's temp dir. A candidate that
loads other files by relative path needs the shared filesystem. Each node keeps its own build cache
(build.cache_dir): without a shared one, a job on a node that did not build its candidate compiles it
again inside the job. On a remote cluster (`--ray-address`) the kbench package itself is shipped with
the job (runtime_env py_modules), so the nodes need only torch and a compiler.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .. import results as R
from ..build import build_env, build_parallelism, detect_arch, job_build
from ..errors import InputError
from ..results import Result
from .collect import Collector, as_job_result, group_builds, internal_error, progress_bar, record_slot
from .plan import Job, tag

INSTALL_HINT = "--executor ray needs Ray, which is not installed: pip install 'kbench[ray]'"


def import_ray():
    try:
        import ray
    except ImportError:
        raise InputError(INSTALL_HINT) from None
    return ray


def require_ray() -> None:
    """Fail early (exit 2, one line) when Ray is missing, before anything is built."""
    import_ray()


def _localize(job: Job, files: dict) -> Job:
    """On a node without the driver's files, write them to a temp dir and point the job there."""
    import dataclasses
    where = None
    for attr, text in files.items():
        obj = getattr(job, attr)
        if not Path(obj.path).is_file():
            where = where or Path(tempfile.mkdtemp(prefix="kbench-files-"))
            path = where / attr / Path(obj.path).name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            job = dataclasses.replace(job, **{attr: dataclasses.replace(obj, path=path)})
    return job


def _slot_name() -> str:
    import ray
    node = ray.util.get_node_ip_address()
    gpus = ray.get_gpu_ids()
    return f"ray:{node}:gpu{','.join(map(str, gpus))}" if gpus else f"ray:{node}:pid{os.getpid()}"


def run_task(kind: str, job: Job, cfg, device: str, files: dict, work_dir: str, name: str, env: dict) -> dict:
    """Body of every Ray task: a build process, or a reference process judging one job, as on the local
    executor."""
    from .judges import JudgeClient, build
    env = dict(env)
    if device == "cuda" and "TORCH_CUDA_ARCH_LIST" not in env:
        env["TORCH_CUDA_ARCH_LIST"] = detect_arch()   # build.arch auto: this node's GPU (None: torch decides)
    here = _localize(job, files)
    try:
        if kind == "build":
            result = build(here, cfg, device, env, Path(work_dir), name)
        else:
            judge = JudgeClient(here.problem.key, str(here.problem.path), cfg, device, env, Path(work_dir))
            try:
                result = judge.run(here, here.spec(cfg, name), left=0)     # one job per judge here
            finally:
                judge.close()
            record_slot(result, _slot_name())
    except Exception as e:
        result = internal_error(job, cfg, device, e)
    result.candidate_path = str(job.candidate.path)     # the driver's path, not the node's copy
    return result.to_dict()


def _ray_failure(job: Job, cfg, device: str, error: BaseException) -> Result:
    first = (str(error).strip().splitlines() or [""])[0]
    result = internal_error(job, cfg, device, error)
    result.message = f"Ray task failed: {type(error).__name__}: {first}"[:300]
    return result


def _connect(ray, cfg) -> None:
    if ray.is_initialized():          # a caller (e.g. a reward loop) already connected: use its cluster
        return
    address = cfg.executor.ray_address or None
    kw = {}
    if address:   # a remote cluster's nodes may lack kbench: ship the package with the job
        kw["runtime_env"] = {"py_modules": [str(Path(__file__).resolve().parent.parent)]}
    ray.init(address=address, include_dashboard=False, log_to_driver=False, **kw)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def execute_ray(jobs, cfg, device: str, store, console, build_only: bool = False, on_result=None) -> list[Result]:
    ray = import_ray()
    _connect(ray, cfg)
    task = ray.remote(run_task)
    build_task = task.options(num_cpus=1, max_retries=0)
    run_on = task.options(num_gpus=1, num_cpus=1, max_retries=0) if device == "cuda" else \
        task.options(num_cpus=1, max_retries=0)
    work = str(store.jobs)
    groups = group_builds(jobs)
    collector = Collector(jobs, store, on_result)
    b_env = build_env(cfg, device, build_parallelism(cfg, len(groups))[1])
    r_env = build_env(cfg, device, build_parallelism(cfg, 1)[1])
    if cfg.build.arch == "auto":     # the driver may have no GPU: each node picks its own arch (run_task)
        b_env.pop("TORCH_CUDA_ARCH_LIST", None)
        r_env.pop("TORCH_CUDA_ARCH_LIST", None)
    files = {}

    def files_of(job) -> dict:
        key = (str(job.problem.path), str(job.candidate.path))
        if key not in files:
            files[key] = {"problem": _read(key[0]), "candidate": _read(key[1])}
        return files[key]

    pending = {}   # ObjectRef -> (kind, key): ("build", candidate path) or ("run", job index)
    built_of: dict[int, Result] = {}
    with progress_bar(console) as progress:
        build_bar = collector.start(progress, len(groups), build_only, cfg, device)
        for n, (path, idx) in enumerate(groups.items()):
            job = jobs[idx[0]]
            ref = build_task.remote("build", job, cfg, device, files_of(job), work, tag("build", n, job), b_env)
            pending[ref] = ("build", path, job)
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    kind, key, job = pending.pop(ref)
                    try:
                        result = Result.from_dict(ray.get(ref))
                    except Exception as e:     # the task's worker or node died: RayTaskError, WorkerCrashedError...
                        result = _ray_failure(job, cfg, device, e)
                    if kind == "run":
                        result.build = job_build(built_of[key].build, result.build)
                        collector.finish(key, result)
                        continue
                    progress.update(build_bar, advance=1, current=f"{result.candidate}: {result.build.status}")
                    for i in groups[key]:
                        if build_only or result.status != R.OK:
                            collector.finish(i, as_job_result(result, jobs[i]))
                            continue
                        built_of[i] = result
                        ref = run_on.remote("run", jobs[i], cfg, device, files_of(jobs[i]), work,
                                            tag("job", i, jobs[i]), r_env)
                        pending[ref] = ("run", i, jobs[i])
        except BaseException:
            collector.close()
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    return collector.results()
