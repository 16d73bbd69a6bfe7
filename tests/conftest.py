"""The suite's configuration: shared fixtures come from ``tests/support/`` (the real broker
in a subprocess, the Spark sessions), and tests marked ``kcat`` skip where kcat is missing.

* ``tests/support/broker.py``: ``BrokerProcess``, ``RawClient``; fixtures ``kafka_broker``
  (one broker for the session), ``broker_factory`` (fresh brokers), ``raw_client``.
* ``tests/support/spark.py``: the local[2] SparkSession (``spark``), ``LogWriter``,
  ``pushdown``; ``tests/support/spark_write.py``: the sink tests' session with task
  retries (``wspark``) and broker (``sink_broker``).
* ``tests/support/tls.py``: the TLS tests' certificates and stores (``pki``).
* ``tests/support/object_store.py``: a real S3-protocol server, moto in server mode
  (``moto_s3``, ``MotoServer``: uploads, and a recording of the requests it gets).
* ``tests/support/producer.py``, ``fault_proxy.py``, ``workload.py``, ``txn_log.py``,
  ``protocol_strategies.py``: helpers imported by the tests that use them.
* ``make test`` runs the suite on pytest-xdist workers, a whole file per worker at a time;
  the slowest files are collected first (``SLOW_FILES``); Spark's JVMs run with C1 only
  the serial collector and a class archive (``SPARK_SUBMIT_OPTS``,
  ``tests/support/jvm_archive.py``), bytecode is cached (Makefile), each worker
  freezes what its collection left alive (``pytest_collection_finish``), and each test
  process starts a fork server for Spark's Python daemons and streaming source runners
  (``pytest_sessionstart``, ``tests/support/spark_fork.py``). Every test owns
  its ports (the brokers bind port 0) and directories (``tmp_path``), and each worker has
  its own Spark session.
* ``@pytest.mark.kcat``: the test runs the ``kcat`` program (an independent librdkafka
  client); without kcat on PATH it is skipped with that one-line reason. CI installs kcat
  and runs them (``.ci/run``: ``make test PYTEST_ARGS='-m kcat'``).
"""

from __future__ import annotations

import gc
import os
import shutil
import zlib
from pathlib import Path

import pytest
from hypothesis import settings

from tests.support import spark_fork
from tests.support.jvm_archive import spark_submit_opts

pytest_plugins = ["tests.support.broker", "tests.support.spark", "tests.support.spark_write", "tests.support.tls",
                  "tests.support.object_store", "tests.support.tables"]

KCAT = shutil.which("kcat")

# Every JVM of the suite is a short one: each worker's Spark session and every job a test
# starts with spark-submit (scripts, notebooks, exports, Spark Connect). They run with C1
# only, the serial collector and a class-data-sharing archive of Spark's classes
# (tests/support/jvm_archive.py: a session's start and a few small queries went from 18 s
# of CPU to 9.5 s with the flags, and to 8.5 s from 13 s with the archive). Spark's
# launcher passes SPARK_SUBMIT_OPTS to the driver's JVM; the xdist workers and the
# processes they start inherit it from the controller, which makes the archive once per
# environment. Behaviour is the same; a value set by the caller is kept.
if "SPARK_SUBMIT_OPTS" not in os.environ:
    os.environ["SPARK_SUBMIT_OPTS"] = spark_submit_opts()

# Spark puts its zip of pyspark first on the path of every Python process it starts, and
# Python compiles a zip's modules from source every time: about 1.2 s of CPU more per Spark
# Python daemon, worker and spark-submit driver, several hundred of them per run. The
# suite's processes import the installed pyspark instead, the same release, from bytecode
# (tests/support/sitehook/sitecustomize.py, first on the PYTHONPATH that every process the
# suite starts inherits; KAFKALOG_TEST_SPARK_ZIPS=1 keeps Spark's zips). There, too, Spark's
# Python daemons import pyarrow, pandas and the connector once before they fork their
# workers, instead of every worker importing them again (KAFKALOG_TEST_SPARK_PRELOAD=0: off).
os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(
    [str(Path(__file__).parent / "support" / "sitehook"),
     *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]))

# Hypothesis' per-example deadline (200 ms) is a timed assertion: on a loaded machine (the
# suite's own workers, CI) an example that decodes a compressed batch takes longer now and
# then, and the test fails for no fault. Speed is the benchmarks' business: no deadline.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


# The test files that take longest (each over ~30 s of wall time in a run of ``make test``,
# summed over their tests), slowest first. ``make test`` hands whole files to its
# pytest-xdist workers in collection order (--dist loadfile, with xdist's reordering by test count
# turned off in ``pytest_configure``), so these are collected first: started first, they
# end with the rest instead of running alone at the end (longest processing time first).
# A stale entry only costs balance, never a test.
SLOW_FILES = (
    "test_spark_compacted.py", "test_readme.py", "test_pipeline.py", "test_server_quota_clients.py",
    "test_security_sasl.py", "test_reliability_spark_faults.py", "test_spark_read_direct.py", "test_spark_write.py",
    "test_spark_exactly_once.py", "test_tables_kills.py", "test_connection_errors.py",
    "test_reliability_resources.py", "test_security_sasl_ssl.py", "test_log_append_fused.py",
    "test_reliability_faults.py", "test_spark_connect.py", "test_spark_read_stream.py",
    "test_reliability_crash_loops.py", "test_notebook.py", "test_tools_schemas.py", "test_object_store_read.py",
    "test_client_share_consumer.py", "test_tables_stream.py", "test_security_acls.py", "test_protocol_fuzz.py",
    "test_docs.py", "test_schema_avro_compat_property.py", "test_spark_stream_sink.py",
    "test_tools_console_consumer.py", "test_cli_export.py", "test_spark_first_hour.py", "test_fuzz.py",
)


def spread(name: str) -> int:
    """A fixed pseudo-random rank of a test file. In name order, files of one kind come
    together (``test_record_*``, ``test_schema_*``: CPU-bound property tests;
    ``test_server_group_*``: brokers and clients waiting on rebalances and timeouts), so the
    workers all computed at once, then all waited at once, with a core idle (6.5% of the
    run's CPU time). Mixed, one worker's waits overlap another's computing."""
    return zlib.crc32(name.encode())


def pytest_configure(config) -> None:
    """Keep the collection order when pytest-xdist hands out whole files: by default its
    ``--dist loadfile`` queue puts the files with the most tests first, which left the
    slowest files, each one or two long tests (the notebook, Spark Connect, the first-hour
    script), to start last and run alone at the end."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items) -> None:
    """Collect the slow files first (``SLOW_FILES``), the rest in an order that mixes their
    kinds (``spread``); skip the tests marked ``kcat`` when the program is not installed."""
    rank = {name: i for i, name in enumerate(SLOW_FILES)}
    # stable: the order within a file is kept
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), spread(item.path.name)))
    if KCAT is not None:
        return
    skip = pytest.mark.skip(reason="kcat is not installed (apt-get install kcat; CI installs it)")
    for item in items:
        if item.get_closest_marker("kcat") is not None:
            item.add_marker(skip)


def pytest_sessionstart(session) -> None:
    """Start this test process's fork server for Spark's Python daemons and streaming
    source runners (``tests/support/spark_fork.py``); not in pytest-xdist's controller,
    which runs no test."""
    if hasattr(session.config, "workerinput") or not getattr(session.config.option, "numprocesses", None):
        spark_fork.start()


def pytest_collection_finish(session) -> None:
    """Move what the collection left alive (every test module, and pyspark, pandas,
    pyarrow, Hypothesis and the clients they import: over 100,000 objects a worker) out of
    the cyclic garbage collector's reach (``gc.freeze()``), as Spark's Python daemons and
    the brokers' fork server do: none of it is ever garbage, and every full collection the
    tests trigger walked all of it again. The tests that build many objects (the property
    tests) spent about a tenth of their CPU on that."""
    gc.collect()
    gc.freeze()
