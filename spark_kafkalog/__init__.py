"""Spark data source ``kafkalog``: Kafka topics as DataFrames, with the options and schema of
Spark's own Kafka source, read straight from Kafka log directories or fetched from brokers,
written with idempotent producers, and streamed with exact offsets.

Owns: the package's public entry points: ``register(spark)`` and ``__version__``. The
user manual is ``spark_kafkalog.source.KafkaLogDataSource``'s docstring (the sink's is
``spark_kafkalog.writers``'). Around the source: ``embedded`` (an embedded broker for
notebooks, tests and the main job), ``jobs`` (the main pipeline and the export job) and
``cli`` (the ``kafkalog`` command).

Spark's Python workers run this interpreter: importing the package sets ``PYSPARK_PYTHON``
(and ``PYSPARK_DRIVER_PYTHON``) to ``sys.executable`` when they are unset, no SparkContext
is running yet and the process is not under ``spark-submit`` (which configures them from
``spark.pyspark.python``), so a script run as ``.venv/bin/python script.py`` works without
activating the venv (pyspark's default is whatever ``python3`` is first on ``PATH``). A
variable the user set is never changed. ``register`` checks a session already started: when
its workers' interpreter (``SparkContext.pythonExec``) is not this one and cannot import
pyarrow and pyspark, it raises ``KafkaLogSetupError`` whose first line says what to do.

Invariants: importing the package is cheap (no pyarrow, numpy or JVM work): pyspark
imports ``pyspark_kafkalog`` in every planning worker to discover the source.

Thread-safety: ``register`` may be called from any thread, any number of times.
"""

from __future__ import annotations

import functools as _functools
import os as _os
import shutil as _shutil
import subprocess as _subprocess
import sys as _sys
from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("spark-kafkalog")
except _metadata.PackageNotFoundError:  # running from a source checkout
    __version__ = "0.1.0"

__all__ = ["register", "__version__", "KafkaLogDataSource", "KafkaLogSetupError"]


class KafkaLogSetupError(RuntimeError):
    """The session cannot run the ``kafkalog`` source (its Python workers lack pyarrow)."""


def _spark_context_started() -> bool:
    """A SparkContext runs in this process (without importing pyspark: never loaded, none runs)."""
    for name in ("pyspark.core.context", "pyspark.context"):
        cls = getattr(_sys.modules.get(name), "SparkContext", None)
        if cls is not None and getattr(cls, "_active_spark_context", None) is not None:
            return True
    return False


def _default_worker_python() -> None:
    """Point Spark's Python workers at this interpreter (see the module docstring)."""
    if not _sys.executable or "PYSPARK_GATEWAY_PORT" in _os.environ or _spark_context_started():
        return
    _os.environ.setdefault("PYSPARK_PYTHON", _sys.executable)
    _os.environ.setdefault("PYSPARK_DRIVER_PYTHON", _sys.executable)


_default_worker_python()


@_functools.cache
def _worker_python_problem(python: str) -> str | None:
    """Why ``python`` cannot run the source's Python workers, or None when it can (or
    cannot be told quickly)."""
    path = _shutil.which(python) or python
    if _os.path.abspath(path) == _os.path.abspath(_sys.executable):
        return None
    try:
        proc = _subprocess.run([path, "-c", "import pyarrow, pyspark"], capture_output=True,
                               text=True, timeout=60, stdin=_subprocess.DEVNULL)
    except FileNotFoundError:
        return f"{python!r}, which is not found"
    except (OSError, _subprocess.TimeoutExpired):
        return None
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    where = f" ({path})" if path != python else ""
    why = lines[-1] if lines else f"exit status {proc.returncode}"
    return f"{python!r}{where}, which cannot import pyarrow and pyspark ({why})"


def _check_worker_python(spark) -> None:
    """Raise ``KafkaLogSetupError`` when the session's Python workers cannot run the source."""
    try:
        python = spark.sparkContext.pythonExec
    except Exception:  # Spark Connect: no SparkContext here, the server runs the workers
        return
    if not isinstance(python, str) or not python:
        return
    problem = _worker_python_problem(python)
    if problem is None:
        return
    raise KafkaLogSetupError(
        f"Run Spark's Python workers on this interpreter: export PYSPARK_PYTHON={_sys.executable} "
        "before starting Python (or import spark_kafkalog before the SparkSession is created), "
        "then start the session again.\n"
        f"This session's Python workers run {problem}; the kafkalog source needs both in them. "
        "spark.pyspark.python set on the session builder does not change them in local mode; "
        "PYSPARK_PYTHON does, read when the SparkContext starts.")


def register(spark) -> None:
    """Register the ``kafkalog`` format with ``spark`` (a SparkSession). Not needed when
    the distribution is installed: pyspark then finds ``pyspark_kafkalog`` on its own.
    The registration holds for the session, on every thread; a write from a thread other
    than the session's own also needs ``spark_kafkalog.jobs.session.activate_session(spark)``
    first in that thread (pyspark looks a write's format up in the thread's active session).
    Raises ``KafkaLogSetupError`` when the session's Python workers run an interpreter that
    cannot import pyarrow and pyspark (see the module docstring)."""
    _check_worker_python(spark)
    if _registered(spark):
        return  # found by pyspark, or registered before: registering again makes Spark warn
    from .source import KafkaLogDataSource
    spark.dataSource.register(KafkaLogDataSource)


def _registered(spark) -> bool:
    """``kafkalog`` is already a data source of ``spark`` (pyspark found ``pyspark_kafkalog``,
    or ``register`` ran). False when that cannot be told (Spark Connect)."""
    try:
        return bool(spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists("kafkalog"))
    except Exception:
        return False


def __getattr__(name: str):
    if name == "KafkaLogDataSource":
        from .source import KafkaLogDataSource
        return KafkaLogDataSource
    raise AttributeError(name)
