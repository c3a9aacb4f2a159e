"""The parent's side of the warm server: `kbench serve` starts it (judge/zygote.py) and waits; every other
command asks it for its reference processes if it is up, and exec's them as before if it is not, or if it
refuses (kbench changed since it started, another environment). Nothing about a verdict depends on which:
a forked reference process runs the same code in the same environment, only without python + torch to
import first (~4 s on the H200 host)."""
from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time

from ..channel import Channel, ChannelClosed
from ..warmth import fingerprint, private_dir, socket_path

NOTICES: list[str] = []       # why the server was not used, once per reason (the CLI prints them after the run)


class ServedProcess:
    """A reference process forked by the server: not our child, so its exit comes as a message on the
    connection that asked for it (as Popen's returncode: -signal or the exit code)."""

    def __init__(self, pid: int, chan: Channel):
        self.pid, self.chan, self.returncode = pid, chan, None

    def _read(self, timeout: float | None) -> bool:
        if timeout is not None and not select.select([self.chan.sock], [], [], timeout)[0]:
            return False
        try:
            msg, _ = self.chan.recv(None)
            self.returncode = int(msg.get("exit", -signal.SIGKILL))
        except (ChannelClosed, OSError, ValueError):     # the server went away: so did its children
            self.returncode = -signal.SIGKILL
        self.chan.close()
        return True

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and not self._read(timeout):
            raise subprocess.TimeoutExpired("reference process", timeout)
        return self.returncode


def served(proc) -> bool:
    return isinstance(proc, ServedProcess)


def _notice(why: str) -> None:
    if why not in NOTICES:
        NOTICES.append(why)


def spawn(env: dict, log, theirs: socket.socket) -> ServedProcess | None:
    """A reference process forked by the server with `env`, on socket `theirs`, logging to `log`; None if no
    server is up (or KBENCH_SERVE=0) or it refused."""
    path = socket_path()
    if os.environ.get("KBENCH_SERVE") == "0" or not path.exists():
        return None
    try:
        private_dir(path)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(5)
        conn.connect(str(path))
        chan = Channel(conn, limit=1 << 16)
        chan.send({"op": "judge", "env": env, "cwd": os.getcwd(), "fingerprint": fingerprint(env)},
                  [theirs.fileno(), log.fileno()])
        reply, _ = chan.recv(10)
    except (OSError, ChannelClosed, ValueError) as e:      # a socket left by a server that is gone: as without one
        if not isinstance(e, (ConnectionRefusedError, FileNotFoundError)):
            _notice(f"kbench serve did not answer ({e}); reference processes were started without it")
        return None
    if not reply.get("ok"):
        _notice(f"kbench serve refused: {reply.get('why')}")
        chan.close()
        return None
    return ServedProcess(int(reply["pid"]), chan)


def serve(env: dict, console) -> int:
    """`kbench serve`: start the server with a reference process's environment and wait (Ctrl-C stops it,
    and with it every reference process it forked)."""
    from .. import sandbox
    from . import lifecycle
    path = socket_path()
    private_dir(path)
    if path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            console.print(f"kbench serve: already running ({path})", highlight=False)
            return 2
        except OSError:
            pass                  # a socket left by a server that is gone
        finally:
            probe.close()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kernelbench_cli.judge.zygote", str(path)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, start_new_session=True)
    lifecycle.register(proc.pid)          # the reaper kills its session (and its children's) if we are killed
    line = proc.stdout.readline().strip()
    if not line.startswith("ready"):
        proc.wait()
        console.print(f"kbench serve: the server did not start ({line or f'exit {proc.returncode}'})", highlight=False)
        return 1
    console.print(f"kbench serve: ready in {time.perf_counter() - t0:.1f} s on {path}; kbench commands on this "
                  f"machine now start their reference processes from it. Ctrl-C stops it.", highlight=False)
    try:
        with sandbox.not_dumpable():      # this process holds the caller's whole environment: unreadable by others
            return _wait_for(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        try:
            path.unlink()
        except OSError:
            pass


def _wait_for(proc: subprocess.Popen) -> int:
    """Until the server ends; meanwhile reap whatever comes here (kbench is a subreaper: lifecycle)."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode
