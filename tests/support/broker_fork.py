"""Test support: start the suite's brokers by forking a process that has imported the broker
already, instead of running ``python -m broker`` from scratch each time.

A run of the suite starts about 350 brokers, and each paid about 0.4 s of CPU importing the
broker before it did anything. ``spawn(argv, env, cwd, stdout, stderr)`` asks a fork server
(one per test process, started at first use) to fork a child that then runs
``runpy.run_module("broker", run_name="__main__")`` with that ``sys.argv``, environment,
working directory and standard streams: the same ``broker/__main__.py``, in a process of its
own, which exits through the interpreter's normal shutdown (threads joined, ``atexit``
handlers run, streams flushed) with the same exit code. Only the imports are shared, as
Spark's Python daemon shares them with its workers.

What differs from ``subprocess.Popen([python, "-m", "broker", ...])``, and does not matter to
the tests: the child's command line, and its ``/proc/<pid>/environ`` (the environment it
was exec'd with), are the fork server's; ``sys.path[0]`` is the working
directory as with ``-m``, but the rest of ``sys.path`` and ``PYTHONHASHSEED`` are the fork
server's; standard input is ``/dev/null``. The environment is the one passed, read when the
broker reads it (the broker reads none at import).

Protocol (``AF_UNIX`` ``SOCK_SEQPACKET`` on an abstract address, one connection per child):
the client sends one message, JSON ``{"argv", "env", "cwd"}``, with the stdout and stderr
descriptors attached (``SCM_RIGHTS``); the server answers JSON ``{"pid"}`` with the child's
pidfd attached, and later JSON ``{"returncode"}`` (``os.waitstatus_to_exitcode``: negative
for a signal) once it has reaped the child; then it closes the connection.

Invariants: the fork server has one thread when it forks (checked at start); a child closes
every descriptor of the server before it runs the broker; signals go through the pidfd, so
a signal never reaches a reused pid; the server exits when its test process does (EOF on its
standard input), leaving running children to ``init`` as ``Popen`` leaves them. Without
``os.pidfd_open`` (not Linux), or with ``KAFKALOG_TEST_BROKER_FORK=0``, ``spawn`` returns
``None`` and the caller runs ``python -m broker`` itself.

Thread-safety: ``spawn`` may be called from any thread of the test process (the server is
started under a lock); a ``ForkedProcess`` belongs to one thread at a time, like ``Popen``.
"""

from __future__ import annotations

import json
import math
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
ENV_SWITCH = "KAFKALOG_TEST_BROKER_FORK"
# What the broker imports before it serves, and what some configurations import on start
# (TLS listeners, the Schema Registry's HTTP side).
# (Not ``broker.__main__`` itself: runpy warns when the module it runs is imported already.)
PRELOAD = ("argparse", "broker.config", "broker.server.broker", "broker.server.socket_server", "ssl",
           "encodings.idna", "broker.server.registry.http")
MAX_MESSAGE = 1 << 20

_lock = threading.Lock()
_server: tuple[subprocess.Popen, str] | None = None


class ForkedProcess:
    """The ``Popen``-like handle of a forked broker: ``pid``, ``returncode``, ``poll``,
    ``wait``, ``send_signal``, ``terminate``, ``kill``."""

    def __init__(self, args: list[str], conn: socket.socket, pid: int, pidfd: int) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._conn: socket.socket | None = conn
        self._pidfd: int | None = pidfd

    def _collect(self, timeout: float | None) -> None:
        conn = self._conn
        if conn is None or not readable(conn.fileno(), timeout):
            return
        message = conn.recv(MAX_MESSAGE)
        if not message:
            raise RuntimeError(f"the broker fork server went away while broker {self.pid} ran")
        self.returncode = int(json.loads(message)["returncode"])
        self._close()

    def poll(self) -> int | None:
        if self.returncode is None:
            self._collect(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._collect(timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is not None or self._pidfd is None:
            return
        try:
            signal.pidfd_send_signal(self._pidfd, sig)
        except ProcessLookupError:  # exited, not yet reported
            pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def __del__(self) -> None:
        self._close()


def readable(fd: int, timeout: float | None) -> bool:
    """Whether ``fd`` is readable (or hung up) within ``timeout`` seconds (None: wait).
    With ``poll``, not ``select``: a test process may hold over 1,024 descriptors (the
    resource tests open thousands of connections), and ``select`` refuses any beyond."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else math.ceil(timeout * 1000)))


def enabled() -> bool:
    return hasattr(os, "pidfd_open") and os.environ.get(ENV_SWITCH, "1") != "0"


def _address() -> str | None:
    """The running fork server's address, starting it first if need be; None if it
    cannot run here."""
    global _server
    with _lock:
        if _server is not None and _server[0].poll() is None:
            return _server[1]
        address = f"kafkalog-broker-fork-{os.getpid()}-{os.urandom(6).hex()}"  # abstract: \0 + name
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.broker_fork", address], cwd=ROOT,
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        ready = proc.stdout.readline().strip()
        proc.stdout.close()
        if ready != b"ready":
            proc.kill()
            proc.wait()
            return None
        _server = (proc, address)
        return address


def spawn(argv: list[str], env: dict[str, str], cwd: Path | str, stdout: IO[Any],
          stderr: IO[Any]) -> ForkedProcess | None:
    """Fork a broker running ``python -m broker *argv``; None when forking is not
    available (the caller then starts ``python -m broker`` itself)."""
    if not enabled():
        return None
    address = _address()
    if address is None:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect("\0" + address)
        request = json.dumps({"argv": list(argv), "env": dict(env), "cwd": str(cwd)}).encode()
        socket.send_fds(conn, [request], [stdout.fileno(), stderr.fileno()])
        message, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 1)
        if not message or len(fds) != 1:
            raise RuntimeError("the broker fork server did not fork")
    except BaseException:
        conn.close()
        raise
    return ForkedProcess(["python", "-m", "broker", *argv], conn, int(json.loads(message)["pid"]), fds[0])


# --- the fork server -------------------------------------------------------------------


def _serve(address: str, nfds: int = 2,
           admit: Callable[[dict[str, Any]], str | None] | None = None) -> tuple[dict[str, Any], list[int]] | None:
    """Serve until standard input closes (returns None); in a forked child, return its
    request and its ``nfds`` descriptors, every other descriptor of the server closed.
    ``admit(request)``, when given, returns why a request is declined (answered JSON
    ``{"declined"}``, no fork) or None to fork. (``tests/support/spark_fork.py`` serves
    Spark's Python processes with it.)"""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind("\0" + address)
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, ("accept",))
    sel.register(0, selectors.EVENT_READ, ("parent",))
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            kind = key.data[0]
            if kind == "parent":
                if not os.read(0, 4096):
                    return None
            elif kind == "accept":
                conn, _ = listener.accept()
                sel.register(conn, selectors.EVENT_READ, ("request",))
            elif kind == "request":
                conn = key.fileobj
                sel.unregister(conn)
                try:
                    message, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, nfds)
                except OSError:
                    message, fds = b"", []
                declined = "no request" if not message or len(fds) != nfds else \
                    admit(json.loads(message)) if admit is not None else None
                if declined is not None:
                    for fd in fds:
                        os.close(fd)
                    try:
                        conn.send(json.dumps({"declined": declined}).encode())
                    except OSError:
                        pass
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    for other in list(sel.get_map().values()):
                        if other.data[0] == "child":
                            other.data[2].close()
                        if isinstance(other.fileobj, int):
                            if other.fileobj != 0:
                                os.close(other.fileobj)
                        else:
                            other.fileobj.close()
                    sel.close()
                    listener.close()
                    conn.close()
                    return json.loads(message), fds
                pidfd = os.pidfd_open(pid)
                for fd in fds:
                    os.close(fd)
                try:
                    socket.send_fds(conn, [json.dumps({"pid": pid}).encode()], [pidfd])
                except OSError:
                    pass
                sel.register(pidfd, selectors.EVENT_READ, ("child", pid, conn))
            else:
                _, pid, conn = key.data
                sel.unregister(key.fileobj)
                os.close(key.fileobj)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
                except OSError:
                    pass
                conn.close()


def _become_broker(request: dict[str, Any], fds: list[int]) -> None:
    """In a forked child: take the request's streams, directory, environment and
    arguments, and run ``broker/__main__.py`` as ``python -m broker`` would."""
    import runpy

    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["-m", *request["argv"]]
    sys.path[0] = os.getcwd()
    runpy.run_module("broker", run_name="__main__", alter_sys=True)


def _main() -> None:
    import gc
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    if threading.active_count() != 1:  # fork only a process of one thread
        raise SystemExit("the broker fork server has more than one thread")
    gc.collect()
    gc.freeze()
    got = _serve(sys.argv[1])
    if got is not None:
        _become_broker(*got)


if __name__ == "__main__":
    _main()
