"""KafkaShareConsumer: Kafka's share consumer (KIP-932 share groups) in Python spelling.

Owns the user-facing share consumer: ``subscribe(topics)`` / ``unsubscribe()`` /
``subscription()``, ``poll(timeout_ms) -> [ShareConsumerRecord]`` (at most
``max.poll.records``; a ``ConsumerRecord`` with ``delivery_count``, Kafka's
``ConsumerRecord.deliveryCount()``), ``poll_arrow(timeout_ms) -> [pyarrow.RecordBatch]``
(one per partition: ``SHARE_ARROW_SCHEMA``, the ``KafkaConsumer.poll_arrow`` columns plus
``delivery_count``; ``partition_of(batch)`` names its partition, kept in the schema
metadata), ``acknowledge(record, AcknowledgeType)`` / ``acknowledge_offsets``,
``commit_sync`` / ``commit_async`` with ``set_acknowledgement_commit_callback``, ``close``.

Built from: ``ShareConsumerConfig`` (Kafka's share consumer keys), a
``ConsumerNetworkClient`` and ``share_fetcher.py`` (``ShareMembership``: heartbeats on a
thread of their own; ``ShareFetcher``: share sessions, acquired records,
acknowledgements).

Semantics, as Kafka's ``KafkaShareConsumer``:

* Records are delivered under an acquisition lock of the group's
  ``share.record.lock.duration.ms``; a record not acknowledged in time goes back to the
  group (delivery count + 1) and a late acknowledgement fails with INVALID_RECORD_STATE.
* ``share.acknowledgement.mode=implicit`` (default): the records of a poll are ACCEPTed
  by the next ``poll``, ``commit_sync`` / ``commit_async`` or ``close``.
  ``explicit``: each record is acknowledged with ``acknowledge(record, type)`` (ACCEPT,
  RELEASE: deliver again, REJECT: never again, RENEW: extend the lock, ShareFetch v2);
  polling again before every record of the last poll was acknowledged raises
  ``IllegalStateError``.
* Acknowledgements ride on the next ShareFetch (a poll served from records already
  acquired sends them in a ShareAcknowledge), or go at once in ShareAcknowledge with
  ``commit_sync(timeout_ms) -> {TopicPartition: KafkaError | None}`` or ``commit_async()``
  (which, like ``KafkaConsumer.commit_async``, completes before returning: there is no
  background thread to finish it; its outcomes go to the callback only). The
  ``AcknowledgementCommitCallback`` (``fn(offsets_by_partition, exception)`` or an object
  with ``on_complete``) gets every outcome, one call per partition, on the consumer's
  thread from ``poll`` / ``commit_*`` / ``close``.
* ``close(timeout_ms)``: the implicit acknowledgements, then a ShareAcknowledge with epoch
  -1 to every share session (closing it: the broker releases records still held, e.g.
  unacknowledged ones in explicit mode), then the leave heartbeat (epoch -1).
* Fatal errors (``FatalConsumerError``: ``GroupAuthorizationError``,
  ``TopicAuthorizationError``, INVALID_REQUEST) are raised by ``poll`` and the commits.

Thread-safety: none, as Kafka's: one thread uses a KafkaShareConsumer (``wakeup`` is not
provided, as for ``KafkaConsumer``); the heartbeat thread shares only the member state.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa

from broker.client.errors import IllegalStateError, KafkaError
from broker.client.network import now_ms
from broker.config import STRING, ConfigDef, ConfigError, one_of
from broker.protocol import ErrorCode

from .client import ConsumerNetworkClient
from .config import ConsumerConfig
from .consumer import InvalidGroupIdError
from .consumer_fetcher import _arrow_to_records
from .offsets import TopicPartition
from .poller import ConsumerRecord
from .share_fetcher import ACCEPT, GAP, SHARE_ARROW_SCHEMA, Acquired, ShareFetcher, ShareMembership

log = logging.getLogger(__name__)

IMPLICIT = "implicit"
EXPLICIT = "explicit"
SHARE_CONFIG_DEF = (
    ConfigDef()
    .define("share.acknowledgement.mode", STRING, IMPLICIT,
            "implicit: a poll's records are accepted by the next poll / commit / close; explicit: "
            "each record is acknowledged with acknowledge().", one_of(IMPLICIT, EXPLICIT))
    .define("share.acquire.mode", STRING, "batch_optimized",
            "batch_optimized: whole batches may be acquired past max.poll.records; record_limit: at "
            "most max.poll.records (ShareFetch v2).", one_of("batch_optimized", "record_limit"))
)
# Kafka's ShareConsumerConfig refuses these (a share group assigns and tracks delivery itself).
UNSUPPORTED_KEYS = frozenset({
    "auto.offset.reset", "enable.auto.commit", "group.instance.id", "isolation.level",
    "partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms", "group.protocol",
    "group.remote.assignor", "auto.commit.interval.ms"})
_MAX_WAIT_STEP_MS = 100.0  # poll's wait for the group's first assignment, in steps


class ShareConsumerConfig:
    """The share consumer's settings: ``share.acknowledgement.mode`` and
    ``share.acquire.mode`` here, every other key a ``ConsumerConfig`` key (``consumer``:
    unknown keys raise ``ConfigError`` as there); the keys of ``UNSUPPORTED_KEYS`` raise
    ``ConfigError`` (Kafka's share consumer refuses them). Read as ``config[key]``."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        own: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for source in (config or {}), {k: v for k, v in kwargs.items() if v is not None}:
            for k, v in source.items():
                name = k if "." in k else k.replace("_", ".")
                if name in UNSUPPORTED_KEYS:
                    raise ConfigError(k, v, "not supported by the share consumer")
                if name in SHARE_CONFIG_DEF.keys:
                    own[name] = v.strip().lower() if isinstance(v, str) else v
                else:
                    rest[k] = v
        self.share = SHARE_CONFIG_DEF.parse(own, strict=True)
        self.consumer = ConsumerConfig(rest)

    def __getitem__(self, key: str) -> Any:
        return self.share[key] if key in self.share else self.consumer[key]

    def __repr__(self) -> str:
        return f"ShareConsumerConfig({self.share}, {self.consumer!r})"


class AcknowledgeType(enum.IntEnum):
    """Kafka's ``AcknowledgeType`` (the wire values; 0 is GAP, the client's own)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class ShareConsumerRecord(ConsumerRecord):
    """A ``ConsumerRecord`` (the same fields, equal to one with the same values) with the
    record's ``delivery_count`` (Kafka's ``ConsumerRecord.deliveryCount()``)."""

    delivery_count: int = 1


def partition_of(batch: pa.RecordBatch) -> TopicPartition:
    """The partition of one of ``poll_arrow``'s batches (its schema metadata)."""
    meta = batch.schema.metadata or {}
    return TopicPartition(meta[b"topic"].decode(), int(meta[b"partition"]))


def _share_records(tp: TopicPartition, rb: pa.RecordBatch) -> list[ShareConsumerRecord]:
    plain = _arrow_to_records(tp, rb.select(range(rb.num_columns - 1)))
    counts = rb.column(rb.num_columns - 1).to_numpy().tolist()
    out = []
    new = tuple.__new__
    for r, n in zip(plain, counts):
        s = new(ShareConsumerRecord, r)
        s.delivery_count = n
        out.append(s)
    return out


class KafkaShareConsumer:
    """See the module docstring. ``KafkaShareConsumer({"bootstrap.servers": ..., "group.id":
    ...}, **overrides)`` (keys with dots or underscores); a context manager."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        cfg = ShareConsumerConfig(config, **kwargs)
        self.config = cfg
        group = cfg["group.id"]
        if not group:
            raise InvalidGroupIdError("To use the share consumer, you must provide a valid group.id in the "
                                      "consumer configuration.", ErrorCode.INVALID_GROUP_ID)
        self.group_id: str = group
        self._explicit = cfg["share.acknowledgement.mode"] == EXPLICIT
        self._max_poll_records = int(cfg["max.poll.records"])
        self._client = ConsumerNetworkClient(cfg.consumer)
        self._membership = ShareMembership(cfg.consumer, self._client, group)
        self._fetcher = ShareFetcher(self._client, group, max_records=self._max_poll_records,
                                     acquire_mode=cfg["share.acquire.mode"], membership=self._membership)
        self._subscription: frozenset[str] = frozenset()
        self._buffer: deque[Acquired] = deque()  # acquired, not yet returned
        # the last poll's records: offset -> acknowledge type (None: not acknowledged yet)
        self._delivered: dict[TopicPartition, dict[int, int | None]] = {}
        self._renewed: set[tuple[TopicPartition, int]] = set()  # RENEWed: still to be acknowledged
        self._callback: Any = None
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> KafkaShareConsumer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self, timeout_ms: float | None = None) -> None:
        """Acknowledge (implicit mode), close the share sessions (ShareAcknowledge epoch -1),
        leave the group, close the connections. Errors are logged, not raised."""
        if self._closed:
            return
        self._closed = True
        deadline = self._client.deadline(timeout_ms)  # close's whole wait, acknowledgements and leave
        try:
            if self._subscription:
                self._implicit_accept()
                try:
                    self._fetcher.commit(self._membership.member_id, deadline, final=True)
                except KafkaError as exc:
                    log.warning("share group %s: final acknowledgements failed: %s", self.group_id, exc)
                self._fire_callbacks()
            self._membership.leave(deadline)
        finally:
            self._client.close()

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")

    # -- subscription ----------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join ``group.id`` for ``topics`` (an empty list is ``unsubscribe``)."""
        self._ensure_open()
        if isinstance(topics, str):
            topics = [topics]
        names = list(topics)
        for t in names:
            if not isinstance(t, str) or not t.strip():
                raise ValueError("Topic collection to subscribe to cannot contain null or empty topic")
        if not names:
            self.unsubscribe()
            return
        self._subscription = frozenset(names)
        for t in names:
            self._client.metadata.add_topic(t)
        self._membership.subscribe(names)

    def subscription(self) -> set[str]:
        return set(self._subscription)

    def unsubscribe(self) -> None:
        """Acknowledge (implicit mode), close the share sessions and leave the group."""
        self._ensure_open()
        if not self._subscription:
            return
        self._implicit_accept()
        try:
            self._fetcher.commit(self._membership.member_id, self._client.deadline(), final=True)
        finally:
            self._membership.leave()
            self._subscription = frozenset()
            self._buffer.clear()
            self._delivered = {}
            self._fire_callbacks()

    # -- poll ------------------------------------------------------------------------------

    def _before_poll(self) -> None:
        self._ensure_open()
        if not self._subscription:
            raise IllegalStateError("Consumer is not subscribed to any topics.")
        self._membership.raise_fatal()
        if self._explicit:
            if any(k is None for acks in self._delivered.values() for k in acks.values()):
                raise IllegalStateError("All records must be acknowledged in explicit acknowledgement mode.")
            self._delivered = {}
        else:
            self._implicit_accept()

    def _implicit_accept(self) -> None:
        if self._explicit:
            return
        for tp, acks in self._delivered.items():
            for offset, kind in acks.items():
                if kind is None:
                    self._fetcher.add_ack(tp, offset, ACCEPT)
        self._delivered = {}

    def _fetch_into_buffer(self, timeout_ms: float) -> None:
        """ShareFetch until records were acquired or ``timeout_ms`` passed (at least once)."""
        end = now_ms() + timeout_ms
        first = True
        while first or now_ms() < end:
            first = False
            self._membership.raise_fatal()
            left = max(0.0, end - now_ms())
            assigned = self._membership.assignment(self._client.deadline())
            with self._membership.lock:
                joined, member_id = self._membership.joined, self._membership.member_id
            if not joined or assigned is None:
                if self._fetcher.pending and joined:
                    self._fetcher.fetch({}, member_id, 0)
                self._fire_callbacks()
                self._client.sleep(min(_MAX_WAIT_STEP_MS, left))
                continue
            self._buffer.extend(self._fetcher.fetch(assigned, member_id, left))
            self._fire_callbacks()
            if self._buffer:
                return
            if not self._fetcher.sent:  # no partition (or no leader known yet: metadata refreshes meanwhile)
                self._client.sleep(min(_MAX_WAIT_STEP_MS, max(0.0, end - now_ms())))

    def _fill(self, timeout_ms: float) -> None:
        """Fetch when nothing is buffered; else send the acknowledgements now
        (ShareAcknowledge), as no ShareFetch would carry them: records held past the group's
        in-flight limit (``group.share.partition.max.record.locks``) keep the other members
        from acquiring more."""
        if not self._buffer:
            self._fetch_into_buffer(timeout_ms)
        elif self._fetcher.pending:
            self._fetcher.commit(self._membership.member_id, self._client.deadline())
            self._fire_callbacks()

    def _take(self, limit: int | None) -> list[tuple[TopicPartition, pa.RecordBatch]]:
        """Up to ``limit`` buffered rows (None: all), as (partition, rows); each row's offset
        is noted as delivered by this poll."""
        out: list[tuple[TopicPartition, pa.RecordBatch]] = []
        room = limit
        while self._buffer and (room is None or room > 0):
            a = self._buffer[0]
            rb = a.batch
            if room is not None and rb.num_rows > room:
                take, a.batch = rb.slice(0, room), rb.slice(room)
            else:
                take = rb
                self._buffer.popleft()
            if room is not None:
                room -= take.num_rows
            seen = self._delivered.setdefault(a.tp, {})
            for o in take.column(0).to_numpy().tolist():
                seen[o] = None
            out.append((a.tp, take))
        return out

    def poll(self, timeout_ms: float = 0) -> list[ShareConsumerRecord]:
        """Acquired records of the assigned partitions (at most ``max.poll.records``), as
        soon as some are in; an empty list once ``timeout_ms`` passed without any."""
        self._before_poll()
        self._fill(timeout_ms)
        out: list[ShareConsumerRecord] = []
        for tp, rb in self._take(self._max_poll_records):
            out.extend(_share_records(tp, rb))
        return out

    def poll_arrow(self, timeout_ms: float = 0) -> list[pa.RecordBatch]:
        """As ``poll``, in columns: one ``pyarrow.RecordBatch`` of ``SHARE_ARROW_SCHEMA`` per
        partition (``partition_of`` names it); every buffered record (``max.poll.records``
        bounds each ShareFetch, not this call)."""
        self._before_poll()
        self._fill(timeout_ms)
        parts: dict[TopicPartition, list[pa.RecordBatch]] = {}
        for tp, rb in self._take(None):
            parts.setdefault(tp, []).append(rb)
        return [(bs[0] if len(bs) == 1 else pa.concat_batches(bs)).replace_schema_metadata(
                    {"topic": tp.topic, "partition": str(tp.partition)})
                for tp, bs in parts.items()]

    # -- acknowledgements --------------------------------------------------------------------

    def acknowledge(self, record: ConsumerRecord, type: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge one record of the last poll (explicit mode); sent with the next
        ShareFetch or commit."""
        self.acknowledge_offsets(TopicPartition(record.topic, record.partition), [record.offset], type)

    def acknowledge_offsets(self, partition: tuple[str, int], offsets: Iterable[int],
                            type: AcknowledgeType | int = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge records of the last poll by offset (explicit mode; for ``poll_arrow``'s
        batches: ``partition_of(batch)`` and its ``offset`` column)."""
        self._ensure_open()
        kind = AcknowledgeType(int(type))
        if not self._explicit:
            raise IllegalStateError("The acknowledge method may only be used with share.acknowledgement.mode"
                                    "=explicit.")
        tp = TopicPartition(*partition)
        seen = self._delivered.get(tp, {})
        offsets = [int(o) for o in offsets]
        for o in offsets:
            if o not in seen and (tp, o) not in self._renewed:
                raise IllegalStateError(f"The record {tp.topic}-{tp.partition}@{o} cannot be acknowledged: it "
                                        "was not delivered by the last poll.")
        for o in offsets:
            if kind == AcknowledgeType.RENEW:
                self._renewed.add((tp, o))
            else:
                self._renewed.discard((tp, o))
            if o in seen:
                seen[o] = int(kind)
            self._fetcher.add_ack(tp, o, int(kind))

    def set_acknowledgement_commit_callback(
            self, callback: Callable[[dict[TopicPartition, set[int]], KafkaError | None], Any] | Any | None) -> None:
        """Kafka's ``AcknowledgementCommitCallback``: ``callback(offsets_by_partition,
        exception_or_None)`` (or an object's ``on_complete``), once per partition and outcome."""
        self._callback = callback

    def _fire_callbacks(self) -> None:
        results = self._fetcher.take_results()
        cb = self._callback
        if cb is None:
            for tp, offsets, error in results:
                if error is not None:
                    log.warning("share group %s: acknowledgement of %s offsets %s..%s failed: %s", self.group_id,
                                tp, offsets[:1], offsets[-1:], error)
            return
        fn = getattr(cb, "on_complete", cb)
        for tp, offsets, error in results:
            if not offsets:
                continue  # GAPs only
            try:
                fn({tp: set(offsets)}, error)
            except Exception:  # noqa: BLE001 - Kafka logs a callback's failure and goes on
                log.exception("acknowledgement commit callback failed")

    def commit_sync(self, timeout_ms: float | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Send the pending acknowledgements now (ShareAcknowledge) and wait for their
        outcome: ``{TopicPartition: None or the error}``."""
        self._ensure_open()
        self._membership.raise_fatal()
        self._implicit_accept()
        results = self._fetcher.commit(self._membership.member_id, self._client.deadline(timeout_ms))
        self._fire_callbacks()
        out: dict[TopicPartition, KafkaError | None] = {}
        for tp, _offsets, error in results:
            if out.get(tp) is None:
                out[tp] = error
        return out

    def commit_async(self) -> None:
        """As ``commit_sync``; the outcomes go to the commit callback (or the log) only."""
        self._ensure_open()
        try:
            self.commit_sync()
        except KafkaError as exc:
            log.warning("share group %s: acknowledgement commit failed: %s", self.group_id, exc)

    # -- introspection ---------------------------------------------------------------------

    @property
    def member_id(self) -> str:
        return self._membership.member_id

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group assigned to this member (those whose topic ids are known)."""
        self._ensure_open()
        return set(self._membership.assignment(self._client.deadline()) or ())


__all__ = ["AcknowledgeType", "GAP", "KafkaShareConsumer", "SHARE_ARROW_SCHEMA", "ShareConsumerConfig",
           "ShareConsumerRecord", "partition_of"]
