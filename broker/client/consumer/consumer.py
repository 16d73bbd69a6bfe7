"""KafkaConsumer: Kafka's consumer API in Python spelling: manual assignment or group
membership (``subscribe``).

Owns the user-facing consumer: ``assign([TopicPartition])`` / ``assignment()`` /
``unsubscribe()``, ``poll(timeout_ms) -> [ConsumerRecord]`` (record by record, at most
``max.poll.records``), ``poll_arrow(timeout_ms) -> {TopicPartition: pyarrow.RecordBatch}``
(columnar, for notebooks and pandas: ``broker.record.columnar``'s schema, offset /
timestamp / timestamp_type / key / value / headers), ``position`` / ``seek`` /
``seek_to_beginning`` / ``seek_to_end``, ``pause`` / ``resume`` / ``paused``,
``subscribe`` / ``subscription``, ``offsets_for_times`` / ``beginning_offsets`` /
``end_offsets``, ``commit_sync`` /
``commit_async`` / ``committed``, ``list_topics`` / ``partitions_for``, ``close``.

Built from: ``SubscriptionState`` (assignment, positions, paused, pending resets),
``ConsumerFetcher`` (the Fetch loop of ``PartitionPoller`` with raw responses decoded
per record or per column on demand), ``offsets.py`` (ListOffsets) and
``group_offsets.py`` (FindCoordinator, OffsetCommit, OffsetFetch).

Semantics, as Kafka's ``KafkaConsumer``:

* A newly assigned partition has no position; before its first fetch (or ``position``)
  it takes the group's committed offset (with a ``group.id``), else
  ``auto.offset.reset`` (earliest / latest; ``none`` raises ``NoOffsetForPartitionError``).
  ``seek_to_beginning`` / ``seek_to_end`` are lazy, resolved the same way.
* Offsets commit as a simple group member (generation -1, empty member id): with
  ``enable.auto.commit`` (default true, as Kafka) the positions of the assigned
  partitions are committed at most every ``auto.commit.interval.ms`` from ``poll``, and
  on ``close`` and before ``assign`` changes the assignment. Without a ``group.id``
  commits raise ``InvalidGroupIdError``.
* ``commit_async`` has no background thread to run on: it sends and completes the commit
  before returning, then calls ``callback(offsets, exception_or_None)``; errors go to the
  callback, not to the caller (as Kafka's).
* ``subscribe(topics | pattern=..., listener=...)`` joins ``group.id`` with the classic
  protocol (JoinGroup / SyncGroup / Heartbeat / LeaveGroup): ``group_driver.py``'s
  ``GroupMembership`` drives ``coordinator.py``'s ``ConsumerCoordinator`` from ``poll``
  (rebalances, ``ConsumerRebalanceListener`` callbacks, auto commit before revocation)
  and keeps the session with a heartbeat thread (its own connection). A subscribed
  member's commits carry its generation and member id; a rebalanced group refuses them
  with ``CommitFailedError``. ``close`` revokes and leaves the group (a static member,
  ``group.instance.id``, does not leave). With ``group.protocol=consumer`` (KIP-848)
  ``consumer_membership.py``'s ``ConsumerGroupMembership`` takes its place: the broker
  assigns, the member heartbeats (ConsumerGroupHeartbeat) and reconciles from ``poll``,
  and commits carry its member epoch.

Thread-safety: none, as Kafka's: one thread uses a KafkaConsumer (``wakeup`` is not
provided); the heartbeat thread shares only the group's member state, under its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from broker.client.errors import IllegalStateError, KafkaError
from broker.client.network import now_ms
from broker.protocol import ErrorCode

from . import group_offsets
from .client import ConsumerNetworkClient
from .config import ConsumerConfig
from .consumer_fetcher import ARROW_SCHEMA, ConsumerFetcher
from .group_offsets import CommitFailedError
from .offsets import (
    EARLIEST,
    LATEST,
    OffsetAndTimestamp,
    TopicPartition,
    list_offsets,
    list_topics,
    partitions_for,
)
from .poller import ConsumerRecord
from .subscription_state import SubscriptionState

log = logging.getLogger(__name__)


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class NoOffsetForPartitionError(KafkaError):
    """No committed offset and ``auto.offset.reset`` is none."""


class UnsupportedOperationError(KafkaError):
    """A consumer call that this client does not provide yet."""


class InvalidGroupIdError(KafkaError):
    """Committing (or reading committed offsets) without a ``group.id``."""


def _assignor_names(config: ConsumerConfig) -> list[str]:
    from .assignors import assignor_name
    return [assignor_name(s) for s in config["partition.assignment.strategy"]]


class KafkaConsumer:
    """See the module docstring. ``KafkaConsumer({"bootstrap.servers": ..., "group.id":
    ...}, **overrides)`` (keys with dots or underscores); a context manager."""

    def __init__(self, config: Mapping[str, Any] | ConsumerConfig | None = None,
                 **kwargs: Any) -> None:
        cfg = config if isinstance(config, ConsumerConfig) and not kwargs \
            else ConsumerConfig(config, **kwargs)
        self.config = cfg
        self.assignors = _assignor_names(cfg)  # validates partition.assignment.strategy
        self.group_id: str | None = cfg["group.id"] or None
        self._auto_commit = bool(cfg["enable.auto.commit"]) and self.group_id is not None
        self._auto_commit_interval = float(cfg["auto.commit.interval.ms"])
        self._next_auto_commit = now_ms() + self._auto_commit_interval
        self._client = ConsumerNetworkClient(cfg)
        self._state = SubscriptionState(cfg["auto.offset.reset"])
        try:
            self._fetcher = ConsumerFetcher(self._client, self._state)
        except BaseException:
            self._client.close()
            raise
        self._group: Any = None  # group_driver.GroupMembership once subscribed
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> KafkaConsumer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self, autocommit: bool = True, timeout_ms: float | None = None) -> None:
        """Commit the positions (with ``enable.auto.commit``), then close the connections."""
        if self._closed:
            return
        try:
            if autocommit and self._auto_commit:
                self._commit_quietly(timeout_ms)
            if self._group is not None:
                self._group.close()
        finally:
            self._closed = True
            self._fetcher.close()
            self._client.close()

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")

    # -- assignment ------------------------------------------------------------------------

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Consume exactly these partitions (an empty list is ``unsubscribe``)."""
        self._ensure_open()
        tps = [TopicPartition(*tp) for tp in partitions]
        for tp in tps:
            if not isinstance(tp.topic, str) or not tp.topic.strip():
                raise ValueError("Topic partitions to assign to cannot have null or empty topic")
            if not isinstance(tp.partition, int) or tp.partition < 0:
                raise ValueError(f"invalid partition {tp.partition!r} of {tp.topic}")
        if not tps:
            self.unsubscribe()
            return
        if self._auto_commit and self._state.all_consumed():
            self._commit_quietly(None)
        self._state.assign_from_user(tps)
        self._fetcher.drop_buffered(set(tps))
        for tp in tps:
            self._client.metadata.add_topic(tp.topic)

    def assignment(self) -> set[TopicPartition]:
        return set(self._state.assigned_partitions())

    def subscribe(self, topics: Iterable[str] | None = None, listener: Any = None, *,
                  pattern: str | None = None) -> None:
        """Join ``group.id`` for ``topics`` (or every topic ``pattern`` fully matches, looked
        up again every ``metadata.max.age.ms``); ``listener``: a
        ``ConsumerRebalanceListener`` (``on_partitions_revoked`` / ``_assigned`` /
        ``_lost``). The group assigns the partitions in ``poll`` (group_driver.py)."""
        self._ensure_open()
        group = self._require_group()
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or pattern=..., not both or neither")
        if isinstance(topics, str):
            topics = [topics]
        if topics is not None:
            topics = list(topics)
            for t in topics:
                if not isinstance(t, str) or not t.strip():
                    raise ValueError("Topic collection to subscribe to cannot contain null or "
                                     "empty topic")
            if not topics:
                self.unsubscribe()
                return
        if self._group is None:
            if self.config["group.protocol"] == "consumer":  # KIP-848: the broker assigns
                from .consumer_membership import ConsumerGroupMembership as GroupMembership
            else:
                from .group_driver import GroupMembership
            self._group = GroupMembership(
                self.config, self._client, self._state, group,
                commit=self._commit_before_revoke,
                drop_buffered=lambda keep: self._fetcher.drop_buffered(keep))
        self._group.subscribe(topics, pattern, listener)

    def _commit_before_revoke(self, offsets: dict[TopicPartition, int]) -> None:
        if not self._auto_commit or self.group_id is None:
            return
        try:
            self._commit(offsets, "", None)
        except KafkaError as e:
            log.warning("auto commit of group %s before revocation failed: %s",
                        self.group_id, e)

    def subscription(self) -> set[str]:
        return set(self._state.subscription)

    def unsubscribe(self) -> None:
        self._ensure_open()
        if self._group is not None:
            self._group.unsubscribe()
            self._group = None
        elif self._auto_commit and self._state.all_consumed():
            self._commit_quietly(None)
        self._state.unsubscribe()
        self._fetcher.drop_buffered()

    # -- positions -------------------------------------------------------------------------

    def _update_positions(self, tps: list[TopicPartition], timeout_ms: float | None) -> None:
        """Give each of ``tps`` (assigned, without a position) its starting offset."""
        state = self._state
        if not tps:
            return
        specs: dict[TopicPartition, int] = {}
        need_committed = [tp for tp in tps if tp not in state.pending_resets]
        if need_committed and self.group_id is not None:
            committed = group_offsets.fetch_committed(self._client, self.group_id,
                                                      need_committed, timeout_ms=timeout_ms)
            for tp in need_committed:
                off = committed.get(tp)
                if off is not None and off >= 0:
                    state.seek(tp, off)
        for tp in tps:
            if tp in state.positions:
                continue
            spec = state.pending_resets.get(tp)
            if spec is None:
                if state.default_reset == "none":
                    raise NoOffsetForPartitionError(
                        f"Undefined offset with no reset policy for partition: {tp}")
                spec = EARLIEST if state.default_reset == "earliest" else LATEST
            specs[tp] = spec
        if specs:
            found = list_offsets(self._client, specs, isolation_level=self._fetcher.isolation,
                                 timeout_ms=timeout_ms)
            for tp in specs:
                o = found.get(tp)
                state.seek(tp, o.offset if o is not None else 0)

    def position(self, partition: tuple[str, int], timeout_ms: float | None = None) -> int:
        """The offset of the next record ``poll`` returns for ``partition`` (looked up
        now if not known yet)."""
        self._ensure_open()
        tp = self._state.require_assigned(partition)
        if tp not in self._state.positions:
            self._update_positions([tp], timeout_ms)
        return self._state.positions[tp]

    def seek(self, partition: tuple[str, int], offset: int) -> None:
        """The next ``poll`` returns records of ``partition`` from ``offset``."""
        self._ensure_open()
        if isinstance(offset, OffsetAndMetadata):
            offset = offset.offset
        if offset < 0:
            raise ValueError(f"seek offset must not be a negative number: {offset}")
        tp = self._state.require_assigned(partition)
        self._state.seek(tp, int(offset))
        self._fetcher.drop_buffered(self.assignment() - {tp})

    def _seek_to(self, partitions: Iterable[tuple[str, int]] | None, spec: int) -> None:
        self._ensure_open()
        tps = (self._state.assigned_partitions() if partitions is None
               else [self._state.require_assigned(tp) for tp in partitions])
        for tp in tps:
            self._state.request_reset(tp, spec)
        self._fetcher.drop_buffered(self.assignment() - set(tps))

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Lazily move to the log start offset (all assigned partitions if None)."""
        self._seek_to(partitions, EARLIEST)

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Lazily move to the end (high watermark, or last stable offset under
        read_committed)."""
        self._seek_to(partitions, LATEST)

    # -- pause -----------------------------------------------------------------------------

    def pause(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._ensure_open()
        for tp in partitions:
            self._state.paused.add(self._state.require_assigned(tp))

    def resume(self, partitions: Iterable[tuple[str, int]]) -> None:
        self._ensure_open()
        for tp in partitions:
            self._state.paused.discard(self._state.require_assigned(tp))

    def paused(self) -> set[TopicPartition]:
        return set(self._state.paused)

    # -- poll ------------------------------------------------------------------------------

    def _before_poll(self) -> None:
        self._ensure_open()
        if self._state.type.name == "NONE":
            raise IllegalStateError("Consumer is not subscribed to any topics or assigned "
                                    "any partitions")
        if self._group is not None:
            self._group.ensure_active(self._client.deadline())
        self._maybe_auto_commit()
        self._update_positions(self._state.missing_positions(), None)

    def _poll_group(self, timeout_ms: float, fetch: Callable[[float], Any]) -> Any:
        """Fetch in slices of heartbeat.interval.ms, rejoining between them when the
        heartbeat thread asked to (a rebalance is not held up by a long poll)."""
        end = now_ms() + timeout_ms
        while True:
            step_of = getattr(self._group, "poll_step_ms", None)
            step = step_of() if step_of is not None else float(self.config["heartbeat.interval.ms"])
            out = fetch(max(0.0, min(step, end - now_ms())))
            if out or now_ms() >= end:
                return out
            self._before_poll()

    def poll(self, timeout_ms: float = 0) -> list[ConsumerRecord]:
        """Records of the assigned, unpaused partitions (at most ``max.poll.records``), as
        soon as some are in; an empty list once ``timeout_ms`` passed without any."""
        self._before_poll()
        if self._group is not None:
            return self._poll_group(timeout_ms, self._fetcher.poll_records)
        return self._fetcher.poll_records(timeout_ms)

    def poll_arrow(self, timeout_ms: float = 0) -> dict[TopicPartition, Any]:
        """As ``poll``, in columns: ``{TopicPartition: pyarrow.RecordBatch}`` of schema
        ``ARROW_SCHEMA`` (whole fetch responses; ``max.poll.records`` does not apply)."""
        self._before_poll()
        if self._group is not None:
            return self._poll_group(timeout_ms, self._fetcher.poll_arrow)
        return self._fetcher.poll_arrow(timeout_ms)

    # -- offsets lookups -------------------------------------------------------------------

    def offsets_for_times(self, timestamps: Mapping[tuple[str, int], int],
                          timeout_ms: float | None = None
                          ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is at or after each timestamp (None when
        there is none)."""
        self._ensure_open()
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"The target time for partition {tp} is {ts}. "
                                 "The target time cannot be negative.")
        return list_offsets(self._client, timestamps, isolation_level=self._fetcher.isolation,
                            timeout_ms=timeout_ms)

    def beginning_offsets(self, partitions: Iterable[tuple[str, int]],
                          timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        self._ensure_open()
        found = list_offsets(self._client, {tp: EARLIEST for tp in partitions},
                             timeout_ms=timeout_ms)
        return {tp: o.offset for tp, o in found.items() if o is not None}

    def end_offsets(self, partitions: Iterable[tuple[str, int]],
                    timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """High watermarks (read_uncommitted) or last stable offsets (read_committed)."""
        self._ensure_open()
        found = list_offsets(self._client, {tp: LATEST for tp in partitions},
                             isolation_level=self._fetcher.isolation, timeout_ms=timeout_ms)
        return {tp: o.offset for tp, o in found.items() if o is not None}

    def list_topics(self, timeout_ms: float | None = None) -> dict[str, int]:
        self._ensure_open()
        return list_topics(self._client, timeout_ms=timeout_ms)

    def partitions_for(self, topic: str, timeout_ms: float | None = None) -> list[Any]:
        self._ensure_open()
        return partitions_for(self._client, [topic], timeout_ms=timeout_ms).get(topic, [])

    # -- commits ---------------------------------------------------------------------------

    def _require_group(self) -> str:
        if self.group_id is None:
            raise InvalidGroupIdError(
                "To use the group management or offset commit APIs, you must provide a "
                "valid group.id in the consumer configuration.", ErrorCode.INVALID_GROUP_ID)
        return self.group_id

    def _offsets_to_commit(self, offsets: Mapping[tuple[str, int], Any] | None
                           ) -> tuple[dict[TopicPartition, int], str | None]:
        if offsets is None:
            return self._state.all_consumed(), None
        out: dict[TopicPartition, int] = {}
        metas = set()
        for tp, o in offsets.items():
            if isinstance(o, OffsetAndMetadata):
                metas.add(o.metadata)
                o = o.offset
            out[TopicPartition(*tp)] = int(o)
        return out, (metas.pop() if len(metas) == 1 else None)

    def commit_sync(self, offsets: Mapping[tuple[str, int], Any] | None = None,
                    metadata: str = "", timeout_ms: float | None = None) -> None:
        """Commit ``offsets`` ({tp: offset | OffsetAndMetadata}; default: the positions of
        every assigned partition) for ``group.id``, blocking until the coordinator
        acknowledged them."""
        self._ensure_open()
        self._require_group()
        tps, meta = self._offsets_to_commit(offsets)
        if not tps:
            return
        self._commit(tps, metadata if meta is None else meta, timeout_ms)
        self._next_auto_commit = now_ms() + self._auto_commit_interval

    def commit_async(self, offsets: Mapping[tuple[str, int], Any] | None = None,
                     callback: Callable[[dict[TopicPartition, int], BaseException | None],
                                        Any] | None = None) -> None:
        """Commit as ``commit_sync``, then ``callback(offsets, error)``; an error goes to
        the callback (or the log), never to the caller (see the module docstring)."""
        self._ensure_open()
        tps, _ = self._offsets_to_commit(offsets)
        error: BaseException | None = None
        try:
            self.commit_sync(offsets)
        except KafkaError as e:
            error = e
            if callback is None:
                log.warning("offset commit of group %s failed: %s", self.group_id, e)
        if callback is not None:
            callback(tps, error)

    def committed(self, partitions: Iterable[tuple[str, int]], timeout_ms: float | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None when there is none). Its
        ``metadata`` is "" (``group_offsets.fetch_committed`` returns offsets only)."""
        self._ensure_open()
        group = self._require_group()
        tps = [TopicPartition(*tp) for tp in partitions]
        found = group_offsets.fetch_committed(self._client, group, tps, timeout_ms=timeout_ms)
        return {tp: (OffsetAndMetadata(found[tp]) if found.get(tp) is not None
                     and found[tp] >= 0 else None) for tp in tps}

    def _commit(self, offsets: Mapping[TopicPartition, int], metadata: str,
                timeout_ms: float | None) -> None:
        """OffsetCommit as a simple consumer, or as a member (generation, member id) once
        subscribed (a rebalanced group raises ``CommitFailedError``)."""
        assert self.group_id is not None
        for attempt in range(2):
            member = self._group.commit_fields() if self._group is not None else {}
            try:
                group_offsets.commit_offsets(self._client, self.group_id, offsets, metadata,
                                             timeout_ms=timeout_ms, **member)
                return
            except CommitFailedError as e:
                if (attempt == 0 and e.code == ErrorCode.STALE_MEMBER_EPOCH and self._group is not None
                        and self._group.commit_fields()["generation"] != member["generation"]):
                    continue  # KIP-848: the epoch moved on meanwhile; commit with the new one
                if self._group is not None:
                    self._group.request_rejoin()  # the next poll() rejoins, as Kafka's
                raise

    def _maybe_auto_commit(self) -> None:
        if self._auto_commit and now_ms() >= self._next_auto_commit:
            self._commit_quietly(None)

    def _commit_quietly(self, timeout_ms: float | None) -> None:
        self._next_auto_commit = now_ms() + self._auto_commit_interval
        offsets = self._state.all_consumed()
        if not offsets or self.group_id is None:
            return
        try:
            self._commit(offsets, "", timeout_ms)
        except KafkaError as e:
            log.warning("auto commit of group %s failed: %s", self.group_id, e)

    # -- introspection ---------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        return {"last_error": self._fetcher.last_error}


__all__ = ["ARROW_SCHEMA", "CommitFailedError", "ConsumerRecord", "InvalidGroupIdError", "KafkaConsumer",
           "NoOffsetForPartitionError", "OffsetAndMetadata", "UnsupportedOperationError"]
