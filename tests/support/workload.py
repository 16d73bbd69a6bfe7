"""The reliability scenarios' workload (E1-E6 of RELIABILITY.md): real confluent-kafka
clients in background threads that record everything into a ``History``
(``tests/support/history.py``), and the final drain that ends each scenario.

* ``IdempotentProducer``: enable.idempotence, acks=all; each value to partition
  ``i % partitions``; a send is ``ok(offset)`` on its delivery report and ``info`` on an
  error (an idempotent producer's give-up: the record may or may not be there). ``pace``:
  a short sleep every 50 sends (False: as fast as the client takes them); ``limit``: stop
  after that many sends; ``pad``: that many spaces after the value, stripped by the
  consumer (bigger records for the same values). ``sent``: sends so far.
* ``TransactionalProducer``: a ``transactional.id`` producer, ``per_txn`` records a
  transaction, committed (or, every ``abort_every``-th, aborted on purpose). The history
  gets ``txn`` -> sends -> ``commit()`` (invoked) -> ``committed()`` / ``aborted()`` /
  ``unknown()``. A retriable error of commit is retried; an abortable one aborts; a fatal
  one (or a commit whose outcome cannot be known) marks the transaction unknown and
  starts a new producer with the same transactional.id (which fences the old one and
  finishes its transaction). ``committed_count``, ``aborted_count``, ``unknown_count``.
* ``GroupConsumer``: a classic-protocol group member, read_committed, auto commit off,
  committing synchronously after each non-empty poll; assignments and polls go to the
  history. ``error``: an exception that ended its thread.
* ``drain(history, consumers, producers_stopped)``: waits (bounded) until every
  acknowledged value (of committed transactions) was polled, then stops the consumers.
* ``verdict(history)``: the checker's report after the drain, with the anomalies shown.
* ``wait_for(condition, timeout)`` (polls, returns the last value) and
  ``wait_for_outcome(predicate, what)`` (a bounded number of checks, else AssertionError
  naming the outcome): the suite's waits.
* ``Workload``: one scenario's four clients on two topics (idempotent ``e-<tag>``,
  transactional ``t-<tag>``), ``progress(...)`` (a bounded wait for more acks and
  commits) and ``finish()`` (stop, drain, verdicts).

Each client gets ``extra`` config on top of its defaults (e.g. request.timeout.ms).
Thread-safety: each object is driven by its own thread; ``stop`` is an Event; counters
are read by the test thread (ints: atomic enough for progress checks).
"""

from __future__ import annotations

import socket
import threading
import time

import confluent_kafka

from tests.support.history import History, Report, check


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout: float, interval: float = 0.05) -> bool:
    """Poll ``condition`` until it is true or ``timeout`` seconds passed; its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


def wait_for_outcome(predicate, what: str, attempts: int = 1200, interval: float = 0.05) -> None:
    """Wait for an outcome: check ``predicate`` up to ``attempts`` times, ``interval``
    seconds apart (a bounded number of checks, never a timed assertion); AssertionError
    "never happened: <what>" when it never holds."""
    gate = threading.Event()
    for _ in range(attempts):
        if predicate():
            return
        gate.wait(interval)
    raise AssertionError(f"never happened: {what}")


class IdempotentProducer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, history: History, *, partitions: int = 3,
                 process: str = "e-producer", pace: bool = True, limit: int | None = None, pad: int = 0,
                 extra: dict | None = None) -> None:
        super().__init__(daemon=True)
        self.history, self.topic, self.partitions = history, topic, partitions
        self.process, self.pace, self.limit, self.pad = process, pace, limit, b" " * pad
        self.stop = threading.Event()
        self.p = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "client.id": process, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 500, **(extra or {})})
        self.sent = 0
        self.errors: list[str] = []

    def run(self) -> None:
        i = 0
        while not self.stop.is_set() and (self.limit is None or i < self.limit):
            value = self.history.value("e")
            partition = i % self.partitions
            op = self.history.send(self.process, partition, value)

            def delivered(err, msg, op=op):
                if err is None:
                    op.ok(msg.offset())
                else:  # an idempotent producer's give-up: the record may or may not be there
                    self.errors.append(str(err))
                    op.info()

            while True:
                try:
                    self.p.produce(self.topic, value.encode() + self.pad, partition=partition, on_delivery=delivered)
                    break
                except BufferError:
                    self.p.poll(0.05)
            self.p.poll(0)
            i += 1
            self.sent = i
            if self.pace and i % 50 == 0:
                time.sleep(0.02)
        self.p.flush(180)


class TransactionalProducer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, history: History, *, partitions: int = 3,
                 process: str = "t-producer", per_txn: int = 10, abort_every: int = 5,
                 extra: dict | None = None) -> None:
        super().__init__(daemon=True)
        self.history, self.topic, self.partitions = history, topic, partitions
        self.process, self.per_txn, self.abort_every = process, per_txn, abort_every
        self.config = {"bootstrap.servers": bootstrap, "client.id": process, "transactional.id": process,
                       "linger.ms": 5, "message.timeout.ms": 60000, "transaction.timeout.ms": 60000,
                       "reconnect.backoff.max.ms": 500, **(extra or {})}
        self.stop = threading.Event()
        self.committed_count = self.aborted_count = self.unknown_count = 0
        self.restarts = 0
        self.error: BaseException | None = None

    def _new_producer(self) -> confluent_kafka.Producer:
        p = confluent_kafka.Producer(self.config)
        while not self.stop.is_set():
            try:
                p.init_transactions(30)
                return p
            except confluent_kafka.KafkaException as exc:
                if exc.args[0].fatal():
                    p = confluent_kafka.Producer(self.config)
                time.sleep(0.2)  # the coordinator is unreachable or loading: try again
        return p

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _run(self) -> None:
        p = self._new_producer()
        n = 0
        while not self.stop.is_set():
            n += 1
            t = self.history.txn(self.process)
            abort = self.abort_every > 0 and n % self.abort_every == 0
            try:
                p.begin_transaction()
                for i in range(self.per_txn):
                    value = self.history.value("t")
                    op = t.send(i % self.partitions, value)

                    def delivered(err, msg, op=op, t=t):
                        if t.outcome != "open":
                            return  # the transaction's outcome decides
                        if err is None:
                            op.ok(msg.offset())
                        else:
                            op.info()

                    while True:
                        try:
                            p.produce(self.topic, value.encode(), partition=i % self.partitions,
                                      on_delivery=delivered)
                            break
                        except BufferError:
                            p.poll(0.05)
                if abort:
                    p.abort_transaction(60)
                    t.aborted()
                    self.aborted_count += 1
                    continue
                t.commit()
                self._commit(p, t)
            except confluent_kafka.KafkaException as exc:
                err = exc.args[0]
                if t.outcome == "open" and err.txn_requires_abort() and t.commit_index is None:
                    try:
                        p.abort_transaction(60)
                        t.aborted()
                        self.aborted_count += 1
                        continue
                    except confluent_kafka.KafkaException:
                        pass
                if t.outcome == "open":
                    t.unknown()
                    self.unknown_count += 1
                self.restarts += 1
                p = self._new_producer()  # fences the old one; its transaction is finished
        p.flush(30)

    def _commit(self, p: confluent_kafka.Producer, t) -> None:
        while True:
            try:
                p.commit_transaction(60)
                t.committed()
                self.committed_count += 1
                return
            except confluent_kafka.KafkaException as exc:
                if exc.args[0].retriable() and not self.stop.is_set():
                    time.sleep(0.1)
                    continue
                raise


class GroupConsumer(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, group: str, history: History, *,
                 process: str = "e-consumer", extra: dict | None = None) -> None:
        super().__init__(daemon=True)
        self.history, self.process = history, process
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.c = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": process,
            "group.protocol": "classic", "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 500, "isolation.level": "read_committed",
            "reconnect.backoff.max.ms": 500, **(extra or {})})
        self.c.subscribe([topic], on_assign=lambda _c, ps: history.assign(process, [p.partition for p in ps]))
        self.polled = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                msgs = self.c.consume(500, 0.2)
                records = [(m.partition(), m.offset(), m.value().decode().rstrip(" "))
                           for m in msgs if m.error() is None]
                if records:
                    self.history.poll(self.process, records, read_committed=True)
                    self.polled += len(records)
                    try:
                        self.c.commit(asynchronous=False)
                    except confluent_kafka.KafkaException:
                        pass  # the broker is down or the group rebalances: the next commit covers it
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.c.close()


def acked_values(history: History) -> set[str]:
    return {o.value for o in history.snapshot() if o.kind == "send" and o.status == "ok"
            and (o.txn is None or o.txn.outcome == "committed")}


def polled_values(history: History) -> set[str]:
    return {v for o in history.snapshot() if o.kind == "poll" for _, _, v in o.records}


def drain(pairs: list[tuple[History, GroupConsumer]], timeout: float = 180) -> None:
    """The final drain: producers are stopped; wait (bounded) until each consumer polled
    every acknowledged value of its history, then stop the consumers."""
    deadline = time.monotonic() + timeout
    for history, _consumer in pairs:
        acked = acked_values(history)
        wait_for(lambda h=history, a=acked: a <= polled_values(h), max(0.0, deadline - time.monotonic()), 0.2)
    for _history, consumer in pairs:
        consumer.stop.set()
    for _history, consumer in pairs:
        consumer.join(60)
        assert consumer.error is None, consumer.error


def verdict(history: History) -> Report:
    """The checker's report (drained), asserted valid with the first anomalies shown."""
    report = check(history, drained=True)
    assert report.valid, report.summary() + "\n" + "\n".join(
        f"{k}: {v[:5]}" for k, v in report.anomalies.items() if v)
    return report


class Workload:
    """One scenario's clients (E3-E6): an idempotent producer and a committing group on
    topic ``e-<tag>`` (history ``e``), and, with ``transactions``, a transactional producer
    and a read_committed group on ``t-<tag>`` (history ``t``: its own history, since a
    history's partitions are those of one topic). ``producer_extra`` / ``consumer_extra``
    go to the clients' configs. ``finish()`` stops the producers, drains, and returns the
    checker's verdicts (asserted valid)."""

    def __init__(self, bootstrap: str, tag: str, *, partitions: int = 3, transactions: bool = True,
                 producer_extra: dict | None = None, consumer_extra: dict | None = None,
                 limit: int | None = None, pace: bool = True, pad: int = 0) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        self.e_topic, self.t_topic = f"e-{tag}", f"t-{tag}"
        topics = [self.e_topic] + ([self.t_topic] if transactions else [])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic(t, partitions, 1) for t in topics]).values():
            f.result(60)
        self.e = History()
        self.t = History()
        self.producer = IdempotentProducer(bootstrap, self.e_topic, self.e, partitions=partitions, pace=pace,
                                           limit=limit, pad=pad, extra=producer_extra)
        self.consumer = GroupConsumer(bootstrap, self.e_topic, f"g-{tag}", self.e, extra=consumer_extra)
        self.txn_producer = TransactionalProducer(bootstrap, self.t_topic, self.t, partitions=partitions,
                                                  process=f"t-producer-{tag}",
                                                  extra=producer_extra) if transactions else None
        self.txn_consumer = GroupConsumer(bootstrap, self.t_topic, f"gt-{tag}", self.t, process="t-consumer",
                                          extra=consumer_extra) if transactions else None

    def threads(self) -> list[threading.Thread]:
        return [x for x in (self.producer, self.consumer, self.txn_producer, self.txn_consumer) if x is not None]

    def start(self) -> Workload:
        for x in self.threads():
            x.start()
        return self

    def acked(self) -> int:
        return len(acked_values(self.e))

    def committed_txns(self) -> int:
        return self.txn_producer.committed_count if self.txn_producer else 0

    def progress(self, acked: int, txns: int = 0, timeout: float = 120) -> bool:
        """Waits (bounded) until ``acked`` more writes were acknowledged and ``txns`` more
        transactions committed than now; whether they were."""
        a, t = self.acked() + acked, self.committed_txns() + txns
        return wait_for(lambda: self.acked() >= a and self.committed_txns() >= t, timeout, 0.1)

    def stop_producers(self, timeout: float = 240) -> None:
        producers = [x for x in (self.producer, self.txn_producer) if x is not None]
        for x in producers:
            x.stop.set()
        for x in producers:
            x.join(timeout)

    def finish(self, drain_timeout: float = 180) -> tuple[Report, Report | None]:
        self.stop_producers()
        pairs = [(self.e, self.consumer)] + ([(self.t, self.txn_consumer)] if self.txn_consumer else [])
        drain(pairs, drain_timeout)
        if self.txn_producer is not None:
            assert self.txn_producer.error is None, self.txn_producer.error
        return verdict(self.e), verdict(self.t) if self.txn_consumer else None

    def close(self) -> None:
        """Stops whatever still runs (after a failure), without waiting long."""
        for x in self.threads():
            x.stop.set()


__all__ = ["GroupConsumer", "IdempotentProducer", "TransactionalProducer", "Workload", "acked_values", "drain",
           "free_port", "polled_values", "verdict", "wait_for"]
