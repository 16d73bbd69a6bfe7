"""The Spark part of issue 19 (reliability): E1/E2 of RELIABILITY.md (clean and hard
broker bounces) under a streaming query ``kafkalog`` -> ``kafkalog``.

The input topic holds N unique values ``v-<i>`` (confluent-kafka, idempotent, acks=all).
A query reads it in network mode (``kafka.bootstrap.servers``, ``subscribe``,
``startingOffsets=earliest``, a small ``maxOffsetsPerTrigger``: many micro-batches,
Trigger.AvailableNow) and writes its values to an output topic through the ``kafkalog``
sink (small record batches, a short ``delivery.timeout.ms``), with a checkpoint. While
micro-batches run, the broker (a subprocess, ``flush.messages=1``: an acknowledged record
is on disk before its ack, so even SIGKILL loses nothing acknowledged) is bounced on the
same port and log directory: SIGKILL first, then alternately SIGTERM; some bounces keep
it down longer than the sink's delivery timeout, so that tasks fail and the query with
them. Each bounce is timed to find a sink task mid-write: with exactlyOnce, when an open
transaction holds records in the output log (high watermark above the last stable
offset); without, when the output log grew while Spark's commit log did not (after a
bounded wait it bounces anyway: "unaligned" in the report); in the long version every
third bounce is not timed ("at once": the next micro-batch is being planned or read, so
the source's offset requests and fetches meet it). A query that fails is
restarted from its checkpoint, as a user would, until it has read all its input.

Then the output topic is read with two read_committed readers (confluent-kafka, and the
``kafkalog`` batch source in network mode with ``kafka.isolation.level=read_committed``):

* ``kafkalog.exactlyOnce=true`` (writers/exactly_once.py): the multiset of output values
  equals the input exactly: no loss, no duplicate, nothing foreign;
* without it (at-least-once, RELIABILITY.md C1): ``set(output) == set(input)`` and every
  duplicate is an input value; the duplicates are counted and reported.

And the broker wrote no traceback in any of its runs.

A second scenario simulates a single machine's crash with exactlyOnce: the broker is
SIGKILLed after the query committed everything in the sink, and Spark's commit log loses
its last entry; the restarted query replays that micro-batch, which must write nothing
(its marker offsets are read back from the recovered ``__consumer_offsets``). Each scenario prints its row of the
``make soak`` table (``tests.support.soak``): iterations and faults = bounces, records =
output records checked, anomalies = lost + foreign (+ duplicates with exactlyOnce), the
detail lists the bounces and the query restarts. ``make test`` runs 2 bounces over 1200
records; ``KAFKALOG_SOAK=1`` (``make soak``) 6 over 6000. No timed assertion: every wait is
a bounded loop on a condition.
"""


from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.support.soak import soak_row
from tests.support.spark_write import consume
from tests.support.workload import free_port

SOAK = bool(os.environ.get("KAFKALOG_SOAK"))
pytestmark = pytest.mark.timeout(1800 if SOAK else 420)

RECORDS = 6000 if SOAK else 1200
BOUNCES = 6 if SOAK else 2
PARTITIONS = 2
PER_TRIGGER = 100  # records per micro-batch (both partitions): RECORDS / 100 micro-batches
# The committed micro-batch count at which each bounce happens (spread over the first
# two thirds of the run, so that batches run before and after each of them).
BOUNCE_AT = [2 + i * (RECORDS // PER_TRIGGER * 2 // 3 - 2) // BOUNCES for i in range(BOUNCES)]
RUN_BUDGET_S = 1500 if SOAK else 330  # the whole run, restarts included (a bound, not a check)
# How long an armed bounce waits for a sink task to be mid-write before bouncing anyway.
ALIGN_WAIT_S = 30
BROKER = {"flush.messages": "1", "group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
          "transaction.state.log.num.partitions": "3", "num.partitions": str(PARTITIONS)}
# Small record batches: a task's 50 rows go out in several Produce requests (each fsynced
# by the broker: flush.messages=1), which widens the window in which a bounce finds it
# mid-write. delivery.timeout.ms: a task whose records cannot be delivered fails within
# seconds (a "long" bounce keeps the broker down longer than that, so that tasks fail, the
# query with them, and it is restarted from its checkpoint).
SINK_PRODUCER = {"batch.size": "256", "linger.ms": "0", "request.timeout.ms": "3000",
                 "delivery.timeout.ms": "6000"}
LONG_DOWN_S = 10.0


def _bounce_kind(i: int) -> tuple[bool, float, bool]:
    """Bounce i: (hard, seconds down, timed mid-write). SIGKILL first, then alternately
    SIGTERM; bounces 1, 2 (mod 4) are long; every third from the third on is not timed (it
    happens as soon as the micro-batch count is reached: the next micro-batch is being
    planned or read). 2 bounces = a quick SIGKILL and a long SIGTERM, both mid-write."""
    return i % 2 == 0, LONG_DOWN_S if i % 4 in (1, 2) else 0.0, i % 3 != 2



def _create_topics(broker, *topics: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(t, num_partitions=PARTITIONS) for t in topics]).values():
        f.result(30)


def _fill(broker, topic: str) -> list[str]:
    import confluent_kafka as ck
    values = [f"v-{i}" for i in range(RECORDS)]
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0
    return values


def _committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return sum(1 for f in commits.iterdir() if f.name.isdigit()) if commits.is_dir() else 0


def _bounce(broker, hard: bool, down_s: float) -> None:
    if hard:
        broker.kill()
    else:
        broker.stop()
    time.sleep(down_s)  # scenario: the broker stays down for a while
    broker.start()


class _EndOffsets:
    """The output topic's end offsets as read_uncommitted (high watermark) and
    read_committed (last stable offset) consumers see them; None while the broker is
    down."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer
        self.topic = topic
        self.consumers = {iso: Consumer({"bootstrap.servers": bootstrap, "group.id": f"spark-bounce-watch-{iso}",
                                         "isolation.level": iso, "socket.timeout.ms": 2000,
                                         "log_level": 0})  # quiet while the broker is down
                          for iso in ("read_uncommitted", "read_committed")}

    def get(self, isolation: str) -> list[int] | None:
        from confluent_kafka import KafkaException, TopicPartition
        try:
            return [self.consumers[isolation].get_watermark_offsets(TopicPartition(self.topic, p), timeout=2,
                                                                    cached=False)[1] for p in range(PARTITIONS)]
        except KafkaException:
            return None

    def close(self) -> None:
        for c in self.consumers.values():
            c.close()


class _Run:
    """The query, restarted from its checkpoint whenever it fails, and the bounces."""

    def __init__(self, spark, broker, source: str, sink: str, checkpoint: Path, exactly_once: bool) -> None:
        self.spark, self.broker, self.checkpoint = spark, broker, checkpoint
        self.source, self.sink, self.exactly_once = source, sink, exactly_once
        self.starts = 0
        self.failures: list[str] = []
        # (committed micro-batches then, SIGKILL/SIGTERM [long], "mid-write", "at once" or
        # "unaligned")
        self.bounces: list[tuple[int, str, str]] = []
        self.progress: list[dict] = []

    def start(self):
        self.starts += 1
        df = (self.spark.readStream.format("kafkalog").option("kafka.bootstrap.servers", self.broker.bootstrap)
              .option("subscribe", self.source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(PER_TRIGGER)).load().select("value"))
        w = (df.writeStream.format("kafkalog").option("kafka.bootstrap.servers", self.broker.bootstrap)
             .option("topic", self.sink).option("kafkalog.exactlyOnce", str(self.exactly_once).lower())
             .option("checkpointLocation", str(self.checkpoint)))
        for k, v in SINK_PRODUCER.items():
            w = w.option(f"kafka.{k}", v)
        return w.trigger(availableNow=True).start()

    def _mid_write(self, ends: _EndOffsets, armed: tuple[int, list[int]]) -> bool:
        """A sink task has records in the output log that its micro-batch has not
        committed yet: with exactlyOnce an open transaction holds records (high watermark
        above the last stable offset); without, the log grew while Spark's commit log did
        not."""
        hwm = ends.get("read_uncommitted")
        if hwm is None:
            return False
        if self.exactly_once:
            lso = ends.get("read_committed")
            return lso is not None and any(h > s for h, s in zip(hwm, lso))
        return sum(hwm) > sum(armed[1]) and _committed_batches(self.checkpoint) == armed[0]

    def run(self, bounce_at: list[int] = BOUNCE_AT) -> None:
        """Until the query ends without an error after every bounce (AvailableNow: it has
        then read everything the input held when it started, which is all of it); the
        last run's progress reports are kept (``progress``)."""
        pending = list(bounce_at)
        armed: tuple[int, list[int]] | None = None  # (committed micro-batches, end offsets) when armed
        armed_at = 0.0
        ends = _EndOffsets(self.broker.bootstrap, self.sink)
        q = self.start()
        deadline = time.monotonic() + RUN_BUDGET_S
        try:
            while True:
                done = _committed_batches(self.checkpoint)
                if pending and done >= pending[0]:
                    if armed is None:
                        armed, armed_at = (done, ends.get("read_uncommitted") or [0] * PARTITIONS), time.monotonic()
                    hard, down_s, timed = _bounce_kind(len(self.bounces))
                    aligned = timed and self._mid_write(ends, armed)
                    if aligned or not timed or time.monotonic() - armed_at > ALIGN_WAIT_S:
                        pending.pop(0)
                        armed = None
                        _bounce(self.broker, hard, down_s)
                        self.bounces.append((done, ("SIGKILL" if hard else "SIGTERM") + (" long" if down_s else ""),
                                             "mid-write" if aligned else "at once" if not timed else "unaligned"))
                if not q.isActive:
                    error = q.exception()
                    if error is None and not pending:
                        self.progress = q.recentProgress
                        return
                    if error is not None:
                        self.failures.append(str(error)[:3000])
                        q = self.start()  # the user restarts it from the same checkpoint
                    elif _committed_batches(self.checkpoint) < pending[0]:
                        # it ended before a bounce was due (a micro-batch count not reached):
                        # nothing left to bounce under
                        pending.clear()
                assert time.monotonic() < deadline, (
                    f"the query did not finish in {RUN_BUDGET_S} s: {done} micro-batches committed, "
                    f"{self.starts} starts, bounces {self.bounces}, failures {self.failures}")
                time.sleep(0.01 if armed else 0.2)
        finally:
            ends.close()
            if q.isActive:
                q.stop()


def _read_output(spark, broker, topic: str, expect: int | None) -> tuple[Counter, Counter]:
    """The output values as read by confluent-kafka and by the kafkalog batch source, both
    read_committed."""
    ck = Counter(r["value"].decode() for r in consume(broker, topic, partitions=PARTITIONS, expect=expect,
                                                      timeout=60))
    rows = (spark.read.format("kafkalog").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic).option("kafka.isolation.level", "read_committed").load()
            .selectExpr("CAST(value AS STRING) v").collect())
    return ck, Counter(r.v for r in rows)


def _open_transactions(broker, topic: str) -> list[tuple[int, int]]:
    """(high watermark, last stable offset) of every output partition, once they agree
    (no transaction left open: the replays aborted what failed attempts left) or after a
    bounded wait (the last EndTxn's markers may still be on their way)."""
    ends = _EndOffsets(broker.bootstrap, topic)
    try:
        deadline = time.monotonic() + 30
        while True:
            hwm, lso = ends.get("read_uncommitted"), ends.get("read_committed")
            if hwm is not None and hwm == lso or time.monotonic() > deadline:
                return list(zip(hwm or [], lso or []))
            time.sleep(0.1)
    finally:
        ends.close()


def _broker_tracebacks(broker) -> list[str]:
    return [p.name for p in sorted(broker.workdir.glob(f"{broker.name}-*.err"))
            if "Traceback" in p.read_text(errors="replace")]


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactlyOnce", "at-least-once"])
def test_stream_kafkalog_to_kafkalog_under_broker_bounces(spark, broker_factory, tmp_path, exactly_once):
    """E1/E2 under the Spark stream (module docstring): exactlyOnce gives the input
    exactly; at-least-once gives every input value, duplicates only."""
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}", **BROKER})
    tag = uuid.uuid4().hex[:6]
    source, sink = f"spark-bounce-in-{tag}", f"spark-bounce-out-{tag}"
    _create_topics(broker, source, sink)
    values = _fill(broker, source)
    expected = Counter(values)

    run = _Run(spark, broker, source, sink, tmp_path / "chk", exactly_once)
    run.run()

    ends = _open_transactions(broker, sink)
    got, via_spark = _read_output(spark, broker, sink, expect=RECORDS if exactly_once else None)
    lost = sorted(set(expected) - set(got))
    foreign = sorted(set(got) - set(expected))
    duplicates = sum(got.values()) - len(got)
    anomalies = len(lost) + len(foreign) + (duplicates if exactly_once else 0)
    scenario = "Spark stream exactlyOnce bounce" if exactly_once else "Spark stream at-least-once bounce"
    soak_row(scenario, len(run.bounces), len(run.bounces), sum(got.values()), anomalies,
             f"{RECORDS} in, {sum(got.values())} out, {len(lost)} lost, {len(foreign)} foreign, "
             f"{duplicates} duplicates; {_committed_batches(run.checkpoint)} micro-batches, "
             f"{run.starts - 1} query restarts; bounces (micro-batches committed, signal, timing): "
             + ", ".join(f"{d} {k} {a}" for d, k, a in run.bounces))
    for f in run.failures:
        print(f"  query failure (restarted): {f}")

    assert len(run.bounces) == BOUNCES, run.bounces
    assert not lost, f"{len(lost)} input values lost, e.g. {lost[:10]}"
    assert not foreign, f"{len(foreign)} values that were never input, e.g. {foreign[:10]}"
    if exactly_once:
        assert got == expected, {v: c for v, c in got.items() if c != 1}
    else:
        assert set(got) == set(expected)  # duplicates only, of input values (foreign checked)
    assert via_spark == got  # the two read_committed readers agree
    assert all(h == s for h, s in ends) and ends, f"a transaction left open: (HWM, LSO) {ends}"
    assert _broker_tracebacks(broker) == []


def test_exactly_once_replay_after_the_broker_and_the_driver_die_together(spark, broker_factory, tmp_path):
    """A single machine's crash, simulated (E2 with the Spark driver on the same node): the
    query has committed every micro-batch in the sink, then the broker is SIGKILLed and
    Spark's commit log loses its last entry (the driver died between the sink's commit and
    its own). After the broker's restart the query is restarted from its checkpoint: Spark
    replays that micro-batch, whose tasks must find their transactions committed in the
    marker groups (read back from the broker's recovered ``__consumer_offsets``, written
    as transactional offset commits) and write nothing: every value exactly once."""
    broker = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}", **BROKER})
    tag = uuid.uuid4().hex[:6]
    source, sink = f"spark-crash-in-{tag}", f"spark-crash-out-{tag}"
    _create_topics(broker, source, sink)
    expected = Counter(_fill(broker, source))
    run = _Run(spark, broker, source, sink, tmp_path / "chk", exactly_once=True)
    run.run(bounce_at=[])
    last = _committed_batches(run.checkpoint) - 1

    broker.kill()
    (run.checkpoint / "commits" / str(last)).unlink()
    (run.checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    broker.start()
    run.run(bounce_at=[])

    replayed = [p for p in run.progress if p["batchId"] == last]
    ends = _open_transactions(broker, sink)
    got, via_spark = _read_output(spark, broker, sink, expect=RECORDS)
    anomalies = sum(abs(got[v] - expected[v]) for v in set(got) | set(expected))
    soak_row("Spark stream exactlyOnce replay after broker SIGKILL", 1, 1, sum(got.values()), anomalies,
             f"micro-batch {last} replayed with {replayed[0]['numInputRows'] if replayed else 0} rows; "
             f"{len(expected)} in, {sum(got.values())} out")
    assert replayed and replayed[0]["numInputRows"] > 0, run.progress  # Spark did replay it
    assert got == expected, {v: c for v, c in got.items() if c != 1}
    assert via_spark == got
    assert all(h == s for h, s in ends) and ends, f"a transaction left open: (HWM, LSO) {ends}"
    assert _broker_tracebacks(broker) == []
