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
* ``@pytest.mark.kcat``: the test runs the ``kcat`` program (an independent librdkafka
  client); without kcat on PATH it is skipped with that one-line reason. CI installs kcat
  and runs them (``.ci/run``: ``make test PYTEST_ARGS='-m kcat'``).
"""

from __future__ import annotations

import shutil

import pytest

pytest_plugins = ["tests.support.broker", "tests.support.spark", "tests.support.spark_write", "tests.support.tls",
                  "tests.support.object_store"]

KCAT = shutil.which("kcat")


def pytest_collection_modifyitems(config, items) -> None:
    """Skip the tests marked ``kcat`` when the program is not installed."""
    if KCAT is not None:
        return
    skip = pytest.mark.skip(reason="kcat is not installed (apt-get install kcat; CI installs it)")
    for item in items:
        if item.get_closest_marker("kcat") is not None:
            item.add_marker(skip)
