"""spark_kafkalog.embedded.EmbeddedBroker: the broker the notebook and the main job start.

Covers: a temporary log directory that is removed on stop; a kept log directory that the
next broker finds with its records; the clean-shutdown marker after stop (and its absence
after kill, with recovery on the next start); a failed start raising with the broker's
own error line; Ctrl-C (SIGINT) in the program that embeds the broker stopping the broker
cleanly too (the child runs in its own session, so the parent's handler does it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.client.consumer import fetch_arrow, latest_offsets
from broker.client.producer import KafkaProducer
from broker.log.files import CLEAN_SHUTDOWN_FILE
from spark_kafkalog.embedded import EmbeddedBroker, EmbeddedBrokerError


def _produce(bootstrap: str, topic: str, n: int) -> None:
    with KafkaProducer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(n):
            producer.send(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=0)
        producer.flush()


def _values(bootstrap: str, topic: str) -> list[bytes]:
    cfg = {"bootstrap.servers": bootstrap}
    end = latest_offsets(cfg, [(topic, 0)])
    (end_offset,) = end.values()
    out: list[bytes] = []
    for batch in fetch_arrow(cfg, topic, 0, 0, end_offset):
        out.extend(batch.column("value").to_pylist())
    return out


def test_temporary_log_dir_is_removed_on_stop() -> None:
    broker = EmbeddedBroker()
    with broker:
        assert broker.is_alive()
        _produce(broker.bootstrap_servers, "embedded-temp", 10)
        assert _values(broker.bootstrap_servers, "embedded-temp") == [f"v{i}".encode() for i in range(10)]
        log_dir = broker.log_path
        assert isinstance(broker.log_dir, str) and isinstance(broker.log_file, str)
        assert log_dir == Path(broker.log_dir) and (log_dir / "embedded-temp-0").is_dir()
    assert not broker.is_alive()
    assert not log_dir.exists()


def test_kept_log_dir_survives_and_shutdown_is_clean(tmp_path: Path) -> None:
    log_dir = tmp_path / "data" / "kafka-logs"
    with EmbeddedBroker(log_dir, overrides={"num.partitions": 1}) as broker:
        _produce(broker.bootstrap_servers, "embedded-kept", 25)
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / "data" / "broker.log").read_text().count("started (kafkalog)") == 1
    with EmbeddedBroker(log_dir) as broker:
        _produce(broker.bootstrap_servers, "embedded-kept", 5)
        values = _values(broker.bootstrap_servers, "embedded-kept")
    assert len(values) == 30 and values[:25] == [f"v{i}".encode() for i in range(25)]


def test_kill_then_restart_recovers(tmp_path: Path) -> None:
    broker = EmbeddedBroker(tmp_path / "kafka-logs").start()
    try:
        _produce(broker.bootstrap_servers, "embedded-crash", 40)
        broker.kill()
        assert not (broker.log_path / CLEAN_SHUTDOWN_FILE).exists()
        broker.start()
        assert len(_values(broker.bootstrap_servers, "embedded-crash")) == 40
    finally:
        broker.stop()


def test_failed_start_raises_with_the_broker_error(tmp_path: Path) -> None:
    broker = EmbeddedBroker(tmp_path / "kafka-logs", overrides={"num.partitions": "zero"})
    with pytest.raises(EmbeddedBrokerError) as info:
        broker.start()
    assert "num.partitions" in str(info.value)
    assert not broker.is_alive()
    with pytest.raises(EmbeddedBrokerError):
        _ = broker.bootstrap_servers


_SCRIPT = """
import sys, time
from spark_kafkalog.embedded import EmbeddedBroker
with EmbeddedBroker(sys.argv[1]) as broker:
    print(broker.pid, flush=True)
    while True:
        time.sleep(0.1)
"""


def test_ctrl_c_in_the_caller_stops_the_broker_cleanly(tmp_path: Path) -> None:
    log_dir = tmp_path / "kafka-logs"
    proc = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(log_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        broker_pid = int(proc.stdout.readline())
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0  # KeyboardInterrupt ended the script
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(broker_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(broker_pid, signal.SIGKILL)
        pytest.fail("the broker outlived the program that embedded it")
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()
