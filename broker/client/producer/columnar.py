"""The producer's columnar bulk path: Arrow columns -> partitioned, encoded batches.

Owns ``send_arrow`` (called by ``KafkaProducer.send_arrow``), its result types
(``ArrowSendResult``, ``PartitionRange``), ``ArrowSendContext`` (what the producer hands it)
and ``ArrowSendTracker``, the one future of a call.

``send_arrow`` sees the producer only through ``ArrowSendContext``: the config, the
accumulator, the buffer pool, the codec, the ``partitioner.class`` callable,
``partitioner.ignore.keys``, a ``wait_on_metadata(topic, partition, max_wait_ms) -> cluster``
callable and the Sender's ``wakeup``. The producer builds it once; this module never imports
``producer.py`` (the import goes one way: producer -> columnar). A call:

1. Partition every row without a Python object per row: explicit ``partitions``; else a
   ``partitioner.class`` callable (row by row, the only slow case); else vectorised
   murmur2 of the keys (``murmur2.partitions_for_keys``), with keyless rows given to
   the topic's ``BuiltInPartitioner`` in runs of about ``batch.size`` bytes (the sticky
   rule of KIP-480 applied to runs of rows, so no half-full batch is stranded).
2. Group the rows of each partition (a stable sort keeps their order) and encode them
   chunk by chunk (at most ``ARROW_CHUNK_BYTES``, never more than half of
   ``buffer.memory``) with ``broker.record.columnar.encode_from_arrow`` into batches of at
   most ``batch.size`` bytes when the user set it, else ``DEFAULT_ARROW_BATCH_BYTES``
   (1000000, librdkafka's default: ``arrow_batch_bytes``), compressed per
   ``compression.type``. Each chunk's memory is
   reserved from the ``BufferPool`` before encoding (blocking up to ``max.block.ms``) and
   the estimate is trimmed to the real size after, so queued columnar data stays within
   ``buffer.memory`` like per-record data.
3. Queue the batches behind the partition's open batch (``append_prebuilt``); the Sender
   stamps producer id, epoch and sequence at drain, retries and splits them like any
   batch.

The tracker counts outstanding batches (a split adds its pieces) and resolves once the
call is sealed and every batch is done: ``ArrowSendResult(topic, records, partitions)``
with the first and last offset and the count per partition, or the first error with
``exc.partial_result`` set.

Thread-safety: ``send_arrow`` runs on the caller's thread; tracker callbacks run on the
Sender thread under the tracker's lock.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from broker.client.errors import KafkaError
from broker.client.producer.murmur2 import partitions_for_keys
from broker.client.producer.partitioner import custom_partition
from broker.record.batch import RECORD_BATCH_OVERHEAD
from broker.record.columnar import encode_from_arrow

# Rows encoded per step: the first batches reach the Sender after 4 MiB of encoding rather
# than all of a large call (the Sender and the broker work while the next chunk is
# encoded, lz4 and Arrow's kernels releasing the GIL), and transient memory stays small;
# at 1-KiB rows a chunk's fixed numpy/Arrow work is under 0.1 us per row. (It was 32 MiB;
# A/B runs on the loaded machine could not tell them apart beyond the noise.)
ARROW_CHUNK_BYTES = 4 * 1024 * 1024
# The batch size of send_arrow when the user did not set batch.size: librdkafka's default
# (Kafka's 16384 is for per-record sends, where every partition's open batch holds a
# pooled buffer of batch.size; the columnar path builds batches of their exact size, so a
# larger bound costs no memory). At 1-KiB rows to this broker, 16-KiB batches cost ~15 us
# of client CPU and ~10 of broker CPU per record, 1-MB ones ~2.7 and ~3.3 (docs/benchmarks.md).
# Capped by max.request.size and half of buffer.memory.
DEFAULT_ARROW_BATCH_BYTES = 1_000_000
_ZERO_OFFSET = bytes(8)
_RECORD_OVERHEAD = 36  # upper bound of a record's framing (see batch.estimate_record_size)


class PartitionRange(NamedTuple):
    first_offset: int  # -1 when unknown (acks=0, duplicates)
    last_offset: int
    count: int


class ArrowSendResult(NamedTuple):
    topic: str
    records: int
    partitions: dict[int, PartitionRange]


@dataclass(frozen=True, slots=True)
class ArrowSendContext:
    """What ``send_arrow`` needs of a producer; built once by ``KafkaProducer``."""

    config: Any  # ProducerConfig: explicit, batch_size, buffer_memory, max_request_size, max_block_ms,
    #              compression_level
    accumulator: Any  # RecordAccumulator: partitioner(topic), append_prebuilt(...)
    pool: Any  # BufferPool: reserve(size, max_block_ms), deallocate(None, size)
    codec: int  # CompressionType of compression.type
    partitioner: Callable | None  # partitioner.class, else None
    ignore_keys: bool  # partitioner.ignore.keys
    wait_on_metadata: Callable[[str, int | None, float], Any]  # -> cluster, or raises
    wakeup: Callable[[], None]  # wakes the Sender
    # a transactional producer's TransactionalManager.maybe_add_partition (None otherwise):
    # each partition joins the transaction before its first batch is queued
    add_partition: Callable[[tuple[str, int]], None] | None = None


class ArrowSendTracker:
    """Aggregates the batches of one ``send_arrow`` call into one future."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.future: concurrent.futures.Future = concurrent.futures.Future()
        self.future.set_running_or_notify_cancel()
        self._lock = threading.Lock()
        self._pending = 0
        self._sealed = False
        self._records = 0
        self._parts: dict[int, list[int]] = {}  # partition -> [first, last, count]
        self._counts: dict[Any, int] = {}  # result -> record count
        self._error: BaseException | None = None

    def add(self, result: Any, count: int) -> None:
        with self._lock:
            self._pending += 1
            self._counts[result] = count

    def seal(self) -> None:
        with self._lock:
            self._sealed = True
            self._maybe_finish()

    def fail_now(self, error: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = error
            self._sealed = True
            self._maybe_finish()

    def batch_split(self, old: Any, pieces: list[tuple[Any, int]]) -> None:
        with self._lock:
            self._counts.pop(old, None)
            self._pending += len(pieces) - 1
            for r, count in pieces:
                self._counts[r] = count

    def batch_done(self, r: Any) -> None:
        with self._lock:
            count = self._counts.pop(r, 0)
            self._pending -= 1
            if r.error is not None:
                if self._error is None:
                    self._error = r.error
            else:
                p = self._parts.get(r.partition)
                first = r.base_offset
                last = r.base_offset + count - 1 if r.base_offset >= 0 else -1
                if p is None:
                    self._parts[r.partition] = [first, last, count]
                else:
                    if first >= 0 and (p[0] < 0 or first < p[0]):
                        p[0] = first
                    if last > p[1]:
                        p[1] = last
                    p[2] += count
                self._records += count
            self._maybe_finish()

    def _maybe_finish(self) -> None:
        if not self._sealed or self._pending > 0 or self.future.done():
            return
        result = ArrowSendResult(self.topic, self._records,
                                 {p: PartitionRange(*v) for p, v in sorted(self._parts.items())})
        if self._error is not None:
            err = self._error
            try:
                err.partial_result = result  # type: ignore[attr-defined]
            except AttributeError:
                pass
            self.future.set_exception(err)
        else:
            self.future.set_result(result)


def _array(col: Any, what: str) -> pa.Array:
    if col is None:
        return None
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if isinstance(col, pa.Array):
        return col
    try:
        return pa.array(col)
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise KafkaError(f"{what}: cannot convert to Arrow: {e}") from None


def _lengths(col: pa.Array | None, n: int) -> np.ndarray:
    if col is None:
        return np.zeros(n, np.int64)
    import pyarrow.compute as pc
    if pa.types.is_null(col.type):
        return np.zeros(n, np.int64)
    return pc.fill_null(pc.binary_length(col.cast(pa.large_binary())), 0).to_numpy(
        zero_copy_only=False).astype(np.int64)


def _partition_rows(ctx: ArrowSendContext, topic: str, cluster: Any, values: pa.Array,
                    keys: pa.Array | None, partitions: Any, sizes: np.ndarray,
                    batch_bytes: int) -> np.ndarray:
    n = len(values)
    count = cluster.partition_count(topic)
    if partitions is not None:
        parts = np.asarray(_array(partitions, "partitions").cast(pa.int64()).to_numpy(
            zero_copy_only=False), np.int64)
        if len(parts) != n:
            raise KafkaError(f"partitions has {len(parts)} rows, values have {n}")
        if n and (parts.min() < 0 or parts.max() >= count):
            raise KafkaError(f"a partition outside 0..{count - 1} for topic {topic}")
        return parts
    if ctx.partitioner is not None:
        kl = keys.to_pylist() if keys is not None else [None] * n
        vl = values.to_pylist()
        return np.array([custom_partition(ctx.partitioner, topic, k, v, count)
                         for k, v in zip(kl, vl)], np.int64)
    if keys is not None and not ctx.ignore_keys and not pa.types.is_null(keys.type):
        parts = partitions_for_keys(keys, count)
    else:
        parts = np.full(n, -1, np.int64)
    keyless = np.flatnonzero(parts < 0)
    if keyless.size:
        # Runs of about batch.size bytes per sticky partition.
        partitioner = ctx.accumulator.partitioner(topic)
        run = batch_bytes
        cum = np.cumsum(sizes[keyless])
        start = 0
        while start < keyless.size:
            info = partitioner.peek_current_partition_info(cluster)
            base = cum[start - 1] if start else 0
            need = max(run - info.produced_bytes, 1)
            end = int(np.searchsorted(cum, base + need, side="left")) + 1
            end = min(max(end, start + 1), keyless.size)
            parts[keyless[start:end]] = info.index
            partitioner.update_partition_info(info, int(cum[end - 1] - base), cluster, True)
            start = end
    return parts


def arrow_batch_bytes(cfg: Any) -> int:
    """The ``max_batch_bytes`` of send_arrow's batches: ``batch.size`` when the user set
    it, else the larger of it and ``DEFAULT_ARROW_BATCH_BYTES`` (capped)."""
    if "batch.size" in cfg.explicit:
        return cfg.batch_size
    return max(cfg.batch_size, min(DEFAULT_ARROW_BATCH_BYTES, cfg.max_request_size,
                                   cfg.buffer_memory // 2))


def _select(cols: tuple, idx: np.ndarray, n: int) -> list:
    """The rows ``idx`` (ascending) of each column: the columns themselves when that is
    every row, a zero-copy slice when the rows are one contiguous run (one partition, or a
    sticky run of keyless rows), else a ``take``."""
    if idx.size == n:
        return list(cols)
    first = int(idx[0])
    if int(idx[-1]) - first + 1 == idx.size:
        return [None if c is None else c.slice(first, idx.size) for c in cols]
    take = pa.array(idx)
    return [None if c is None else c.take(take) for c in cols]


def send_arrow(ctx: ArrowSendContext, topic: str, values: Any, keys: Any = None,
               headers: Any = None, timestamps: Any = None, partitions: Any = None
               ) -> concurrent.futures.Future:
    """Queue Arrow columns as records of ``topic``; a future of ``ArrowSendResult``."""
    cfg = ctx.config
    values = _array(values, "values")
    keys = _array(keys, "keys")
    headers = _array(headers, "headers")
    timestamps = _array(timestamps, "timestamps")
    n = len(values)
    tracker = ArrowSendTracker(topic)
    if n == 0:
        tracker.seal()
        return tracker.future
    start = time.monotonic()
    cluster = ctx.wait_on_metadata(topic, None, cfg.max_block_ms)
    sizes = _lengths(values, n) + _lengths(keys, n) + _RECORD_OVERHEAD
    if headers is not None:
        # Headers add to the estimate through their flattened size (keys + values).
        import pyarrow.compute as pc
        hl = pc.list_value_length(headers).fill_null(0).to_numpy(zero_copy_only=False)
        sizes = sizes + hl.astype(np.int64) * 16
        flat = pc.list_flatten(headers)
        if len(flat):
            per = _lengths(flat.field("key"), len(flat)) + _lengths(flat.field("value"), len(flat))
            owner = np.repeat(np.arange(n), hl.astype(np.int64))
            sizes = sizes + np.bincount(owner, weights=per, minlength=n).astype(np.int64)
    too_big = sizes + RECORD_BATCH_OVERHEAD > min(cfg.max_request_size, cfg.buffer_memory)
    if too_big.any():
        from broker.client.errors import RecordTooLargeError
        raise RecordTooLargeError(f"row {int(np.flatnonzero(too_big)[0])} is larger than "
                                  "max.request.size or buffer.memory")
    batch_bytes = arrow_batch_bytes(cfg)
    parts = _partition_rows(ctx, topic, cluster, values, keys, partitions, sizes, batch_bytes)
    order = np.argsort(parts, kind="stable")
    sorted_parts = parts[order]
    bounds = np.flatnonzero(np.diff(sorted_parts)) + 1
    groups = np.split(order, bounds)
    chunk_limit = max(min(ARROW_CHUNK_BYTES, cfg.buffer_memory // 2), batch_bytes)
    acc = ctx.accumulator
    pool = ctx.pool
    wakeup = ctx.wakeup
    try:
        for rows in groups:
            partition = int(parts[rows[0]])
            if ctx.add_partition is not None:  # raises outside a transaction, before any memory is taken
                ctx.add_partition((topic, partition))
            cum = np.cumsum(sizes[rows])
            lo = 0
            while lo < rows.size:
                base = cum[lo - 1] if lo else 0
                hi = int(np.searchsorted(cum, base + chunk_limit, side="right"))
                hi = min(max(hi, lo + 1), rows.size)
                idx = rows[lo:hi]
                est = int(cum[hi - 1] - base) + RECORD_BATCH_OVERHEAD * (
                    1 + int(cum[hi - 1] - base) // max(batch_bytes - RECORD_BATCH_OVERHEAD, 1))
                est = min(est, cfg.buffer_memory)
                remaining = max(cfg.max_block_ms - (time.monotonic() - start) * 1000.0, 0.0)
                pool.reserve(est, remaining)
                try:
                    encoded = encode_from_arrow(
                        *_select((values, keys, timestamps, headers), idx, n),
                        compression=ctx.codec, compression_level=cfg.compression_level,
                        max_batch_bytes=batch_bytes, writable=True)
                except BaseException:
                    pool.deallocate(None, est)
                    raise
                items = []
                for eb in encoded:
                    data = eb.data  # a bytearray (writable=True): the Sender stamps it
                    data[0:8] = _ZERO_OFFSET  # base offset 0 (outside the CRC)
                    items.append((data, eb.record_count))
                del encoded
                used = sum(len(d) for d, _ in items)
                if used < est:
                    pool.deallocate(None, est - used)  # trim to what the batches hold
                elif used > est:  # incompressible data: codec framing beyond the estimate
                    remaining = max(cfg.max_block_ms - (time.monotonic() - start) * 1000.0, 0.0)
                    try:
                        pool.reserve(used - est, remaining)
                    except BaseException:
                        pool.deallocate(None, est)
                        raise
                acc.append_prebuilt(topic, partition, [(d, c, len(d)) for d, c in items],
                                    tracker, time.monotonic() * 1000.0)
                wakeup()
                lo = hi
    except BaseException as e:
        tracker.fail_now(e)
        raise
    tracker.seal()
    return tracker.future
