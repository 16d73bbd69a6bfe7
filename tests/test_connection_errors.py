"""Connection errors, fast and true: a bootstrap server that refuses connections, a host
name that does not resolve and a TLS listener whose certificate the client does not trust
make the clients (admin, consumer, producer), the console tools and the Spark source and
sink fail naming the cause, within the bound they were given, with the setting that
bounds the wait; the tools also tell the cause at once, in one line, before waiting.

Real brokers (a TLS one for the wrong CA, one without topic auto-creation for the
"topic not present" case) and the test session's Spark. Timing assertions are generous
(bound + slack): what matters is that the given bound, not Kafka's 60 s default, applies.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.client.admin import AdminClient
from broker.client.errors import BrokerUnreachableError, KafkaTimeoutError, SslAuthenticationError
from broker.client.producer import KafkaProducer
from spark_kafkalog.cli.main import main
from tests.support.broker import BrokerProcess

ROOT = Path(__file__).resolve().parents[1]
UNKNOWN_HOST = "no-such-host.invalid:9092"
SLACK_S = 15  # a busy machine: the bound plus this is the limit asserted


@pytest.fixture
def dead_port():
    """A port bound but not listening: connections to it are refused (ECONNREFUSED)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    yield f"127.0.0.1:{s.getsockname()[1]}"
    s.close()


@pytest.fixture(params=["refused", "unknown-host"])
def unreachable(request, dead_port):
    """(bootstrap address, the cause its failure is named by)."""
    if request.param == "refused":
        return dead_port, "connection refused"
    return UNKNOWN_HOST, "unknown host"


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory, pki):
    b = BrokerProcess(tmp_path_factory.mktemp("tls-errors"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.path("server.pem"),
    }, name="tls-errors")
    b.start()
    yield b
    b.stop()


@pytest.fixture
def wrong_ca(tls_broker, pki, tmp_path):
    """Client settings for the TLS listener with a trust store of another CA, and the
    same as a properties file."""
    config = {"bootstrap.servers": f"localhost:{tls_broker.ports['SSL']}", "security.protocol": "SSL",
              "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("other-ca.pem")}
    props = tmp_path / "wrong-ca.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in config.items() if k != "bootstrap.servers"))
    return config, props


def run(capsys, *argv: str) -> tuple[int, list[str], float]:
    """``kafkalog ARGV`` in-process: (exit code, stderr lines, seconds)."""
    t0 = time.monotonic()
    code = main(list(argv))
    elapsed = time.monotonic() - t0
    return code, capsys.readouterr().err.splitlines(), elapsed


# -- clients ----------------------------------------------------------------------------

def test_admin_client_names_the_cause_and_the_bound(unreachable):
    address, cause = unreachable
    t0 = time.monotonic()
    with AdminClient({"bootstrap.servers": address, "default.api.timeout.ms": 2000}) as admin:
        with pytest.raises(BrokerUnreachableError) as e:
            admin.list_topics()
    assert time.monotonic() - t0 < 2 + SLACK_S
    assert str(e.value) == (f"no broker of {address} reachable ({cause}); waited 2000 ms "
                            "(default.api.timeout.ms)")
    assert isinstance(e.value, KafkaTimeoutError) and e.value.cause == cause


def test_producer_metadata_wait_names_the_cause_not_the_topic(unreachable):
    address, cause = unreachable
    producer = KafkaProducer({"bootstrap.servers": address, "max.block.ms": 2000})
    try:
        t0 = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as e:  # existing handlers still catch it
            producer.send("t", b"x")
        assert time.monotonic() - t0 < 2 + SLACK_S
    finally:
        producer.close(0)
    assert isinstance(e.value, BrokerUnreachableError)
    assert str(e.value) == f"no broker of {address} reachable ({cause}); waited 2000 ms (max.block.ms)"


def test_a_missing_topic_is_still_the_topics_fault(broker_factory):
    broker = broker_factory({"auto.create.topics.enable": "false"}, name="noauto")
    producer = KafkaProducer({"bootstrap.servers": broker.bootstrap, "max.block.ms": 1500})
    try:
        with pytest.raises(KafkaTimeoutError) as e:
            producer.send("missing", b"x")
    finally:
        producer.close(0)
    assert not isinstance(e.value, BrokerUnreachableError)
    assert "topic missing not present in metadata after 1500 ms" in str(e.value)


def test_the_client_remembers_each_addresses_failure(dead_port):
    with AdminClient({"bootstrap.servers": f"{dead_port},{UNKNOWN_HOST}",
                      "default.api.timeout.ms": 1500}) as admin:
        with pytest.raises(BrokerUnreachableError) as e:
            admin.list_topics()
        failures = admin._client.client.connection_failures
    assert {a: f.cause for a, f in failures.items()} == {dead_port: "connection refused",
                                                         UNKNOWN_HOST: "unknown host"}
    assert f"({dead_port}: connection refused; {UNKNOWN_HOST}: unknown host)" in str(e.value)


def test_a_certificate_from_another_ca_fails_at_once(wrong_ca):
    """Not retriable (Kafka's SslAuthenticationException): no wait for the bound."""
    config, _ = wrong_ca
    t0 = time.monotonic()
    with AdminClient({**config, "default.api.timeout.ms": 60000}) as admin:
        with pytest.raises(SslAuthenticationError, match="certificate verify failed"):
            admin.list_topics()
    producer = KafkaProducer({**config, "max.block.ms": 60000})
    try:
        with pytest.raises(SslAuthenticationError, match="certificate verify failed"):
            producer.send("t", b"x")
    finally:
        producer.close(0)
    assert time.monotonic() - t0 < SLACK_S


# -- the console tools ------------------------------------------------------------------

def test_topics_tells_the_cause_then_fails_with_it(capsys, tmp_path, unreachable):
    address, cause = unreachable
    props = tmp_path / "admin.properties"
    props.write_text("default.api.timeout.ms=2000\n")
    code, err, elapsed = run(capsys, "topics", "--list", "--bootstrap-server", address,
                             "--command-config", str(props))
    assert code == 1 and elapsed < 2 + SLACK_S
    assert err == [
        f"kafkalog topics: no broker of {address} reachable yet ({cause}); retrying until "
        "default.api.timeout.ms (2000 ms)...",
        f"kafkalog topics: error: no broker of {address} reachable ({cause}); waited 2000 ms "
        "(default.api.timeout.ms)"]


def test_consume_timeout_bounds_the_connection_wait(capsys, unreachable):
    address, cause = unreachable
    code, err, elapsed = run(capsys, "consume", "--bootstrap-server", address, "--topic", "t",
                             "--timeout-ms", "3000")
    assert code == 1 and elapsed < 3 + SLACK_S  # not default.api.timeout.ms (60 s)
    assert err == [
        f"kafkalog consume: no broker of {address} reachable yet ({cause}); retrying until "
        "--timeout-ms (3000 ms)...",
        f"kafkalog consume: error: no broker of {address} reachable ({cause}); waited 3000 ms (--timeout-ms)"]


def test_produce_names_max_block_ms(capsys, tmp_path, dead_port):
    path = tmp_path / "in.txt"
    path.write_bytes(b"x\n")
    code, err, elapsed = run(capsys, "produce", "--bootstrap-server", dead_port, "--topic", "t",
                             "--file", str(path), "--producer-property", "max.block.ms=2000")
    assert code == 1 and elapsed < 2 + SLACK_S
    assert err == [
        f"kafkalog produce: no broker of {dead_port} reachable yet (connection refused); retrying until "
        "max.block.ms (2000 ms)...",
        f"kafkalog produce: error: no broker of {dead_port} reachable (connection refused); waited 2000 ms "
        "(max.block.ms)"]


def test_the_cause_is_told_at_once_not_after_the_timeout(dead_port):
    """A real process with Kafka's 60 s bound: its first stderr line, naming the cause,
    comes within seconds (then the process is stopped)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "spark_kafkalog.cli", "consume", "--bootstrap-server",
                             dead_port, "--topic", "t"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            env=env, cwd=ROOT)
    try:
        line = proc.stderr.readline().decode()
        elapsed = time.monotonic() - t0
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    assert line.rstrip("\n") == (f"kafkalog consume: no broker of {dead_port} reachable yet (connection "
                                 "refused); retrying until default.api.timeout.ms (60000 ms)...")
    assert elapsed < SLACK_S


def test_tools_fail_at_once_on_a_certificate_from_another_ca(capsys, tmp_path, wrong_ca):
    config, props = wrong_ca
    address = config["bootstrap.servers"]
    code, err, elapsed = run(capsys, "topics", "--list", "--bootstrap-server", address,
                             "--command-config", str(props))
    assert code == 1 and elapsed < SLACK_S and len(err) == 1, err  # not the 30 s bound
    assert err[0].startswith("kafkalog topics: error: ") and "certificate verify failed" in err[0]
    code, err, elapsed = run(capsys, "consume", "--bootstrap-server", address, "--topic", "t",
                             "--timeout-ms", "3000", "--consumer.config", str(props))
    assert code == 1 and elapsed < 3 + SLACK_S and len(err) == 1, err
    assert err[0].startswith("kafkalog consume: error: ") and "certificate verify failed" in err[0]
    path = tmp_path / "in.txt"
    path.write_bytes(b"x\n")
    code, err, elapsed = run(capsys, "produce", "--bootstrap-server", address, "--topic", "t",
                             "--file", str(path), "--producer.config", str(props))
    assert code == 1 and elapsed < SLACK_S and len(err) == 1, err  # not max.block.ms (60 s)
    assert err[0].startswith("kafkalog produce: error: ") and "certificate verify failed" in err[0]


# -- Spark ------------------------------------------------------------------------------

_DEAD_SINK = "no broker of {} reachable (connection refused); waited 3000 ms (kafka.max.block.ms)"


def _sink_options(address: str, **extra: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": address, "topic": "t", "kafka.max.block.ms": "3000", **extra}


def _one_batch():
    import pyarrow as pa
    return iter([pa.record_batch([pa.array(["a", "b"])], names=["value"])])


def test_transactional_producer_init_names_the_cause_not_the_request(dead_port):
    """InitProducerId (FindCoordinator first) with no broker reachable: the producer's
    max.block.ms wait ends in BrokerUnreachableError, never 'InitProducerId did not
    complete'."""
    producer = KafkaProducer({"bootstrap.servers": dead_port, "transactional.id": "t-1", "max.block.ms": 2000})
    try:
        t0 = time.monotonic()
        with pytest.raises(BrokerUnreachableError) as e:
            producer.init_transactions()
        assert time.monotonic() - t0 < 2 + SLACK_S
    finally:
        producer.close(0)
    assert str(e.value) == f"no broker of {dead_port} reachable (connection refused); waited 2000 ms (max.block.ms)"


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "micro-batch"])
def test_exactly_once_task_names_the_sinks_option(dead_port, streaming):
    """The exactly-once sink's task body (no Spark): its InitProducerId wait fails with the
    sink's option, one frame, no chained client error."""
    import dataclasses

    from spark_kafkalog.writers import parse_write_options
    from spark_kafkalog.writers.common import SinkColumns, TaskInfo
    from spark_kafkalog.writers.exactly_once import write_task_transactional

    opts = dataclasses.replace(parse_write_options(_sink_options(dead_port, **{"kafkalog.exactlyOnce": "true"})),
                               write_id="w1")
    info = TaskInfo(partition=0, batch_id=3 if streaming else None, query_id="q" if streaming else None)
    t0 = time.monotonic()
    with pytest.raises(BrokerUnreachableError) as e:
        write_task_transactional(opts, SinkColumns(value=0), _one_batch(), streaming=streaming, info=info)
    assert time.monotonic() - t0 < 3 + SLACK_S
    assert str(e.value) == _DEAD_SINK.format(dead_port)
    assert e.value.__cause__ is None and e.value.__suppress_context__
    assert any("its transaction" in note for note in e.value.__notes__)


def test_exactly_once_abort_is_bounded_by_max_block_ms(dead_port):
    """The driver's abort (EndTxn / fencing InitProducerId) against an unreachable cluster
    gives up after kafka.max.block.ms, not a fixed minute, and says why."""
    import dataclasses

    from spark_kafkalog.writers import parse_write_options
    from spark_kafkalog.writers.exactly_once import abort_transactions

    opts = dataclasses.replace(parse_write_options(_sink_options(dead_port, **{"kafkalog.exactlyOnce": "true"})),
                               write_id="w1")
    t0 = time.monotonic()
    line = abort_transactions(opts, [None, None])
    assert time.monotonic() - t0 < 3 + SLACK_S
    assert line.count(_DEAD_SINK.format(dead_port)) == 2, line  # one per failed task's id
    assert "last error: None" not in line


def test_the_sink_checks_the_cluster_once_on_the_driver(dead_port):
    """make_writer / make_stream_writer (the driver) fail at once with the sink's error; the
    stream writer pyspark re-creates to commit or abort a micro-batch does not ask the cluster."""
    from pyspark.sql.types import StringType, StructField, StructType

    from spark_kafkalog.writers import make_stream_writer, make_writer

    schema = StructType([StructField("value", StringType())])
    for make in (make_writer, make_stream_writer):
        t0 = time.monotonic()
        with pytest.raises(BrokerUnreachableError) as e:
            make(_sink_options(dead_port), schema, False)
        assert time.monotonic() - t0 < 3 + SLACK_S
        assert str(e.value) == _DEAD_SINK.format(dead_port)
    # pyspark's commit runner (pyspark/sql/worker/python_streaming_sink_runner.py) calls
    # DataSource.streamWriter, then commit or abort: no check there (here: a caller by that name)
    import pyspark.sql.worker.python_streaming_sink_runner as runner
    assert "data_source.streamWriter(" in Path(runner.__file__).read_text()  # still the path it takes
    scope: dict = {}
    exec(compile("def call(f, *a):\n    return f(*a)\n", runner.__file__, "exec"), scope)
    t0 = time.monotonic()
    scope["call"](make_stream_writer, _sink_options(dead_port), schema, False)
    assert time.monotonic() - t0 < 2


def _jobs_of(spark, group: str) -> list[int]:
    return list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def _failing(spark, group: str, action):
    """Run ``action`` in job group ``group``: (its exception's text, seconds)."""
    spark.sparkContext.setJobGroup(group, group)
    t0 = time.monotonic()
    try:
        with pytest.raises(Exception) as e:
            action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return str(e.value), time.monotonic() - t0


@pytest.mark.parametrize("exactly_once", ["false", "true"])
def test_spark_write_fails_once_from_the_driver(spark, dead_port, exactly_once):
    """An unreachable cluster fails a batch write (idempotent or exactly-once) from the
    driver's check, before any task runs: the sink's message once, with one frame."""
    df = spark.createDataFrame([("a",), ("b",)], "value STRING")  # no shuffle: a job would be the write's
    group = f"unreachable-write-{exactly_once}-{time.monotonic_ns()}"
    text, elapsed = _failing(spark, group, lambda: df.write.format("kafkalog").mode("append").options(
        **_sink_options(dead_port, **{"kafkalog.exactlyOnce": exactly_once})).save())
    assert elapsed < 3 + 3 * SLACK_S  # Spark's own overhead included
    assert text.count("no broker of") == 1, text
    assert f"BrokerUnreachableError: {_DEAD_SINK.format(dead_port)}" in text
    assert "not present in metadata" not in text and "did not complete" not in text
    assert text.count("File ") == 1, text  # the source's one frame, not the client's
    assert _jobs_of(spark, group) == []  # no task started


def test_spark_stream_write_fails_once_from_the_driver(spark, dead_port, tmp_path):
    stream = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
              .selectExpr("CAST(value AS STRING) AS value"))
    query = stream.writeStream.format("kafkalog").options(**_sink_options(dead_port)) \
        .option("checkpointLocation", str(tmp_path / "chk")).start()
    t0 = time.monotonic()
    try:
        with pytest.raises(Exception) as e:
            query.awaitTermination(3 + 3 * SLACK_S)
    finally:
        query.stop()
    assert time.monotonic() - t0 < 3 + 3 * SLACK_S
    text = str(e.value)
    assert text.count("no broker of") == 1, text
    assert f"BrokerUnreachableError: {_DEAD_SINK.format(dead_port)}" in text
    assert "PYTHON_EXCEPTION" not in text  # not a task's error: the driver's


def test_spark_read_fails_once_while_planning(spark, dead_port):
    group = f"unreachable-read-{time.monotonic_ns()}"
    df = spark.read.format("kafkalog").option("subscribe", "t").option("kafka.bootstrap.servers", dead_port) \
        .option("kafka.default.api.timeout.ms", "3000").load()
    text, elapsed = _failing(spark, group, df.count)
    assert elapsed < 3 + 3 * SLACK_S
    assert text.count("no broker of") == 1, text
    assert (f"BrokerUnreachableError: no broker of {dead_port} reachable (connection refused); "
            "waited 3000 ms (kafka.default.api.timeout.ms)") in text
    assert text.count("File ") == 1, text
    assert _jobs_of(spark, group) == []
