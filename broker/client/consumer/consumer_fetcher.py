"""ConsumerFetcher: the fetch side of ``KafkaConsumer``: ``PartitionPoller``'s Fetch loop
(requests per leader, long polls, error handling, read_committed rules) with responses
kept raw until the caller says how it wants them: records one by one (``poll``) or
columns (``poll_arrow``: one ``pyarrow.RecordBatch`` per partition, decoded by
``broker.record.columnar.iter_arrow``, the Spark reader's decoder).

Owns the raw-response buffer and the pause rule: a paused partition is not fetched and
its buffered data is kept, not returned, until it is resumed (Kafka's rule). Positions
live in the consumer's ``SubscriptionState`` (the same dict).

Columnar decoding: ``scan_entries`` walks the batch headers (the offset after the last
complete entry, the ABORT markers of aborted transactions), ``iter_arrow`` decodes from
the position with the aborted ranges dropped and control batches skipped. A bad batch
falls back to the record path for that response, so the rows before it are returned and
``CorruptBatchError`` is raised on the next call, with the position left at the batch,
exactly as ``poll`` does. ``max.poll.records`` bounds ``poll`` only: ``poll_arrow``
returns whole responses (bounded by ``fetch.max.bytes`` / ``max.partition.fetch.bytes``).

Thread-safety: none; owned by the consumer's thread.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import pyarrow as pa

from broker.record.columnar import arrow_schema, iter_arrow
from broker.record.errors import DecodeError
from broker.record.limits import INT64_MAX

from .fetcher import aborted_ranges, scan_entries
from .offsets import TopicPartition
from .poller import MAX_PARTIAL_ANSWERS, ConsumerRecord, PartitionPoller, _Completed
from .subscription_state import SubscriptionState

READ_COMMITTED = 1
ARROW_SCHEMA = arrow_schema(include_headers=True)
_MAX_ROWS = 1 << 30


class _Raw:
    """One partition's records of one Fetch response, not decoded yet."""

    __slots__ = ("tp", "position", "pd")

    def __init__(self, tp: TopicPartition, position: int, pd: Any) -> None:
        self.tp = tp
        self.position = position
        self.pd = pd


class ConsumerFetcher(PartitionPoller):
    """See the module docstring. ``poll(timeout_ms)`` -> list of ``ConsumerRecord``;
    ``poll_arrow(timeout_ms)`` -> ``{TopicPartition: pyarrow.RecordBatch}``."""

    def __init__(self, client: Any, state: SubscriptionState) -> None:
        super().__init__(client, auto_offset_reset=state.default_reset)
        self.state = state
        self._positions = state.positions  # shared with the SubscriptionState
        self._arrow = False

    # -- hooks of PartitionPoller ----------------------------------------------------------

    def _send_fetches(self) -> None:
        full = self._positions
        paused = self.state.paused
        self._positions = {tp: o for tp, o in full.items() if tp not in paused}
        try:
            super()._send_fetches()
        finally:
            self._positions = full

    def _decode(self, tp: TopicPartition, position: int, pd: Any) -> None:
        if pd.records is not None and len(pd.records):
            self._completed.append(_Raw(tp, position, pd))

    def _drain(self) -> Any:
        return self._drain_arrow() if self._arrow else self._drain_records()

    # -- public ------------------------------------------------------------------------------

    def poll_records(self, timeout_ms: float) -> list[ConsumerRecord]:
        self._arrow = False
        return self.poll(timeout_ms)

    def poll_arrow(self, timeout_ms: float) -> dict[TopicPartition, pa.RecordBatch]:
        self._arrow = True
        try:
            out = self.poll(timeout_ms)
        finally:
            self._arrow = False
        return out if out else {}

    def drop_buffered(self, keep: set[TopicPartition] | None = None) -> None:
        """Forget buffered data (of every partition not in ``keep``)."""
        self._completed = deque(c for c in self._completed if keep is not None and c.tp in keep)

    # -- draining ----------------------------------------------------------------------------

    def _records_of(self, raw: _Raw) -> list[_Completed]:
        """Decode ``raw`` one record at a time with the poller's decoder."""
        saved, self._completed = self._completed, deque()
        try:
            PartitionPoller._decode(self, raw.tp, raw.position, raw.pd)
            return list(self._completed)
        finally:
            self._completed = saved

    def _drain_records(self) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        room = self.max_poll_records
        positions = self._positions
        paused = self.state.paused
        skipped: list[Any] = []
        queue = self._completed
        try:
            while queue and room > 0:
                c = queue.popleft()
                if c.tp in paused:
                    skipped.append(c)
                    continue
                if isinstance(c, _Raw):
                    if positions.get(c.tp) == c.position:
                        queue.extendleft(reversed(self._records_of(c)))
                    continue
                take = c.records[c.index:c.index + room]
                if take:
                    out.extend(take)
                    c.index += len(take)
                    room -= len(take)
                    positions[c.tp] = take[-1].offset + 1
                if c.index < len(c.records):
                    queue.appendleft(c)
                    break
                positions[c.tp] = max(positions[c.tp], c.next_offset)
                if c.error is not None:
                    queue.appendleft(c)  # raised again until seek() drops it
                    if out:
                        break
                    raise c.error
        finally:
            queue.extendleft(reversed(skipped))
        return out

    def _drain_arrow(self) -> dict[TopicPartition, pa.RecordBatch]:
        parts: dict[TopicPartition, list[pa.RecordBatch]] = {}
        positions = self._positions
        paused = self.state.paused
        skipped: list[Any] = []
        queue = self._completed
        try:
            while queue:
                c = queue.popleft()
                if c.tp in paused or c.tp in parts and isinstance(c, _Completed) \
                        and c.error is not None:
                    skipped.append(c)
                    continue
                if isinstance(c, _Raw):
                    if positions.get(c.tp) != c.position:
                        continue
                    decoded = self._arrow_of(c)
                    if decoded is None:  # a bad batch: the record path tells where
                        queue.extendleft(reversed(self._records_of(c)))
                    elif decoded.num_rows:
                        parts.setdefault(c.tp, []).append(decoded)
                    continue
                rest = c.records[c.index:]
                c.index = len(c.records)
                if rest:
                    parts.setdefault(c.tp, []).append(_records_to_arrow(rest))
                    positions[c.tp] = rest[-1].offset + 1
                positions[c.tp] = max(positions[c.tp], c.next_offset)
                if c.error is not None:
                    queue.appendleft(c)
                    if parts:
                        break
                    raise c.error
        finally:
            queue.extendleft(reversed(skipped))
        return {tp: (bs[0] if len(bs) == 1 else pa.concat_batches(bs))
                for tp, bs in parts.items()}

    def _arrow_of(self, raw: _Raw) -> pa.RecordBatch | None:
        """The records of ``raw`` from its position as one RecordBatch (the position
        advances past every complete entry); None when a batch in it is bad."""
        tp, position, pd = raw.tp, raw.position, raw.pd
        buf = memoryview(pd.records)
        committed = self.isolation == READ_COMMITTED
        watched = ({t.producer_id for t in pd.aborted_transactions}
                   if committed and pd.aborted_transactions else None)
        scan = scan_entries(buf, INT64_MAX, watched)
        if scan.next_offset is None:
            tries = self._partial[tp] = self._partial.get(tp, 0) + 1
            if tries >= MAX_PARTIAL_ANSWERS:
                self._records_of(raw)  # raises the poller's error naming the limits
            return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
        self._partial.pop(tp, None)
        aborted = aborted_ranges(pd.aborted_transactions, scan.aborts) if committed else None
        try:
            batches = list(iter_arrow(buf, position, None, max_rows_per_batch=_MAX_ROWS,
                                      max_decompressed=self.max_decompressed, aborted=aborted,
                                      verify_crc=self.verify_crc, include_headers=True))
        except DecodeError:
            return None
        self._positions[tp] = max(position, scan.next_offset)
        if not batches:
            return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
        return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def _records_to_arrow(records: list[ConsumerRecord]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp for r in records], pa.int64()),
        pa.array([r.timestamp_type for r in records], pa.int32()),
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records],
                 ARROW_SCHEMA.field("headers").type),
    ], schema=ARROW_SCHEMA)


__all__ = ["ARROW_SCHEMA", "ConsumerFetcher"]
