"""The warm server behind `kbench serve` (trusted): a process with torch and the reference process's code
imported, that forks reference processes for kbench commands on this machine, so a check does not pay
python + torch at each start (~4 s on the H200 host).

    python -m kernelbench_cli.judge.zygote SOCKET     (started by `kbench serve`, dies with it)

A client (orchestrate/warm.py) connects to SOCKET, a Unix socket in a directory only this user can enter,
and sends {"op": "judge", env, cwd, log, fingerprint} with the socket of its reference process attached.
The zygote forks (forking.py): the child leads a session of its own and runs the reference process's main
in this image, with exactly that environment. The client's connection stays open for the child's life:
the zygote sends {"exit": code} when the child ends, and kills the child's session when the connection
closes first (the kbench command exited or was killed). It refuses when the client's kbench sources or
import-time environment differ from its own (the client then exec's a reference process as without it).

What a forked reference process inherits is this image, and its first candidate processes are forks of
that: so nothing secret may enter it. It is started with an allow-listed environment, receives only
allow-listed environments, never loads a problem, and forks before it reads anything else of a request.
"""
from __future__ import annotations

import importlib
import os
import selectors
import signal
import socket
import sys
import time

from .. import sandbox
from ..channel import Channel, ChannelClosed
from ..forking import fork_main, forkable
from ..warmth import fingerprint

REQUEST_TIMEOUT_S = 5.0
WARM = ("torch", ".process", ".reference", ".session", ".sides", "..candidate.process")   # the judge's and candidates' code


def serve(path: str) -> int:
    t0 = time.perf_counter()
    mine = fingerprint(dict(os.environ))      # before torch, which sets variables of its own at import
    for name in WARM:        # what this process is for: imported once, inherited by every fork
        importlib.import_module(name, __package__)
    why = forkable()
    if why:
        print(f"kbench serve: cannot fork reference processes from this process ({why})", flush=True)
        return 2
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(path):
        os.unlink(path)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(64)
    print(f"ready {time.perf_counter() - t0:.1f}", flush=True)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}      # pid -> its client's connection
    by_conn: dict[socket.socket, int] = {}

    def reap() -> None:
        while True:              # every child, also those whose client is gone (else they stay zombies)
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = children.pop(pid, None)
            if conn is not None:
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                try:
                    Channel(conn).send({"exit": code})
                except OSError:
                    pass
                by_conn.pop(conn, None)
                sel.unregister(conn)
                conn.close()

    while True:
        for key, _ in sel.select(timeout=0.2):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                pid = _spawn(conn, mine)
                if pid is None:
                    conn.close()
                    continue
                children[pid], by_conn[conn] = conn, pid
                sel.register(conn, selectors.EVENT_READ)
            else:                                  # a client's connection: closed (or it spoke out of turn)
                conn = key.fileobj
                pid = by_conn.pop(conn, None)
                sel.unregister(conn)
                conn.close()
                if pid is not None:
                    children.pop(pid, None)
                    try:
                        os.killpg(pid, signal.SIGKILL)    # its session: the reference process and its candidates
                    except OSError:
                        pass
        reap()


def _spawn(conn: socket.socket, mine: str) -> int | None:
    """Read one request, fork its reference process, answer with its pid; None if refused."""
    chan = Channel(conn, limit=1 << 20)
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        uid = int.from_bytes(creds[4:8], sys.byteorder)
        msg, fds = chan.recv(REQUEST_TIMEOUT_S)
    except (OSError, ValueError, ChannelClosed, TimeoutError):
        return None
    try:
        why = ""
        if uid != os.getuid():
            why = "another user"
        elif msg.get("op") != "judge" or len(fds) != 2:
            why = "not a request for a reference process"
        elif msg.get("fingerprint") != mine:
            why = "kbench's sources or the import-time environment changed since `kbench serve` started: restart it"
        if why:
            chan.send({"ok": False, "why": why})
            return None
        chan_fd, log_fd = fds
        env = {str(k): str(v) for k, v in msg["env"].items()}
        env.update(KBENCH_FD=str(chan_fd), KBENCH_PARENT_PID=str(os.getpid()))
        from .process import exit_now, main
        pid = fork_main(lambda argv: exit_now(main()), [], env, str(msg.get("cwd") or "/"), log_fd, chan_fd,
                        new_session=True)
        chan.send({"ok": True, "pid": pid})
        return pid
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def main(argv: list[str]) -> int:
    sandbox.set_name("kbench-serve")
    sandbox.tie_to_parent(int(os.environ.get("KBENCH_PARENT_PID", "0")) or None)   # dies with `kbench serve`
    return serve(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
