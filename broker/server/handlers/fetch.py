"""Fetch (key 1), v4-v11, and the waiters that long-polling fetches sleep on.

Wire behaviour (PROTOCOL.md 3.6):

* Every requested partition is answered, in request order and grouped as requested
  (kafka-python discards a full fetch response that lacks one). There are no fetch
  sessions: session_id is always 0 (a client then keeps sending full requests); a
  request naming a session id we never gave gets FETCH_SESSION_ID_NOT_FOUND (70).
* Reads are bounded by the isolation level: read_uncommitted (0) up to the high
  watermark, read_committed (1) up to the last stable offset, with the aborted
  transactions of the range listed (an empty list when there are none; null for
  read_uncommitted).
* Sizes (KIP-74): the response holds at most ``max_bytes`` of records and each partition
  at most ``partition_max_bytes``, except that the first partition with data always
  returns its first batch whole even when larger. Batches are returned whole from the
  one containing ``fetch_offset`` (clients skip the records below it); the last one may
  be cut by the limits, as in Kafka, but a partition whose only content would be a piece
  of one batch returns no records instead.
* Per partition: UNKNOWN_TOPIC_OR_PARTITION (3) for a missing topic or partition,
  OFFSET_OUT_OF_RANGE (1) below the log start offset or above the log end offset (at the
  end offset: no records, no error), KAFKA_STORAGE_ERROR (56) for an offline directory;
  high_watermark, last_stable_offset, log_start_offset and preferred_read_replica -1
  always set (-1 when unknown).
* Long polling: when fewer than ``min_bytes`` are available and no partition has an
  error, the request waits (blocking only its own connection, whose requests are
  processed in order anyway) until an append to one of its partitions brings enough
  data or ``max_wait_ms`` passes, then answers with what there is.
* Records are not copied: a slice of at least ``ZERO_COPY_MIN_BYTES`` is put in the
  response as the ``FileSlice`` itself, which the socket server sends with
  ``os.sendfile``; smaller ones are read with one ``pread``.

Tiered storage (KIP-405): an offset in [log start offset, local log start offset) lives
only in remote storage (``OffsetMovedToTieredStorageError``); the broker's remote log
manager reads it from the remote segment holding it (whole batches, at most the
partition's limit, the first batch whole when it is the response's first) and the answer
is ordinary records, for any client, as Kafka answers from remote storage. Such a read
returns records of that one remote segment; the client's next fetch continues.

Authorization (Kafka's, ``authz.py``): each topic needs READ, else its partitions are
answered TOPIC_AUTHORIZATION_FAILED (decided once per request, not per long-poll pass).

``PartitionWatchers``: each waiting fetch registers one ``threading.Event`` under each
of its partitions before it reads (so no append between the read and the wait is
missed); ``notify(tp)`` (called by Produce after every append) sets the events of that
partition. Lock-protected dict of sets; ``close()`` wakes every waiter at shutdown.

Thread-safety: handlers run concurrently on connection threads; the log reads are
lock-free (``UnifiedLog.read``); the watchers are guarded by their lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from broker.log.errors import LogOffsetOutOfRangeError
from broker.log.remote.errors import OffsetMovedToTieredStorageError
from broker.log.unified_log import HIGH_WATERMARK, TXN_COMMITTED
from broker.protocol import ErrorCode
from broker.protocol.messages.fetch import FETCH_RESPONSE
from broker.protocol.primitives import ZERO_COPY_MIN_BYTES
from broker.record.batch import LOG_OVERHEAD
from broker.record.limits import INT32_MAX
from broker.server.errors import error_code_for, log_failure
from broker.server.handlers import RequestContext, ServerState, throttling
from broker.server.handlers.authz import AclOperation, ResourceType, allowed_names

log = logging.getLogger(__name__)

FetchResponse = FETCH_RESPONSE.cls
TopicResponse = FETCH_RESPONSE.structs["FetchableTopicResponse"]
PartitionData = FETCH_RESPONSE.structs["PartitionData"]
AbortedTransaction = FETCH_RESPONSE.structs["AbortedTransaction"]

READ_COMMITTED = 1


class PartitionWatchers:
    """Wakes long-polling fetches when their partitions get data (see module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[tuple[str, int], set[threading.Event]] = {}
        self.closed = False

    def register(self, tps: Iterable[tuple[str, int]]) -> threading.Event:
        event = threading.Event()
        with self._lock:
            if self.closed:
                event.set()
            for tp in tps:
                self._waiters.setdefault(tp, set()).add(event)
        return event

    def unregister(self, tps: Iterable[tuple[str, int]], event: threading.Event) -> None:
        with self._lock:
            for tp in tps:
                events = self._waiters.get(tp)
                if events is not None:
                    events.discard(event)
                    if not events:
                        del self._waiters[tp]

    def notify(self, tp: tuple[str, int]) -> None:
        if tp not in self._waiters:  # the common case: nobody waits (racy read is fine:
            return                    # a waiter registers before it reads)
        with self._lock:
            events = self._waiters.get(tp)
            if events:
                for event in events:
                    event.set()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            for events in self._waiters.values():
                for event in events:
                    event.set()

    @property
    def waiting(self) -> int:
        with self._lock:
            return len({e for events in self._waiters.values() for e in events})


def _error_partition(index: int, code: int) -> Any:  # a generated struct (PartitionData)
    return PartitionData(partition_index=index, error_code=code, high_watermark=-1,
                         last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                         preferred_read_replica=-1, records=b"")


def _first_batch_cut(records, size: int) -> bool:
    """True when the first batch of a size-bounded read does not fit whole (Kafka would
    send the piece; clients drop it, so it only costs bandwidth)."""
    if size < LOG_OVERHEAD:
        return True
    fileno = getattr(records, "fileno", None)
    head = os.pread(fileno(), LOG_OVERHEAD, records.position) if fileno else records.read_bytes()[:LOG_OVERHEAD]
    return len(head) < LOG_OVERHEAD or LOG_OVERHEAD + int.from_bytes(head[8:12], "big", signed=True) > size


def _read_remote(state: ServerState, lg, offset: int, limit: int, min_one_message: bool, committed: bool):
    """Tiered storage: the offset lives only in remote storage; the remote log manager
    reads it (no manager: the offset is out of range, as for a replica in Kafka)."""
    rlm = state.log_manager.remote_log_manager if state.log_manager is not None else None
    if rlm is None:
        raise LogOffsetOutOfRangeError(f"offset {offset} of {lg.name} is in remote storage, which is not enabled")
    return rlm.read(lg, offset, limit, min_one_message, committed)


def _read_all(state: ServerState, body, version: int, max_bytes: int,
              denied: frozenset[str] = frozenset()) -> tuple[list, int, bool]:
    """One pass over every requested partition: (topic responses, bytes, any error);
    the topics in ``denied`` are answered TOPIC_AUTHORIZATION_FAILED."""
    isolation = TXN_COMMITTED if body.isolation_level == READ_COMMITTED else HIGH_WATERMARK
    committed = isolation == TXN_COMMITTED
    remaining = max_bytes
    min_one_message = version >= 3
    total = 0
    has_error = False
    topics = state.topics
    stats = state.stats
    out = []
    for t in body.topics:
        name = t.topic
        partitions = []
        for p in t.partitions:
            index = p.partition
            if denied and name in denied:
                partitions.append(_error_partition(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                has_error = True
                continue
            lg = topics.get_log(name, index) if topics.get(name) is not None else None
            if lg is None:
                partitions.append(_error_partition(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                has_error = True
                continue
            try:
                limit = max(min(p.partition_max_bytes, remaining), 0)
                try:
                    info = lg.read(p.fetch_offset, limit, isolation, min_one_message)
                except OffsetMovedToTieredStorageError:
                    info = _read_remote(state, lg, p.fetch_offset, limit, min_one_message, committed)
                hw = lg.high_watermark
                lso = lg.last_stable_offset
                start = lg.log_start_offset
            except Exception as exc:  # noqa: BLE001 - every error becomes a code
                code = error_code_for(exc)
                log_failure(log, exc, "fetch of %s-%d at %d failed", name, index, p.fetch_offset)
                part = _error_partition(index, code)
                if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    part.high_watermark = lg.high_watermark
                    part.last_stable_offset = lg.last_stable_offset
                    part.log_start_offset = lg.log_start_offset
                partitions.append(part)
                has_error = True
                continue
            records = info.records
            if isinstance(records, bytes):  # a remote read: whole batches, within the limit
                size = len(records)
                data = records
            else:
                size = records.size_in_bytes
                if size and not min_one_message and size >= limit and _first_batch_cut(records, size):
                    size = 0  # only a piece of one batch fits: useless to the client, send nothing
            if isinstance(records, bytes):
                pass
            elif size == 0:
                data = b""
            elif size >= ZERO_COPY_MIN_BYTES and hasattr(records, "fileno"):
                data = records  # a FileSlice: sent with os.sendfile by the socket server
            else:
                data = records.memoryview()
            if size:
                total += size
                remaining -= size
                min_one_message = False
                if stats is not None:
                    stats.record_bytes_out(name, size)
            aborted = None
            if committed:
                aborted = [AbortedTransaction(producer_id=pid, first_offset=first)
                           for pid, first in (info.aborted_transactions or ())]
            partitions.append(PartitionData(
                partition_index=index, error_code=ErrorCode.NONE, high_watermark=hw,
                last_stable_offset=lso, log_start_offset=start, aborted_transactions=aborted,
                preferred_read_replica=-1, records=data))
        out.append(TopicResponse(topic=name, partitions=partitions))
    return out, total, has_error


def handle(state: ServerState, ctx: RequestContext, body) -> object:
    version = ctx.api_version
    if version >= 7 and body.session_id != 0:
        return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                             session_id=0, responses=[])
    denied: frozenset[str] = frozenset()
    if state.authorizer is not None:
        names = {t.topic for t in body.topics}
        denied = frozenset(names - allowed_names(state, ctx, AclOperation.READ, ResourceType.TOPIC, names))
    max_wait_s = max(body.max_wait_ms, 0) / 1000.0
    min_bytes = body.min_bytes
    waiter = None
    tps: list[tuple[str, int]] = []
    if max_wait_s > 0 and min_bytes > 0:
        tps = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
        waiter = state.watchers.register(tps)
    # a fetch quota bounds the answer to what one quota window could ever allow
    max_bytes = throttling.fetch_max_bytes(state, ctx, body.max_bytes if version >= 3 else INT32_MAX)
    try:
        deadline = time.monotonic() + max_wait_s
        while True:
            responses, total, has_error = _read_all(state, body, version, max_bytes, denied)
            if waiter is None or total >= min_bytes or has_error or state.watchers.closed:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            waiter.wait(left)
            waiter.clear()
    finally:
        if waiter is not None:
            state.watchers.unregister(tps, waiter)
    throttle_ms = throttling.record_fetch(state, ctx, total)
    if throttle_ms > 0:  # Kafka's throttled response: no data, the client backs off
        return FetchResponse(throttle_time_ms=throttle_ms, error_code=ErrorCode.NONE, session_id=0, responses=[])
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=responses)


def error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return FetchResponse(
        throttle_time_ms=0, error_code=code, session_id=0,
        responses=[TopicResponse(topic=t.topic, partitions=[_error_partition(p.partition, code)
                                                           for p in t.partitions])
                   for t in body.topics])
