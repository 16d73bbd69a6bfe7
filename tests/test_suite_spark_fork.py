"""The suite's fork server for Spark's Python processes (``tests/support/spark_fork.py``): a
daemon started as Spark starts it runs forked from the server, answers on its standard
output, forks its workers, and stops when its standard input closes or on SIGTERM, and
the process Spark started exits with the daemon's status; a process the server must not
stand for (another interpreter, path, startup environment or session) starts as before."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import spark_fork

pytestmark = pytest.mark.skipif(not spark_fork.enabled() or not os.environ.get(spark_fork.ADDRESS_ENV),
                                reason="the suite's Spark Python processes start from nothing here")


@pytest.fixture(autouse=True)
def _server_ready() -> None:
    assert spark_fork.wait_ready(60), "the fork server does not listen"


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _status(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def _start_daemon(**env_changes: str) -> subprocess.Popen:
    """``python -m pyspark.daemon pyspark.worker`` with the environment Spark gives it."""
    env = spark_fork.server_environment(dict(os.environ))
    env.update({spark_fork.ADDRESS_ENV: os.environ[spark_fork.ADDRESS_ENV],
                "PYTHON_WORKER_FACTORY_SECRET": "s3cret", "SPARK_REUSE_WORKER": "1"}, **env_changes)
    return subprocess.Popen([sys.executable, "-m", "pyspark.daemon", "pyspark.worker"], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _worker_of(proc: subprocess.Popen) -> int:
    """Read the daemon's port as Spark does, connect, and return the pid of the worker it
    forks for the connection (the worker writes it first)."""
    assert proc.stdout is not None
    port = struct.unpack(">i", proc.stdout.read(4))[0]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        data = b""
        while len(data) < 4:
            chunk = conn.recv(4 - len(data))
            assert chunk, "the daemon closed the connection"
            data += chunk
    return struct.unpack(">i", data)[0]


def _daemon_of(proc: subprocess.Popen) -> int:
    """Wait for the daemon's port (it is up, in its loop), then return the pid of the
    server's child that holds the same standard input as ``proc`` (without connecting: a
    signal that reaches pyspark's daemon while it forks a worker can be lost, in the
    at-fork hook that ``logging`` registers, with or without the server)."""
    assert proc.stdout is not None
    proc.stdout.read(4)
    stdin = os.readlink(f"/proc/{proc.pid}/fd/0")
    server = spark_fork._server
    assert server is not None
    for task in Path(f"/proc/{server.pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                if os.readlink(f"/proc/{child}/fd/0") == stdin:
                    return int(child)
            except OSError:  # another child, gone meanwhile
                continue
    raise AssertionError("no child of the server holds the daemon's standard input")


def test_a_daemon_runs_forked_from_the_server_and_stops_when_its_input_closes() -> None:
    proc = _start_daemon()
    try:
        worker = _worker_of(proc)
        daemon = _parent(worker)
        assert daemon != proc.pid
        assert b"tests.support.spark_fork" in Path(f"/proc/{_parent(daemon)}/cmdline").read_bytes()
        assert os.readlink(f"/proc/{daemon}/cwd") == os.getcwd()
        assert b"PYTHON_WORKER_FACTORY_SECRET" not in Path(f"/proc/{daemon}/environ").read_bytes()  # the server's
        assert proc.stdin is not None
        proc.stdin.close()  # Spark's way of stopping its daemon
        assert proc.wait(30) == 1  # pyspark.daemon's status when its input closes, as below
    finally:
        proc.kill()
        proc.wait()


def test_sigterm_to_the_process_spark_started_stops_the_daemon_with_its_status() -> None:
    proc = _start_daemon()
    try:
        daemon = _daemon_of(proc)
        # pyspark's daemon writes its port before it handles SIGTERM: wait for the handler
        deadline = time.monotonic() + 30
        while not int(_status(daemon)["SigCgt"], 16) & (1 << (signal.SIGTERM - 1)):
            assert time.monotonic() < deadline, "the daemon never handled SIGTERM"
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 1  # pyspark.daemon's SIGTERM handler exits with 1
        assert not Path(f"/proc/{daemon}").exists() or _status(daemon)["State"].startswith("Z")
    finally:
        proc.kill()
        proc.wait()


def test_a_daemon_killed_is_reported_killed_by_the_process_spark_started() -> None:
    proc = _start_daemon()
    try:
        daemon = _daemon_of(proc)
        assert daemon != proc.pid
        os.kill(daemon, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_a_process_with_another_startup_environment_starts_as_before() -> None:
    proc = _start_daemon(PYTHONHASHSEED="7")
    try:
        assert _parent(_worker_of(proc)) == proc.pid  # the process Spark started is the daemon
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(30) == 1


def test_a_child_gets_the_warning_filters_of_its_pythonwarnings_as_at_startup() -> None:
    """The connector's jobs hand Spark's Python processes a ``PYTHONWARNINGS``; the server,
    started without one, gives its child the filters a new interpreter would have had, in
    the same order (behind those that imports added, before the defaults)."""
    options = "ignore:PySpark does not yet fully support pandas:FutureWarning,error::ResourceWarning"
    script = ("import sys, warnings; from tests.support import spark_fork\n"
              "if sys.argv[1] == 'server': spark_fork._BASE.update(filters=list(warnings.filters), warnoptions=[])\n"
              "warnings.filterwarnings('ignore', message='an import adds this')\n"
              "if sys.argv[1] == 'server': spark_fork._apply_warning_options(sys.argv[2].split(','))\n"
              "print(repr(warnings.filters), sys.warnoptions)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    fresh = subprocess.run([sys.executable, "-c", script, "fresh"], env=dict(env, PYTHONWARNINGS=options),
                           capture_output=True, text=True, check=True).stdout
    forked = subprocess.run([sys.executable, "-c", script, "server", options], env=env,
                            capture_output=True, text=True, check=True).stdout
    assert "an import adds this" in fresh and "ResourceWarning" in fresh
    assert forked == fresh


def test_admission() -> None:
    base = {"module": "pyspark.daemon", "argv": ["pyspark.worker"], "executable": "/venv/bin/python",
            "path": ["/repo", "/venv/lib/site-packages"], "sid": 42,
            "env": {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "YES", "PYTHONPATH": "/repo", "HOME": "/root"}}
    spark_fork._BASE.update(executable="/venv/bin/python", path=["/venv/lib/site-packages", "/repo"], sid=42,
                            filters=[], warnoptions=[], environment=spark_fork.startup_environment(
                                {"PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "YES", "PYTHONPATH": "/elsewhere"}))
    try:
        assert spark_fork.admit(base) is None  # PYTHONPATH, HOME and the path's order aside
        assert spark_fork.admit(dict(base, module="pyspark.worker")) is not None
        assert spark_fork.admit(dict(base, executable="/usr/bin/python3")) == "another interpreter"
        assert spark_fork.admit(dict(base, path=["/repo", "/venv/lib/site-packages", "/job.zip"])) == "another sys.path"
        assert spark_fork.admit(dict(base, sid=7)) == "another session"
        for change in ({"PYTHONHASHSEED": "1"}, {"PYTHONDONTWRITEBYTECODE": "1"}, {"OPENBLAS_NUM_THREADS": "4"},
                       {"LD_PRELOAD": "/lib/x.so"}):
            env = dict(base["env"], **change)
            assert spark_fork.admit(dict(base, env=env)) == "another startup environment", change
        assert spark_fork.admit(dict(base, env=dict(base["env"], OPENBLAS_NUM_THREADS="1"))) is None  # the default
        assert spark_fork.admit(dict(base, env=dict(base["env"], PYTHONWARNINGS="ignore::FutureWarning"))) is None
    finally:
        spark_fork._BASE.clear()


def test_only_python_dash_m_command_lines_are_recognised() -> None:
    hook = spark_fork.site_hook()
    assert hook.module_run(["/venv/bin/python", "-m", "pyspark.daemon", "pyspark.worker", ""]) == \
        ("pyspark.daemon", ["pyspark.worker", ""])
    assert hook.module_run(["python", "-u", "-m", "pyspark.daemon"]) is None  # another interpreter option
    assert hook.module_run(["python", "script.py", "-m", "pyspark.daemon"]) is None
