"""The SparkSession a job runs in: an active one, spark-submit's, or a quiet local one.

Owns ``job_session(app_name, master=None, conf=None) -> JobSession`` for the jobs in this
package and the ``kafkalog`` commands that run them (``export``, the main pipeline):

* an active session (a notebook's, a test's) is used as it is, and never stopped;
* under ``spark-submit`` (its PythonRunner hands the driver ``PYSPARK_GATEWAY_PORT``) the
  session spark-submit configured (its --master, --conf, --properties-file), never
  overridden here, except ``master`` when one is given explicitly;
* otherwise a local session the caller owns (``JobSession.stop()`` stops it): ``master``
  (default ``local[*]``), the ``conf`` entries, Arrow on, no UI, no console progress bar,
  Python workers on this interpreter (``PYSPARK_PYTHON`` when unset), and a log4j2
  configuration of its own so that the terminal shows no start-up chatter and no Java
  stack traces (the commands report failures in one line themselves).

The log level is set to ERROR once a session built here is up (an active session's is the
user's and left alone), pyspark's import-time warning about pandas 3 is silenced, the
``kafkalog`` source is registered explicitly
(``spark_kafkalog.register``), so a job works whether or not pyspark discovered it, and the
session is made the calling thread's active one (``activate_session``).

Also owns ``activate_session(spark)``: every thread that writes with a Python data source
calls it first. pyspark 4 (classic, not Spark Connect) runs each Python thread's calls on
a JVM thread of its own, and the JVM's active session is a thread-local that only the thread
that built the session has; Spark looks the format of ``df.write.format(...).save()`` (and of
``writeStream...start()``) up among the Python data sources of the *active* session only, so
from any other thread a write fails with ``DATA_SOURCE_NOT_FOUND`` although the source is
registered (a read looks it up in its own session and works). pyspark has no public setter
in classic mode; ``activate_session`` makes the call pyspark's own ``ml`` code makes for the
same reason. ``tests/test_spark_thread_write.py`` fails loudly once a pyspark no longer needs
it.

Thread-safety: ``job_session`` from any thread (a session already active in the calling
thread, or the process's default session, is used as it is); ``activate_session`` from any
thread, any number of times.
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["JobSession", "activate_session", "job_session", "under_spark_submit"]

# pyspark 4.3 warns at import about pandas 3; it says nothing about these jobs.
PANDAS_WARNING = "PySpark does not yet fully support pandas"

_LOG4J2 = """\
# kafkalog jobs: Spark's log quiet from the JVM's start (WARN, as Spark's shells, so that
# Spark does not announce its default level; then ERROR once the session is up)
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
# the jobs report failures themselves, in one line: never a stack trace on the terminal
appender.console.layout.alwaysWriteExceptions = false
"""


def under_spark_submit() -> bool:
    """spark-submit's PythonRunner hands the driver its JVM gateway through this."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


@dataclass
class JobSession:
    spark: Any
    owned: bool  # built here: stop() stops it
    log4j_file: str | None = None

    def stop(self) -> None:
        if self.owned:
            self.spark.stop()
        if self.log4j_file is not None:
            try:
                os.unlink(self.log4j_file)
            except OSError:
                pass
            self.log4j_file = None


def activate_session(spark: Any) -> None:
    """Make ``spark`` the active SparkSession of the calling thread, on the JVM side too, so
    that ``df.write.format("kafkalog")`` works in it (see the module docstring). A no-op for
    a Spark Connect session (the server resolves formats in its own session)."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        return
    from pyspark.sql import SparkSession

    # pyspark 4.x: the classic session's JVM class (org.apache.spark.sql.classic.SparkSession)
    SparkSession._get_j_spark_session_class(spark._jvm).setActiveSession(jsession)


def _running_session() -> Any | None:
    """The calling thread's active session, else the process's default one (what
    ``SparkSession.active()`` returns: a thread other than the one that built the session
    has no active session of its own), else None."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    try:
        return SparkSession.active()
    except PySparkRuntimeError:  # NO_ACTIVE_OR_DEFAULT_SESSION: no session runs
        return None


def job_session(app_name: str, master: str | None = None,
                conf: Mapping[str, str] | None = None) -> JobSession:
    """See the module docstring."""
    warnings.filterwarnings("ignore", message=PANDAS_WARNING)
    from pyspark.sql import SparkSession

    from spark_kafkalog import register

    active = _running_session()
    if active is not None:
        activate_session(active)
        register(active)
        return JobSession(active, owned=False)
    builder = SparkSession.builder.appName(app_name)
    log4j = None
    if under_spark_submit():
        if master:
            builder = builder.master(master)
        session = JobSession(builder.getOrCreate(), owned=False)
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYTHONWARNINGS", f"ignore:{PANDAS_WARNING}:FutureWarning")
        builder = (builder.master(master or "local[*]")
                   .config("spark.ui.enabled", "false")
                   .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        fd, log4j = tempfile.mkstemp(prefix="kafkalog-log4j2-", suffix=".properties")
        with os.fdopen(fd, "w") as f:
            f.write(_LOG4J2)
        builder = (builder.config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.defaultJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}"))
        session = JobSession(builder.getOrCreate(), owned=True, log4j_file=log4j)
    session.spark.sparkContext.setLogLevel("ERROR")  # built here: no active session was running
    activate_session(session.spark)
    register(session.spark)
    return session
