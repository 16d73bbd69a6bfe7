"""A class-data-sharing archive of Spark's classes for the suite's JVMs.

Owns ``spark_submit_opts()``: the ``SPARK_SUBMIT_OPTS`` of every JVM the suite starts
(each worker's Spark session, every ``spark-submit`` of a script, notebook, export or
Spark Connect server). Each of those JVMs is short, and loading and verifying Spark's
classes is a large part of its CPU: a session's start plus a few small queries costs
about 13 s of CPU, 8.5 s when the classes come from an archive (wall 12 s to 7.5 s).

The archive is the JDK's dynamic AppCDS archive (``-XX:ArchiveClassesAtExit`` once, then
``-XX:SharedArchiveFile``). It is made the first time the suite runs in an environment,
in the background while the suite starts: one short Spark session runs the kinds of
query the suite runs (SQL, a shuffle, Arrow and Python UDFs, Parquet, a micro-batch
stream), and its JVM writes the classes it loaded when it exits (about 40 s). It is kept
beside the interpreter (``<venv>/spark-cds/``, or the temporary directory outside a
virtual environment), named after the pyspark version and the ``java -version`` text, so
another JDK or Spark makes another archive.

Invariants: the archive's flags (C1 only, the serial collector) are the flags every JVM
runs with, because the JVM refuses an archive dumped with another collector. A JVM that
cannot use the archive (not there yet, another class path, a damaged file) goes on
without it, and ``-Xlog:cds=off`` keeps its warning out of the JVM's standard output,
which some tests parse: the archive only ever changes the speed. The archive appears
whole or not at all (dumped under a temporary name, renamed when the JVM has exited).

``python -m tests.support.jvm_archive`` starts the dump when the archive is missing and
returns at once: ``make test`` runs it before ruff and mypy, which use one core, so that on
a new venv the dump has the other one and is mostly done when the first Spark JVM starts.

Thread-safety: called once per process, from ``tests/conftest.py`` at import.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# C2 (the optimizing JIT) and the parallel collector's threads cost a short JVM about
# half its CPU for nothing.
BASE_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
DUMP_TIMEOUT_S = 300

_DUMP_SCRIPT = r"""
import sys, tempfile
from pyspark import SparkContext
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true").getOrCreate())
df = spark.range(2000).selectExpr("id", "id % 7 AS k", "CAST(id AS STRING) AS s")
df.groupBy("k").agg(F.count("*"), F.max("s")).collect()
df.mapInArrow(lambda batches: batches, df.schema).count()
df.select(F.udf(lambda v: v + 1, "long")("id")).collect()
spark.createDataFrame(df.limit(10).toPandas()).collect()
with tempfile.TemporaryDirectory() as d:
    df.write.parquet(d + "/p")
    spark.read.parquet(d + "/p").where("k = 3").count()
    q = (spark.readStream.format("rate").option("rowsPerSecond", 10).load().writeStream
         .format("memory").queryName("cds").option("checkpointLocation", d + "/c")
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
proc = SparkContext._gateway.proc
spark.stop()
proc.stdin.close()  # the gateway JVM exits when its stdin closes, and writes the archive then
proc.wait(120)
import os, pathlib
partial, archive = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
if proc.returncode == 0 and partial.is_file() and partial.stat().st_size > 0:
    os.replace(partial, archive)
partial.unlink(missing_ok=True)
"""


def _java_version() -> str | None:
    java = Path(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stderr if done.returncode == 0 else None


def _archive_path() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    java = _java_version()
    if java is None:
        return None
    key = hashlib.sha256(f"{pyspark.__version__}\n{java}\n{BASE_OPTS}".encode()).hexdigest()[:16]
    home = Path(sys.prefix) if sys.prefix != sys.base_prefix else Path(tempfile.gettempdir())
    return home / "spark-cds" / f"spark-{pyspark.__version__}-{key}.jsa"


def _start_dump(archive: Path) -> None:
    """Start the dump of ``archive`` in a process of its own session (it outlives a
    suite interrupted meanwhile); nothing when another dump of it is under way."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    for old in archive.parent.glob(f"{archive.name}.*.partial"):
        try:
            if time.time() - old.stat().st_mtime < DUMP_TIMEOUT_S:
                return
            old.unlink()
        except OSError:
            pass
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    partial.touch()
    env = dict(os.environ, SPARK_SUBMIT_OPTS=f"{BASE_OPTS} {QUIET} -XX:ArchiveClassesAtExit={partial}",
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    try:
        subprocess.Popen([sys.executable, "-c", _DUMP_SCRIPT, str(partial), str(archive)], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         cwd=tempfile.gettempdir(), start_new_session=True)
    except OSError:
        partial.unlink(missing_ok=True)


def spark_submit_opts() -> str:
    """The JVM options of the suite's Spark JVMs: ``BASE_OPTS``, plus the class archive
    when one can be had (its dump started here if it is missing; JVMs started before it
    is there run without it)."""
    archive = _archive_path()
    if archive is None:
        return BASE_OPTS
    if not archive.is_file():
        _start_dump(archive)
    return f"{BASE_OPTS} {QUIET} -XX:SharedArchiveFile={archive}"


if __name__ == "__main__":
    spark_submit_opts()
