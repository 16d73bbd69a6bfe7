"""The suite's Spark Python processes import the installed pyspark, not Spark's zip of it,
and Spark's Python daemons import once what each of their workers would import again.

Owns: what runs at the start of every interpreter the suite starts (a ``sitecustomize``
that ``tests/conftest.py`` puts first on PYTHONPATH, which every process of the suite
inherits).

1. Spark's zips. Spark puts its own copy of pyspark first on the PYTHONPATH of every
Python process it starts (each Spark Python daemon and worker, and the driver of every
``spark-submit`` of a script): ``<pyspark>/python/lib/pyspark.zip``,
``py4j-*-src.zip`` and the ``spark-core`` jar. Python imports a zip's modules from source
(zipimport neither reads nor writes a bytecode cache), so each of those processes compiled
pyspark's modules again: ``import pyspark.sql`` plus the worker modules cost 1.75 s of CPU
from the zip and 0.55 s from the installed package; about 400 such processes ran in one run
of the suite. pyspark's ``setup_spark_files`` also re-reads every zip on the path
(``importlib.invalidate_caches``: ~0.26 s, mostly the 6,000-entry jar) once per worker.

Here those entries are dropped when they belong to the pyspark that is installed beside
this interpreter: that package is the same release (the wheel ships the zip and the
package from one build; they differ only by the test modules the package leaves out), and
py4j is installed with it, so the same code runs, from bytecode. Entries of any other
Spark (another SPARK_HOME) are kept. Set ``KAFKALOG_TEST_SPARK_ZIPS=1`` to keep them all.

2. The daemons' imports. A Spark Python daemon (``python -m pyspark.daemon MODULE``) forks a
worker per concurrent task, and again whenever Spark drops an idle or failed one (about
five forks per daemon in a run of the suite, 300 in all). Since pyspark 4 the daemon
imports nothing before it forks, so every worker imported its worker module, pyarrow (which
imports pandas the first time it builds an array: about 0.5 s of CPU by itself), and the
connector's readers or writers, about 0.8 s of CPU per worker. The daemons of the workers
that run tasks, plan reads and writes, or create sources (``PRELOAD_DAEMONS``) import
``PRELOAD_MODULES`` once before forking, then ``gc.freeze()`` what they hold, so that the
``gc.collect()`` pyspark runs after every task of a reused worker skips it. The workers run
the same code, which they find already imported: a forked worker's path is the daemon's
path plus what pyspark adds, so nothing imports here that the worker would not have found.
The daemon imports with OpenBLAS and Arrow's jemalloc held to their calling thread
(``OPENBLAS_NUM_THREADS=1``, ``JE_ARROW_MALLOC_CONF=background_thread:false``, unless set),
so that it forks with no other thread alive. A module that fails to import is left for the
worker to fail on, as it would have. Set ``KAFKALOG_TEST_SPARK_PRELOAD=0`` to turn it off.
Measured: ``tests/test_spark_write.py`` alone went from 68 s of CPU to 42 s, and the Spark
Python processes of a whole run from 347 s to 157 s.

3. Forked from a server. Where the test process runs a fork server
(``tests/support/spark_fork.py``, its address in ``KAFKALOG_TEST_SPARK_FORK_ADDRESS``), a
Spark daemon or streaming source runner (``python -m MODULE``, ``FORKED_MODULES``) asks it
first (``fork_through``): the server forks a child that takes this process's standard
streams, directory, environment, path, process group and ignored signals and runs the
module, having imported everything above already; this process stands in for it, passes
the signals it gets on, and exits with the child's status. If the server is not there or
declines, the process goes on as above.

Invariant: only the entries ``<installed pyspark>/python/lib/*.zip`` and
``<installed pyspark>/jars/*.jar`` are removed, and only when the installed package
exists; nothing is imported here (it runs in every interpreter of the suite, before
``-m`` resolves its module) except in a Spark Python daemon or streaming source runner; a
process whose module the fork server runs never runs it itself too. Shadows Debian's
``/usr/lib/python3*/sitecustomize.py`` (an apport hook) in the suite's processes only.

Thread-safety: runs once, at interpreter start, before any thread exists; a daemon still
has only its main thread when it forks.
"""

from __future__ import annotations

import os
import sys

# The daemons whose workers run tasks, plan reads and writes, or create sources: each forks
# several workers in a run. Lookup, commit and pushdown daemons fork about once: no gain.
PRELOAD_DAEMONS = frozenset({
    "pyspark.worker", "pyspark.sql.worker.plan_data_source_read",
    "pyspark.sql.worker.write_into_data_source", "pyspark.sql.worker.create_data_source",
    "pyspark.sql.worker.python_streaming_sink_runner",
})
# What those workers import: pyarrow (and pandas, which pyarrow imports the first time it
# converts a Python object), pyspark's SQL modules, and the connector's source and sink.
PRELOAD_MODULES = (
    "numpy", "pyarrow", "pyarrow.compute", "pandas", "pyspark.sql", "pyspark.sql.pandas.serializers",
    "pyspark_kafkalog", "spark_kafkalog.source", "spark_kafkalog.readers.batch", "spark_kafkalog.readers.direct",
    "spark_kafkalog.writers", "broker.client.producer", "broker.client.consumer",
)


def spark_zip_entries(path: list[str], site_dirs: list[str]) -> list[str]:
    """The entries of ``path`` that are Spark's zips and jars of a pyspark installed in one
    of ``site_dirs`` (which holds ``pyspark/__init__.py`` and ``py4j/__init__.py``)."""
    drop = []
    for site in site_dirs:
        pkg = os.path.join(site, "pyspark")
        if not (os.path.isfile(os.path.join(pkg, "__init__.py"))
                and os.path.isfile(os.path.join(site, "py4j", "__init__.py"))):
            continue
        lib, jars = os.path.join(pkg, "python", "lib") + os.sep, os.path.join(pkg, "jars") + os.sep
        for entry in path:
            if ((entry.startswith(lib) and entry.endswith(".zip"))
                    or (entry.startswith(jars) and entry.endswith(".jar"))):
                drop.append(entry)
    return drop


def _site_dirs() -> list[str]:
    return [p for p in sys.path if os.path.basename(p) == "site-packages"]


if os.environ.get("KAFKALOG_TEST_SPARK_ZIPS") != "1":
    _drop = set(spark_zip_entries(sys.path, _site_dirs()))
    if _drop:
        sys.path[:] = [p for p in sys.path if p not in _drop]


def daemon_worker_module(argv: list[str]) -> str | None:
    """The worker module of a Spark Python daemon's command line (``python -m
    pyspark.daemon [MODULE]``), or None for any other process."""
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m" and argv[i + 1] == "pyspark.daemon":
            return argv[i + 2] if len(argv) > i + 2 else "pyspark.worker"
    return None


def _preload(module: str) -> None:
    import gc
    import importlib
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")
    for name in (module, *PRELOAD_MODULES):
        try:
            importlib.import_module(name)
        except Exception:  # the worker imports it again and reports the error
            continue
    gc.freeze()


# 3. Forked from the suite's fork server (tests/support/spark_fork.py, which owns the
# protocol): the modules it serves, the signals a stand-in passes on.
FORK_ADDRESS_ENV = "KAFKALOG_TEST_SPARK_FORK_ADDRESS"
FORKED_MODULES = frozenset({"pyspark.daemon", "pyspark.sql.streaming.python_streaming_source_runner"})
FORWARDED_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def module_run(argv: list[str]) -> tuple[str, list[str]] | None:
    """(module, arguments) of a command line that is exactly ``python -m MODULE ARGS...``."""
    if len(argv) >= 3 and argv[1] == "-m":
        return argv[2], argv[3:]
    return None


def fork_through(address: str, module: str, args: list[str]) -> int | None:
    """Have the fork server at ``address`` run ``module`` in a child that takes this
    process's place, and stand in for it until it exits: its exit status (negative: the
    signal that ended it), or None when the server is not there or declines (this
    process then runs the module itself)."""
    import json
    import select
    import signal
    import socket

    signums = [getattr(signal, name) for name in FORWARDED_SIGNALS]
    ignored = [int(s) for s in signums if signal.getsignal(s) == signal.SIG_IGN]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect("\0" + address)
        request = {"module": module, "argv": args, "env": dict(os.environ), "cwd": os.getcwd(),
                   "path": list(sys.path), "executable": sys.executable, "sid": os.getsid(0),
                   "pgid": os.getpgid(0), "ignored": ignored}
        socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
        message, fds, _, _ = socket.recv_fds(conn, 1 << 16, 1)
    except OSError:
        conn.close()
        return None
    if len(fds) != 1 or "pid" not in (json.loads(message) if message else {}):
        for fd in fds:
            os.close(fd)
        conn.close()
        return None
    pidfd = fds[0]

    def forward(signum, frame) -> None:
        try:
            signal.pidfd_send_signal(pidfd, signum)
        except OSError:  # exited already
            pass

    try:  # from here on the child runs the module: this process never runs it too
        for signum in signums:
            if int(signum) not in ignored:
                signal.signal(signum, forward)
        message = conn.recv(1 << 16)  # the child's exit status (a signal handler does not cut it short)
        if message:
            return int(json.loads(message)["returncode"])
    except Exception:
        pass
    waiter = select.poll()  # the server went away first: wait for the child all the same
    waiter.register(pidfd, select.POLLIN)
    waiter.poll()
    return 1


def exit_as(code: int) -> None:
    """End this process with ``code`` as the exit status (negative: by that signal)."""
    if code < 0:
        import signal
        try:
            signal.signal(-code, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP: always their default
            pass
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)


if os.environ.get(FORK_ADDRESS_ENV) and os.environ.get("KAFKALOG_TEST_SPARK_FORK") != "0":
    _run = module_run(list(getattr(sys, "orig_argv", [])))
    if _run is not None and _run[0] in FORKED_MODULES:
        _code = fork_through(os.environ[FORK_ADDRESS_ENV], *_run)
        if _code is not None:
            exit_as(_code)

if os.environ.get("KAFKALOG_TEST_SPARK_PRELOAD") != "0":
    _worker = daemon_worker_module(list(getattr(sys, "orig_argv", [])))
    if _worker in PRELOAD_DAEMONS:
        _preload(_worker)
