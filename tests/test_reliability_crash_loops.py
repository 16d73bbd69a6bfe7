"""Crash loops on the whole system (issue 19): the real broker in a subprocess, SIGKILLed
again and again under real clients, and restarted on the same port and log directory.

* R14 (RELIABILITY.md) crash loop: iterations of {start the broker (``flush.messages=1``:
  every acknowledged record is fsynced before its ack); run an acks=all idempotent
  confluent-kafka producer writing unique values; SIGKILL the broker at a random time
  0-2 s; restart it; let the producer deliver what it still holds}. After each restart:
  every value acknowledged so far is readable (Fetch from offset 0) at the offset its ack
  gave, no value is in the log twice, the offsets of every partition are contiguous from 0
  and strictly increasing (no offset repeats), every batch of every segment file has a
  valid CRC, and LEO >= last acknowledged offset + 1. Also: no traceback in the broker's
  stderr and no fatal error of the idempotent producer.
* I7 dedup across a restart: raw idempotent Produce requests (``RawClient``, producer ids
  from InitProducerId); SIGKILL right after the acks; restart; resend the identical
  batches, shuffled. Each is answered with its original base offset and nothing is
  appended; the next sequence then lands at the old log end. Variants: one batch; three
  producers with five batches each in flight on each of two partitions, in one segment;
  the same with small rolling segments, the producer state snapshot files kept, and
  deleted before the restart (the whole log is replayed). A snapshot keeps one batch
  per producer (Kafka's format), so a batch older than the newest snapshot on disk may
  be answered OUT_OF_ORDER_SEQUENCE_NUMBER (counted in the row), never appended again;
  every batch after it must be a duplicate (the loader replays the log tail).
* Transaction coordinator crash loop: a confluent-kafka transactional producer commits
  and aborts transactions (data on three partitions plus its consumer group's offsets,
  API calls bounded to 2 s) while the broker is SIGKILLed at random times and stays down
  a random time, and exits at each named crash point of the coordinator
  (``KAFKALOG_TXN_CRASH_POINT``, ``broker/server/txn/markers.py``: after the Prepare
  record, after the first marker, before the Complete record) for commit and abort,
  after a clean restart. The killed producer stays alive (a zombie). After each
  restart a new producer with the same transactional.id recovers (init_transactions,
  which fences the zombie) and commits one more transaction, and a read_committed
  consumer sees every committed transaction whole, no aborted or never-ended one, an
  unknown outcome all or nothing and unchanged since the previous check, the outcome
  decided before a crash point (its Prepare record) applied, no value twice, and the
  group's committed offset of the last visible transaction. The producers run with
  ``metadata.recovery.strategy=none``: librdkafka 2.16's re-bootstrap, when its only
  broker is down, can leave a send_offsets_to_transaction hanging (see TxnProducer).

``make test`` runs short loops; ``KAFKALOG_SOAK=1`` (``make soak``) runs R14's 50
iterations and longer I7 and coordinator loops. Each scenario prints its ``make soak``
row (``tests/support/soak.py``) before asserting. No timed assertions: waits are bounded
loops on conditions.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from broker.protocol import ApiKey
from broker.record.batch import decode_batch, encode_batch, iter_batch_headers, iter_batches
from tests.support.broker import BrokerProcess, RawClient
from tests.support.soak import soak_row
from tests.support.txn_protocol import create_topic
from tests.support.workload import free_port

SOAK = bool(os.environ.get("KAFKALOG_SOAK"))
R14_ITERATIONS = 50 if SOAK else 6
I7_ROUNDS = 5 if SOAK else 1
TXN_RANDOM_KILLS = 20 if SOAK else 3
TXN_CRASH_ROUNDS = 3 if SOAK else 1
CRASH_ENV = "KAFKALOG_TXN_CRASH_POINT"
CRASH_EXIT = 86  # crash_point's exit code
# (crash point, commit): every point for commit and abort under soak, four of them otherwise.
CRASH_POINTS = ([(p, c) for p in ("after-prepare", "after-first-marker", "before-complete") for c in (True, False)]
                if SOAK else [("after-prepare", True), ("after-first-marker", True), ("before-complete", True),
                              ("after-first-marker", False)])

pytestmark = pytest.mark.timeout(3600 if SOAK else 300)

BROKER_CONFIG = {"flush.messages": "1", "group.initial.rebalance.delay.ms": "0",
                 "offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def fixed_port_broker(broker_factory, name: str, **overrides: str) -> BrokerProcess:
    """A broker whose restarts keep its port (clients reconnect to the same address)."""
    return broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}", **BROKER_CONFIG, **overrides},
                          name=name)


def tracebacks(broker: BrokerProcess) -> list[str]:
    """The stderr files of every run of ``broker`` that hold a Python traceback."""
    return [p.name for p in sorted(broker.workdir.glob(f"{broker.name}-*.err"))
            if "Traceback" in p.read_text(errors="replace")]


# --- reading the log back: the segment files and the Fetch path ---

@dataclass
class PartitionScan:
    """What one partition's segment files hold (``scan_files``)."""

    records: dict[int, bytes | None] = field(default_factory=dict)  # offset -> value (data records)
    next_offset: int = 0  # the offset after the last batch: the LEO the files give
    batches: int = 0
    anomalies: list[str] = field(default_factory=list)


def scan_files(partition_dir: Path) -> PartitionScan:
    """Every batch of every segment in offset order: CRC checked (``decode_batch``),
    base offsets contiguous from the first segment's base (no gap, no repeat), and no
    bytes after the last whole batch of a segment (recovery truncates a torn tail)."""
    scan = PartitionScan()
    segments = sorted(partition_dir.glob("*.log"), key=lambda p: int(p.stem))
    expected = int(segments[0].stem) if segments else 0
    scan.next_offset = expected
    for seg in segments:
        data = seg.read_bytes()
        end = 0
        for pos, header in iter_batch_headers(data):
            end = pos + header.size_in_bytes
            try:
                _, records = decode_batch(data, pos)
            except Exception as exc:  # noqa: BLE001 - reported as an anomaly
                scan.anomalies.append(f"{seg.name}@{pos}: {exc}")
                continue
            scan.batches += 1
            if header.base_offset != expected:
                scan.anomalies.append(f"{seg.name}@{pos}: base offset {header.base_offset}, expected {expected}")
            offsets = [r.offset for r in records]
            if offsets != list(range(header.base_offset, header.next_offset)) and not header.is_control:
                scan.anomalies.append(f"{seg.name}@{pos}: record offsets {offsets[:5]}... in batch "
                                      f"{header.base_offset}-{header.last_offset}")
            if not header.is_control:
                for r in records:
                    if r.offset in scan.records:
                        scan.anomalies.append(f"offset {r.offset} repeats")
                    scan.records[r.offset] = r.value
            expected = header.next_offset
        if end != len(data):
            scan.anomalies.append(f"{seg.name}: {len(data) - end} bytes after the last whole batch")
    scan.next_offset = expected
    return scan


def fetch_all(c: RawClient, topic: str, partition: int, isolation: int = 0) -> tuple[list[tuple[int, bytes]], int]:
    """(offset, value) of every data record from offset 0 through the Fetch path, and the
    high watermark."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    while True:
        r = c.request(ApiKey.FETCH, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 8 << 20, "isolation_level": isolation,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "current_leader_epoch": -1,
                                                         "fetch_offset": offset, "log_start_offset": -1,
                                                         "partition_max_bytes": 4 << 20}]}]})
        part = r.responses[0].partitions[0]
        assert part.error_code == 0, part
        data = bytes(part.records or b"")
        before = offset
        for header, records in iter_batches(data):
            if not header.is_control:
                out += [(rec.offset, rec.value) for rec in records if rec.offset >= offset]
            offset = max(offset, header.next_offset)
        if offset >= part.high_watermark or offset == before:
            return out, part.high_watermark


def list_end_offset(c: RawClient, topic: str, partition: int) -> int:
    r = c.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                        "timestamp": -1}]}]})
    part = r.topics[0].partitions[0]
    assert part.error_code == 0, part
    return part.offset


# --- R14 ---

class AckingProducer(threading.Thread):
    """An idempotent acks=all confluent-kafka producer writing unique values round-robin
    over the partitions until ``stop``; ``acked``: value -> (partition, offset) from the
    delivery reports; ``failed``: values whose delivery report was an error (unknown
    outcome); ``fatal``: the client's fatal errors (error_cb)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, tag: str) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions, self.tag = topic, partitions, tag
        self.stop = threading.Event()
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: list[bytes] = []
        self.fatal: list[str] = []
        self.sent = 0
        self.p = Producer({"bootstrap.servers": bootstrap, "client.id": tag, "enable.idempotence": True,
                           "acks": "all", "linger.ms": 2, "message.timeout.ms": 120000,
                           "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200, "retry.backoff.ms": 20,
                           "error_cb": self._error})

    def _error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked[msg.value()] = (msg.partition(), msg.offset())
        else:
            self.failed.append(msg.value())

    def run(self) -> None:
        while not self.stop.is_set():
            value = f"{self.tag}-{self.sent}".encode()
            try:
                self.p.produce(self.topic, value, partition=self.sent % self.partitions, on_delivery=self._delivered)
            except BufferError:
                self.p.poll(0.05)
                continue
            self.sent += 1
            self.p.poll(0)
            if self.sent % 20 == 0:
                time.sleep(0.01)

    def finish(self, timeout: float = 120) -> int:
        """After ``stop`` and the thread's end: deliver what is left, close; the number
        undelivered."""
        left = self.p.flush(timeout)
        self.p.purge()
        self.p.flush(1)
        self.p.close()
        return left


def check_r14(broker: BrokerProcess, topic: str, partitions: int, acked: dict[bytes, tuple[int, int]],
              sent: set[bytes]) -> tuple[list[str], int]:
    """The pass criteria of R14 after a restart; (anomalies, records in the log)."""
    anomalies: list[str] = []
    in_log = 0
    with RawClient(broker.host, broker.port, "r14-check") as c:
        for p in range(partitions):
            scan = scan_files(broker.log_dir / f"{topic}-{p}")
            anomalies += [f"p{p}: {a}" for a in scan.anomalies]
            if scan.records and min(scan.records) != 0:
                anomalies.append(f"p{p}: the log starts at {min(scan.records)}")
            fetched, hw = fetch_all(c, topic, p)
            leo = list_end_offset(c, topic, p)
            if leo != scan.next_offset or hw != leo:
                anomalies.append(f"p{p}: ListOffsets {leo}, high watermark {hw}, segment files end at "
                                 f"{scan.next_offset}")
            offsets = [o for o, _ in fetched]
            if offsets != sorted(set(offsets)) or offsets != list(range(len(offsets))):
                anomalies.append(f"p{p}: fetched offsets not contiguous from 0 ({len(offsets)} records, "
                                 f"last {offsets[-1:]})")
            if dict(fetched) != scan.records:
                anomalies.append(f"p{p}: Fetch and the segment files disagree")
            values = [v for _, v in fetched]
            dupes = {v for v in values if values.count(v) > 1} if len(set(values)) != len(values) else set()
            anomalies += [f"p{p}: value {v!r} twice" for v in sorted(dupes)[:5]]
            anomalies += [f"p{p}: value {v!r} was never sent" for v in values if v not in sent][:5]
            by_offset = dict(fetched)
            mine = {v: o for v, (pp, o) in acked.items() if pp == p}
            lost = [(o, v) for v, o in mine.items() if by_offset.get(o) != v]
            anomalies += [f"p{p}: acked {v!r} at {o} reads {by_offset.get(o)!r}" for o, v in sorted(lost)[:5]]
            if mine and leo < max(mine.values()) + 1:
                anomalies.append(f"p{p}: LEO {leo} <= last acked offset {max(mine.values())}")
            in_log += len(fetched)
    return anomalies, in_log


def test_r14_crash_loop_keeps_every_acknowledged_record(broker_factory):
    """R14 (issue 19): SIGKILL at a random time under an idempotent acks=all producer,
    restart, check; ``R14_ITERATIONS`` times."""
    rng = random.Random(1914)
    broker = fixed_port_broker(broker_factory, "r14")
    topic, partitions = unique("r14"), 3
    with RawClient(broker.host, broker.port) as c:
        create_topic(c, topic, partitions)
    acked: dict[bytes, tuple[int, int]] = {}
    sent: set[bytes] = set()
    anomalies: list[str] = []
    kills = unknown = in_log = 0
    iterations = 0
    for it in range(R14_ITERATIONS):
        iterations += 1
        producer = AckingProducer(broker.bootstrap, topic, partitions, f"r14-{it}")
        producer.start()
        time.sleep(rng.uniform(0.0, 2.0))  # scenario: the kill comes at a random moment
        broker.kill()
        kills += 1
        producer.stop.set()
        producer.join(30)
        broker.start()
        left = producer.finish()
        sent |= {f"r14-{it}-{n}".encode() for n in range(producer.sent)}
        acked.update(producer.acked)
        unknown += len(producer.failed) + left
        anomalies += [f"iteration {it}: fatal producer error {e}" for e in producer.fatal]
        found, in_log = check_r14(broker, topic, partitions, acked, sent)
        anomalies += [f"iteration {it}: {a}" for a in found]
        if anomalies:
            break
    anomalies += [f"traceback in {name}" for name in tracebacks(broker)]
    soak_row("R14 crash loop", iterations, kills, len(acked), len(anomalies),
             f"{len(sent)} sent, {len(acked)} acked, {unknown} unknown, {in_log} in the log")
    assert not anomalies, "\n".join(anomalies[:20])
    assert len(acked) > 0


# --- I7 ---

def init_producer_id(c: RawClient) -> tuple[int, int]:
    r = c.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": -1})
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def produce_pipelined(c: RawClient, topic: str, batches: list[tuple[int, bytes]]) -> list[tuple[int, int]]:
    """Send every (partition, batch) before reading any answer (batches in flight);
    [(error code, base offset)] in order."""
    cids = [c.send(ApiKey.PRODUCE, 8, {
        "transactional_id": None, "acks": -1, "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}]})
        for p, batch in batches]
    out = []
    for cid in cids:
        got, r = c.recv()
        assert got == cid
        part = r.responses[0].partition_responses[0]
        out.append((part.error_code, part.base_offset))
    return out


@dataclass
class IdempotentWriter:
    """One producer id's raw batches: ``batch(partition, n)`` is the next batch for the
    partition (its sequence follows the last one's)."""

    producer_id: int
    epoch: int
    tag: str
    sequences: dict[int, int] = field(default_factory=dict)

    def batch(self, partition: int, n: int = 3) -> bytes:
        seq = self.sequences.get(partition, 0)
        self.sequences[partition] = seq + n
        now = int(time.time() * 1000)
        return encode_batch([(None, f"{self.tag}-p{partition}-s{seq + i}".encode(), now) for i in range(n)],
                            producer_id=self.producer_id, producer_epoch=self.epoch, base_sequence=seq)


def i7_round(broker: BrokerProcess, rng: random.Random, *, producers: int, in_flight: int, history: int,
             segment_bytes: int | None, delete_snapshots: bool) -> tuple[list[str], int, int]:
    """One I7 round on a new topic; (anomalies, batches resent, resent batches answered
    OUT_OF_ORDER_SEQUENCE_NUMBER as allowed: older than the newest snapshot)."""
    topic, partitions = unique("i7"), 2
    anomalies: list[str] = []
    configs = [{"name": "internal.segment.bytes", "value": str(segment_bytes)}] if segment_bytes else []
    with RawClient(broker.host, broker.port, "i7") as c:
        r = c.request(ApiKey.CREATE_TOPICS, 4, {"topics": [
            {"name": topic, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
             "configs": configs}], "timeout_ms": 10000})
        assert r.topics[0].error_code == 0, r
        writers = [IdempotentWriter(*init_producer_id(c), tag=f"{topic}-w{i}") for i in range(producers)]
        # History first (acknowledged one at a time): with small segments they roll, and
        # a producer state snapshot is taken at each roll.
        for _ in range(history):
            for w in writers:
                p = rng.randrange(partitions)
                (code, _), = produce_pipelined(c, topic, [(p, w.batch(p))])
                assert code == 0
        # Then each producer's last five batches of each partition, all in flight at once.
        last = [(p, w.batch(p)) for _ in range(in_flight) for w in writers for p in range(partitions)]
        acks = produce_pipelined(c, topic, last)
        assert all(code == 0 for code, _ in acks), acks
        ends = [list_end_offset(c, topic, p) for p in range(partitions)]
    broker.kill()  # right after the acks
    snapshots = {p: [int(s.stem) for s in (broker.log_dir / f"{topic}-{p}").glob("*.snapshot")]
                 for p in range(partitions)}
    if delete_snapshots:
        assert any(snapshots.values()), "no producer state snapshot to delete: the segments did not roll"
        for s in broker.log_dir.glob(f"{topic}-*/*.snapshot"):
            s.unlink()
    # A snapshot keeps one batch per producer (Kafka's format): a batch written before the
    # newest snapshot may be answered 45, never appended again; one after it must be a
    # duplicate (the loader replays the log after the snapshot), and with no snapshot
    # left every batch must (the whole log is replayed).
    newest = {p: -1 if delete_snapshots else max(snapshots[p], default=-1) for p in range(partitions)}
    broker.start()
    allowed = 0
    with RawClient(broker.host, broker.port, "i7") as c:
        order = list(range(len(last)))
        rng.shuffle(order)  # any of a producer's last five batches is a duplicate, in any order
        again = dict(zip(order, produce_pipelined(c, topic, [last[i] for i in order]), strict=True))
        for i, (code, base) in sorted(again.items()):
            p, original = last[i][0], acks[i][1]
            if (code, base) == (0, original):
                continue
            if code == 45 and original < newest[p]:
                allowed += 1
                continue
            anomalies.append(f"resent batch {i} (partition {p}, newest snapshot {newest[p]}): error {code}, "
                             f"base offset {base}; the original was {original}")
        after = [list_end_offset(c, topic, p) for p in range(partitions)]
        if after != ends:
            anomalies.append(f"log end offsets {after} after the resend, {ends} before")
        for p in range(partitions):
            values = [v for _, v in fetch_all(c, topic, p)[0]]
            if len(values) != len(set(values)):
                anomalies.append(f"partition {p}: a value twice in the log")
        # The state goes on: the next sequence is appended right at the end.
        p = 0
        (code, base), = produce_pipelined(c, topic, [(p, writers[0].batch(p))])
        if (code, base) != (0, ends[p]):
            anomalies.append(f"the next batch: error {code}, base offset {base}, expected {ends[p]}")
    return anomalies, len(last), allowed


def test_i7_dedup_across_a_restart(broker_factory):
    """I7 (issue 19): a batch acknowledged just before a SIGKILL, resent after the
    restart, gets its original offsets and appends nothing; with several producers and
    batches in flight, with the snapshots kept (snapshot + log tail) and deleted (replay
    of the whole log)."""
    rng = random.Random(7)
    broker = broker_factory(BROKER_CONFIG, name="i7")
    anomalies: list[str] = []
    kills = resent = 0
    variants = [dict(producers=1, in_flight=1, history=0, segment_bytes=None, delete_snapshots=False),
                dict(producers=3, in_flight=5, history=4, segment_bytes=None, delete_snapshots=False),
                dict(producers=3, in_flight=5, history=8, segment_bytes=1200, delete_snapshots=False),
                dict(producers=3, in_flight=5, history=8, segment_bytes=1200, delete_snapshots=True)]
    allowed = 0
    for _ in range(I7_ROUNDS):
        for v in variants:
            found, n, a = i7_round(broker, rng, **v)
            kills += 1
            resent += n
            allowed += a
            anomalies += [f"{v}: {a}" for a in found]
    anomalies += [f"traceback in {name}" for name in tracebacks(broker)]
    soak_row("I7 dedup across restart", I7_ROUNDS * len(variants), kills, resent, len(anomalies),
             "1 producer x 1 batch; 3 producers x 2 partitions x 5 in flight: one segment, rolling segments "
             f"with snapshots kept / deleted; {allowed} resent batches older than the newest snapshot "
             "answered 45 (the snapshot keeps one batch per producer)")
    assert not anomalies, "\n".join(anomalies[:20])


# --- the transaction coordinator crash loop ---

@dataclass
class Txn:
    """One transaction: its number (also the offset it commits for the group), values,
    and what the producer knows of its end: open (never ended), committing / aborting
    (the call did not return: unknown), committed, aborted. ``expect``: the outcome the
    coordinator decided before a crash point (its Prepare record), else None."""

    n: int
    values: list[bytes]
    state: str = "open"
    expect: str | None = None


class TxnBook:
    """Every transaction of the test, by number (written by one producer thread at a time)."""

    def __init__(self) -> None:
        self.txns: list[Txn] = []

    def new(self, per_txn: int) -> Txn:
        n = len(self.txns) + 1
        t = Txn(n, [f"t{n}-{k}".encode() for k in range(per_txn)])
        self.txns.append(t)
        return t


class TxnProducer:
    """A confluent-kafka transactional producer (one instance; a new one with the same
    transactional.id fences the previous) running transactions of ``per_txn`` values over
    the partitions plus its group's offset for partition 0 (the transaction's number)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, tid: str, group: str, book: TxnBook) -> None:
        self.topic, self.partitions, self.book = topic, partitions, book
        self.p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "client.id": tid,
                           "linger.ms": 2, "transaction.timeout.ms": 60000, "message.timeout.ms": 60000,
                           "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200, "retry.backoff.ms": 20,
                           # librdkafka 2.16's re-bootstrap (KIP-899) when every broker is down
                           # decommissions the broker handle under a send_offsets_to_transaction
                           # whose AddOffsetsToTxn is being retried: the TxnOffsetCommit is never
                           # sent and the call hangs past its timeout (client side: the broker
                           # answered AddOffsetsToTxn NO_ERROR). One broker: nothing to re-bootstrap.
                           "metadata.recovery.strategy": "none"})
        self.group_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        self.group_metadata = self.group_consumer.consumer_group_metadata()

    def init(self, timeout: float = 30) -> None:
        self.p.init_transactions(timeout)

    def run_one(self, commit: bool, per_txn: int = 6, end: bool = True, timeout: float = 30) -> Txn:
        """Begin, produce, add the offset, and (``end``) commit or abort; the Txn's state
        says how far it got (an exception propagates)."""
        t = self.book.new(per_txn)
        self.p.begin_transaction()
        for k, value in enumerate(t.values):
            self.p.produce(self.topic, value, partition=k % self.partitions)
        self.p.send_offsets_to_transaction([TopicPartition(self.topic, 0, t.n)], self.group_metadata, timeout)
        if end:
            self.end(t, commit, timeout)
        return t

    def end(self, t: Txn, commit: bool, timeout: float = 30) -> None:
        t.state = "committing" if commit else "aborting"
        if commit:
            self.p.commit_transaction(timeout)
        else:
            self.p.abort_transaction(timeout)
        t.state = "committed" if commit else "aborted"

    def close(self) -> None:
        """Close; a fenced zombie's fatal error is expected here."""
        try:
            self.p.purge()
            self.p.flush(1)
            self.p.close()
        except confluent_kafka.KafkaException as exc:
            if not exc.args[0].fatal():
                raise
        self.group_consumer.close()


class TxnRunner(threading.Thread):
    """Transactions one after the other (every third aborted, API calls bounded by
    ``timeout``) until ``stop`` or the first error (the broker was killed under it). The
    producer is left as it is (``tp``): a zombie that the next producer with its
    transactional.id must fence; the test closes it after the recovery."""

    def __init__(self, producer_args: tuple, rng: random.Random, timeout: float) -> None:
        super().__init__(daemon=True)
        self.producer_args, self.rng, self.timeout = producer_args, rng, timeout
        self.stop = threading.Event()
        self.initialised = threading.Event()
        self.error: str | None = None
        self.tp: TxnProducer | None = None

    def run(self) -> None:
        self.tp = TxnProducer(*self.producer_args)
        try:
            self.tp.init(60)  # the broker is up: the kill comes after it (_kill_under_a_runner)
            self.initialised.set()
            while not self.stop.is_set():
                self.tp.run_one(commit=self.rng.random() > 1 / 3, timeout=self.timeout)
        except confluent_kafka.KafkaException as exc:
            self.error = str(exc)


def recover_producer(producer_args: tuple, attempts: int = 10) -> TxnProducer:
    """A new producer with the transactional.id: init_transactions fences the previous one
    and ends its transaction; retried while the coordinator loads or completes one."""
    for attempt in range(attempts):
        tp = TxnProducer(*producer_args)
        try:
            tp.init(60)
            return tp
        except confluent_kafka.KafkaException as exc:
            tp.close()
            if attempt == attempts - 1 or not exc.args[0].retriable():
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


def read_committed(bootstrap: str, topic: str, partitions: int) -> tuple[list[tuple[int, int, bytes]], list[str]]:
    """Every record a read_committed consumer sees from offset 0 up to the end of each
    partition: [(partition, offset, value)], and errors."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("check"), "isolation.level": "read_committed",
                  "enable.partition.eof": True, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    seen: list[tuple[int, int, bytes]] = []
    errors: list[str] = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        eof: set[int] = set()
        deadline = time.monotonic() + 120
        while eof != set(range(partitions)) and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                else:
                    errors.append(str(m.error()))
                continue
            seen.append((m.partition(), m.offset(), m.value()))
        if eof != set(range(partitions)):
            errors.append(f"no end of partitions {sorted(set(range(partitions)) - eof)} within 120 s")
    finally:
        c.close()
    return seen, errors


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=60)[0].offset
    finally:
        c.close()


def check_transactions(bootstrap: str, topic: str, partitions: int, group: str, book: TxnBook,
                       seen_before: dict[int, bool]) -> list[str]:
    """After a recovery: committed transactions whole, aborted and never-ended ones
    absent, unknown ones all or nothing and as at the previous check (``seen_before``:
    transaction -> visible, updated; a fenced zombie must not change it), decided ones as
    decided, no value twice, offsets increasing, and the group's offset that of the last
    visible transaction."""
    seen, anomalies = read_committed(bootstrap, topic, partitions)
    by_value: dict[bytes, list[tuple[int, int]]] = {}
    for p, o, v in seen:
        by_value.setdefault(v, []).append((p, o))
    anomalies += [f"{v!r} read {len(at)} times at {at}" for v, at in by_value.items() if len(at) > 1][:5]
    for p in range(partitions):
        offsets = [o for pp, o, _ in seen if pp == p]
        if offsets != sorted(set(offsets)):
            anomalies.append(f"partition {p}: offsets not strictly increasing")
    known = {v for t in book.txns for v in t.values}
    anomalies += [f"{v!r} was never written" for v in by_value if v not in known][:5]
    visible = []
    for t in book.txns:
        n = sum(v in by_value for v in t.values)
        whole, none = n == len(t.values), n == 0
        if whole:
            visible.append(t.n)
        if seen_before.setdefault(t.n, whole) != whole:
            anomalies.append(f"transaction {t.n} ({t.state}): visible {seen_before[t.n]} at the previous check, "
                             f"now {whole}")
        if t.expect is not None:
            ok = whole if t.expect == "committed" else none
            why = f"decided {t.expect} before the crash"
        elif t.state == "committed":
            ok, why = whole, "committed"
        elif t.state == "committing":
            ok, why = whole or none, "commit outcome unknown"
        else:
            ok, why = none, t.state
        if not ok:
            anomalies.append(f"transaction {t.n} ({why}, producer saw {t.state}): {n} of {len(t.values)} "
                             "values visible")
    offset = committed_offset(bootstrap, group, topic)
    expected = max(visible, default=confluent_kafka.OFFSET_INVALID)
    if offset != expected:
        anomalies.append(f"the group's committed offset is {offset}, the last visible transaction {expected}")
    return anomalies


@pytest.mark.filterwarnings("ignore:Producer abort_transaction failed during close")  # a fenced zombie's close
def test_transaction_coordinator_crash_loop(broker_factory, monkeypatch):
    """Issue 19: SIGKILLs at random times under a transactional producer, and exits at
    each named crash point of the coordinator while ending a transaction (commit and
    abort); after each restart a new producer recovers and a read_committed consumer
    checks every transaction so far (``check_transactions``)."""
    rng = random.Random(1917)
    broker = fixed_port_broker(broker_factory, "txn")
    topic, partitions, group, tid = unique("txn-loop"), 3, unique("txn-group"), unique("tid")
    with RawClient(broker.host, broker.port) as c:
        create_topic(c, topic, partitions)
    book = TxnBook()
    args = (broker.bootstrap, topic, partitions, tid, group, book)
    anomalies: list[str] = []
    plan = [("kill", None)] * TXN_RANDOM_KILLS + [("crash", point) for point in CRASH_POINTS] * TXN_CRASH_ROUNDS
    rng.shuffle(plan)
    kills = crashes = recoveries = 0
    seen: dict[int, bool] = {}
    for i, (kind, point) in enumerate(plan):
        where = f"iteration {i} ({kind} {point or ''})"
        try:
            zombie = None
            if kind == "kill":
                zombie = _kill_under_a_runner(broker, args, rng)
                kills += 1
            else:
                anomalies += [f"{where}: {a}" for a in _exit_at_a_crash_point(broker, args, monkeypatch, *point)]
                crashes += 1
            rp = recover_producer(args)
            recoveries += 1
            anomalies += [f"{where}: {a}" for a in check_transactions(
                broker.bootstrap, topic, partitions, group, book, seen)]
            rp.run_one(commit=True)  # the recovered producer works
            rp.close()
            if zombie is not None:
                zombie.close()
        except confluent_kafka.KafkaException as exc:
            anomalies.append(f"{where}: {exc}")
        if anomalies:
            break
    anomalies += check_transactions(broker.bootstrap, topic, partitions, group, book, seen)
    anomalies += [f"traceback in {name}" for name in tracebacks(broker)]
    states = [t.expect or t.state for t in book.txns]
    soak_row("txn coordinator crash loop", kills + crashes, kills + crashes, sum(len(t.values) for t in book.txns),
             len(anomalies), f"{kills} SIGKILLs, {crashes} crash points; {len(book.txns)} transactions: "
             f"{states.count('committed')} committed, {states.count('aborted')} aborted, "
             f"{states.count('committing')} unknown, {states.count('open') + states.count('aborting')} never "
             f"ended; {recoveries} recoveries")
    assert not anomalies, "\n".join(anomalies[:20])


def _kill_under_a_runner(broker: BrokerProcess, args: tuple, rng: random.Random) -> TxnProducer | None:
    """SIGKILL at a random time under a ``TxnRunner``, restart after a random time down;
    the runner's producer (a zombie to fence).

    The kill waits for the runner's init_transactions: killed under it, the call times out
    while librdkafka goes on with the InitProducerId in the background, and that new
    instance's InitProducerId, answered after the restart, would legitimately fence the
    recovered producer (Kafka does the same), which is not the scenario under test."""
    runner = TxnRunner(args, rng, timeout=2.0)
    runner.start()
    assert runner.initialised.wait(90), f"the runner's init_transactions did not succeed: {runner.error}"
    time.sleep(rng.uniform(0.0, 2.0))  # scenario: the kill comes at a random moment
    broker.kill()
    runner.stop.set()
    time.sleep(rng.choice([0.0, rng.uniform(0.0, 3.0)]))  # scenario: down longer than the calls' timeout, or not
    broker.start()
    runner.join(180)
    assert not runner.is_alive(), "the transactional producer did not finish"
    return runner.tp


def _exit_at_a_crash_point(broker: BrokerProcess, args: tuple, monkeypatch, crash_point: str,
                           commit: bool) -> list[str]:
    """A clean restart with the crash point set, a transaction ended (commit or abort)
    in the background while the broker exits there, a restart without it; the
    transaction's outcome is the decided one (``expect``)."""
    assert broker.stop() == 0
    monkeypatch.setenv(CRASH_ENV, crash_point)
    broker.start()
    monkeypatch.delenv(CRASH_ENV)
    tp = TxnProducer(*args)
    tp.init(60)
    t = tp.run_one(commit, end=False)
    t.expect = "committed" if commit else "aborted"
    ender = threading.Thread(target=_end_quietly, args=(tp, t, commit), daemon=True)
    ender.start()
    code = broker.proc.wait(120)
    found = []
    if code != CRASH_EXIT or f"{CRASH_ENV}={crash_point}" not in broker.stderr_text():
        found.append(f"the broker exited with {code}, not at {crash_point}")
    broker.start()
    ender.join(180)
    assert not ender.is_alive(), "commit/abort did not return"
    tp.close()
    return found


def _end_quietly(tp: TxnProducer, t: Txn, commit: bool) -> None:
    """Commit or abort while the broker exits at its crash point (the call may fail)."""
    try:
        tp.end(t, commit, timeout=60)
    except confluent_kafka.KafkaException:
        pass
