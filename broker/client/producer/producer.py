"""KafkaProducer: the public producer API, wiring every producer subsystem.

Owns the user-facing calls, as Kafka's ``KafkaProducer``:

* ``send(topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None,
  on_delivery=None) -> FutureRecordMetadata``. Never touches a socket: waits for the
  topic's metadata (bounded by ``max.block.ms``), serializes (``key.serializer`` /
  ``value.serializer`` callables, else bytes-like values; ``str`` is UTF-8 encoded),
  checks the size, picks the partition (explicit, else ``partitioner.class``, else murmur2
  of the key, else -1 for the sticky partitioner inside the accumulator), appends and
  returns at once, waking the Sender when a batch filled up or a new one began.
  The common case, a keyless ``bytes`` value (below 16 KiB) without headers to the sticky
  partition whose open batch has room, is fused into ``send`` itself (no call into the
  accumulator or the batch: about a third of the Python work per record); it writes the
  same bytes as ``ProducerBatch.try_append`` (tests/test_client_producer_fastpath.py
  compares them) and falls back to the general path, having changed nothing, whenever a
  condition fails (first record of a batch, full batch, large deltas, closing).
  ``on_delivery(err, metadata)`` runs exactly once on the Sender thread, in send order
  per partition; a too-large record fails its future (and callback) at once.
* ``send_arrow(topic, values, keys=None, headers=None, timestamps=None, partitions=None)
  -> concurrent.futures.Future[ArrowSendResult]``: the columnar bulk path for the Spark
  writer, in ``columnar.py`` (which owns ``ArrowSendResult`` and ``PartitionRange`` too; the
  producer hands it an ``ArrowSendContext`` built once, never itself). Rows are
  partitioned column-wise (explicit ``partitions``, else ``partitioner.class`` row by row,
  else vectorised murmur2 of the keys, else runs of about ``batch.size`` bytes per sticky
  partition), encoded with
  ``broker.record.columnar.encode_from_arrow`` into batches of at most ``batch.size``
  bytes (when not set: 1000000, librdkafka's default, ``columnar.arrow_batch_bytes``;
  chunk by chunk, each chunk's memory reserved from ``buffer.memory`` first), and
  queued behind the partition's records. The batches get sequences at drain like any
  other, so idempotence, retries, splitting and delivery timeouts apply unchanged; the one
  future resolves when every batch is done: to the per-partition offsets, or to the first
  error (with ``exc.partial_result`` telling what was acknowledged).
* ``flush(timeout=None)``: everything sent before the call is completed; raises
  ``IllegalStateError`` on the Sender thread (it would wait on itself) and
  ``KafkaTimeoutError`` after ``timeout`` seconds.
* ``close(timeout=None)``: no more sends; the Sender finishes queued and in-flight
  batches within ``timeout`` seconds, then fails the rest. From a callback it degrades to
  a non-blocking ``close(0)``.
* Transactions (``transactional.id``, ``transactional.py``): ``init_transactions()``,
  ``begin_transaction()``, ``send_offsets_to_transaction(offsets, group_metadata)``,
  ``commit_transaction()``, ``abort_transaction()``, each with an optional ``timeout`` in
  seconds (default max.block.ms); ``send`` and ``send_arrow`` outside a transaction raise
  ``IllegalStateError`` (their partitions join the transaction as records are queued).
  Errors: ``ProducerFencedError`` (fatal), ``TransactionAbortableError`` (abort and
  retry), ``TransactionAbortedError`` (a record dropped by an abort).
* ``partitions_for(topic)``, ``metrics()`` (counters), context-manager use.

Thread-safety: ``send``, ``send_arrow``, ``flush`` and ``partitions_for`` may be called from
any number of threads; ``close`` from any thread, once or more.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from broker.client.errors import (
    BrokerUnreachableError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    RecordTooLargeError,
    TransactionAbortedError,
)
from broker.client.metadata import Metadata, MetadataUpdater, PartitionInfo
from broker.client.network import NetworkClient
from broker.client.producer.accumulator import RecordAccumulator
from broker.client.producer.batch import (
    _LEN,
    _SMALL,
    _VARINT,
    FutureRecordMetadata,
    ProduceRequestResult,
    _tuple_new,
    estimate_record_size,
)
from broker.client.producer.buffer_pool import BufferPool
from broker.client.producer.columnar import ArrowSendContext, send_arrow
from broker.client.producer.config import ProducerConfig
from broker.client.producer.murmur2 import partition_for_key
from broker.client.producer.partitioner import custom_partition
from broker.client.producer.sender import Sender
from broker.client.producer.transaction_manager import TransactionManager
from broker.client.producer.transactional import TransactionalManager
from broker.client.sasl import SaslSettings
from broker.client.ssl_context import client_context
from broker.record.batch import RECORD_BATCH_OVERHEAD
from broker.record.codecs import CompressionType

_ids = itertools.count(1)
_monotonic = time.monotonic


class KafkaProducer:
    """A Kafka producer speaking the wire protocol (see the module docstring).

    ``KafkaProducer({"bootstrap.servers": "host:9092", "linger.ms": 5})`` or
    ``KafkaProducer(bootstrap_servers="host:9092", linger_ms=5)``.
    """

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        cfg = self.config = ProducerConfig(config, **kwargs)
        self.client_id = cfg.client_id or f"producer-{next(_ids)}"
        self.metadata = Metadata(cfg["bootstrap.servers"],
                                 metadata_max_age_ms=cfg["metadata.max.age.ms"],
                                 retry_backoff_ms=cfg.retry_backoff_ms,
                                 metadata_max_idle_ms=cfg["metadata.max.idle.ms"])
        self.pool = BufferPool(cfg.buffer_memory, cfg.batch_size)
        txn_id = cfg["transactional.id"]
        if txn_id is not None:
            self.transaction_manager: TransactionManager | None = TransactionalManager(
                txn_id, cfg["transaction.timeout.ms"], cfg.retry_backoff_ms)
        else:
            self.transaction_manager = TransactionManager() if cfg.idempotence else None
        self._txn = self.transaction_manager if txn_id is not None else None
        self.codec = int(CompressionType.from_name(cfg.compression_type))
        self.accumulator = RecordAccumulator(
            batch_size=cfg.batch_size, linger_ms=cfg.linger_ms,
            retry_backoff_ms=cfg.retry_backoff_ms, retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            delivery_timeout_ms=cfg.delivery_timeout_ms, pool=self.pool, codec=self.codec,
            compression_level=cfg.compression_level, transaction_manager=self.transaction_manager,
            adaptive_partitioning=cfg["partitioner.adaptive.partitioning.enable"],
            partition_availability_timeout_ms=cfg["partitioner.availability.timeout.ms"])
        self.client = NetworkClient(
            metadata=self.metadata, client_id=self.client_id,
            request_timeout_ms=cfg.request_timeout_ms,
            reconnect_backoff_ms=cfg["reconnect.backoff.ms"],
            reconnect_backoff_max_ms=cfg["reconnect.backoff.max.ms"],
            max_in_flight=cfg.max_in_flight,
            connection_setup_timeout_ms=cfg["socket.connection.setup.timeout.ms"],
            send_buffer_bytes=cfg["send.buffer.bytes"],
            receive_buffer_bytes=cfg["receive.buffer.bytes"],
            connections_max_idle_ms=cfg["connections.max.idle.ms"],
            metadata_updater=MetadataUpdater(self.metadata),
            sasl=SaslSettings.from_config(cfg), ssl_context=client_context(cfg.values))
        if self._txn is not None:
            self._txn.features = lambda: self.client.finalized_features  # transaction.version (KIP-890)
        self._metrics: dict[str, float] = {}
        self.sender = Sender(client=self.client, metadata=self.metadata,
                             accumulator=self.accumulator, config=cfg,
                             transaction_manager=self.transaction_manager, metrics=self._metrics,
                             name=f"kafka-producer-network-thread | {self.client_id}")
        self._partitioner: Callable | None = cfg["partitioner.class"]
        self._key_serializer: Callable | None = cfg["key.serializer"]
        self._value_serializer: Callable | None = cfg["value.serializer"]
        self._ignore_keys = cfg["partitioner.ignore.keys"]
        self._max_block_ms = cfg.max_block_ms
        self._max_record_bytes = min(cfg.max_request_size, cfg.buffer_memory)
        # Records whose key + value stay below this are surely within _max_record_bytes.
        self._size_check_from = self._max_record_bytes - RECORD_BATCH_OVERHEAD - 64
        self._wall_offset_ms = time.time() * 1000.0 - _monotonic() * 1000.0
        self._append = self.accumulator.append
        self._acc_topics = self.accumulator._topics  # send()'s fast path reads it (see there)
        # Values below this take the fast path: their varints come from batch's tables and
        # they are surely within max.request.size.
        self._fast_max = min(_SMALL - 64, self._size_check_from + 1)
        self._sends = 0
        self._slow_path = (self._key_serializer is not None or self._value_serializer is not None
                           or self._txn is not None)
        self._closed = False
        self._close_lock = threading.Lock()
        self._arrow = ArrowSendContext(
            config=cfg, accumulator=self.accumulator, pool=self.pool, codec=self.codec,
            partitioner=self._partitioner, ignore_keys=self._ignore_keys,
            wait_on_metadata=self._wait_on_metadata, wakeup=self.sender.wakeup,
            add_partition=self._txn.maybe_add_partition if self._txn is not None else None)
        self._wakeup = self.client.wakeup  # what Sender.wakeup does, one call less
        self.sender.on_fatal = self._enter_slow_path
        self.sender.start()

    # -- context manager -----------------------------------------------------------------

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- metadata ------------------------------------------------------------------------

    def _wait_on_metadata(self, topic: str, partition: int | None, max_wait_ms: float) -> Any:
        """The cluster once ``topic`` (and ``partition``) is known; after ``max_wait_ms``
        (max.block.ms) ``BrokerUnreachableError`` when no broker could be connected to (its
        cause: connection refused, unknown host...), else KafkaTimeoutError (the brokers
        answered, the topic is not there)."""
        md = self.metadata
        md.add_topic(topic)
        cluster = md.fetch()
        count = cluster.partition_count(topic)
        if count and (partition is None or partition < count):
            return cluster
        deadline = time.monotonic() + max_wait_ms / 1000.0
        while True:
            err = md.fatal_error(topic)
            if err is not None:
                raise err
            version = md.request_update()
            self.sender.wakeup()
            remaining = (deadline - time.monotonic()) * 1000.0
            if remaining <= 0:
                break
            try:
                md.await_update(version, remaining)
            except KafkaTimeoutError:
                break
            cluster = md.fetch()
            count = cluster.partition_count(topic)
            if count and (partition is None or partition < count):
                return cluster
            if self._closed:
                raise IllegalStateError("producer closed while waiting for metadata")
        err = md.fatal_error(topic)
        if err is not None:
            raise err
        cause = None if count else self.client.unreachable_cause()
        if cause is not None:  # no broker answered: the topic is not to blame
            raise BrokerUnreachableError(",".join(self.config["bootstrap.servers"]), cause,
                                         max_wait_ms, "max.block.ms")
        if count and partition is not None:
            raise KafkaTimeoutError(f"partition {partition} of topic {topic} not present in "
                                    f"metadata after {max_wait_ms:g} ms ({count} partitions)")
        raise KafkaTimeoutError(f"topic {topic} not present in metadata after {max_wait_ms:g} ms")

    def partitions_for(self, topic: str) -> list[PartitionInfo]:
        cluster = self._wait_on_metadata(topic, None, self.config.max_block_ms)
        return cluster.partitions_for_topic(topic)

    # -- send ----------------------------------------------------------------------------

    def _enter_slow_path(self) -> None:
        self._slow_path = True  # closed or failed: send() checks before appending

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("cannot send after the producer is closed")
        if self.sender.fatal_error is not None:
            if self._txn is not None and isinstance(self.sender.fatal_error, KafkaError):
                raise self.sender.fatal_error  # e.g. ProducerFencedError, as Kafka's send() does
            raise KafkaError(f"the producer hit a fatal error: {self.sender.fatal_error}")

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             timestamp_ms: int | None = None, headers: Any = None,
             on_delivery: Callable[[BaseException | None, Any], Any] | None = None
             ) -> FutureRecordMetadata:
        """Queue one record; see the module docstring."""
        # The fused fast path (see the module docstring): a keyless bytes value without
        # headers, appended to the sticky partition's open batch in this one frame. Any
        # condition not met, nothing was changed and the general path below runs.
        if key is None and partition is None and headers is None and not self._slow_path \
                and value.__class__ is bytes:
            info = self._acc_topics.get(topic)
            n = len(value)
            if info is not None and n < self._fast_max:
                partitioner = info.partitioner
                pinfo = partitioner._sticky
                if pinfo is not None:
                    q = info.queues.get(pinfo.index)
                    cluster = self.metadata._cluster
                    if q is not None and cluster.partition_counts.get(topic):
                        ts = int(_monotonic() * 1000.0 + self._wall_offset_ms) \
                            if timestamp_ms is None else timestamp_ms
                        with q.lock:
                            batches = q.batches
                            if batches and partitioner._sticky is pinfo and not self.accumulator.closed:
                                b = batches[-1]
                                count = b.record_count
                                d = ts - b.base_ts
                                if count and not b.full and 0 <= d < _SMALL and count < _SMALL:
                                    L = _LEN
                                    V = _VARINT
                                    body = 3 + L[d] + L[count] + L[n] + n
                                    rec = b"".join((V[body], b"\x00", V[d], V[count], b"\x01",
                                                    V[n], value, b"\x00"))
                                    size = len(rec)
                                    pos = b.pos
                                    end = pos + size
                                    if end <= b.capacity:
                                        b.mv[pos:end] = rec
                                        b.pos = end
                                        b.record_count = count + 1
                                        if ts > b.max_ts:
                                            b.max_ts = ts
                                        b.last_record_size = size
                                        if on_delivery is not None:
                                            b.result.callbacks.append((count, ts, on_delivery, None))
                                        full = end >= b.capacity
                                        produced = pinfo.produced_bytes + size
                                        pinfo.produced_bytes = produced
                                        if produced >= partitioner.sticky_batch_size:
                                            partitioner.update_partition_info(pinfo, 0, cluster, full)
                                        self._sends += 1
                                        if full or len(batches) > 1:
                                            self._wakeup()
                                        return _tuple_new(FutureRecordMetadata,
                                                          (b.result, count, ts))
        # The general path.
        if self._slow_path:
            self._check_open()
            if self._key_serializer is not None:
                key = self._key_serializer(topic, key)
            if self._value_serializer is not None:
                value = self._value_serializer(topic, value)
        if key.__class__ is str:
            key = key.encode()
        if value.__class__ is str:
            value = value.encode()
        if headers is not None and headers.__class__ is dict:
            headers = list(headers.items())
        cluster = self.metadata._cluster
        count = cluster.partition_counts.get(topic)
        max_block = self._max_block_ms
        if not count or (partition is not None and partition >= count):
            start = _monotonic()
            cluster = self._wait_on_metadata(topic, partition, max_block)
            count = cluster.partition_count(topic)
            max_block = max(max_block - (_monotonic() - start) * 1000.0, 0.0)
        # A cheap size check first; the exact bound only for records near the limit.
        if (len(value) if value is not None else 0) + (len(key) if key is not None else 0) \
                > self._size_check_from or headers:
            size = estimate_record_size(key, value, headers) + RECORD_BATCH_OVERHEAD
            if size > self._max_record_bytes:
                return self._failed(topic, partition, RecordTooLargeError(
                    f"the record is {size} bytes when serialized, larger than "
                    f"max.request.size ({self.config.max_request_size}) or buffer.memory "
                    f"({self.config.buffer_memory})"), on_delivery)
        if partition is None:
            if self._partitioner is not None:
                partition = custom_partition(self._partitioner, topic, key, value, count)
            elif key is not None and not self._ignore_keys:
                partition = partition_for_key(key, count)
            else:
                partition = -1
        elif partition < 0:
            raise KafkaError(f"invalid partition {partition}")
        now = _monotonic() * 1000.0
        if timestamp_ms is None:
            timestamp_ms = int(now + self._wall_offset_ms)
        txn = self._txn
        if txn is not None and partition >= 0:
            txn.maybe_add_partition((topic, partition))  # raises outside a transaction
        fut, wake = self._append(topic, partition, timestamp_ms, key, value, headers,
                                 on_delivery, max_block, now, cluster)
        if txn is not None and partition < 0:  # the sticky partition the accumulator chose
            txn.maybe_add_partition((topic, fut[0].partition))
        self._sends += 1
        if wake:
            self._wakeup()
        return fut

    def _failed(self, topic: str, partition: int | None, error: BaseException,
                on_delivery: Callable | None) -> FutureRecordMetadata:
        r = ProduceRequestResult(topic, -1 if partition is None else partition)
        r.error = error
        r.done = True
        r._set()
        if on_delivery is not None:
            r.callbacks.append((0, -1, on_delivery, None))
            r.fire_callbacks()
        return FutureRecordMetadata(r, 0, -1)

    # -- columnar bulk path --------------------------------------------------------------

    def send_arrow(self, topic: str, values: Any, keys: Any = None, headers: Any = None,
                   timestamps: Any = None, partitions: Any = None) -> concurrent.futures.Future:
        """Queue Arrow columns as records of ``topic``; one future for the whole call
        (``columnar.send_arrow``)."""
        self._check_open()
        return send_arrow(self._arrow, topic, values, keys, headers, timestamps, partitions)

    # -- transactions (transactional.py) ------------------------------------------------

    def _transactional(self) -> TransactionalManager:
        if self._txn is None:
            raise IllegalStateError("transactional.id is not set: this producer is not transactional")
        if self._closed:
            raise IllegalStateError("the producer is closed")
        return self._txn

    def _wait(self, result: Any, timeout: float | None) -> None:
        """Wait for a transactional call (max.block.ms unless ``timeout``, in seconds); a
        wait that passes while no broker could be connected to raises
        ``BrokerUnreachableError`` naming the cause and the bound, not the request."""
        self.sender.wakeup()
        try:
            result.wait(self._max_block_ms / 1000.0 if timeout is None else timeout)
        except KafkaTimeoutError:
            cause = self.client.unreachable_cause()
            if cause is None:
                raise
            raise BrokerUnreachableError(
                ",".join(self.config["bootstrap.servers"]), cause,
                self._max_block_ms if timeout is None else timeout * 1000.0,
                "max.block.ms" if timeout is None else "timeout") from None

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional.id with its coordinator: fences any earlier producer
        with the same id and aborts (or completes) its open transaction. Once per producer."""
        self._wait(self._transactional().init_transactions(), timeout)

    def begin_transaction(self) -> None:
        self._transactional().begin_transaction()

    def send_offsets_to_transaction(self, offsets: dict[tuple[str, int], Any], group_metadata: Any,
                                    timeout: float | None = None) -> None:
        """Commit ``offsets`` ({(topic, partition): next offset to consume}, values ints or
        objects with ``offset`` / ``metadata``) for the consumer group with the transaction.
        ``group_metadata``: the group id, or an object with ``group_id`` and optionally
        ``generation_id``, ``member_id`` and ``group_instance_id`` (a consumer's group
        metadata: the coordinator then fences a zombie member)."""
        if isinstance(group_metadata, str):
            group_id, generation, member, instance = group_metadata, -1, "", None
        else:
            group_id = group_metadata.group_id
            generation = getattr(group_metadata, "generation_id", -1)
            member = getattr(group_metadata, "member_id", "") or ""
            instance = getattr(group_metadata, "group_instance_id", None)
        if not group_id:
            raise KafkaError("send_offsets_to_transaction needs a group id")
        self._wait(self._transactional().send_offsets(dict(offsets), group_id, generation, member, instance),
                   timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send what is queued, then commit. A failed record makes the transaction
        abortable: ``TransactionAbortableError`` (abort, then start again);
        ``ProducerFencedError`` is fatal."""
        txn = self._transactional()
        txn.check_not_fatal()
        self.flush(timeout)
        result = txn.begin_completion(commit=True)
        if result is not None:
            self._wait(result, timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records still queued (their futures fail with TransactionAbortedError),
        wait for those in flight, then abort."""
        txn = self._transactional()
        result = txn.begin_completion(commit=False)
        # queued records never go out, also those of partitions not (yet) in the transaction
        self.accumulator.abort_undrained_batches(TransactionAbortedError("the transaction was aborted"))
        self.sender.wakeup()
        self.flush(timeout)
        if result is not None:
            self._wait(result, timeout)
        bump = getattr(txn, "_bump_result", None)
        if bump is not None:
            txn._bump_result = None
            self._wait(bump, timeout)

    # -- flush and close -----------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        if threading.current_thread() is self.sender:
            raise IllegalStateError("flush() cannot be called from a producer callback "
                                    "(it would wait on the thread that runs it)")
        acc = self.accumulator
        acc.begin_flush()
        try:
            self.sender.wakeup()
            acc.await_flush_completion(timeout)
        finally:
            acc.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Stop accepting records and deliver what is queued within ``timeout`` seconds
        (None: no limit), then fail what is left."""
        on_sender = threading.current_thread() is self.sender
        if on_sender:
            timeout = 0.0  # never join ourselves
        with self._close_lock:
            self._closed = True
            self._slow_path = True
        if timeout is not None and timeout <= 0:
            self.sender.force_close()
        else:
            self.sender.initiate_close()
        if on_sender:
            return
        self.sender.join(timeout)
        if self.sender.is_alive():
            self.sender.force_close()
            self.sender.join(5.0)
        self.pool.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- metrics -------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        m = dict(self._metrics)
        m["record-send-total"] = self._sends
        m["buffer-total-bytes"] = self.pool.total_memory
        m["buffer-available-bytes"] = self.pool.available_memory()
        m["buffer-exhausted-total"] = self.pool.exhausted_count
        m["bufferpool-wait-time-ns-total"] = self.pool.wait_time_ns
        m["outgoing-byte-total"] = self.client.bytes_sent
        m["incoming-byte-total"] = self.client.bytes_received
        m["waiting-threads"] = self.pool.queued()
        if self.transaction_manager is not None:
            m["producer-id"] = self.transaction_manager.producer_id
            m["producer-epoch"] = self.transaction_manager.producer_epoch
            m["epoch-bump-total"] = self.transaction_manager.epoch_bumps
        return m

