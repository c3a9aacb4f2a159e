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
from ..orchestrate.lifecycle import become_subreaper
from ..orchestrate.reaper import processes
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
    served: dict[int, tuple] = {}      # reference process pid -> (its client's connection, pidfd of the client)

    def end(pid: int, code: int | None = None) -> None:
        """The reference process is gone (code) or must go (its client left): kill its session, tell the client."""
        conn, peer = served.pop(pid)
        if code is None:
            try:
                os.killpg(pid, signal.SIGKILL)        # the reference process and its candidates
            except OSError:
                pass
        else:
            try:
                Channel(conn).send({"exit": code})
            except OSError:
                pass
        for f in (conn, peer):
            sel.unregister(f)
            f.close()

    while True:
        for key, _ in sel.select(timeout=0.2):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                got = _spawn(conn, mine)
                if got is None:
                    conn.close()
                    continue
                pid, peer = got
                served[pid] = (conn, peer)
                sel.register(conn, selectors.EVENT_READ, pid)
                sel.register(peer, selectors.EVENT_READ, pid)
            elif key.data in served:       # its client closed the connection, or the client process ended
                end(key.data)              # (a client could hand its connection on to keep it open)
        while True:                        # reap, and tell the clients how their reference processes ended
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in served:
                end(pid, -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))
        _sweep(set(served))


def _sweep(live: set[int]) -> None:
    """This process is a child subreaper: what a reference process's descendants orphan (one that left its
    session with setsid, out of reach of the session kill) comes here, and is killed now."""
    me = os.getpid()
    for pid, state, ppid, sid in processes():
        if ppid == me and pid not in live and state != "Z":
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _peer_refused(pid: int) -> str:
    """Why a client must not get a reference process from here: it may not hold less than this process does,
    or the reference process would have what its client has not (red team, session 12: a build process,
    which runs candidate code without capabilities, got one with the server's and read the parent's memory)."""
    try:
        fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
        mine = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    except OSError:
        return "its process cannot be read"
    theirs_caps, my_caps = int(fields["CapEff"], 16), int(mine["CapEff"], 16)
    if my_caps & ~theirs_caps:
        return "it holds fewer capabilities than the server"
    if any(int(fields.get(k, "0")) > int(mine.get(k, "0")) for k in ("Seccomp", "NoNewPrivs")):
        return "it runs under a seccomp filter the server has not (a kbench build or candidate process)"
    return ""


class _PidFd:
    """A pidfd as a selectable object (readable once the process has ended)."""

    def __init__(self, fd: int):
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        os.close(self.fd)


def _spawn(conn: socket.socket, mine: str) -> tuple[int, _PidFd] | None:
    """Read one request, fork its reference process, answer with its pid; (pid, the client's pidfd), or None
    if refused."""
    chan = Channel(conn, limit=1 << 20)
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        peer, uid = int.from_bytes(creds[0:4], sys.byteorder), int.from_bytes(creds[4:8], sys.byteorder)
        msg, fds = chan.recv(REQUEST_TIMEOUT_S)
        peer_fd = os.pidfd_open(peer)             # its end is what ends the reference process too
    except (OSError, ValueError, ChannelClosed, TimeoutError):
        return None
    try:
        why = ("another user" if uid != os.getuid() else _peer_refused(peer)
               or ("not a request for a reference process" if msg.get("op") != "judge" or len(fds) != 2 else "")
               or ("kbench's sources or the import-time environment changed since `kbench serve` started: restart it"
                   if msg.get("fingerprint") != mine else ""))
        if why:
            chan.send({"ok": False, "why": why})
            os.close(peer_fd)
            return None
        chan_fd, log_fd = fds
        env = {str(k): str(v) for k, v in msg["env"].items()}
        env.update(KBENCH_FD=str(chan_fd), KBENCH_PARENT_PID=str(os.getpid()))
        from .process import exit_now, main
        pid = fork_main(lambda argv: exit_now(main()), [], env, str(msg.get("cwd") or "/"), log_fd, chan_fd,
                        new_session=True)
        chan.send({"ok": True, "pid": pid})
        return pid, _PidFd(peer_fd)
    except OSError:
        os.close(peer_fd)
        return None
    finally:
        for fd in fds:
            os.close(fd)


def main(argv: list[str]) -> int:
    sandbox.set_name("kbench-serve")
    become_subreaper()                             # see _sweep
    sandbox.tie_to_parent(int(os.environ.get("KBENCH_PARENT_PID", "0")) or None)   # dies with `kbench serve`
    return serve(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
