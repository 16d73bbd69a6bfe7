"""PartitionPoller: follow assigned partitions from given offsets, record by record, as the
fetch half of Kafka's ``KafkaConsumer.poll()`` with manual assignment (``assign`` +
``seek``; no group membership). The console consumer (``kafkalog consume``) runs on it.

Owns, as Kafka's ``Fetcher`` / ``CompletedFetch`` / ``SubscriptionState`` for a fixed
assignment:

* ``ConsumerRecord`` (topic, partition, offset, timestamp, timestamp_type, key, value,
  headers, leader_epoch): what ``poll`` returns. ``timestamp_type`` is Kafka's
  ``TimestampType`` id: -1 NO_TIMESTAMP_TYPE (magic 0), 0 CreateTime, 1 LogAppendTime.
* ``PartitionPoller(client_or_config, ...)``: ``assign({tp: offset | EARLIEST | LATEST})``
  (specs resolved at once with ListOffsets), ``seek(tp, offset)``, ``position(tp)`` /
  ``positions()`` (the offset of the next record ``poll`` will return: what a group
  commits), ``high_watermark(tp)``, ``poll(timeout_ms) -> list[ConsumerRecord]``,
  ``close()``.
* Fetching: one Fetch (v4-v11, no fetch session) per leader holding assigned partitions
  without buffered records, long-polled by the broker (``fetch.max.wait.ms``,
  ``fetch.min.bytes``). A request still in flight when ``poll`` returns stays in flight
  and is used by the next ``poll``. ``poll`` returns as soon as records are buffered, at
  most ``max.poll.records`` of them (the rest wait for the next call), or an empty list
  once ``timeout_ms`` passed.
* Decoding: RecordBatch v2 (CRC-32C checked under ``check.crcs``) and legacy magic 0/1
  message sets. Records below the position (the head of a compressed batch fetched from
  its middle) are skipped; control batches are skipped; the position then advances past
  every complete entry, so a partition ending in markers or compacted gaps never stalls.
* read_committed: the broker answers up to the last stable offset with the aborted
  transactions of the response; a producer's transactional batches are dropped from the
  first offset of an aborted transaction until its ABORT marker, exactly Kafka's
  ``CompletedFetch`` rule.
* Errors: stale-metadata codes (NOT_LEADER_OR_FOLLOWER, ...), UNKNOWN_TOPIC_OR_PARTITION,
  lost connections and timed-out requests refresh the metadata and retry after an
  exponential backoff, for ever, as Kafka's consumer does; ``last_error`` holds the latest
  such error until a fetch succeeds again (a caller may warn about it). OFFSET_OUT_OF_RANGE
  resets the partition per ``auto.offset.reset`` (earliest / latest) or, with ``none``,
  raises ``OffsetOutOfRangeError``. Other error codes raise ``KafkaError.from_code``
  naming the partition; malformed data raises ``broker.record.errors.DecodeError``.
* Bad batches (a batch already in the log whose CRC, records or compressed payload are
  bad, or which inflates past ``max_decompressed``), as Kafka's consumer does with its
  CorruptRecordException: the records before it are returned; then ``poll`` raises
  ``CorruptBatchError`` naming the topic-partition, the batch's base and last offsets and
  what is wrong (``Record batch of t-0 at offsets [5, 9] (byte position 73) is invalid:
  record 3: key length -7 out of range``), the position stays at the batch, and every
  later ``poll`` raises it again until ``seek`` moves past it (the caller's choice: the
  poller never skips data on its own). Nothing is fetched again meanwhile.

Wire format: none of its own (Fetch and ListOffsets, via ``ConsumerNetworkClient``).
Invariants: ``poll`` returns each offset of a partition at most once and in offset order
(unless ``seek`` moves back); ``position(tp)`` is always the offset after the last record
returned for ``tp``, or further on past entries that hold no records for the caller.

Thread-safety: none. A PartitionPoller (and its client) belongs to one thread.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping
from typing import Any, NamedTuple

from broker.client.errors import KafkaError, NetworkError, OffsetOutOfRangeError
from broker.client.network import now_ms
from broker.protocol import ApiKey, ErrorCode, request_schema
from broker.record.batch import (
    CURRENT_MAGIC,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    LOG_ENTRY_PREFIX,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    decode_records,
    ensure_valid,
    read_header,
    records_payload,
)
from broker.record.control import is_abort_marker
from broker.record.errors import (
    CorruptBatchError,
    CorruptRecordError,
    DecodeError,
    UnsupportedMagicError,
)
from broker.record.legacy import iter_legacy_records

from .client import ConsumerNetworkClient
from .config import ConsumerConfig
from .offsets import (
    EARLIEST,
    LATEST,
    RETRIABLE_PARTITION_ERRORS,
    TopicPartition,
    _isolation,
    list_offsets,
)

FETCH_MIN_VERSION = 4
FETCH_MAX_VERSION = 11
READ_COMMITTED = 1
# Answers in a row holding bytes of a partition but no complete entry (the response's
# size limit cut its first batch) before giving up with an error naming the limits.
MAX_PARTIAL_ANSWERS = 5


class ConsumerRecord(NamedTuple):
    """One record as ``poll`` returns it (see the module docstring)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # -1 NO_TIMESTAMP_TYPE, 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    leader_epoch: int = -1


class _Completed:
    """Decoded records of one partition from one response, not yet all returned."""

    __slots__ = ("tp", "records", "index", "next_offset", "error")

    def __init__(self, tp: TopicPartition, records: list[ConsumerRecord], next_offset: int,
                 error: CorruptBatchError | None = None) -> None:
        self.tp = tp
        self.records = records
        self.index = 0
        self.next_offset = next_offset
        self.error = error  # the bad batch at next_offset, raised once the records are out


class _InFlight(NamedTuple):
    future: Any
    node: int
    offsets: dict[TopicPartition, int]  # fetch offset of each partition in the request


class PartitionPoller:
    """Follows assigned partitions (see the module docstring).

    ``client_or_config``: a ``ConsumerNetworkClient`` (shared, left open by ``close``) or
    a config mapping / ``ConsumerConfig`` with Kafka's consumer keys (a client of its own).
    ``isolation_level`` and ``auto_offset_reset`` override the config's keys.
    """

    def __init__(self, client_or_config: Any, *, isolation_level: str | int | None = None,
                 auto_offset_reset: str | None = None,
                 max_decompressed: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> None:
        if isinstance(client_or_config, ConsumerNetworkClient):
            self.client = client_or_config
            self._owns_client = False
        else:
            cfg = client_or_config if isinstance(client_or_config, ConsumerConfig) \
                else ConsumerConfig(client_or_config)
            self.client = ConsumerNetworkClient(cfg)
            self._owns_client = True
        cfg = self.config = self.client.config
        self.isolation = _isolation(self.client, isolation_level if isolation_level is not None
                                    else cfg["isolation.level"])
        reset = (auto_offset_reset or cfg["auto.offset.reset"]).strip().lower()
        if reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto.offset.reset {reset!r}: expected earliest, latest or none")
        self.auto_offset_reset = reset
        self.max_decompressed = max_decompressed
        self.verify_crc: bool = cfg["check.crcs"]
        self.max_poll_records: int = max(1, cfg["max.poll.records"])
        self.fetch_max_bytes: int = cfg["fetch.max.bytes"]
        self.partition_max_bytes: int = cfg["max.partition.fetch.bytes"]
        self.max_wait_ms: int = cfg["fetch.max.wait.ms"]
        self.min_bytes: int = cfg["fetch.min.bytes"]
        self.rack_id: str = cfg["client.rack"]
        self._positions: dict[TopicPartition, int] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._completed: deque[_Completed] = deque()
        self._in_flight: dict[int, _InFlight] = {}
        self._backoff_until: dict[int, float] = {}  # node -> no fetch before this time
        self._partial: dict[TopicPartition, int] = {}
        self._errors_in_a_row = 0
        self.last_error: BaseException | None = None
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> PartitionPoller:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections of a client of the poller's own."""
        if not self._closed:
            self._closed = True
            if self._owns_client:
                self.client.close()

    # -- assignment and positions --------------------------------------------------------

    def assign(self, specs: Mapping[tuple[str, int], int], *,
               timeout_ms: float | None = None) -> None:
        """Follow exactly these partitions, each from an offset (>= 0), ``EARLIEST`` or
        ``LATEST`` (looked up now, bounded by ``timeout_ms`` / default.api.timeout.ms)."""
        wanted = {TopicPartition(*tp): int(spec) for tp, spec in specs.items()}
        for tp, spec in wanted.items():
            if spec < 0 and spec not in (EARLIEST, LATEST):
                raise ValueError(f"invalid starting offset {spec} for {tp}")
        lookups = {tp: spec for tp, spec in wanted.items() if spec < 0}
        if lookups:
            found = list_offsets(self.client, lookups, isolation_level=self.isolation,
                                 timeout_ms=timeout_ms)
            for tp in lookups:
                wanted[tp] = found[tp].offset if found.get(tp) is not None else 0
        self._positions = dict(wanted)
        self._completed.clear()
        self._partial.clear()
        for tp in wanted:
            self.client.metadata.add_topic(tp.topic)

    def assignment(self) -> list[TopicPartition]:
        return sorted(self._positions)

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        """Return records of ``tp`` from ``offset`` on (buffered ones are dropped)."""
        tp = TopicPartition(*tp)
        if tp not in self._positions:
            raise ValueError(f"{tp} is not assigned")
        if offset < 0:
            raise ValueError(f"invalid offset {offset} for {tp}")
        self._positions[tp] = offset
        self._completed = deque(c for c in self._completed if c.tp != tp)

    def position(self, tp: tuple[str, int]) -> int:
        return self._positions[TopicPartition(*tp)]

    def positions(self) -> dict[TopicPartition, int]:
        return dict(self._positions)

    def high_watermark(self, tp: tuple[str, int]) -> int:
        """The last high watermark a Fetch reported for ``tp`` (-1 before one did)."""
        return self._high_watermarks.get(TopicPartition(*tp), -1)

    # -- poll ----------------------------------------------------------------------------

    def poll(self, timeout_ms: float) -> list[ConsumerRecord]:
        """Records of the assigned partitions (see the module docstring); an empty list
        when none arrived within ``timeout_ms``."""
        if self._closed:
            raise KafkaError("the poller is closed")
        client = self.client
        deadline = now_ms() + max(0.0, timeout_ms)
        while True:
            out = self._drain()
            if out:
                return out
            self._send_fetches()
            if self._in_flight:
                self._wait_any(deadline)
                done = [node for node, f in self._in_flight.items() if f.future.done]
                for node in done:
                    self._handle(self._in_flight.pop(node))
                if done:
                    continue  # records to return, or the next fetch to send at once
            else:
                # Nothing could be sent (connecting, no leader yet, backing off): one network
                # poll, which returns early when a connection or metadata answer comes in.
                now = now_ms()
                wake = min((t for t in self._backoff_until.values() if t > now),
                           default=now + client.retry_backoff_ms)
                client.poll(max(0.0, min(wake, deadline) - now))
            if now_ms() >= deadline:
                return []

    def _drain(self) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        room = self.max_poll_records
        while self._completed and room > 0:
            c = self._completed[0]
            take = c.records[c.index:c.index + room]
            if take:
                out.extend(take)
                c.index += len(take)
                room -= len(take)
                self._positions[c.tp] = take[-1].offset + 1
            if c.index >= len(c.records):
                self._positions[c.tp] = max(self._positions[c.tp], c.next_offset)
                if c.error is not None:
                    if out:
                        break  # these first; the error on the next poll
                    raise c.error  # kept buffered: raised again until seek() drops it
                self._completed.popleft()
        return out

    def _wait_any(self, deadline: float) -> None:
        """Poll the network (at least once, so that ``poll(0)`` makes progress) until a
        request in flight completes or ``deadline`` passes."""
        client = self.client
        while True:
            client.poll(max(0.0, deadline - now_ms()))
            if any(f.future.done for f in self._in_flight.values()) or now_ms() >= deadline:
                return

    def _send_fetches(self) -> None:
        client = self.client
        md = client.metadata
        cluster = md.fetch()
        now = now_ms()
        buffered = {c.tp for c in self._completed}
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, offset in self._positions.items():
            if tp in buffered:
                continue
            leader = cluster.leader_for(tp.topic, tp.partition)
            if leader < 0:
                md.request_update()
                continue
            by_node.setdefault(leader, {})[tp] = offset
        for node, offsets in by_node.items():
            if node in self._in_flight or self._backoff_until.get(node, 0.0) > now:
                continue
            net = client.client
            if not net.ready(node, now):
                if net.connection_failed(node):
                    self._failed(node, NetworkError(f"cannot connect to node {node}"))
                continue  # connecting: the next round sends
            future = client.send(node, ApiKey.FETCH, self._request(offsets),
                                 our_min=FETCH_MIN_VERSION, our_max=FETCH_MAX_VERSION)
            self._in_flight[node] = _InFlight(future, node, offsets)

    def _request(self, offsets: dict[TopicPartition, int]) -> Any:
        isolation, rack = self.isolation, self.rack_id
        max_wait, min_bytes = self.max_wait_ms, self.min_bytes
        max_bytes, part_bytes = self.fetch_max_bytes, self.partition_max_bytes
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))

        def build(version: int) -> Any:
            schema = request_schema(ApiKey.FETCH, version)
            topic_cls = schema.structs["FetchTopic"]
            part_cls = schema.structs["FetchPartition"]
            return schema.cls(
                replica_id=-1, max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
                isolation_level=isolation, session_id=0, session_epoch=-1,
                topics=[topic_cls(topic=t, partitions=[
                    part_cls(partition=p, current_leader_epoch=-1, fetch_offset=o,
                             log_start_offset=-1, partition_max_bytes=part_bytes)
                    for p, o in parts]) for t, parts in by_topic.items()],
                forgotten_topics_data=[], rack_id=rack)
        return build

    def _failed(self, node: int, error: BaseException) -> None:
        """A retriable failure talking to ``node``: refresh metadata, back off."""
        self.last_error = error
        self._errors_in_a_row += 1
        self.client.metadata.request_update()
        self._backoff_until[node] = now_ms() + self.client.backoff_ms(self._errors_in_a_row - 1)

    def _handle(self, flight: _InFlight) -> None:
        resp = flight.future.response
        if resp.error is not None:
            self._failed(flight.node, resp.error)
            return
        body = resp.body
        if body.error_code:
            if ErrorCode.lookup(body.error_code).retriable:
                self._failed(flight.node, KafkaError.from_code(body.error_code, "Fetch"))
                return
            raise KafkaError.from_code(body.error_code, "Fetch of "
                                       + ", ".join(map(str, sorted(flight.offsets))))
        retry: BaseException | None = None
        for t in body.responses:
            for pd in t.partitions:
                tp = TopicPartition(t.topic, pd.partition_index)
                fetched_at = flight.offsets.get(tp)
                if fetched_at is None or self._positions.get(tp) != fetched_at:
                    continue  # not asked for, or seek()ed since: stale
                code = pd.error_code
                if code == ErrorCode.NONE:
                    self._high_watermarks[tp] = pd.high_watermark
                    self._decode(tp, fetched_at, pd)
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._reset(tp, fetched_at, pd)
                elif code in RETRIABLE_PARTITION_ERRORS:
                    retry = KafkaError.from_code(code, f"Fetch of {tp}")
                else:
                    raise KafkaError.from_code(code, f"Fetch of {tp} at offset {fetched_at}")
        if retry is not None:
            self._failed(flight.node, retry)
        else:
            self._errors_in_a_row = 0
            self.last_error = None
            self._backoff_until.pop(flight.node, None)

    def _reset(self, tp: TopicPartition, offset: int, pd: Any) -> None:
        log_start, hw = pd.log_start_offset, pd.high_watermark
        if self.auto_offset_reset == "none":
            raise OffsetOutOfRangeError(
                f"OFFSET_OUT_OF_RANGE fetching {tp} at offset {offset} and auto.offset.reset "
                f"is none (log start {log_start}, high watermark {hw})", topic=tp.topic,
                partition=tp.partition, start_offset=offset, end_offset=offset,
                lost_start=offset, lost_end=offset, fetch_offset=offset,
                log_start_offset=log_start, high_watermark=hw)
        spec = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
        found = list_offsets(self.client, {tp: spec}, isolation_level=self.isolation)[tp]
        self._positions[tp] = found.offset if found is not None else 0

    # -- decoding ------------------------------------------------------------------------

    def _decode(self, tp: TopicPartition, position: int, pd: Any) -> None:
        buf = pd.records if pd.records is not None else memoryview(b"")
        if not len(buf):
            return
        buf = memoryview(buf)
        committed = self.isolation == READ_COMMITTED
        aborted_heap: list[tuple[int, int]] = []
        if committed and pd.aborted_transactions:
            aborted_heap = [(a.first_offset, a.producer_id) for a in pd.aborted_transactions]
            heapq.heapify(aborted_heap)
        aborted_pids: set[int] = set()
        out: list[ConsumerRecord] = []
        topic, partition = tp
        next_offset = position
        complete = False
        pos, n = 0, len(buf)
        while n - pos > MAGIC_OFFSET:
            base, length = LOG_ENTRY_PREFIX.unpack_from(buf, pos)
            size = length + LOG_OVERHEAD
            if length < 0:
                raise CorruptRecordError(f"entry length {length} in the Fetch response of {tp}")
            if size > n - pos:
                break  # a partial trailing entry: the next fetch gets it whole
            complete = True
            magic = buf[pos + MAGIC_OFFSET]
            if magic == CURRENT_MAGIC:
                header = read_header(buf, pos)
                last = header.last_offset
                if last >= next_offset:
                    try:
                        batch_records = self._batch_records(buf, pos, header, committed,
                                                            aborted_heap, aborted_pids)
                    except DecodeError as exc:
                        error = CorruptBatchError(
                            str(exc), base_offset=header.base_offset, last_offset=last,
                            position=pos, topic=topic, partition=partition)
                        self._completed.append(_Completed(tp, out, next_offset, error))
                        self._partial.pop(tp, None)
                        return
                    for r in batch_records:
                        if r.offset >= next_offset:
                            out.append(ConsumerRecord(topic, partition, r.offset, r.timestamp,
                                                      header.timestamp_type, r.key, r.value,
                                                      r.headers, header.partition_leader_epoch))
                    next_offset = max(next_offset, header.next_offset)
            elif magic in (0, 1):
                for r in iter_legacy_records(buf[pos:pos + size], self.max_decompressed):
                    if r.offset >= next_offset:
                        out.append(ConsumerRecord(topic, partition, r.offset, r.timestamp,
                                                  r.timestamp_type, r.key, r.value))
                        next_offset = r.offset + 1
                next_offset = max(next_offset, base + 1)
            else:
                raise UnsupportedMagicError(f"magic {magic} in the Fetch response of {tp}")
            pos += size
        if not complete:
            tries = self._partial[tp] = self._partial.get(tp, 0) + 1
            if tries >= MAX_PARTIAL_ANSWERS:
                raise KafkaError(f"Fetch of {tp} at offset {position} keeps returning a partial "
                                 f"batch of {n} bytes; raise max.partition.fetch.bytes / "
                                 "fetch.max.bytes")
            return
        self._partial.pop(tp, None)
        if out or next_offset != position:
            self._completed.append(_Completed(tp, out, next_offset))

    def _batch_records(self, buf: memoryview, pos: int, header: Any, committed: bool,
                       aborted_heap: list[tuple[int, int]], aborted_pids: set[int]) -> list:
        """The records of the v2 batch at ``pos`` for the caller (none for a control or
        aborted batch); a batch that cannot be read raises ``DecodeError``."""
        if self.verify_crc:
            ensure_valid(buf, pos, header)
        skip = False
        if committed and header.producer_id >= 0:
            while aborted_heap and aborted_heap[0][0] <= header.last_offset:
                aborted_pids.add(heapq.heappop(aborted_heap)[1])
            if header.is_control:
                if header.producer_id in aborted_pids and is_abort_marker(buf, pos, header):
                    aborted_pids.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in aborted_pids:
                skip = True
        if header.is_control or skip:
            return []
        return decode_records(records_payload(buf, pos, header, self.max_decompressed), header)


__all__ = ["ConsumerRecord", "MAX_PARTIAL_ANSWERS", "PartitionPoller"]
