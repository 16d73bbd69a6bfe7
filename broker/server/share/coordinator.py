"""``ShareCoordinator``: the durable state of every share-partition, in
``__share_group_state`` (Kafka's share coordinator and its in-process persister), on the
coordinator runtime (``broker.server.coordinator``).

Owns:

* the topic ``__share_group_state`` (``SHARE_STATE_TOPIC_SPEC``: Kafka's
  ``share.coordinator.state.topic.*`` keys, compacted), one partition per
  share-partition key: ``abs(java_hashCode("<group>:<topic id>:<partition>")) %
  partitions`` (Kafka's ``SharePartitionKey.asCoordinatorKey``; the topic id in Kafka's
  base64 form);
* the cache: per (group, topic id, partition) a ``PersistedState`` (state epoch, snapshot
  epoch, start offset, the merged state batches, how many updates followed the last
  snapshot, creation time), rebuilt at startup by replaying the topic (a ShareSnapshot
  replaces, a ShareUpdate merges its batches and start offset, a tombstone deletes). The
  updates are merged lazily: a write (and the replay) queues its start offset and batches
  in ``pending``, and they are folded into the batches, all at once in one
  ``SharePartition``, when the state is read or snapshotted; so a write costs its own
  batches, not the size of the whole state;
* the persister's operations, Kafka's five share-group state RPCs:
  ``initialize(key, state_epoch, start_offset)`` (a snapshot), ``read(key)``,
  ``write(key, state_epoch, leader_epoch, start_offset, batches)`` (an update, or a snapshot
  of the merged state once ``share.coordinator.snapshot.update.records.per.snapshot``
  updates followed the last one), ``delete(key)`` (tombstones for both keys),
  ``read_summary(key)``. A write with an older state epoch than the stored one fails with
  FENCED_STATE_EPOCH, as in Kafka (the offsets were reset meanwhile).

Every change is appended (one batch) before the cache changes; an append failure raises
``ApiError`` (the storage error map; UNKNOWN_SERVER_ERROR for a batch too large).

Thread-safety: ``startup`` before any request; each write holds its topic partition's
lock (``runtime.partition_lock``) around the append and the cache change (a snapshot
replaces the entry; an update changes it in place under the cache lock); reads fold and
copy under the cache lock.
"""

from __future__ import annotations

import base64
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.log.clock import SYSTEM_TIME, Time
from broker.protocol import ErrorCode
from broker.server.coordinator import (
    SHARE_GROUP_STATE_TOPIC,
    CoordinatorRecord,
    CoordinatorRuntime,
    InternalTopicSpec,
    storage_error_map,
)
from broker.server.errors import ApiError
from broker.server.share import records as rec
from broker.server.share.config import ShareConfig
from broker.server.share.partition import SharePartition, StateBatch

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC_SPEC = InternalTopicSpec(
    SHARE_GROUP_STATE_TOPIC, partitions_key="share.coordinator.state.topic.num.partitions",
    replication_key="share.coordinator.state.topic.replication.factor",
    segment_bytes_key="share.coordinator.state.topic.segment.bytes",
    load_buffer_key="share.coordinator.load.buffer.size",
    compression_codec_key="share.coordinator.state.topic.compression.codec",
    min_isr_key="share.coordinator.state.topic.min.isr",
    configs=(("cleanup.policy", "compact"), ("compression.type", "producer")))

StateKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)


def coordinator_key(key: StateKey) -> str:
    """Kafka's ``SharePartitionKey.asCoordinatorKey``: "group:topicId:partition"."""
    group, topic_id, partition = key
    tid = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    return f"{group}:{tid}:{partition}"


@dataclass
class PersistedState:
    state_epoch: int
    start_offset: int
    batches: list[StateBatch]
    snapshot_epoch: int = 0
    leader_epoch: int = 0
    updates: int = 0  # ShareUpdates since the last ShareSnapshot
    create_timestamp: int = 0
    write_timestamp: int = 0
    # ShareUpdates (start offset, batches) not yet folded into start_offset / batches
    pending: list[tuple[int, list[StateBatch]]] = field(default_factory=list)

    def fold(self) -> PersistedState:
        """Fold ``pending`` into the start offset and batches (in place); returns self."""
        if self.pending:
            self.start_offset, self.batches = fold_updates(self.start_offset, self.batches, self.pending)
            self.pending = []
        return self

    def copy(self) -> PersistedState:
        """A folded copy (the caller's to change)."""
        self.fold()
        return PersistedState(self.state_epoch, self.start_offset, list(self.batches), self.snapshot_epoch,
                              self.leader_epoch, self.updates, self.create_timestamp, self.write_timestamp)


def fold_updates(start_offset: int, batches: Iterable[StateBatch],
                 updates: Iterable[tuple[int, Iterable[StateBatch]]]) -> tuple[int, list[StateBatch]]:
    """The state after ShareUpdates, in order: each one's ranges overwrite the state's, the
    start offset moves to its start offset (-1: unchanged) and past terminal batches at
    the start. One ``SharePartition`` for them all."""
    sp = SharePartition(start_offset, delivery_count_limit=1 << 15)
    sp.load(start_offset, batches)
    for new_start, delta in updates:
        sp.apply_batches(sp.start_offset if new_start < 0 else new_start, delta)
    return sp.start_offset, sp.state_batches()


def merge_batches(start_offset: int, batches: Iterable[StateBatch], new_start: int,
                  delta: Iterable[StateBatch]) -> tuple[int, list[StateBatch]]:
    """The state after one ShareUpdate (``fold_updates`` of one)."""
    return fold_updates(start_offset, batches, [(new_start, delta)])


@dataclass
class _Cache:
    states: dict[StateKey, PersistedState] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ShareCoordinator:
    """See the module docstring. ``topics``: the broker's ``TopicManager``."""

    def __init__(self, topics: Any, config: Mapping[str, Any], *, time: Time = SYSTEM_TIME, scheduler: Any = None,
                 on_append: Callable[[tuple[str, int]], None] | None = None) -> None:
        self.time = time
        self.config = ShareConfig.from_config(config)
        self.runtime = CoordinatorRuntime(SHARE_STATE_TOPIC_SPEC, topics, config,
                                          append_errors=storage_error_map(ErrorCode.UNKNOWN_SERVER_ERROR),
                                          time=time, scheduler=scheduler, on_append=on_append)
        self._cache = _Cache()

    # --- lifecycle ---

    def startup(self) -> None:
        results = self.runtime.startup(self._replay)
        if results:
            log.info("loaded the state of %d share-partitions from %s", len(self._cache.states),
                     SHARE_GROUP_STATE_TOPIC)

    def shutdown(self) -> None:
        self.runtime.shutdown()

    def partition_for(self, key: StateKey) -> int:
        return self.runtime.partition_for(coordinator_key(key))

    # --- the persister ---

    def read(self, key: StateKey) -> PersistedState | None:
        with self._cache.lock:
            state = self._cache.states.get(key)
            return None if state is None else state.copy()

    def keys(self, group_id: str | None = None) -> list[StateKey]:
        with self._cache.lock:
            return [k for k in self._cache.states if group_id is None or k[0] == group_id]

    def initialize(self, key: StateKey, state_epoch: int, start_offset: int, leader_epoch: int = 0) -> None:
        """A fresh state at ``start_offset`` (a snapshot), replacing any earlier one."""
        p = self.partition_for(key)
        now = self.time.milliseconds()
        with self.runtime.partition_lock(p):
            old = self.read(key)
            state = PersistedState(state_epoch, start_offset, [], (old.snapshot_epoch + 1) if old else 0,
                                   leader_epoch, 0, now, now)
            self._append_snapshot(p, key, state)

    def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: list[StateBatch]) -> None:
        """Persist a change (ApiError: FENCED_STATE_EPOCH, the append's)."""
        p = self.partition_for(key)
        now = self.time.milliseconds()
        with self.runtime.partition_lock(p):
            with self._cache.lock:  # the cached entry itself: only writers (holding p's lock) replace it
                old = self._cache.states.get(key)
            if old is None:
                new_start, merged = merge_batches(start_offset if start_offset >= 0 else 0, [], start_offset, batches)
                self._append_snapshot(p, key, PersistedState(state_epoch, new_start, merged, 0, leader_epoch, 0,
                                                             now, now))
                return
            if state_epoch < old.state_epoch:
                raise ApiError(ErrorCode.FENCED_STATE_EPOCH,
                               f"state epoch {state_epoch} is older than the stored {old.state_epoch}")
            epoch = max(state_epoch, old.state_epoch)
            if old.updates + 1 >= max(self.config.updates_per_snapshot, 1):
                with self._cache.lock:
                    folded = old.copy()
                new_start, merged = merge_batches(folded.start_offset, folded.batches, start_offset, batches)
                self._append_snapshot(p, key, PersistedState(epoch, new_start, merged, old.snapshot_epoch + 1,
                                                             leader_epoch, 0, old.create_timestamp, now))
                return
            value = rec.encode_update(snapshot_epoch=old.snapshot_epoch, leader_epoch=leader_epoch,
                                      start_offset=start_offset, batches=list(batches))
            self.runtime.append(p, [(rec.encode_key(rec.ShareStateKey(rec.UPDATE, *key)), value)])
            with self._cache.lock:  # in place: readers copy under this lock
                old.pending.append((start_offset, list(batches)))
                old.state_epoch, old.leader_epoch, old.write_timestamp = epoch, leader_epoch, now
                old.updates += 1

    def delete(self, key: StateKey) -> None:
        p = self.partition_for(key)
        with self.runtime.partition_lock(p):
            if self.read(key) is None:
                return
            self.runtime.append(p, [(rec.encode_key(rec.ShareStateKey(t, *key)), None)
                                    for t in (rec.SNAPSHOT, rec.UPDATE)])
            with self._cache.lock:
                self._cache.states.pop(key, None)

    def _append_snapshot(self, p: int, key: StateKey, state: PersistedState) -> None:
        value = rec.encode_snapshot(snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch,
                                    leader_epoch=state.leader_epoch, start_offset=state.start_offset,
                                    create_timestamp=state.create_timestamp,
                                    write_timestamp=state.write_timestamp, batches=state.batches)
        self.runtime.append(p, [(rec.encode_key(rec.ShareStateKey(rec.SNAPSHOT, *key)), value)])
        with self._cache.lock:
            self._cache.states[key] = state

    # --- loading ---

    def _replay(self, record: CoordinatorRecord) -> bool:
        if record.key is None:
            return False
        try:
            key = rec.decode_key(record.key)
            sk: StateKey = (key.group_id, key.topic_id, key.partition)
            with self._cache.lock:
                if record.value is None:
                    if key.type == rec.SNAPSHOT:
                        self._cache.states.pop(sk, None)
                    return True
                value = rec.decode_value(key.type, record.value)
                batches = rec.batches_of(value)
                if key.type == rec.SNAPSHOT:
                    self._cache.states[sk] = PersistedState(
                        value.state_epoch, value.start_offset, batches, value.snapshot_epoch, value.leader_epoch, 0,
                        value.create_timestamp, value.write_timestamp)
                    return True
                old = self._cache.states.get(sk)
                if old is None:  # an update whose snapshot was compacted away or deleted: skipped
                    return False
                old.pending.append((value.start_offset, batches))
                old.updates += 1
                old.leader_epoch = value.leader_epoch
                old.write_timestamp = record.timestamp
                return True
        except rec.ShareRecordError as exc:
            log.warning("%s-%d: skipping an unreadable record at offset %d: %s", SHARE_GROUP_STATE_TOPIC,
                        record.partition, record.offset, exc)
            return False


__all__ = ["SHARE_STATE_TOPIC_SPEC", "PersistedState", "ShareCoordinator", "StateKey", "coordinator_key",
           "fold_updates", "merge_batches"]
