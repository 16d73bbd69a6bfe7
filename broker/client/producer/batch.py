"""ProducerBatch and the futures it completes: one RecordBatch v2 under construction.

Owns, as Kafka's ``ProducerBatch`` / ``ProduceRequestResult`` / ``FutureRecordMetadata``:

* ``ProducerBatch``: the records of one (topic, partition) written straight into a buffer
  from the ``BufferPool`` (uncompressed, from byte 61 on, leaving room for the header), or
  a prebuilt batch from the columnar path. ``close()`` (at drain, on the Sender thread)
  compresses when configured and writes the 61-byte header with producer id, epoch and
  base sequence and the CRC-32C, giving ``payload``; an uncompressed payload is a view of
  the pooled buffer itself (zero copy), so the buffer must not be recycled while a request
  holding it is in flight (I13: ``release_buffer`` is called only when the request is
  done). Sequence changes after ``close`` (epoch bump, failed batch) are recorded with
  ``reset_producer_state`` and stamped at the next drain, never into bytes on the wire.
* The final-state machine: the first of ``complete`` / ``fail`` / ``abort`` wins; FAILED ->
  FAILED is ignored, FAILED/ABORTED -> SUCCEEDED is logged (a late broker write after a
  local expiry), anything out of SUCCEEDED raises. Completion fires every record's
  callbacks in append order, swallowing exceptions of user callbacks.
* ``split(max_size)``: a batch rejected with MESSAGE_TOO_LARGE is decoded and its records
  re-appended into batches of at most ``max_size``; the records' futures move to the new
  batches and keep their order; sequences continue from the big batch's.
* ``FutureRecordMetadata``: the future ``send()`` returns (``result``, ``exception``,
  ``done``, ``add_done_callback``, like ``concurrent.futures.Future``), resolving to
  ``RecordMetadata(topic, partition, offset, timestamp, ...)``.

Thread-safety: a batch is guarded by its partition queue's lock while open (user threads
append, the Sender drains); after drain only the Sender thread touches it. A
``ProduceRequestResult`` is completed once, under its own lock, and read from any thread.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from broker.client.errors import KafkaError, KafkaTimeoutError
from broker.record import codecs
from broker.record.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    CURRENT_MAGIC,
    HEADER,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    crc32c,
    decode_batch,
    encode_record,
)
from broker.record.columnar import stamp_producer_fields
from broker.record.varint import encode_varint, encode_varlong

log = logging.getLogger(__name__)

_UINT32 = struct.Struct(">I")
# Varints of 0 .. _SMALL-1 (zigzag), looked up on the hot path.
_SMALL = 1 << 14
_VARINT = tuple(encode_varint(i) for i in range(_SMALL))
_LEN = tuple(len(v) for v in _VARINT)
_NULL = b"\x01"  # zigzag varint -1: a null key or value
# Upper bound of a record's framing: length (5) + attributes (1) + timestamp delta (10)
# + offset delta (5) + key length (5) + value length (5) + header count (5).
RECORD_OVERHEAD_UPPER_BOUND = 36
SEQUENCE_MODULUS = 1 << 31


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int  # -1 when unknown (acks=0, or a DUPLICATE_SEQUENCE_NUMBER answer)
    timestamp: int  # ms; the broker's LogAppendTime when the topic uses it


def estimate_record_size(key: Any, value: Any, headers: Any) -> int:
    """An upper bound of a record's bytes in a batch."""
    size = RECORD_OVERHEAD_UPPER_BOUND + (len(key) if key is not None else 0) + \
        (len(value) if value is not None else 0)
    if headers:
        for k, v in headers:
            size += 10 + len(k.encode("utf-8") if isinstance(k, str) else k) + (len(v) if v else 0)
    return size


def encode_one(offset_delta: int, ts_delta: int, key: Any, value: Any, headers: Any) -> bytes:
    """The bytes of one record (length prefix included); the hot path of ``send()``."""
    V = _VARINT
    tv = V[ts_delta] if 0 <= ts_delta < _SMALL else encode_varlong(ts_delta)
    if headers:
        return encode_record(offset_delta, ts_delta, key, value, list(headers))
    ov = V[offset_delta] if offset_delta < _SMALL else encode_varint(offset_delta)
    if key is None:
        kh, key = _NULL, b""
    else:
        n = len(key)
        kh = V[n] if n < _SMALL else encode_varint(n)
    if value is None:
        vh, value = _NULL, b""
    else:
        n = len(value)
        vh = V[n] if n < _SMALL else encode_varint(n)
    body = 2 + len(tv) + len(ov) + len(kh) + len(key) + len(vh) + len(value)
    lh = V[body] if body < _SMALL else encode_varint(body)
    return b"".join((lh, b"\x00", tv, ov, kh, key, vh, value, b"\x00"))


class ProduceRequestResult:
    """The shared outcome of one batch. ``callbacks`` holds (index, timestamp, fn,
    future) entries: ``future`` None for an ``on_delivery(err, metadata)`` callback, else
    a done-callback ``fn(future)``. After a split, ``remap[i]`` is the (result, index) of
    record ``i`` in its new batch."""

    __slots__ = ("topic", "partition", "base_offset", "log_append_time", "error", "done",
                 "remap", "superseded", "_event", "lock", "listeners", "callbacks")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.done = False
        self.remap: list[tuple[ProduceRequestResult, int]] | None = None
        self.superseded: list[ProduceRequestResult] | None = None
        self._event = threading.Event()
        self.lock = threading.Lock()
        self.listeners: list[Any] | None = None  # objects with batch_done / batch_split
        self.callbacks: list[tuple] = []

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def wait_all(self, deadline: float | None) -> bool:
        """Wait for this result and, after a split, for its pieces."""
        pending = [self]
        while pending:
            r = pending.pop()
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not r._event.wait(remaining):
                return False
            if r.superseded:
                pending.extend(r.superseded)
        return True

    def _set(self) -> None:
        self._event.set()

    def metadata(self, index: int, timestamp: int) -> RecordMetadata:
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        ts = self.log_append_time if self.log_append_time >= 0 else timestamp
        return RecordMetadata(self.topic, self.partition, offset, ts)

    def fire_callbacks(self) -> None:
        """Run the callbacks in record order (on_delivery before done-callbacks of the
        same record); exceptions are logged and swallowed."""
        cbs = self.callbacks
        if not cbs:
            return
        if len(cbs) > 1:
            cbs.sort(key=_first)
        err = self.error
        for index, ts, fn, fut in cbs:
            if fut is not None:
                _safe_call(fn, fut)
            elif err is not None:
                _safe_call(fn, err, None)
            else:
                _safe_call(fn, None, self.metadata(index, ts))


def _first(entry: tuple) -> int:
    return entry[0]


class FutureRecordMetadata(tuple):
    """The future of one record: an immutable (result, index, timestamp) that follows
    its record through splits (see the module docstring)."""

    __slots__ = ()

    def __new__(cls, result: ProduceRequestResult, index: int, timestamp: int) -> FutureRecordMetadata:
        return tuple.__new__(cls, (result, index, timestamp))

    def _current(self) -> tuple[ProduceRequestResult, int]:
        r, i = self[0], self[1]
        while r.remap is not None:
            r, i = r.remap[i]
        return r, i

    def _final(self, timeout: float | None) -> tuple[ProduceRequestResult, int]:
        deadline = None if timeout is None else time.monotonic() + timeout
        r, i = self[0], self[1]
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not r.wait(remaining):
                raise KafkaTimeoutError(f"record not acknowledged within {timeout} s")
            if r.remap is None:
                return r, i
            r, i = r.remap[i]  # the batch was split: follow the record to its new batch

    def done(self) -> bool:
        return self._current()[0].done

    def cancel(self) -> bool:
        return False  # records cannot be recalled once sent

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self.done()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        r, i = self._final(timeout)
        if r.error is not None:
            raise r.error
        return r.metadata(i, self[2])

    get = result  # Java / kafka-python spelling

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._final(timeout)[0].error

    def add_done_callback(self, fn: Callable[[FutureRecordMetadata], Any]) -> None:
        """``fn(future)`` when the record completes (on the Sender thread), or now."""
        r, i = self[0], self[1]
        while True:
            with r.lock:
                if r.remap is None:
                    if not r.done:
                        r.callbacks.append((i, self[2], fn, self))
                        return
                    break
            r, i = r.remap[i]
        _safe_call(fn, self)

    def __repr__(self) -> str:
        r, i = self._current()
        state = "pending" if not r.done else ("error" if r.error else "done")
        return f"<FutureRecordMetadata {r.topic}-{r.partition} #{i} {state}>"

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


_tuple_new = tuple.__new__  # builds a FutureRecordMetadata without a Python-level frame


def _safe_call(fn: Callable, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("a producer callback raised (ignored; other callbacks still run)")


# Final states.
SUCCEEDED, FAILED, ABORTED = "SUCCEEDED", "FAILED", "ABORTED"


class ProducerBatch:
    """See the module docstring."""

    __slots__ = (
        "topic", "partition", "created_ms", "last_attempt_ms", "last_append_ms", "drained_ms",
        "attempts", "record_count", "max_record_size", "buffer", "pos", "capacity", "codec",
        "level", "base_ts", "max_ts", "mv", "result", "final_state", "producer_id",
        "producer_epoch", "base_sequence", "is_transactional", "payload", "full", "needs_stamp",
        "sequence_reset", "pool", "reserved", "in_flight", "release_pending", "prebuilt",
        "leader_epoch", "split_count", "last_record_size",
    )

    def __init__(self, topic: str, partition: int, buffer: bytearray | None, now_ms: float, *,
                 codec: int = 0, level: int | None = None, pool: Any = None,
                 prebuilt: bytearray | None = None, prebuilt_count: int = 0,
                 reserved: int = 0) -> None:
        self.topic = topic
        self.partition = partition
        self.created_ms = now_ms
        self.last_attempt_ms = now_ms
        self.last_append_ms = now_ms
        self.drained_ms = 0.0
        self.attempts = 0
        self.max_record_size = 0
        self.codec = codec
        self.level = level
        self.result = ProduceRequestResult(topic, partition)
        self.final_state: str | None = None
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.is_transactional = False
        self.needs_stamp = False
        self.sequence_reset = False
        self.pool = pool
        self.reserved = reserved  # budget taken from the pool without a pooled buffer
        self.in_flight = False
        self.release_pending = False
        self.leader_epoch = -1
        self.split_count = 0
        self.last_record_size = 0
        self.base_ts = -1
        self.max_ts = -1
        if prebuilt is not None:
            self.prebuilt = True
            self.buffer = None
            self.mv = None
            self.payload = memoryview(prebuilt)
            self.pos = self.capacity = len(prebuilt)
            self.record_count = prebuilt_count
            self.full = True
        else:
            self.prebuilt = False
            self.buffer = buffer
            self.mv = memoryview(buffer)  # type: ignore[arg-type]
            self.payload = None
            self.pos = RECORD_BATCH_OVERHEAD
            self.capacity = len(buffer)  # type: ignore[arg-type]
            self.record_count = 0
            self.full = False

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.topic}-{self.partition}, records={self.record_count}, "
                f"seq={self.base_sequence}, attempts={self.attempts}, state={self.final_state})")

    # -- appending (user threads, under the queue lock) ----------------------------------

    def try_append(self, timestamp: int, key: Any, value: Any, headers: Any,
                   on_delivery: Callable | None, now_ms: float) -> FutureRecordMetadata | None:
        """Append one record; None (and the batch marked full) when it does not fit."""
        if self.full:
            return None
        count = self.record_count
        if count == 0:
            self.base_ts = timestamp
        d = timestamp - self.base_ts
        rec = None
        if key is None and not headers and value is not None and 0 <= d < _SMALL and count < _SMALL:
            n = len(value)  # the hot case: keyless, no headers, small deltas
            if n < _SMALL - 64:
                L = _LEN
                V = _VARINT
                body = 3 + L[d] + L[count] + L[n] + n
                rec = b"".join((V[body], b"\x00", V[d], V[count], b"\x01", V[n], value, b"\x00"))
        if rec is None:
            rec = encode_one(count, d, key, value, headers)
        n = len(rec)
        pos = self.pos
        end = pos + n
        if end > self.capacity:
            self.full = True
            if count == 0:
                self.base_ts = -1
            return None
        self.mv[pos:end] = rec  # type: ignore[index]
        self.pos = end
        self.record_count = count + 1
        if timestamp > self.max_ts:
            self.max_ts = timestamp
        self.last_record_size = n
        if on_delivery is not None:
            self.result.callbacks.append((count, timestamp, on_delivery, None))
        return _tuple_new(FutureRecordMetadata, (self.result, count, timestamp))

    def is_full(self) -> bool:
        return self.full or self.pos >= self.capacity

    def close_for_appends(self) -> None:
        self.full = True

    @property
    def estimated_size(self) -> int:
        return self.pos

    # -- building (Sender thread) --------------------------------------------------------

    def close(self) -> memoryview:
        """The batch bytes with the current producer state (built once, stamped again
        after a sequence reset)."""
        self.full = True
        if self.payload is not None:
            if self.needs_stamp:
                stamp_producer_fields(self.payload, self.producer_id, self.producer_epoch,
                                      self.base_sequence, self.is_transactional)
                self.needs_stamp = False
            return self.payload
        count = self.record_count
        buf = self.buffer
        attributes = self.codec
        if self.is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self.codec:
            compressed = codecs.compress(self.codec, memoryview(buf)[RECORD_BATCH_OVERHEAD:self.pos],
                                         self.level)
            size = RECORD_BATCH_OVERHEAD + len(compressed)
            if size <= len(buf):  # type: ignore[arg-type]
                data = buf  # compressed records replace the raw ones in the same buffer
            else:
                data = bytearray(size)
            data[RECORD_BATCH_OVERHEAD:size] = compressed  # type: ignore[index]
        else:
            data = buf
            size = self.pos
        HEADER.pack_into(data, 0, 0, size - LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH,
                         CURRENT_MAGIC, 0, attributes, count - 1, self.base_ts, self.max_ts,
                         self.producer_id, self.producer_epoch, self.base_sequence, count)
        _UINT32.pack_into(data, CRC_OFFSET, crc32c(memoryview(data)[ATTRIBUTES_OFFSET:size]))
        self.payload = memoryview(data)[:size]
        self.needs_stamp = False
        return self.payload

    @property
    def size_in_bytes(self) -> int:
        return self.payload.nbytes if self.payload is not None else self.pos

    # -- producer state ------------------------------------------------------------------

    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int,
                           is_transactional: bool = False) -> None:
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        if self.payload is not None:
            self.needs_stamp = True

    def reset_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        """New sequence after an epoch bump or a failed earlier batch; stamped at drain."""
        self.sequence_reset = True
        self.set_producer_state(producer_id, epoch, base_sequence, self.is_transactional)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.record_count - 1) % SEQUENCE_MODULUS

    # -- timing --------------------------------------------------------------------------

    def waited_time_ms(self, now_ms: float) -> float:
        return now_ms - (self.last_attempt_ms if self.attempts else self.created_ms)

    def has_reached_delivery_timeout(self, delivery_timeout_ms: float, now_ms: float) -> bool:
        return delivery_timeout_ms <= now_ms - self.created_ms

    def reenqueued(self, now_ms: float) -> None:
        self.attempts += 1
        self.last_attempt_ms = now_ms
        self.last_append_ms = now_ms

    def drained(self, now_ms: float) -> None:
        self.drained_ms = max(self.drained_ms, now_ms)

    @property
    def in_retry(self) -> bool:
        return self.attempts > 0

    def is_done(self) -> bool:
        return self.final_state is not None

    # -- completion ----------------------------------------------------------------------

    def complete(self, base_offset: int, log_append_time: int) -> bool:
        """Success; returns True when this call decided the final state."""
        return self._done(base_offset, log_append_time, None, SUCCEEDED)

    def fail(self, error: BaseException) -> bool:
        return self._done(-1, -1, error, FAILED)

    def abort(self, error: BaseException) -> bool:
        self.full = True
        return self._done(-1, -1, error, ABORTED)

    def _done(self, base_offset: int, log_append_time: int, error: BaseException | None,
              state: str) -> bool:
        current = self.final_state
        if current is not None:
            if current == SUCCEEDED:
                raise KafkaError(f"batch {self} already SUCCEEDED, cannot become {state}")
            if state == SUCCEEDED:
                log.debug("late success of %r after it was %s", self, current)
            return False
        self.final_state = state
        r = self.result
        with r.lock:
            r.base_offset = base_offset
            r.log_append_time = log_append_time
            r.error = error
            r.done = True
        r._set()
        if r.callbacks:
            r.fire_callbacks()
        if r.listeners:
            for listener in r.listeners:
                try:
                    listener.batch_done(r)
                except Exception:
                    log.exception("error in a batch listener")
        return True

    # -- buffer lifetime (I13) ------------------------------------------------------------

    def release_buffer(self) -> None:
        """Give the buffer (or reserved budget) back to the pool; only when no request
        holding the bytes is in flight."""
        if self.in_flight:
            self.release_pending = True
            return
        pool = self.pool
        self.pool = None
        self.release_pending = False
        if pool is None:
            return
        buf = self.buffer
        self.buffer = None
        self.mv = None
        self.payload = None if self.final_state is not None else self.payload
        if buf is not None:
            pool.deallocate(buf)
        if self.reserved:
            pool.deallocate(None, self.reserved)
            self.reserved = 0

    # -- splitting -----------------------------------------------------------------------

    def split(self, max_size: int, now_ms: float) -> list[ProducerBatch]:
        """Pieces of at most ``max_size`` bytes (one record at least) holding this batch's
        records in order; each record's future and callbacks follow it (``remap``);
        sequences continue from ours."""
        data = self.close()
        _, records = decode_batch(data, verify_crc=False)
        pieces: list[ProducerBatch] = []
        remap: list[tuple[ProduceRequestResult, int]] = []
        cur: ProducerBatch | None = None
        for rec in records:
            fut = None
            if cur is not None:
                fut = cur.try_append(rec.timestamp, rec.key, rec.value, rec.headers, None, now_ms)
            if fut is None:
                size = estimate_record_size(rec.key, rec.value, rec.headers) + RECORD_BATCH_OVERHEAD
                cur = ProducerBatch(self.topic, self.partition, bytearray(max(max_size, size)),
                                    self.created_ms, codec=self.codec, level=self.level)
                cur.attempts = self.attempts
                cur.last_attempt_ms = self.last_attempt_ms
                pieces.append(cur)
                fut = cur.try_append(rec.timestamp, rec.key, rec.value, rec.headers, None, now_ms)
            assert fut is not None
            remap.append((cur.result, fut[1]))
        for p in pieces:
            p.full = True
            p.result.listeners = list(self.result.listeners) if self.result.listeners else None
        if self.base_sequence != NO_SEQUENCE:
            seq = self.base_sequence
            for p in pieces:
                p.set_producer_state(self.producer_id, self.producer_epoch, seq,
                                     self.is_transactional)
                seq = (seq + p.record_count) % SEQUENCE_MODULUS
        old = self.result
        with old.lock:
            for index, ts, fn, fut in old.callbacks:
                r, i = remap[index]
                r.callbacks.append((i, ts, fn, fut))
            old.callbacks = []
            old.superseded = [p.result for p in pieces]
            old.remap = remap
        if old.listeners:
            for listener in old.listeners:
                listener.batch_split(old, [(p.result, p.record_count) for p in pieces])
        old._set()  # waiters move on to the pieces
        self.final_state = ABORTED  # this batch object is finished; its records live on
        self.split_count = len(pieces)
        return pieces
