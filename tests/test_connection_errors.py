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

def test_spark_write_and_read_name_the_cause_and_the_option(spark, dead_port):
    df = spark.createDataFrame([("a",), ("b",)], "value STRING").coalesce(1)
    t0 = time.monotonic()
    with pytest.raises(Exception) as e:
        df.write.format("kafkalog").option("kafka.bootstrap.servers", dead_port).option("topic", "t") \
            .option("kafka.max.block.ms", "3000").mode("append").save()
    assert time.monotonic() - t0 < 3 + 3 * SLACK_S  # Spark's own overhead included
    text = str(e.value)
    assert (f"BrokerUnreachableError: no broker of {dead_port} reachable (connection refused); "
            "waited 3000 ms (kafka.max.block.ms)") in text
    assert "not present in metadata" not in text
    assert text.count("File ") <= 3, text  # the client's frames are left out
    t0 = time.monotonic()
    with pytest.raises(Exception) as e:
        spark.read.format("kafkalog").option("subscribe", "t").option("kafka.bootstrap.servers", dead_port) \
            .option("kafka.default.api.timeout.ms", "3000").load().count()
    assert time.monotonic() - t0 < 3 + 3 * SLACK_S
    assert (f"BrokerUnreachableError: no broker of {dead_port} reachable (connection refused); "
            "waited 3000 ms (kafka.default.api.timeout.ms)") in str(e.value)
