"""Run jobs on this host: a build pool, and one slot per GPU (--gpus) or per CPU worker (--workers) fed
from one queue.

Each build is a build process supervised by a thread of the pool (`build.jobs` at a time). When a build
finishes, its jobs go straight to the run queue on CUDA, so the GPUs measure while other candidates still
compile. On the CPU backend the queue opens after the last build: a compiler running next to a timed CPU
job would be timed with it.

A slot is a thread that keeps one reference process (judge) per problem: it takes the next job, reuses
its judge if the job is of the same problem (reference outputs, oracle and a warm candidate process are
ready), else replaces it. On CUDA, when a slot takes the last job of a problem, it starts the next
problem's judge in hold mode: torch is imported meanwhile (other cores), the device is touched only once
that judge's first job comes, so nothing is added to the GPU while the current job is timed. On CUDA a slot owns one GPU and its processes see only that one
(CUDA_VISIBLE_DEVICES), so two jobs never share a GPU; the slot's name goes into Result.env["slot"].
The queue is ordered by problem, so a slot's consecutive jobs share a judge.
"""
from __future__ import annotations

import os
import queue
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from .. import backends, cpus
from .. import results as R
from ..build import build_env, build_parallelism, job_build
from ..errors import InputError
from ..results import Result
from . import lifecycle
from .collect import Collector, as_job_result, group_builds, internal_error, progress_bar, record_slot
from .judges import JudgeClient, build, recorded
from .plan import tag


@dataclass(frozen=True)
class Slot:
    name: str                                  # gpu0, gpu1, ... or cpu0, cpu1, ...
    env: dict = field(default_factory=dict)    # added to the worker's environment


def _listed() -> list[str] | None:
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    return None if listed is None else [d.strip() for d in listed.split(",") if d.strip()]


def visible_gpus() -> list[str]:
    """Device ids this process may use: CUDA_VISIBLE_DEVICES if set, else every GPU the driver reports."""
    if _listed() is not None:
        return _listed()
    import torch   # device_count reads NVML / the driver; it creates no CUDA context
    return [str(i) for i in range(torch.cuda.device_count())]


def parse_gpus(spec: str, visible: list[str]) -> list[str]:
    """--gpus all | N (the first N) | I,J (positions among the visible GPUs; "3," is GPU 3 alone)
    -> the device ids to give one slot each."""
    spec = str(spec).strip()
    if not visible:
        raise InputError(f"--gpus {spec}: no CUDA GPU is visible here")
    if spec == "all":
        return list(visible)
    if "," in spec:
        try:
            wanted = [int(s) for s in spec.split(",") if s.strip()]
        except ValueError:
            wanted = []
        bad = [i for i in wanted if not 0 <= i < len(visible)]
        if not wanted or bad:
            raise InputError(f"--gpus {spec}: pick GPUs among 0..{len(visible) - 1} (the {len(visible)} visible), "
                             "e.g. --gpus 0,2")
        return [visible[i] for i in dict.fromkeys(wanted)]
    if spec.isdigit() and int(spec) >= 1:
        if int(spec) > len(visible):
            raise InputError(f"--gpus {spec}: only {len(visible)} GPU(s) visible; use --gpus all")
        return visible[:int(spec)]
    raise InputError(f"--gpus {spec!r}: use all, a count (--gpus 2) or GPU indices (--gpus 0,2)")


def make_slots(cfg, device: str) -> list[Slot]:
    if device == "cuda":
        if not cfg.executor.gpus:      # default: the one GPU a plain CUDA process would use
            return [Slot(f"gpu{(_listed() or ['0'])[0]}")]
        return [Slot(f"gpu{d}", {"CUDA_VISIBLE_DEVICES": d}) for d in parse_gpus(cfg.executor.gpus, visible_gpus())]
    n = max(1, cfg.executor.workers)
    # n timed CPU jobs at once: each on cores of its own (cpus.py), its threads as many as its cores
    slots = []
    for i, mine in enumerate(cpus.slot_cpus(n)):
        env = {cpus.ENV: ",".join(map(str, mine))}
        if n > 1 and "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = len(mine)
        slots.append(Slot(f"cpu{i}", env))
    return slots


def execute_local(jobs, cfg, device: str, store, console, build_only: bool = False, on_result=None,
                  overlap: bool | None = None) -> list[Result]:
    """Build every candidate once, run each job through its problem's judge on a free slot; Results in job
    order. `overlap`: start jobs while other candidates build (default: on CUDA only, see the module doc)."""
    if overlap is None:      # (a build that warms its candidate on the GPU must not run beside a timed job)
        overlap = device == "cuda" and not any(device in backends.BY_NAME[b].warms_on
                                               for j in jobs for b in j.candidate.uses)
    logs = store.jobs
    groups = group_builds(jobs)
    collector = Collector(jobs, store, on_result)
    builders, max_jobs = build_parallelism(cfg, len(groups))
    b_env = build_env(cfg, device, max_jobs)
    r_env = build_env(cfg, device, build_parallelism(cfg, 1)[1])
    slots = [] if build_only else make_slots(cfg, device)
    runq: queue.PriorityQueue = queue.PriorityQueue()    # (problem order, job index): a judge serves a run of jobs

    order = {key: n for n, key in enumerate(dict.fromkeys(j.problem.key for j in jobs))}
    undispatched = Counter(j.problem.key for j in jobs if not j.candidate.file_error)   # jobs yet to reach a judge
    counting = threading.Lock()

    ahead_of: set = set()     # problems whose judge a slot has started ahead

    def dispatched(key: str) -> int:
        """One job of `key` leaves the queue (run or failed to build); how many more of it may follow."""
        with counting:
            undispatched[key] -= 1
            return undispatched[key]

    def upcoming(after: str) -> str | None:
        """The next problem in queue order with jobs still to come, that no slot has a judge ready for."""
        with counting:
            later = [k for k in order if order[k] > order[after] and undispatched[k] > 0 and k not in ahead_of]
            if later:
                ahead_of.add(later[0])
            return later[0] if later else None

    def judge_for(key: str, slot: Slot, hold: bool = False) -> JudgeClient:
        return JudgeClient(key, str(runnable[key].path), cfg, device, {**r_env, **slot.env}, logs, hold=hold,
                           jobs=undispatched[key])

    first = {}            # each slot's reference process starts now, warming up while the candidates build
    runnable = {j.problem.key: j.problem for j in jobs if not j.candidate.file_error}
    for slot, key in zip(slots, [k for k in order if k in runnable]):
        try:
            first[slot.name] = judge_for(key, slot)
        except Exception:            # it will be started (and fail visibly) on demand
            pass


    def slot_loop(slot: Slot) -> None:
        judge = first.pop(slot.name, None)
        ahead = None       # CUDA: the next problem's judge, started (torch imported, device untouched) meanwhile
        try:
            while (item := runq.get())[2] is not None:
                _, i, built = item
                job = jobs[i]
                try:
                    if judge is not None and (judge.problem_key != job.problem.key or not judge.alive):
                        if judge.alive and ahead is None and undispatched[judge.problem_key] > 0:
                            ahead = judge        # its problem's candidates are still building: keep it warm
                        else:
                            judge.close()
                        judge = None
                    if judge is None and ahead is not None and ahead.problem_key == job.problem.key:
                        judge, ahead = ahead, None
                        if not judge.alive:
                            judge.close()
                            judge = None
                    if judge is None:
                        judge = judge_for(job.problem.key, slot)
                    left = dispatched(job.problem.key)
                    if not left and ahead is None and device == "cuda":
                        key = upcoming(job.problem.key)
                        ahead = judge_for(key, slot, hold=True) if key else None
                    result = judge.run(job, job.spec(cfg, tag("job", i, job)), left=left)
                    if not judge.alive:
                        judge = None
                except Exception as e:       # e.g. the run folder vanished: report it on this job, keep going
                    result = internal_error(job, cfg, device, e)
                result.build = job_build(built.build, result.build)
                record_slot(result, slot.name)
                collector.finish(i, result)
        finally:
            for j in (judge, ahead):
                if j is not None:
                    j.close()

    def enqueue(i, built):
        runq.put((order[jobs[i].problem.key], i, built))

    def do_build(n, idx):
        job = jobs[idx[0]]
        try:
            return build(job, cfg, device, b_env, logs, tag("build", n, job))
        except Exception as e:
            return internal_error(job, cfg, device, e)

    with progress_bar(console) as progress:
        build_bar = collector.start(progress, len(groups), build_only, cfg, device)
        threads = [threading.Thread(target=slot_loop, args=(s,), name=f"kbench-{s.name}", daemon=True) for s in slots]
        pool = ThreadPoolExecutor(max_workers=builders, thread_name_prefix="kbench-build")
        held = []

        def built_one(built: Result, path: str) -> None:
            progress.update(build_bar, advance=1, current=f"{built.candidate}: {built.build.status}")
            for i in groups[path]:
                if build_only or built.status != R.OK:
                    dispatched(jobs[i].problem.key)
                    collector.finish(i, as_job_result(built, jobs[i]))
                elif overlap:
                    enqueue(i, built)
                else:
                    held.append((i, built))
        try:
            # Candidates built before are known at once (no process): queue them all before any slot takes a
            # job, so the slots start with the first problem in order, where their judges are already warming.
            to_build = {}
            for n, (path, idx) in enumerate(groups.items()):
                hit = recorded(jobs[idx[0]], cfg, device, b_env, tag("build", n, jobs[idx[0]]))
                if hit is not None:
                    built_one(hit, path)
                else:
                    to_build[n] = (path, idx)
            for t in threads:
                t.start()
            futures = {pool.submit(do_build, n, idx): path for n, (path, idx) in to_build.items()}
            for fut in as_completed(futures):
                built_one(fut.result(), futures[fut])
            for i, built in held:
                enqueue(i, built)
            for k, _ in enumerate(threads):
                runq.put((1 << 30, k, None))
            for t in threads:
                while t.is_alive():
                    t.join(0.2)        # short joins: the main thread must stay responsive to signals
        except BaseException:         # Ctrl-C, SIGTERM: no process may outlive the run
            collector.close()
            pool.shutdown(wait=False, cancel_futures=True)
            lifecycle.kill_all()
            raise
        pool.shutdown()
    return collector.results()
