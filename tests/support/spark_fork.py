"""Test support: Spark's Python daemons and streaming source runners, forked from a process
that has imported pyspark, pyarrow, pandas and the connector already.

Every Spark JVM the suite starts (each worker's session, every ``spark-submit`` of a script,
notebook or export) starts its own Python processes: a daemon (``python -m pyspark.daemon
MODULE``) for each kind of work (tasks, a source's creation, planning a read, writing,
committing, looking sources up) and a ``python -m
pyspark.sql.streaming.python_streaming_source_runner`` for each streaming query's source. A
run of the suite starts about 110 daemons and 60 runners, and each imported pyspark,
pyarrow, pandas and the connector from nothing: about 1.1 s of CPU a daemon (the suite's
``sitecustomize`` preloads what the daemon's workers use) and 0.7 s a runner, over 140 s a
run.

``start()`` (``tests/conftest.py``, once per test process) starts a fork server that imports
all of that once, and puts its address in the environment (``KAFKALOG_TEST_SPARK_FORK_ADDRESS``),
which the JVMs and their Python processes inherit. At the start of such a Python process,
the suite's ``sitecustomize`` (``tests/support/sitehook/``, ``fork_through``) sends the
server a request; the server forks a child that takes the process's standard streams,
working directory, environment, ``sys.path``, process group and ignored signals, and runs
the module as ``python -m`` would (``runpy``). The process the JVM started stays as the
child's stand-in: it forwards the signals it gets to the child (through a pidfd) and exits
with the child's exit status, so the JVM sees its daemon start, answer on its standard
output, stop on SIGTERM or when its standard input closes, and exit, as before.

Admission (``admit``): the server forks only for the same interpreter, the same ``sys.path``
(the order aside: the entries are the repository, the suite's site hook, the standard
library and the venv, each module in one of them), the same interpreter environment (every
``PYTHON*`` variable but ``PYTHONPATH`` and ``PYTHONWARNINGS``, with ``PYTHONHASHSEED=0`` and
``PYTHONUNBUFFERED=YES`` as Spark sets them; the dynamic loader's and the numeric libraries'
thread settings), and the same session (so that the child can join the stand-in's process
group: a test that kills a job's process group kills its Python processes too). A
``PYTHONWARNINGS`` (the connector's jobs set one) becomes the child's warning filters, where
the interpreter would have put them. Anything else is declined, and the process starts as
it always did. Set ``KAFKALOG_TEST_SPARK_FORK=0`` to turn it off.

Protocol: ``broker_fork``'s server (``AF_UNIX`` ``SOCK_SEQPACKET`` on an abstract address):
the request is JSON ``{"module", "argv", "env", "cwd", "path", "executable", "sid", "pgid",
"ignored"}`` with standard input, output and error attached; the answer is JSON ``{"pid"}``
with the child's pidfd attached, then ``{"returncode"}``; or ``{"declined": why}``.

What differs from the process Spark would have started, and does not matter to Spark or the
tests: the child's ``/proc/<pid>/cmdline`` and ``environ`` are the server's, its parent is
the server, and a module the server imported is not imported again (it was the same file).

Invariants: the server has one thread when it forks (checked at start); a child closes every
descriptor of the server before it runs the module; a request that is declined or fails
before the fork leaves the process to start unchanged; the server exits when its test
process does (EOF on its standard input), leaving running children to ``init``.

Thread-safety: ``start()`` is called once, from the test process's main thread.
"""

from __future__ import annotations

import functools
import gc
import importlib
import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.support import broker_fork

ROOT = Path(__file__).resolve().parents[2]
SITEHOOK = Path(__file__).resolve().parent / "sitehook"
ENV_SWITCH = "KAFKALOG_TEST_SPARK_FORK"
ADDRESS_ENV = "KAFKALOG_TEST_SPARK_FORK_ADDRESS"
# What the daemons' workers and the runners import: every worker module of pyspark's, the
# modules the server forks for (``FORKED_MODULES`` of the site hook, which asks for those
# only), and what the site hook preloads in a daemon (pyarrow, pandas, the connector).
WORKER_MODULES = (
    "pyspark.worker", "pyspark.sql.worker.lookup_data_sources", "pyspark.sql.worker.create_data_source",
    "pyspark.sql.worker.plan_data_source_read", "pyspark.sql.worker.write_into_data_source",
    "pyspark.sql.worker.commit_data_source_write", "pyspark.sql.worker.data_source_pushdown_filters",
    "pyspark.sql.worker.python_streaming_sink_runner",
)
# The environment a Python process reads at its start, or that the libraries the server
# imported read at theirs: it must be the same for the process the child stands for.
THREAD_DEFAULTS = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}
LOADER_KEYS = ("LD_PRELOAD", "LD_LIBRARY_PATH")
_INTERPRETER_KEY = re.compile(r"PYTHON[A-Z]+")

_server: subprocess.Popen | None = None


@functools.cache
def site_hook() -> Any:
    """The suite's site hook (``sitehook/sitecustomize.py``), loaded from its file: its
    ``FORKED_MODULES``, ``PRELOAD_MODULES`` and ``fork_through``. (Running it again does
    nothing here: this process is no Spark daemon, and has no Spark zip on its path.)"""
    spec = importlib.util.spec_from_file_location("kafkalog_suite_sitehook", SITEHOOK / "sitecustomize.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def enabled() -> bool:
    return hasattr(os, "pidfd_open") and os.environ.get(ENV_SWITCH, "1") != "0"


def startup_environment(env: dict[str, str]) -> dict[str, str | None]:
    """The part of ``env`` that a new interpreter, or a library at its import, reads
    (``PYTHONPATH`` and ``PYTHONWARNINGS`` aside: the path is compared as such, and a child
    sets up its warning filters as the interpreter would have, ``_apply_warning_options``)."""
    keys = {k for k in env if _INTERPRETER_KEY.fullmatch(k) and k not in ("PYTHONPATH", "PYTHONWARNINGS")}
    out: dict[str, str | None] = {k: env[k] for k in sorted(keys)}
    out.update({k: env.get(k) for k in LOADER_KEYS})
    out.update({k: env.get(k, v) for k, v in THREAD_DEFAULTS.items()})
    return out


def server_environment(env: dict[str, str]) -> dict[str, str]:
    """The fork server's environment: the test process's, as Spark hands it to its Python
    processes (``PYTHONHASHSEED`` 0 unless the driver set one, unbuffered streams, the
    repository and the site hook on the path)."""
    out = {k: v for k, v in env.items() if k != ADDRESS_ENV}
    out.setdefault("PYTHONHASHSEED", "0")
    out["PYTHONUNBUFFERED"] = "YES"
    paths = [str(ROOT), str(SITEHOOK), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    out["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return out


def start() -> str | None:
    """Start this test process's fork server (once) and put its address in the environment
    that everything started afterwards inherits. Returns at once: until the server listens,
    a Spark Python process starts as it always did."""
    global _server
    if not enabled():
        return None
    if _server is not None and _server.poll() is None:
        return os.environ.get(ADDRESS_ENV)
    address = f"kafkalog-spark-fork-{os.getpid()}-{os.urandom(6).hex()}"
    _server = subprocess.Popen([sys.executable, "-m", "tests.support.spark_fork", address], cwd=ROOT,
                               env=server_environment(dict(os.environ)), stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL)
    os.environ[ADDRESS_ENV] = address
    return address


def wait_ready(timeout: float) -> bool:
    """Whether this test process's fork server listens, waiting up to ``timeout`` seconds
    (the suite never waits: a process that comes too early starts as before)."""
    address = os.environ.get(ADDRESS_ENV)
    deadline = time.monotonic() + timeout
    while address:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as probe:
            try:
                probe.connect("\0" + address)
                return True
            except OSError:
                if time.monotonic() > deadline or _server is None or _server.poll() is not None:
                    return False
        time.sleep(0.05)
    return False


# --- the fork server -------------------------------------------------------------------

_BASE: dict[str, Any] = {}


def admit(request: dict[str, Any]) -> str | None:
    """Why the server will not fork for ``request``, or None (see the module docstring)."""
    if request.get("module") not in site_hook().FORKED_MODULES:
        return f"not a forked module: {request.get('module')!r}"
    if request.get("executable") != _BASE["executable"]:
        return "another interpreter"
    if set(request.get("path", ())) != set(_BASE["path"]):
        return "another sys.path"
    if startup_environment(request.get("env", {})) != _BASE["environment"]:
        return "another startup environment"
    if request.get("sid") != _BASE["sid"]:
        return "another session"
    if _warning_options(request.get("env", {})) and not _startup_filters_last():
        return "warning options that cannot be set up as at startup"
    return None


def _warning_options(env: dict[str, str]) -> list[str]:
    """The ``-W`` options of ``PYTHONWARNINGS`` (comma-separated, as the interpreter splits it)."""
    return [option for option in env.get("PYTHONWARNINGS", "").split(",") if option]


def _startup_filters_last() -> bool:
    """Whether the server's warning filters are still its startup filters, after those its
    imports added in front (so a child can put its own startup filters between)."""
    import warnings

    base = _BASE["filters"]
    return not _BASE["warnoptions"] and (not base or warnings.filters[-len(base):] == base)


def _apply_warning_options(options: list[str]) -> None:
    """Give the child the warning filters ``-W``/``PYTHONWARNINGS`` options make at startup:
    behind the filters that imports added in front, before the interpreter's defaults."""
    import warnings

    base = _BASE["filters"]
    added = warnings.filters[:len(warnings.filters) - len(base)]
    warnings.filters[:] = []
    sys.warnoptions[:] = options
    warnings._processoptions(options)  # type: ignore[attr-defined]  # what the interpreter runs at startup
    warnings.filters[:] = added + warnings.filters + base
    warnings._filters_mutated()  # type: ignore[attr-defined]


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """In a forked child: take the stand-in's streams, process group, ignored signals,
    directory, environment and path, and run its module as ``python -m`` would."""
    import runpy

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        os.close(fd)
    try:
        os.setpgid(0, int(request["pgid"]))
    except OSError:  # the stand-in is gone already: the child stays in the server's group
        pass
    for signum in request["ignored"]:
        signal.signal(signum, signal.SIG_IGN)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for key, value in THREAD_DEFAULTS.items():
        os.environ.setdefault(key, value)
    options = _warning_options(request["env"])
    if options:
        _apply_warning_options(options)
    sys.path[:] = [os.getcwd(), *request["path"]]
    sys.argv = ["-m", *request["argv"]]
    module = request["module"]
    sys.modules.pop(module, None)  # run afresh as __main__, as ``-m`` does (and runpy warns otherwise)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def _main() -> None:
    for key, value in THREAD_DEFAULTS.items():
        os.environ.setdefault(key, value)
    import warnings

    _BASE.update(executable=sys.executable, path=list(sys.path[1:]), sid=os.getsid(0),
                 environment=startup_environment(dict(os.environ)), filters=list(warnings.filters),
                 warnoptions=list(sys.warnoptions))
    hook = site_hook()
    for name in (*WORKER_MODULES, *sorted(hook.FORKED_MODULES), *hook.PRELOAD_MODULES):
        try:
            importlib.import_module(name)
        except Exception:  # the child imports it again and fails as the process would have
            continue
    if threading.active_count() != 1:  # fork only a process of one thread
        raise SystemExit("the Spark fork server has more than one thread")
    gc.collect()
    gc.freeze()
    got = broker_fork._serve(sys.argv[1], 3, admit)
    if got is not None:
        _become(*got)


if __name__ == "__main__":
    _main()
