"""RecordAccumulator: per-partition queues of ProducerBatches between send() and the Sender.

Owns, as Kafka's ``RecordAccumulator``:

* ``append`` (user threads): topic -> ``_TopicInfo`` (its queues and its
  ``BuiltInPartitioner``) -> partition queue; the record goes into the last open batch, or
  a new batch whose buffer comes from the ``BufferPool`` (``max(batch.size, record)``
  bytes, blocking up to the remaining ``max.block.ms`` outside any queue lock). Keyless
  records (partition -1) get the sticky partition inside the queue lock, with Kafka's
  peek / re-validate / update protocol. Returns the future and whether the Sender should
  be woken (a batch is full or a new one was created).
* ``append_prebuilt``: whole batches from the columnar path, after the open batch of the
  partition is sealed (records keep their send order).
* ``ready`` (Sender): leaders with a sendable batch (full, lingered ``linger.ms``, memory
  exhausted, flushing or closing, and not in retry backoff), the time until the next
  check, topics without a known leader; it also feeds the partitioner's queue-depth
  statistics and leaves out partitions whose leader did not drain for
  ``partitioner.availability.timeout.ms``.
* ``drain`` (Sender): per ready node, at most one batch per partition, walking the
  node's partitions round-robin from a per-node index, up to ``max.request.size`` (a
  single larger batch goes alone), skipping muted and backing-off partitions, stopping as
  the TransactionManager's ordering rules say; batches without a sequence are stamped
  here; each is ``close()``d (compressed, header written) outside the lock.
* ``reenqueue`` in sequence order (idempotence) or at the front; ``split_and_reenqueue``;
  ``expired_batches`` (``delivery.timeout.ms``, queued batches); flush and abort support;
  the set of incomplete batches.

Invariants: batches of a partition leave their queue in the order they entered it, except
retries, which go back in front in base-sequence order; a buffer belongs to one batch
until the batch is done and no request holds it.

Thread-safety: each partition queue has its own lock (``_Queue.lock``), held briefly by
user threads (append) and the Sender (ready, drain); the topic map is only added to
(dict assignment is atomic in CPython); ``muted`` and the drain indexes are Sender-only;
the incomplete set has its own lock.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from broker.client.errors import IllegalStateError, KafkaError, KafkaTimeoutError
from broker.client.producer.batch import (
    ProducerBatch,
    estimate_record_size,
)
from broker.client.producer.buffer_pool import BufferPool
from broker.client.producer.partitioner import BuiltInPartitioner
from broker.record.batch import RECORD_BATCH_OVERHEAD


class _Queue:
    __slots__ = ("lock", "batches")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.batches: deque[ProducerBatch] = deque()


class _TopicInfo:
    __slots__ = ("queues", "partitioner")

    def __init__(self, topic: str, batch_size: int) -> None:
        self.queues: dict[int, _Queue] = {}
        self.partitioner = BuiltInPartitioner(topic, batch_size)


class ReadyCheckResult:
    __slots__ = ("ready_nodes", "next_ready_check_delay_ms", "unknown_leader_topics")

    def __init__(self, ready_nodes: set[int], delay: float, unknown: set[str]) -> None:
        self.ready_nodes = ready_nodes
        self.next_ready_check_delay_ms = delay
        self.unknown_leader_topics = unknown


class _NodeLatencyStats:
    __slots__ = ("ready_time_ms", "drain_time_ms")

    def __init__(self, now: float) -> None:
        self.ready_time_ms = now
        self.drain_time_ms = now


class AppendResult:
    __slots__ = ("future", "batch_is_full", "new_batch_created", "partition")

    def __init__(self, future: Any, full: bool, new: bool, partition: int) -> None:
        self.future = future
        self.batch_is_full = full
        self.new_batch_created = new
        self.partition = partition


class RecordAccumulator:
    """See the module docstring."""

    def __init__(self, *, batch_size: int, linger_ms: float, retry_backoff_ms: float,
                 retry_backoff_max_ms: float, delivery_timeout_ms: float, pool: BufferPool,
                 codec: int = 0, compression_level: int | None = None,
                 transaction_manager: Any = None, adaptive_partitioning: bool = True,
                 partition_availability_timeout_ms: float = 0) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.pool = pool
        self.codec = codec
        self.compression_level = compression_level
        self.tm = transaction_manager
        self.adaptive = adaptive_partitioning
        self.availability_timeout_ms = partition_availability_timeout_ms
        self._topics: dict[str, _TopicInfo] = {}
        self._topics_lock = threading.Lock()
        self._incomplete: set[ProducerBatch] = set()
        self._incomplete_lock = threading.Lock()
        self.muted: set[tuple[str, int]] = set()
        self._drain_index: dict[int, int] = {}
        self._node_stats: dict[int, _NodeLatencyStats] = {}
        self._flushes_in_progress = 0
        self._flush_lock = threading.Lock()
        self.closed = False
        self._next_batch_expiry_ms = float("inf")
        self._rng = random.Random()

    # -- topics and queues ---------------------------------------------------------------

    def _topic_info(self, topic: str) -> _TopicInfo:
        info = self._topics.get(topic)
        if info is None:
            with self._topics_lock:
                info = self._topics.get(topic)
                if info is None:
                    info = _TopicInfo(topic, self.batch_size)
                    self._topics[topic] = info
        return info

    @staticmethod
    def _queue(info: _TopicInfo, partition: int) -> _Queue:
        q = info.queues.get(partition)
        if q is None:
            q = info.queues.setdefault(partition, _Queue())
        return q

    def _add_incomplete(self, batch: ProducerBatch) -> None:
        with self._incomplete_lock:
            self._incomplete.add(batch)

    def remove_incomplete(self, batch: ProducerBatch) -> None:
        with self._incomplete_lock:
            self._incomplete.discard(batch)

    # -- append (user threads) -----------------------------------------------------------

    def append(self, topic: str, partition: int, timestamp: int, key: Any, value: Any,
               headers: Any, on_delivery: Any, max_block_ms: float, now_ms: float,
               cluster: Any) -> tuple[Any, bool]:
        """Append one record; returns (future, wake the Sender)."""
        info = self._topics.get(topic) or self._topic_info(topic)
        # Fast path: the record fits the partition's open batch.
        if partition < 0:
            partitioner = info.partitioner
            pinfo = partitioner._sticky or partitioner.peek_current_partition_info(cluster)
            q = info.queues.get(pinfo.index) or self._queue(info, pinfo.index)
        else:
            pinfo = None
            q = info.queues.get(partition) or self._queue(info, partition)
        with q.lock:
            batches = q.batches
            if batches and not self.closed and (pinfo is None or partitioner._sticky is pinfo):
                last = batches[-1]
                fut = last.try_append(timestamp, key, value, headers, on_delivery, now_ms)
                if fut is not None:
                    full = last.full or last.pos >= last.capacity
                    if pinfo is not None:
                        pinfo.produced_bytes += last.last_record_size
                        if pinfo.produced_bytes >= partitioner.sticky_batch_size:
                            partitioner.update_partition_info(pinfo, 0, cluster, full)
                    return fut, full or len(batches) > 1
        res = self._append_slow(info, topic, partition, timestamp, key, value, headers,
                                on_delivery, max_block_ms, now_ms, cluster)
        return res.future, res.batch_is_full or res.new_batch_created

    def _append_slow(self, info: _TopicInfo, topic: str, partition: int, timestamp: int,
                     key: Any, value: Any, headers: Any, on_delivery: Any,
                     max_block_ms: float, now_ms: float, cluster: Any) -> AppendResult:
        partitioner = info.partitioner
        buf = None
        try:
            while True:
                if partition < 0:
                    pinfo = partitioner.peek_current_partition_info(cluster)
                    effective = pinfo.index
                else:
                    pinfo = None
                    effective = partition
                q = info.queues.get(effective) or self._queue(info, effective)
                with q.lock:
                    if self.closed:
                        raise IllegalStateError("cannot send after the producer is closed")
                    if pinfo is not None and partitioner._sticky is not pinfo:
                        continue
                    batches = q.batches
                    if batches:
                        last = batches[-1]
                        fut = last.try_append(timestamp, key, value, headers, on_delivery, now_ms)
                        if fut is not None:
                            if pinfo is not None:
                                partitioner.update_partition_info(
                                    pinfo, last.last_record_size, cluster, last.is_full())
                            return AppendResult(fut, len(batches) > 1 or last.is_full(), False,
                                                effective)
                if buf is None:
                    size = max(self.batch_size,
                               estimate_record_size(key, value, headers) + RECORD_BATCH_OVERHEAD)
                    buf = self.pool.allocate(size, max_block_ms)
                with q.lock:
                    if self.closed:
                        raise IllegalStateError("cannot send after the producer is closed")
                    if pinfo is not None and partitioner._sticky is not pinfo:
                        continue
                    batches = q.batches
                    if batches:
                        last = batches[-1]
                        fut = last.try_append(timestamp, key, value, headers, on_delivery, now_ms)
                        if fut is not None:  # another thread made room meanwhile
                            if pinfo is not None:
                                partitioner.update_partition_info(pinfo, last.last_record_size,
                                                                  cluster, last.is_full())
                            return AppendResult(fut, len(batches) > 1 or last.is_full(), False,
                                                effective)
                    batch = ProducerBatch(topic, effective, buf, now_ms, codec=self.codec,
                                          level=self.compression_level, pool=self.pool)
                    fut = batch.try_append(timestamp, key, value, headers, on_delivery, now_ms)
                    if fut is None:
                        raise KafkaError("record does not fit an empty batch")  # sized above
                    buf = None  # owned by the batch now
                    batches.append(batch)
                    self._add_incomplete(batch)
                    if pinfo is not None:
                        partitioner.update_partition_info(pinfo, batch.last_record_size, cluster,
                                                          batch.is_full())
                    return AppendResult(fut, len(batches) > 1 or batch.is_full(), True, effective)
        finally:
            if buf is not None:
                self.pool.deallocate(buf)

    def append_prebuilt(self, topic: str, partition: int, batches: Iterable[tuple[bytearray, int, int]],
                        listener: Any, now_ms: float) -> list[ProducerBatch]:
        """Queue whole batches (data, record count, reserved bytes) from the columnar
        path behind the partition's records; ``listener.add(result, count)`` is told of
        each batch first, then ``batch_done`` / ``batch_split`` as they happen."""
        info = self._topic_info(topic)
        q = self._queue(info, partition)
        made = []
        for data, count, reserved in batches:
            b = ProducerBatch(topic, partition, None, now_ms, codec=self.codec, pool=self.pool,
                              prebuilt=data, prebuilt_count=count, reserved=reserved)
            b.result.listeners = [listener]
            listener.add(b.result, count)  # counted before any completion can happen
            made.append(b)
        with q.lock:
            if self.closed:
                for b in made:
                    b.release_buffer()
                raise IllegalStateError("cannot send after the producer is closed")
            if q.batches:
                q.batches[-1].close_for_appends()
            q.batches.extend(made)
        with self._incomplete_lock:
            self._incomplete.update(made)
        return made

    # -- ready (Sender) ------------------------------------------------------------------

    def _retry_backoff(self, attempts: int) -> float:
        base = self.retry_backoff_ms
        if attempts <= 0 or base <= 0:
            return base
        backoff = min(base * (2 ** (attempts - 1)), self.retry_backoff_max_ms)
        return backoff * self._rng.uniform(0.8, 1.2) if backoff < self.retry_backoff_max_ms \
            else backoff

    def _should_backoff(self, batch: ProducerBatch, waited: float) -> bool:
        return batch.attempts > 0 and waited < self._retry_backoff(batch.attempts)

    def ready(self, cluster: Any, now_ms: float) -> ReadyCheckResult:
        ready_nodes: set[int] = set()
        unknown: set[str] = set()
        delay = float("inf")
        exhausted = self.pool.queued() > 0
        flushing = self._flushes_in_progress > 0 or self.closed
        for topic, info in list(self._topics.items()):
            delay = self._partition_ready(cluster, now_ms, topic, info, delay, ready_nodes,
                                          unknown, exhausted, flushing)
        return ReadyCheckResult(ready_nodes, delay, unknown)

    def _partition_ready(self, cluster: Any, now: float, topic: str, info: _TopicInfo,
                         delay: float, ready_nodes: set[int], unknown: set[str],
                         exhausted: bool, flushing: bool) -> float:
        queues = info.queues
        sizes: list[int] | None = None
        ids: list[int] | None = None
        if self.adaptive and len(queues) >= cluster.partition_count(topic) > 0:
            sizes = [0] * len(queues)
            ids = [0] * len(queues)
        idx = -1
        for partition, q in list(queues.items()):
            leader = cluster.leader_for(topic, partition)
            if leader >= 0 and sizes is not None:
                idx += 1
                ids[idx] = partition  # type: ignore[index]
            with q.lock:
                if not q.batches:
                    continue
                batch = q.batches[0]
                waited = batch.waited_time_ms(now)
                backing_off = self._should_backoff(batch, waited)
                depth = len(q.batches)
                full = depth > 1 or batch.is_full()
            if leader < 0:
                unknown.add(topic)
                continue
            if sizes is not None:
                sizes[idx] = depth
            if self.availability_timeout_ms > 0:
                st = self._node_stats.get(leader)
                if st is not None and st.ready_time_ms - st.drain_time_ms > self.availability_timeout_ms:
                    idx -= 1
            if leader in ready_nodes or (topic, partition) in self.muted:
                continue
            time_to_wait = self._retry_backoff(batch.attempts) if backing_off else self.linger_ms
            sendable = full or waited >= time_to_wait or exhausted or flushing
            if sendable and not backing_off:
                ready_nodes.add(leader)
            else:
                delay = min(delay, max(time_to_wait - waited, 0.0))
        info.partitioner.update_partition_load_stats(sizes, ids, idx + 1)
        return delay

    def update_node_latency_stats(self, node_id: int, now_ms: float, can_drain: bool) -> None:
        st = self._node_stats.get(node_id)
        if st is None:
            st = self._node_stats[node_id] = _NodeLatencyStats(now_ms)
        st.ready_time_ms = now_ms
        if can_drain:
            st.drain_time_ms = now_ms

    # -- drain (Sender) ------------------------------------------------------------------

    def drain(self, cluster: Any, nodes: Iterable[int], max_size: int,
              now_ms: float) -> dict[int, list[ProducerBatch]]:
        out: dict[int, list[ProducerBatch]] = {}
        for node in nodes:
            batches = self._drain_node(cluster, node, max_size, now_ms)
            if batches:
                out[node] = batches
        return out

    def _drain_node(self, cluster: Any, node: int, max_size: int,
                    now: float) -> list[ProducerBatch]:
        parts = cluster.partitions_for_node(node)
        if not parts:
            return []
        ready: list[ProducerBatch] = []
        size = 0
        n = len(parts)
        start = self._drain_index.get(node, 0) % n
        i = start
        tm = self.tm
        while True:
            topic, partition = parts[i]
            i = (i + 1) % n
            self._drain_index[node] = i
            tp = (topic, partition)
            info = self._topics.get(topic)
            q = info.queues.get(partition) if info is not None else None
            if q is not None and tp not in self.muted:
                batch = None
                with q.lock:
                    first = q.batches[0] if q.batches else None
                    if first is not None and not self._should_backoff(first, first.waited_time_ms(now)):
                        if ready and size + first.estimated_size > max_size:
                            break
                        if tm is not None and tm.should_stop_drain(first, tp):
                            break
                        batch = q.batches.popleft()
                        if tm is not None and not batch.has_sequence():
                            tm.assign_sequence(batch, tp)
                if batch is not None:
                    batch.close()
                    size += batch.size_in_bytes
                    ready.append(batch)
                    batch.drained(now)
            if i == start:
                break
        return ready

    # -- retries, splits, expiry (Sender) ------------------------------------------------

    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        batch.reenqueued(now_ms)
        q = self._queue(self._topic_info(batch.topic), batch.partition)
        with q.lock:
            if self.tm is not None and batch.has_sequence():
                self._insert_in_sequence_order(q.batches, batch)
            else:
                q.batches.appendleft(batch)

    @staticmethod
    def _insert_in_sequence_order(dq: deque[ProducerBatch], batch: ProducerBatch) -> None:
        ahead = []
        while dq and dq[0].has_sequence() and dq[0].base_sequence < batch.base_sequence:
            ahead.append(dq.popleft())
        dq.appendleft(batch)
        for b in reversed(ahead):
            dq.appendleft(b)

    def split_and_reenqueue(self, big: ProducerBatch, now_ms: float) -> int:
        if self.tm is not None:
            self.tm.remove_in_flight_batch(big)  # its pieces take over its sequences
        pieces = big.split(self.batch_size, now_ms)
        q = self._queue(self._topic_info(big.topic), big.partition)
        with self._incomplete_lock:
            self._incomplete.discard(big)
            self._incomplete.update(pieces)
        for piece in reversed(pieces):
            with q.lock:
                if self.tm is not None and piece.has_sequence():
                    self.tm.add_in_flight_batch(piece)
                    self._insert_in_sequence_order(q.batches, piece)
                else:
                    q.batches.appendleft(piece)
        return len(pieces)

    def expired_batches(self, now_ms: float) -> list[ProducerBatch]:
        """Queued batches past ``delivery.timeout.ms``, oldest first per partition."""
        expired = []
        self._next_batch_expiry_ms = float("inf")
        for info in list(self._topics.values()):
            for q in list(info.queues.values()):
                with q.lock:
                    while q.batches:
                        b = q.batches[0]
                        if b.has_reached_delivery_timeout(self.delivery_timeout_ms, now_ms):
                            q.batches.popleft()
                            b.close_for_appends()
                            expired.append(b)
                        else:
                            self._next_batch_expiry_ms = min(
                                self._next_batch_expiry_ms, b.created_ms + self.delivery_timeout_ms)
                            break
        return expired

    @property
    def next_batch_expiry_ms(self) -> float:
        return self._next_batch_expiry_ms

    def unmute(self, tp: tuple[str, int]) -> None:
        self.muted.discard(tp)

    # -- flush and close -----------------------------------------------------------------

    def begin_flush(self) -> None:
        with self._flush_lock:
            self._flushes_in_progress += 1

    def end_flush(self) -> None:
        with self._flush_lock:
            self._flushes_in_progress -= 1

    def flush_in_progress(self) -> bool:
        return self._flushes_in_progress > 0

    def incomplete_batches(self) -> list[ProducerBatch]:
        with self._incomplete_lock:
            return list(self._incomplete)

    def await_flush_completion(self, timeout_s: float | None) -> None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for batch in self.incomplete_batches():
            if not batch.result.wait_all(deadline):
                raise KafkaTimeoutError(f"flush did not complete within {timeout_s} s")

    def has_undrained(self) -> bool:
        for info in list(self._topics.values()):
            for q in list(info.queues.values()):
                if q.batches:
                    return True
        return False

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    def close(self) -> None:
        self.closed = True

    def abort_undrained_batches(self, error: BaseException) -> list[ProducerBatch]:
        """Fail every queued batch (forced close); returns them."""
        aborted = []
        for info in list(self._topics.values()):
            for q in list(info.queues.values()):
                with q.lock:
                    aborted.extend(q.batches)
                    q.batches.clear()
        for b in aborted:
            b.abort(error)
            self.remove_incomplete(b)
            b.release_buffer()
        return aborted

    def abort_incomplete_batches(self, error: BaseException) -> None:
        """Fail everything not done yet: queued batches and those in flight."""
        self.abort_undrained_batches(error)
        for b in self.incomplete_batches():
            b.abort(error)
            self.remove_incomplete(b)
            b.release_buffer()

    # -- inspection ----------------------------------------------------------------------

    def queue_depth(self, topic: str, partition: int) -> int:
        info = self._topics.get(topic)
        q = info.queues.get(partition) if info is not None else None
        return len(q.batches) if q is not None else 0

    def partitioner(self, topic: str) -> BuiltInPartitioner:
        return self._topic_info(topic).partitioner
