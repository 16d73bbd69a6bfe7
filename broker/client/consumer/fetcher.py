"""RangeFetcher: the records of one offset range of one partition, fetched from its leader
and decoded column-wise into Arrow (the network read mode of the Spark data source).

Owns the fetch loop of a bounded read, as the part of Kafka's ``Fetcher`` /
``CompletedFetch`` that a range reader needs, and the ``DataLoss`` reports:

* ``RangeFetcher(client_or_config, ...).fetch(topic, partition, start, end)`` yields
  ``pyarrow.RecordBatch``es of ``broker.record.columnar.arrow_schema(include_headers)``
  holding exactly the records with ``start <= offset < end``, in offset order, without
  control records (and, under read_committed, without aborted transactions).
  ``fetch_arrow(...)`` does the same with a fetcher of its own, closed at the end.
* Fetch v4-v11 (the highest both sides support), one partition per request, without
  fetch sessions (session id 0, epoch -1: a full request each time), to the leader, or
  to the follower the leader names as preferred read replica (KIP-392, v11, when
  ``client.rack`` is set); any error from that follower sends the next fetch back to
  the leader.
* Pipelining: when a response arrives, its batch headers are walked (no decoding) to find
  the offset after its last complete batch; the next Fetch, from that offset, is sent
  before the response is decoded, so the broker reads and sends while this thread
  decodes. At most two responses are held: the one being decoded and the one in flight
  (each at most ``fetch.max.bytes``; for one partition ``max.partition.fetch.bytes``,
  or one whole batch if that is larger, KIP-74).
* Advancing: the next fetch offset is the offset after the last complete entry of the
  response (control batches, aborted batches and compacted gaps included), never "last
  record + 1". A trailing partial batch (a response cut by the size limits) is left for
  the next fetch. A batch that starts at or past ``end`` ends the read.
* read_committed (isolation level 1): the broker answers up to the last stable offset
  with the aborted transactions (producer id, first offset) overlapping the response.
  Each one becomes the range (pid, first offset, offset of that producer's next ABORT
  marker in the response, or the end of the data when the marker is further on), which
  ``iter_arrow`` skips: exactly Kafka's consumer rule (a producer's transactional batches
  are dropped from the first offset of an aborted transaction until its ABORT marker).
* Errors: NOT_LEADER_OR_FOLLOWER and the other stale-metadata codes, lost connections
  and request timeouts refresh the metadata and retry from the same offset after an
  exponential backoff (the response in hand is decoded first, so no record is skipped
  or repeated). Other error codes raise ``KafkaError.from_code`` naming the partition;
  malformed framing (a length or magic that leaves no next batch) raises
  ``broker.record.errors.DecodeError`` subclasses.
* Bad batches (a batch already in the log whose CRC, records or compressed payload are
  bad, or which inflates past ``max_decompressed``): ``CorruptBatchError`` naming the
  topic-partition, the batch's base and last offsets and what is wrong, e.g. ``Record
  batch of t-0 at offsets [5, 9] (byte position 73) is invalid: record 3: key length -7
  out of range``. The rows of the batches before it are yielded first. With
  ``on_data_loss`` the batch is reported as a ``DataLoss`` of its offsets inside the
  range instead, and the read goes on with the next batch; either way the next fetch
  starts after it (the offsets come from the batch headers, never from decoded records),
  so a bad batch is never fetched twice. No progress for
  ``default.api.timeout.ms`` (or ``timeout_ms``) raises ``KafkaTimeoutError``.
* Data loss: offsets of the range that no longer exist are reported once each, as a
  ``DataLoss(topic, partition, start, end, reason)``: to ``on_data_loss`` when one is
  given (the read then goes on with what remains: Spark's ``failOnDataLoss=false``), else
  raised as an exception naming the partition, the range and the lost offsets:

  - OFFSET_OUT_OF_RANGE below the log start offset (retention, DeleteRecords):
    ``OffsetOutOfRangeError``; the read resumes at the log start offset;
  - OFFSET_OUT_OF_RANGE past the log end, or the log ending (high watermark) before
    ``end`` on ``DATA_LOSS_CONFIRMATIONS`` consecutive empty answers (a truncated log; a
    new leader's high watermark may lag for a moment, hence the confirmations):
    ``OffsetOutOfRangeError`` / ``DataLossError``; the read stops there;
  - the topic or partition gone for ``UNKNOWN_TOPIC_GRACE_MS``: ``DataLossError``.

  Offsets missing inside the range because of compaction or transaction markers are not
  data loss. ``fetcher.stats`` (``FetchStats``) tells what a read did: fetches, bytes,
  rows, the last known watermarks, the losses and ``next_offset`` (where it stopped).

A consumer of the generator that pauses for longer than ``request.timeout.ms`` between
two batches may find the pipelined request timed out (the network is only driven while
the generator runs): it is sent again, at the cost of one round trip.

Bounded memory: two responses as above, plus the decoder's unit (about twice
``max_bytes_per_batch`` of record bytes) and the batch being consumed.

Thread-safety: a RangeFetcher (and its client) belongs to one thread. Abandoning a
``fetch`` generator half way is safe: its pipelined request is left to complete and be
dropped, and the fetcher may start another range.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from broker.client.errors import (
    DataLossError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    OffsetOutOfRangeError,
)
from broker.client.network import now_ms
from broker.protocol import ApiKey, ErrorCode, request_schema
from broker.record.batch import (
    CONTROL_FLAG_MASK,
    CURRENT_MAGIC,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    H_ATTRIBUTES,
    H_LAST_OFFSET_DELTA,
    H_PRODUCER_ID,
    HEADER,
    LOG_ENTRY_PREFIX,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    RECORD_BATCH_OVERHEAD,
)
from broker.record.columnar import (
    DEFAULT_MAX_BYTES_PER_BATCH,
    DEFAULT_MAX_ROWS_PER_BATCH,
    DecodeProgress,
    iter_arrow,
)
from broker.record.control import is_abort_marker
from broker.record.errors import CorruptBatchError, CorruptRecordError, UnsupportedMagicError
from broker.record.limits import INT64_MAX

from .client import ConsumerNetworkClient
from .config import ConsumerConfig
from .offsets import (
    EARLIEST,
    LATEST,
    RETRIABLE_PARTITION_ERRORS,
    UNKNOWN_TOPIC_GRACE_MS,
    TopicPartition,
    _isolation,
    list_offsets,
)

FETCH_MIN_VERSION = 4  # RecordBatch v2, isolation level, LSO and aborted transactions
FETCH_MAX_VERSION = 11  # v12+ are flexible and v13+ name topics by id
READ_COMMITTED = 1
# Consecutive empty answers with the high watermark at or below the fetch offset (and the
# range not done) before the missing tail counts as lost.
DATA_LOSS_CONFIRMATIONS = 3
# OFFSET_OUT_OF_RANGE answers in a row for an offset that ListOffsets says is in range
# (retention racing with the lookup) before giving up.
MAX_OUT_OF_RANGE_RETRIES = 5

_unpack_header = HEADER.unpack_from  # a raw tuple, indexed with batch.H_*


class DataLoss(NamedTuple):
    """Offsets ``[start, end)`` of ``topic``-``partition`` that a read could not return."""

    topic: str
    partition: int
    start: int
    end: int
    reason: str


@dataclass
class FetchStats:
    """What one ``RangeFetcher.fetch`` did (updated as it runs)."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    next_offset: int  # the offset after the last one read (end_offset once done)
    fetches: int = 0  # responses with data or an answer for the partition
    bytes: int = 0  # record bytes received
    records: int = 0  # rows yielded
    batches: int = 0  # RecordBatches yielded
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    lost: list[DataLoss] = field(default_factory=list)


class _Scan(NamedTuple):
    next_offset: int | None  # after the last complete entry below end (None: none)
    reached_end: bool  # a complete batch starting at or past end was seen
    aborts: list[tuple[int, int]]  # (producer id, offset) of ABORT markers of watched pids


def scan_entries(buf: memoryview, end_offset: int, watched_pids: set[int] | None = None) -> _Scan:
    """Walk the complete log entries of a fetch response without decoding records."""
    pos, n = 0, len(buf)
    next_offset = None
    reached_end = False
    aborts: list[tuple[int, int]] = []
    while n - pos > MAGIC_OFFSET:
        base, length = LOG_ENTRY_PREFIX.unpack_from(buf, pos)
        size = length + LOG_OVERHEAD
        if length < 0:
            raise CorruptRecordError(f"entry length {length} at position {pos}")
        if size > n - pos:
            break
        magic = buf[pos + MAGIC_OFFSET]
        if magic == CURRENT_MAGIC:
            if size < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(f"batchLength {length} at position {pos} is smaller "
                                         "than the header")
            if base >= end_offset:
                reached_end = True
                break
            header = _unpack_header(buf, pos)
            if watched_pids and header[H_ATTRIBUTES] & CONTROL_FLAG_MASK \
                    and header[H_PRODUCER_ID] in watched_pids and is_abort_marker(buf, pos):
                aborts.append((header[H_PRODUCER_ID], base))
            next_offset = base + header[H_LAST_OFFSET_DELTA] + 1
        elif magic == 0 or magic == 1:
            next_offset = base + 1  # a legacy entry's offset is its (last inner) offset
        else:
            raise UnsupportedMagicError(f"magic {magic} at position {pos}")
        pos += size
    return _Scan(next_offset, reached_end, aborts)


def aborted_ranges(aborted_transactions: Any, aborts: list[tuple[int, int]]
                   ) -> list[tuple[int, int, int]]:
    """(producer id, first offset, last offset) per aborted transaction: from its first
    offset to its producer's next ABORT marker (or past the data when not in it)."""
    markers: dict[int, list[int]] = {}
    for pid, offset in aborts:
        markers.setdefault(pid, []).append(offset)
    out = []
    for txn in aborted_transactions or ():
        pid, first = txn.producer_id, txn.first_offset
        last = min((m for m in markers.get(pid, ()) if m >= first), default=INT64_MAX)
        out.append((pid, first, last))
    return out


class _Pending(NamedTuple):
    future: Any
    node: int
    offset: int


class RangeFetcher:
    """Reads offset ranges of partitions (see the module docstring).

    ``client_or_config``: a ``ConsumerNetworkClient`` (shared, left open by ``close``) or
    a config mapping / ``ConsumerConfig`` with Kafka's consumer keys (a client of the
    fetcher's own). The keyword arguments override the matching config keys
    (``request_timeout_ms`` and ``client_id`` only apply to a client of its own).
    """

    _pipelining = True  # False only to measure what pipelining brings

    def __init__(self, client_or_config: Any, *, isolation_level: str | int | None = None,
                 include_headers: bool = True,
                 max_rows_per_batch: int = DEFAULT_MAX_ROWS_PER_BATCH,
                 max_bytes_per_batch: int = DEFAULT_MAX_BYTES_PER_BATCH,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                 on_data_loss: Callable[[DataLoss], None] | None = None,
                 fetch_max_bytes: int | None = None,
                 max_partition_fetch_bytes: int | None = None,
                 fetch_max_wait_ms: int | None = None, fetch_min_bytes: int | None = None,
                 request_timeout_ms: int | None = None, client_id: str | None = None,
                 timeout_ms: float | None = None) -> None:
        overrides = {"fetch.max.bytes": fetch_max_bytes,
                     "max.partition.fetch.bytes": max_partition_fetch_bytes,
                     "fetch.max.wait.ms": fetch_max_wait_ms, "fetch.min.bytes": fetch_min_bytes}
        if isinstance(client_or_config, ConsumerNetworkClient):
            self.client = client_or_config
            self._owns_client = False
            cfg = ConsumerConfig(client_or_config.config,
                                 **{k.replace(".", "_"): v for k, v in overrides.items()})
        else:
            overrides.update({"request.timeout.ms": request_timeout_ms, "client.id": client_id})
            base = client_or_config if isinstance(client_or_config, ConsumerConfig) \
                else ConsumerConfig(client_or_config)
            cfg = ConsumerConfig(base, **{k.replace(".", "_"): v for k, v in overrides.items()})
            self.client = ConsumerNetworkClient(cfg)
            self._owns_client = True
        self.config = cfg
        self.isolation = _isolation(self.client, isolation_level if isolation_level is not None
                                    else cfg["isolation.level"])
        self.include_headers = include_headers
        self.max_rows_per_batch = max_rows_per_batch
        self.max_bytes_per_batch = max_bytes_per_batch
        self.max_decompressed = max_decompressed
        self.verify_crc: bool = cfg["check.crcs"]
        self.on_data_loss = on_data_loss
        self.timeout_ms = timeout_ms
        self.fetch_max_bytes: int = cfg["fetch.max.bytes"]
        self.partition_max_bytes: int = cfg["max.partition.fetch.bytes"]
        self.max_wait_ms: int = cfg["fetch.max.wait.ms"]
        self.min_bytes: int = cfg["fetch.min.bytes"]
        self.rack_id: str = cfg["client.rack"]
        self.stats: FetchStats | None = None
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> RangeFetcher:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections of a client of the fetcher's own."""
        if not self._closed:
            self._closed = True
            if self._owns_client:
                self.client.close()

    # -- the read ------------------------------------------------------------------------

    def fetch(self, topic: str, partition: int, start_offset: int, end_offset: int
              ) -> Iterator[Any]:
        """RecordBatches of the records ``start_offset <= offset < end_offset`` of
        ``topic``-``partition`` (a generator; its return value is the ``FetchStats``,
        also in ``self.stats``)."""
        if start_offset < 0 or end_offset < start_offset:
            raise ValueError(f"invalid offset range [{start_offset}, {end_offset}) of "
                             f"{topic}-{partition}")
        if self._closed:
            raise KafkaError("the fetcher is closed")
        stats = self.stats = FetchStats(topic, partition, start_offset, end_offset,
                                        next_offset=start_offset)
        return self._run(TopicPartition(topic, partition), stats)

    def _run(self, tp: TopicPartition, stats: FetchStats) -> Iterator[Any]:
        client = self.client
        md = client.metadata
        md.add_topic(tp.topic)
        offset, end = stats.start_offset, stats.end_offset
        committed = self.isolation == READ_COMMITTED
        deadline = client.deadline(self.timeout_ms)
        pending: _Pending | None = None
        attempt = 0
        empty_at_hw = 0
        out_of_range = 0
        unknown_since: float | None = None
        refreshed = False
        replica: int | None = None  # a preferred read replica named by the leader
        while offset < end:
            # -- one response: send (unless pipelined) and wait -----------------------------
            problem: BaseException | None = None
            unknown = False
            pd = None
            if pending is None:
                cluster = md.fetch()
                leader = cluster.leader_for(tp.topic, tp.partition)
                if leader < 0 and not refreshed:
                    client.await_metadata_update(deadline)
                    refreshed = True
                    continue
                if leader < 0:
                    err = md.fatal_error(tp.topic)
                    if err is not None:
                        raise err
                    unknown = tp.partition >= cluster.partition_count(tp.topic)
                    problem = KafkaError.from_code(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if unknown
                        else ErrorCode.LEADER_NOT_AVAILABLE, f"{tp}")
                else:
                    node = replica if replica is not None else leader
                    if client.await_ready(node, deadline):
                        pending = self._send(node, tp, offset)
                    else:
                        problem = NetworkError(f"cannot connect to node {node} for {tp}")
            if pending is not None:
                resp = client.wait(pending.future, deadline)
                pending = None
                if replica is not None and (resp.error is not None or resp.body.error_code or (
                        (p := _partition_data(resp.body, tp)) is not None and p.error_code)):
                    # A follower that fails us (lagging, out of range, gone): back to the
                    # leader, without counting this answer as data loss.
                    replica = None
                    continue
                if resp.error is not None:
                    problem = resp.error
                elif resp.body.error_code:
                    code = resp.body.error_code
                    if ErrorCode.lookup(code).retriable:
                        problem = KafkaError.from_code(code, f"Fetch of {tp}")
                    else:
                        raise KafkaError.from_code(code, f"Fetch of {tp} at offset {offset}")
                else:
                    pd = _partition_data(resp.body, tp)
                    if pd is None:
                        problem = KafkaError(f"the Fetch response lacks {tp}")
                    elif pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        out_of_range += 1
                        offset = self._out_of_range(tp, stats, offset, pd, out_of_range, deadline)
                        stats.next_offset = offset
                        deadline = client.deadline(self.timeout_ms)
                        continue
                    elif pd.error_code in RETRIABLE_PARTITION_ERRORS:
                        unknown = pd.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        problem = KafkaError.from_code(pd.error_code, f"Fetch of {tp}")
                    elif pd.error_code:
                        raise KafkaError.from_code(pd.error_code,
                                                   f"Fetch of {tp} at offset {offset}")
            if problem is not None:
                replica = None
                if unknown:
                    now = now_ms()
                    unknown_since = unknown_since if unknown_since is not None else now
                    if now - unknown_since >= UNKNOWN_TOPIC_GRACE_MS:
                        self._data_loss(stats, DataLoss(
                            tp.topic, tp.partition, offset, end,
                            f"the topic or partition {tp} no longer exists"), None)
                        offset = end
                        break
                else:
                    unknown_since = None
                md.request_update()
                refreshed = False
                if now_ms() >= deadline:
                    raise client.deadline_error(f"Fetch of {tp} at offset {offset} made no progress "
                                                f"before the deadline (last error: {problem})"
                                                ) from problem
                client.sleep(client.backoff_ms(attempt), deadline)
                attempt += 1
                continue
            # -- a good answer ---------------------------------------------------------
            preferred = getattr(pd, "preferred_read_replica", -1)
            if preferred >= 0 and preferred != resp.request.node_id \
                    and md.node(preferred) is not None:
                replica = preferred  # KIP-392: the leader sends us to a closer follower
                if not (pd.records is not None and len(pd.records)):
                    continue
            attempt = 0
            unknown_since = None
            out_of_range = 0
            stats.fetches += 1
            stats.high_watermark = pd.high_watermark
            stats.last_stable_offset = pd.last_stable_offset
            stats.log_start_offset = pd.log_start_offset
            records = pd.records if pd.records is not None else memoryview(b"")
            stats.bytes += len(records)
            watched = ({t.producer_id for t in pd.aborted_transactions}
                       if committed and pd.aborted_transactions else None)
            scan = scan_entries(records, end, watched)
            if scan.next_offset is None:
                if scan.reached_end:
                    offset = end  # the range's remaining offsets were compacted away
                    break
                if len(records):
                    raise KafkaError(f"Fetch of {tp} at offset {offset} returned "
                                     f"{len(records)} bytes without a complete batch; "
                                     "raise max.partition.fetch.bytes / fetch.max.bytes")
                hw = pd.high_watermark
                if 0 <= hw <= offset:
                    empty_at_hw += 1
                    if empty_at_hw >= DATA_LOSS_CONFIRMATIONS:
                        self._data_loss(stats, DataLoss(
                            tp.topic, tp.partition, offset, end,
                            f"the log of {tp} ends at offset {hw} (its high watermark), "
                            f"before the end of the range"), None)
                        offset = end
                        break
                    md.request_update()
                if now_ms() >= deadline:
                    raise KafkaTimeoutError(
                        f"no records of {tp} at offset {offset} before the deadline (high "
                        f"watermark {hw}, last stable offset {pd.last_stable_offset})")
                if resp.latency_ms < self.max_wait_ms / 2:
                    # The broker did not long-poll (fetch.min.bytes 0, a short wait):
                    # do not spin.
                    client.sleep(client.retry_backoff_ms, deadline)
                continue
            empty_at_hw = 0
            next_offset = scan.next_offset
            if next_offset <= offset:
                raise KafkaError(f"Fetch of {tp} at offset {offset} answered with entries "
                                 f"ending at {next_offset}: no progress")
            if scan.reached_end:
                next_offset = max(next_offset, end)
            deadline = client.deadline(self.timeout_ms)
            if (next_offset < end and self._pipelining
                    and client.client.is_ready(resp.request.node_id, now_ms())):
                # Pipelining: the next request goes out before this response is decoded.
                pending = self._send(resp.request.node_id, tp, next_offset)
            aborted = aborted_ranges(pd.aborted_transactions, scan.aborts) if committed else None
            progress = DecodeProgress()
            try:
                for rb in iter_arrow(records, offset, end,
                                     max_rows_per_batch=self.max_rows_per_batch,
                                     max_bytes_per_batch=self.max_bytes_per_batch,
                                     max_decompressed=self.max_decompressed,
                                     aborted=aborted, verify_crc=self.verify_crc,
                                     include_headers=self.include_headers, progress=progress,
                                     on_bad_batch=lambda e, at=offset: self._bad_batch(stats, e, at)):
                    stats.records += rb.num_rows
                    stats.batches += 1
                    yield rb
            finally:
                del records, pd, resp
            offset = next_offset
            stats.next_offset = min(offset, end)
        stats.next_offset = min(max(offset, stats.next_offset), end)
        return stats

    # -- helpers -------------------------------------------------------------------------

    def _send(self, node: int, tp: TopicPartition, offset: int) -> _Pending:
        isolation = self.isolation
        max_wait, min_bytes = self.max_wait_ms, self.min_bytes
        max_bytes, part_bytes, rack = self.fetch_max_bytes, self.partition_max_bytes, self.rack_id

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.FETCH, version)
            topic_cls = schema.structs["FetchTopic"]
            part_cls = schema.structs["FetchPartition"]
            return schema.cls(
                replica_id=-1, max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
                isolation_level=isolation, session_id=0, session_epoch=-1,
                topics=[topic_cls(topic=tp.topic, partitions=[part_cls(
                    partition=tp.partition, current_leader_epoch=-1, fetch_offset=offset,
                    log_start_offset=-1, partition_max_bytes=part_bytes)])],
                forgotten_topics_data=[], rack_id=rack)

        future = self.client.send(node, ApiKey.FETCH, build, our_min=FETCH_MIN_VERSION,
                                  our_max=FETCH_MAX_VERSION)
        return _Pending(future, node, offset)

    def _data_loss(self, stats: FetchStats, loss: DataLoss,
                   error: DataLossError | None) -> None:
        """Report ``loss``: to ``on_data_loss``, else raise ``error`` (or a DataLossError)."""
        stats.lost.append(loss)
        if self.on_data_loss is not None:
            self.on_data_loss(loss)
            return
        if error is None:
            error = DataLossError(
                f"offsets [{loss.start}, {loss.end}) of {loss.topic}-{loss.partition} "
                f"(range [{stats.start_offset}, {stats.end_offset})) are lost: {loss.reason}",
                topic=loss.topic, partition=loss.partition, start_offset=stats.start_offset,
                end_offset=stats.end_offset, lost_start=loss.start, lost_end=loss.end)
        raise error

    def _bad_batch(self, stats: FetchStats, error: CorruptBatchError, offset: int) -> None:
        """A batch of the response that cannot be read: raised naming the partition, or,
        with ``on_data_loss``, reported as the loss of its offsets inside the range."""
        error = error.with_partition(stats.topic, stats.partition)
        if self.on_data_loss is None:
            raise error
        start = max(error.base_offset, offset, stats.start_offset)
        end = min(error.last_offset + 1, stats.end_offset)
        if start < end:
            self._data_loss(stats, DataLoss(stats.topic, stats.partition, start, end,
                                            str(error)), None)

    def _out_of_range(self, tp: TopicPartition, stats: FetchStats, offset: int, pd: Any,
                      attempts: int, deadline: float) -> int:
        """Report the offsets lost to an OFFSET_OUT_OF_RANGE answer; the offset to go on
        from (``end`` when nothing is left)."""
        end = stats.end_offset
        log_start, hw = pd.log_start_offset, pd.high_watermark
        if log_start < 0 or hw < 0:  # Kafka leaves them -1 on errors: ask
            timeout = max(deadline - now_ms(), 0.0)
            first = list_offsets(self.client, {tp: EARLIEST}, timeout_ms=timeout)[tp]
            last = list_offsets(self.client, {tp: LATEST}, isolation_level=0,
                                timeout_ms=timeout)[tp]
            log_start = first.offset if first is not None else -1
            hw = last.offset if last is not None else -1
        stats.log_start_offset, stats.high_watermark = log_start, hw
        if offset < log_start:
            lost_end = min(log_start, end)
            reason = f"the log of {tp} now starts at offset {log_start}"
        elif offset > hw >= 0:
            lost_end = end
            reason = f"the log of {tp} now ends at offset {hw}"
        else:
            if attempts >= MAX_OUT_OF_RANGE_RETRIES:
                raise KafkaError.from_code(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"Fetch of {tp} at offset {offset}, inside [{log_start}, {hw}]")
            return offset  # the bounds moved since the answer: fetch again
        loss = DataLoss(tp.topic, tp.partition, offset, lost_end, reason)
        error = OffsetOutOfRangeError(
            f"OFFSET_OUT_OF_RANGE fetching {tp} at offset {offset} (range "
            f"[{stats.start_offset}, {end})): {reason}; offsets [{offset}, {lost_end}) "
            "are lost", topic=tp.topic, partition=tp.partition,
            start_offset=stats.start_offset, end_offset=end, lost_start=offset,
            lost_end=lost_end, fetch_offset=offset, log_start_offset=log_start,
            high_watermark=hw)
        self._data_loss(stats, loss, error)
        return lost_end


def _partition_data(body: Any, tp: TopicPartition) -> Any:
    for t in body.responses:
        if t.topic == tp.topic:
            for p in t.partitions:
                if p.partition_index == tp.partition:
                    return p
    return None


def fetch_arrow(client_or_config: Any, topic: str, partition: int, start_offset: int,
                end_offset: int, *, isolation_level: str | int | None = None,
                include_headers: bool = True,
                max_rows_per_batch: int = DEFAULT_MAX_ROWS_PER_BATCH,
                max_bytes_per_batch: int = DEFAULT_MAX_BYTES_PER_BATCH,
                on_data_loss: Callable[[DataLoss], None] | None = None,
                fetch_max_bytes: int | None = None, max_partition_fetch_bytes: int | None = None,
                fetch_max_wait_ms: int | None = None, fetch_min_bytes: int | None = None,
                request_timeout_ms: int | None = None, client_id: str | None = None,
                timeout_ms: float | None = None) -> Iterator[Any]:
    """``RangeFetcher(...).fetch(...)`` with a fetcher of its own, closed when the
    generator ends or is closed; the generator's return value is the ``FetchStats``."""
    fetcher = RangeFetcher(
        client_or_config, isolation_level=isolation_level, include_headers=include_headers,
        max_rows_per_batch=max_rows_per_batch, max_bytes_per_batch=max_bytes_per_batch,
        on_data_loss=on_data_loss, fetch_max_bytes=fetch_max_bytes,
        max_partition_fetch_bytes=max_partition_fetch_bytes,
        fetch_max_wait_ms=fetch_max_wait_ms, fetch_min_bytes=fetch_min_bytes,
        request_timeout_ms=request_timeout_ms, client_id=client_id, timeout_ms=timeout_ms)
    try:
        return (yield from fetcher.fetch(topic, partition, start_offset, end_offset))
    finally:
        fetcher.close()


__all__ = ["DATA_LOSS_CONFIRMATIONS", "DataLoss", "FetchStats", "RangeFetcher",
           "aborted_ranges", "fetch_arrow", "scan_entries"]
