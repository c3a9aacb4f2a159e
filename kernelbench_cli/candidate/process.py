"""The candidate process (untrusted): one per job, started warm, discarded after it.

    python -m kernelbench_cli.candidate run     (fd $KBENCH_FD: the socket to the reference process)
    python -m kernelbench_cli.candidate build   (fd $KBENCH_FD: the socket to the parent; compiles, exits)

`run`: before any candidate code exists here, it ties itself to the reference process (parent-death
signal), drops capabilities, imports torch and brings the device up (so the judge can start it ahead of
need; with KBENCH_HOLD set it waits for "go" before touching the device), and answers timing pings. On a job it maps the shared buffers, installs the seccomp filter
(sandbox.confine), imports the candidate from the build cache without compiling, builds ModelNew and
serves calls. Every number it sends is a claim: the judge checks outputs itself, times the calls with
its own clock (the witness) and freezes this process between calls.
"""
from __future__ import annotations

import faulthandler
import os
import sys
import time
import traceback

from .. import cpus, sandbox
from ..channel import CANARY_PAD, CANARY_SIZES, Channel, Reply, map_specs
from ..l2flush import DriverFlush
from ..layouts import view_of
from .clocks import DeviceTimer, perf_counter_ns
from .outputs import describe, flatten


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def failure_status(e: BaseException) -> str:
    return "cuda-error" if "CUDA error" in str(e) or type(e).__name__ == "AcceleratorError" else "runtime-error"


def install_backends(msg: dict, compile: bool):
    """The record of what the candidate builds and calls, with the hook of every backend it uses (msg
    "backends", read from its file by the parent; the load_inline one always) installed and each backend's
    run-time brought up: trusted code, before the sandbox (Triton's driver runs ldconfig and ptxas once)."""
    from ..backends import BY_NAME
    from .loading import BuildInterceptor
    interceptor = BuildInterceptor(msg["cache_dir"], msg.get("verbose", False), compile=compile)
    device = os.environ.get("KBENCH_DEVICE", "cpu")
    for name in dict.fromkeys(["cpu"] + list(msg.get("backends", []))):
        BY_NAME[name].install(interceptor, device, msg["cache_dir"])
        BY_NAME[name].prepare(device)
    return interceptor


def import_candidate(msg: dict, interceptor):
    """(module or None, BuildInfo dict, failure Reply or None, interceptor), the backends installed first."""
    from .loading import BuildFailed, import_file
    path = msg["candidate_path"]
    start = time.perf_counter()
    module, error = None, None
    try:
        module = import_file(path, "kbench_candidate")
    except BuildFailed as e:
        error = e
    except Exception as e:
        traceback.print_exc()
        error = e
    exts = interceptor.extensions
    build = {"extensions": exts, "seconds": round(time.perf_counter() - start, 3),
             "status": build_status(exts, interceptor.failure), "log": ""}
    if interceptor.failure:
        build["log"] = interceptor.failure[-4000:]      # the compiler's last words
        print(interceptor.failure, file=sys.stderr)
        name = exts[-1]["name"] if exts else "?"
        return None, build, Reply(op="error", ok=False, status="compile-error",
                                  message=f"extension '{name}' failed to build (compiler output in the log)"), interceptor
    if error is not None:
        return None, build, Reply(op="error", ok=False, status="import-error",
                                  message=f"importing the candidate raised {one_line(error)}"), interceptor
    if not hasattr(module, "ModelNew"):
        return None, build, Reply(op="error", ok=False, status="missing-modelnew",
                                  message="the candidate defines no ModelNew; add class ModelNew(nn.Module)"), interceptor
    return module, build, None, interceptor


def build_status(exts: list, failure: str | None, interpreted: bool | None = None) -> str:
    """failed | cached | built (load_inline extensions) | jit | interpreted (Triton kernels only: they
    compile at their first launch, or never under the interpreter) | none."""
    if failure:
        return "failed"
    built = [x for x in exts if x["backend"] != "triton"]
    if built:
        return "cached" if all(x["cached"] for x in built) else "built"
    if exts:
        interpreted = os.environ.get("TRITON_INTERPRET") == "1" if interpreted is None else interpreted
        return "interpreted" if interpreted else "jit"
    return "none"


class Server:
    def __init__(self, chan: Channel):
        import torch

        from . import attribution        # its profiler entry points are bound now, before any candidate code
        self.torch, self.chan, self.attribution = torch, chan, attribution
        self.device = os.environ.get("KBENCH_DEVICE", "cpu")
        self.model = self.interceptor = self.flush = self.wake = None
        self.last: dict = {}
        self.lanes: list = []
        self.inputs, self.outputs, self.weights = [], [], []
        self.extra: dict = {}        # storage address -> "a parameter": the model's parameters and buffers

    def device_up(self) -> None:
        torch = self.torch
        if self.device == "cuda":
            torch.cuda.init()
            a = torch.randn(256, 256, device="cuda")
            (a @ a).sum().item()                    # context, cuBLAS handle and workspace: off the clock
            torch.cuda.synchronize()
            self.timer = DeviceTimer(torch)          # bound before any candidate code exists here
            self.spin = torch._C._cuda_sleep          # the canary's work (clocks.py), bound before candidate code
        else:
            # A CPU job's processes see no GPU (build.build_env), but on a GPU host the CUDA driver starts a
            # thread at its first query all the same (cuInit, measured on the H200): asked here, that thread
            # is part of the baseline, not taken for the candidate's when its code (or Triton) asks later; and
            # the driver, initialised with no device visible, gives this process none afterwards.
            torch.cuda.is_available()
        try:
            self.attribution.warm_up(self.device)       # the profiler (CUPTI), while this process may open files
        except Exception as e:
            print(f"kbench: profiler warm-up failed: {one_line(e)}", file=sys.stderr)
        torch.ones(1 << 20).mul_(2).sum()           # the intra-op thread pool, before the thread baseline
        if self.device == "cpu":
            cpus.pin_pool(torch)                     # before confine(), which refuses it (cpus.py)
            self.wake = cpus.team_waker(torch)

    def serve(self) -> None:
        while True:
            msg, fds = self.chan.recv()
            op = msg.get("op")
            if op == "quit":
                return
            handler = getattr(self, f"op_{op}", None)
            try:
                reply = handler(msg, fds) if handler else Reply(op="error", ok=False, message=f"unknown op {op}")
            except Exception as e:          # the forward (or constructor) raised: a reported result
                traceback.print_exc()
                reply = Reply(op="error", ok=False, status=failure_status(e), message=one_line(e))
            reply.nonce = msg.get("nonce", 0)
            self.chan.send(reply)

    def op_map(self, msg, fds) -> Reply:
        """The job's buffers (lanes of input and output slots, one lane per call of a batch; the reference's
        weights) and a stand-in: the problem's own Model with those weights, so the judge can time the whole
        path of a batch on trusted code before any candidate code exists here (op_ping)."""
        torch = self.torch
        fds = list(fds)
        self.lanes = []
        for lane in msg["lanes"]:
            ins = map_specs(lane["inputs"], fds[:len(lane["inputs"])], self.device)
            fds = fds[len(ins):] if self.device == "cpu" else fds
            outs = map_specs(lane["outputs"], fds[:len(lane["outputs"])], self.device)
            fds = fds[len(outs):] if self.device == "cpu" else fds
            self.lanes.append((ins, outs))
        self.weights = map_specs(msg["weights"], fds[:len(msg["weights"])], self.device)
        fds = fds[len(self.weights):] if self.device == "cpu" else fds
        self.shape_lanes = []       # the shapes variants' buffers: [inputs, outputs, weights, names, init args]
        for lane in msg.get("shapes", []):
            parts = []
            for key in ("inputs", "outputs", "weights"):
                parts.append(map_specs(lane[key], fds[:len(lane[key])], self.device))
                fds = fds[len(lane[key]):] if self.device == "cpu" else fds
            self.shape_lanes.append(parts + [lane["weight_names"], lane["init_args"]])
        self.inputs, self.outputs = self.lanes[0]
        if self.device == "cuda" and msg.get("flush_bytes"):     # (before the import: its launch is bound here)
            self.flush = DriverFlush(torch, msg["flush_bytes"])
        from .loading import import_file
        problem = import_file(msg["problem_path"], "kbench_standin_problem")
        with torch.device(self.device):
            torch.manual_seed(msg["seed"])
            standin = problem.Model(*msg["init_args"])
        self.model = standin.to(device=self.device, dtype=getattr(torch, msg["dtype"])).eval()
        if msg["weight_names"]:
            self.model.load_state_dict(dict(zip(msg["weight_names"], self.weights)))
        spans = [[t.data_ptr(), t.data_ptr() + t.untyped_storage().nbytes()] for ins, _ in self.lanes for t in ins]
        return Reply(op="mapped", addresses=spans)

    def op_ping(self, msg, fds) -> Reply:
        """A whole batch on the stand-in: the judge's witness time minus the stand-in's own times is what a
        batch costs beyond the forwards (hand-over, flushes, copying outputs into the slots, freeing them)."""
        reply = self.op_call(msg, fds)
        reply.ms = sum(reply.times)
        return reply

    def op_load(self, msg, fds) -> Reply:
        weights, self.weights, self.model = self.weights, [], None
        sys.modules.pop("kbench_standin_problem", None)
        import gc
        gc.collect()            # the stand-in is gone before candidate code could look for it
        interceptor = install_backends(msg, compile=False)
        confined = sandbox.confine()
        sys.dont_write_bytecode = True
        module, build, failure, self.interceptor = import_candidate(msg, interceptor)
        if failure:
            failure.build = build
            return failure
        self.module, self.load_msg = module, msg
        try:
            model, how = self.construct(msg["init_args"], msg["weight_names"], weights)
        except Exception as e:
            traceback.print_exc()
            status = "bad-constructor" if isinstance(e, TypeError) else failure_status(e)
            return Reply(op="error", ok=False, status=status, build=build,
                         message=f"ModelNew(*get_init_inputs()) raised {one_line(e)}; ModelNew must take the same "
                                 "constructor arguments as Model")
        with self.torch._C.DisableTorchFunction():     # (a tensor subclass's hooks are candidate code)
            self.extra = {t.untyped_storage().data_ptr(): "a parameter"
                          for t in list(model.parameters()) + list(model.buffers()) if t.numel()}
        self.model = model
        del weights
        return Reply(op="loaded", build=build, weights=how, sandbox="seccomp" if confined else "none")

    def construct(self, init_args: list, names: list, weights: list):
        """ModelNew(*init_args) under the job's seed, given the reference's weights where its state_dict has
        the same names and shapes (else its own seeded ones): (model, how its weights were set)."""
        torch = self.torch
        with torch.device(self.device):
            torch.manual_seed(self.load_msg["seed"])
            model = self.module.ModelNew(*init_args)
        model = model.to(device=self.device, dtype=getattr(torch, self.load_msg["dtype"])).eval()
        sd = model.state_dict()
        how = "seed" if names or sd else "none"
        if names and list(sd.keys()) == names and all(tuple(sd[k].shape) == tuple(w.shape) for k, w in zip(names, weights)):
            model.load_state_dict(dict(zip(names, weights)))
            how = "state_dict"
        return model, how

    def shape_model(self, k: int):
        """The ModelNew of shapes variant k, built on its first call (a constructor error is the variant's)."""
        lane = self.shape_lanes[k]
        if len(lane) == 5:
            lane.append(self.construct(lane[4], lane[3], lane[2])[0])
        return lane[5]

    def _calls(self) -> int:
        return sum(self.interceptor.calls.values()) if self.interceptor else 0

    def op_call(self, msg, fds) -> Reply:
        """A batch of calls, one per lane named, back to back, each timed with this process's clock, the L2
        flushed between them and after the last (the judge flushed it before the first, which a full-device hold
        precedes: l2flush.HOLD_CYCLES), each flush timed too, from an event just before it to the next call's
        start (reply.flush_ms: a flush held back by work still running is the judge's to charge, judge/flush.py);
        after the last, each call's outputs are copied into its lane's slots (CUDA) or left where the judge can
        read them (CPU). On CUDA the host queues work ahead of the device, so the witness measures the device's
        time, not this loop's Python."""
        torch = self.torch
        self.last = {}
        reply = Reply(op="done")
        events, flushes, done = [], [], []
        (size, at), canary = msg.get("canary", (-1, -1)), None    # clock canary (clocks.py): size, position
        spun, inside, after = msg.get("inside", (0, -1, -1))        # the spin inside a call, and after one (clocks.py)
        pinged = msg.get("op") == "ping" and self.device == "cpu"
        t_in = perf_counter_ns()
        head = self.timer.mark() if self.device == "cuda" else None
        with torch.no_grad():
            model = self.model if "shape" not in msg else self.shape_model(msg["shape"])
            lanes = msg.get("lanes", [0])
            for pos, lane in enumerate(lanes):
                inputs, outputs = self.lanes[lane] if "shape" not in msg else self.shape_lanes[msg["shape"]][:2]
                if msg.get("views"):      # a layout trial: the same slots, viewed non-contiguously
                    inputs = [view_of(x, v) for x, v in zip(inputs, msg["views"])]
                if self.device == "cuda":
                    canary = self._canary(size) if pos == at else canary
                    f0 = self.timer.mark() if self.flush is not None and pos else None
                    if f0 is not None:
                        self.flush()
                    elif self.flush is not None:
                        self.flush.hold()     # (the judge flushed before the first call)
                    f1 = self.timer.mark() if pos == after else None
                    if f1 is not None:
                        self.spin(CANARY_SIZES[spun])
                    start = self.timer.mark()
                    if pos == inside:
                        self.spin(CANARY_SIZES[spun])
                    out = model(*inputs)
                    events.append((start, self.timer.mark()))
                    if f0 is not None:
                        flushes.append((f0, start if f1 is None else f1))
                else:
                    if self.wake is not None:
                        self.wake()        # (cpus.team_waker)
                    c0 = (time.thread_time_ns(), time.process_time_ns()) if pinged else None
                    t0 = perf_counter_ns()
                    out = model(*inputs)
                    reply.times.append((perf_counter_ns() - t0) / 1e6)
                    if pinged:                # (judge/handover.py: the stand-in's CPU inside its calls)
                        reply.cpu_ms = [a + (b - c) / 1e6 for a, b, c in
                                        zip(reply.cpu_ms or [0.0, 0.0], (time.thread_time_ns(), time.process_time_ns()), c0)]
                done.append((lane, inputs, outputs, out))
                del out
            if self.device == "cuda":
                if canary is None:             # (after the last call)
                    canary = self._canary(size)
                if self.flush is not None:     # the last call's work must be done before kbench's own
                    f0 = self.timer.mark()
                    self.flush()
                    flushes.append((f0, self.timer.mark()))
            t_queued = perf_counter_ns()
            for lane, self.inputs, self.outputs, out in done:
                reply.each.append(self._deliver(out, lane))
            done.clear()
            if self.device == "cuda":
                tail, t_delivered = self.timer.mark(), perf_counter_ns()
                *times, reply.canary, span = self.timer.elapsed_ms(events + flushes + [canary, (head, tail)])
                reply.times, reply.flush_ms = times[:len(events)], times[len(events):]
                reply.diag = [span] + [(t - t_in) / 1e6 for t in (t_queued, t_delivered, perf_counter_ns())]
        self.inputs, self.outputs = self.lanes[0]       # (after a shapes call: what profiling runs on)
        reply.calls = self._calls()
        return reply

    def _canary(self, size: int) -> tuple:
        self.spin(CANARY_PAD)
        start = self.timer.mark()
        self.spin(CANARY_SIZES[int(size) % len(CANARY_SIZES)])
        return start, self.timer.mark()

    def _deliver(self, out, lane: int) -> list:
        """[outputs, mismatch] for one call; the outputs stay alive until the next batch. Off the candidate's
        clock, so no candidate code may run here: a tensor subclass's __torch_function__ (an output's, a
        buffer's) would do work the clock misses; torch functions are dispatched without it."""
        self.last[lane] = out
        with self.torch._C.DisableTorchFunction():
            return describe(self.torch, flatten(out), out, self.inputs, self.extra, self.outputs, self.device)

    def op_ablate(self, msg, fds) -> Reply:
        """One call on lane 0 with every compiled function's result replaced by noise (loading.noise_like);
        the judge compares the output with the reference's."""
        if self.interceptor is None:
            return Reply(op="done")
        from .loading import nan_filled_allocations
        self.interceptor.ablation["on"] = True
        try:
            with nan_filled_allocations(self.torch):
                reply = self.op_call({"lanes": [0], "views": msg.get("views")} |
                                     ({"shape": msg["shape"]} if "shape" in msg else {}), fds)
        finally:
            self.interceptor.ablation["on"] = False
        reply.build = {"extensions": self.interceptor.extensions}   # by now with what ran (e.g. autotune configs)
        return reply

    def op_repeat(self, msg, fds) -> Reply:
        """The forward `calls` times on lane 0, for the judge to sample where the time goes (judge/sampler.py)."""
        with self.torch.no_grad():
            for _ in range(max(1, min(int(msg.get("calls", 1)), 100_000))):
                self.model(*self.inputs)
        return Reply(op="done")

    def op_profile(self, msg, fds) -> Reply:
        """One call on lane 0, profiled: the share of its time in the candidate's own code (attribution.py)."""
        names = {k for ext in (self.interceptor.extensions if self.interceptor else []) for k in ext.get("kernels", [])}
        try:
            with self.torch.no_grad():
                share, top = self.attribution.custom_share(self.model, self.inputs, self.device, names)
        except Exception as e:     # the profiler needs what the sandbox may refuse: no share, not a failure
            return Reply(op="profiled", top=f"profiler unavailable: {one_line(e)}")
        return Reply(op="profiled", custom_share=-1.0 if share is None else share, top=top)


def run_main() -> int:
    sandbox.tie_to_parent(int(os.environ.get("KBENCH_PARENT_PID", "0")) or None)
    sandbox.drop_capabilities()          # before torch starts any thread: capabilities are per thread
    if os.environ.get("KBENCH_READABLE"):     # a CPU job's judge without CAP_SYS_PTRACE (a non-root user)
        sandbox.readable_by_parent()
    faulthandler.enable()
    chan = Channel.from_fd(int(os.environ["KBENCH_FD"]))
    server = Server(chan)                # torch imported; the device not touched yet
    if os.environ.get("KBENCH_HOLD"):    # started ahead of its turn: the device is another job's until "go"
        msg, _ = chan.recv()
        if msg.get("op") != "go":
            return 0
    server.device_up()
    chan.send(Reply(op="ready"))
    server.serve()
    return 0
