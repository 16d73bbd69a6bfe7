"""Test support for the resource-exhaustion scenarios (tests/test_reliability_resources.py):
the broker's memory, a well-behaved client, raw-socket helpers and the soak row.

* ``Memory``: the broker's RSS in KiB: ``before`` (at creation), ``peak`` (VmRSS sampled
  every 20 ms by a thread, and VmHWM, reset through ``/proc/PID/clear_refs`` at creation)
  and ``after`` (``finish``); ``text(bound)`` says them in MiB.
* ``GoodClient``: a confluent-kafka producer (acks=all, idempotent) and an assigned
  consumer in a background thread, in rounds of 20 records each produced, acknowledged and
  read back in order; ``verified``, ``failures``; ``wait_for(n)``: a bounded wait for ``n``
  more verified records (fails the test on a failure or at the deadline).
* ``report``: one ``make soak`` row (``tests.support.soak.soak_row``) with the RSS figures;
  returns the anomalies (good-client failures + bound violations).
* raw sockets: ``frame`` (a request's bytes), ``closed_by_peer``, ``small_buffers``,
  ``produce_raw``, ``create_topic``, ``status_kb``.

Thread-safety: ``Memory`` and ``GoodClient`` each run one thread of their own; their
counters are read by the test thread.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import confluent_kafka

from broker.protocol import ApiKey, RequestHeader, encode_request
from tests.support.broker import BrokerProcess, RawClient
from tests.support.soak import soak_row


def create_topic(b: BrokerProcess, name: str, partitions: int = 1) -> str:
    with RawClient(b.host, b.port, "exhaustion-admin") as admin:
        r = admin.request(ApiKey.CREATE_TOPICS, 4, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
            "configs": []}], "timeout_ms": 5000})
        assert r.topics[0].error_code == 0, r
    return name


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


class Memory:
    """The broker's RSS: before (at start), peak (sampled every 20 ms, and VmHWM since a
    ``clear_refs`` reset), after (``finish``); in MiB."""

    def __init__(self, b: BrokerProcess) -> None:
        self.pid = b.pid
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # VmHWM := current RSS
        except OSError:
            pass
        self.before = status_kb(self.pid, "VmRSS")
        self.peak = self.before
        self.after = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            try:
                self.peak = max(self.peak, status_kb(self.pid, "VmRSS"))
            except (OSError, RuntimeError):
                return

    def now(self) -> int:
        return status_kb(self.pid, "VmRSS")

    def finish(self) -> None:
        self._stop.set()
        self._thread.join()
        self.after = status_kb(self.pid, "VmRSS")
        self.peak = max(self.peak, self.after, status_kb(self.pid, "VmHWM"))

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.before) / 1024

    def text(self, bound_mib: int) -> str:
        return (f"broker RSS before {self.before / 1024:.0f} MiB, peak {self.peak / 1024:.0f} MiB, "
                f"after {self.after / 1024:.0f} MiB; peak growth {self.growth_mib:.0f} MiB, bound {bound_mib} MiB")


class GoodClient:
    """A well-behaved confluent-kafka producer (acks=all) and consumer (assigned, from offset
    0) in a background thread: rounds of 20 records, each produced, acknowledged, then read
    back in order. ``verified``: records read back; ``failures``: what went wrong."""

    ROUND = 20

    def __init__(self, b: BrokerProcess, topic: str) -> None:
        self.topic = topic
        self.producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap, "acks": "all",
                                                  "linger.ms": 5, "enable.idempotence": True, "log_level": 4})
        self.consumer = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"good-{topic}",
                                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                                  "log_level": 4})
        self.consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        self.verified = 0
        self.rounds = 0
        self.failures: list[str] = []
        self._seq = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="good-client", daemon=True)

    def __enter__(self) -> GoodClient:
        self._thread.start()
        self.wait_for(self.ROUND)  # connected and working before the abuse starts
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(120)
        self.consumer.close()

    def _run(self) -> None:
        while not self._stop.wait(0.02):  # a pause between rounds: a client, not a load generator
            try:
                self._round()
            except Exception as exc:  # noqa: BLE001 - recorded as the good client's failure
                self.failures.append(f"round {self.rounds}: {exc!r}")
                return

    def _round(self) -> None:
        values = [f"good-{self._seq + i}".encode() for i in range(self.ROUND)]
        self._seq += self.ROUND
        errors: list[str] = []

        def acked(err, msg) -> None:
            if err is not None:
                errors.append(str(err))

        for v in values:
            self.producer.produce(self.topic, v, partition=0, on_delivery=acked)
        if self.producer.flush(60) or errors:
            self.failures.append(f"round {self.rounds}: not acknowledged: {errors[:3]}")
            return
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = self.consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                self.failures.append(f"round {self.rounds}: consumer error {msg.error()}")
                return
            got.append(msg.value())
        if got != values:
            self.failures.append(f"round {self.rounds}: read {len(got)} of {len(values)} records back in order")
            return
        self.verified += len(values)
        self.rounds += 1

    def wait_for(self, more: int, timeout: float = 180.0) -> None:
        """Wait until ``more`` further records are verified (a bounded liveness wait)."""
        target = self.verified + more
        deadline = time.monotonic() + timeout
        while self.verified < target and not self.failures and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.verified >= target and not self.failures, (self.verified, target, self.failures)


def report(scenario: str, iterations: int, faults: int, good: GoodClient, mem: Memory, bound_mib: int,
           extra: str = "", violations: int = 0) -> int:
    """Prints the scenario's soak row; returns its anomalies (good-client failures + bound
    violations: the peak's, plus ``violations`` found by the scenario)."""
    violations += int(mem.growth_mib > bound_mib)
    anomalies = len(good.failures) + violations
    detail = mem.text(bound_mib) + (f"; {extra}" if extra else "")
    if good.failures:
        detail += f"; good client: {good.failures[:3]}"
    soak_row(scenario, iterations, faults, good.verified, anomalies, detail)
    return anomalies


def frame(api_key: int, version: int, body, correlation_id: int, client_id: str = "abuser") -> bytes:
    return b"".join(bytes(b) for b in encode_request(RequestHeader(api_key, version, correlation_id, client_id), body))


def closed_by_peer(sock: socket.socket, timeout: float = 30.0) -> bool:
    """True when the broker closes ``sock`` (EOF or reset) within ``timeout``; reads and
    drops anything it answers meanwhile."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def small_buffers(sock: socket.socket) -> None:
    """64 KiB send and receive buffers: the kernel holds little of what a client does not read."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)


def produce_raw(client: RawClient, topic: str, batch: bytes):
    """Produce one batch to partition 0 (acks=-1) on a raw connection; the partition response."""
    return client.request(ApiKey.PRODUCE, 8, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                                              "topic_data": [{"name": topic, "partition_data": [
                                                  {"index": 0, "records": batch}]}]}
                          ).responses[0].partition_responses[0]
