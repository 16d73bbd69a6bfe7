"""Direct mode: the executors read the segment files of a Kafka log directory themselves.

Owns: ``DirectOffsetReader`` (planning's ``OffsetReader`` over ``broker.log.reader``:
partitions, log start and end offsets, offsets for timestamps; with
``kafka.isolation.level=read_committed`` the latest offsets are the last stable offsets,
``PartitionReader.last_stable_offset``, so no record of a transaction still open is
read, as with a read_committed consumer) and ``DirectRangeReader``
(the ``RangeReader`` that turns one offset range of one partition into decoded Arrow
batches). Needs no broker: the directory may be a live broker's, a copy or a backup.

How a range [start, end) is read: the partition directory is listed afresh on the
executor (``PartitionReader``); the aborted transactions overlapping the range are
collected from the ``.txnindex`` files; then for each segment holding part of the range,
from the offset index's floor position of ``start`` (0 in later segments) to the
segment's valid end, a window of at most ``max_bytes_per_batch`` bytes is memory-mapped
and handed whole to ``broker.record.columnar.iter_arrow`` with the start and end offsets
and the aborted transactions, which decodes back-to-back batches column-wise
(decompressing, checking CRCs, skipping control batches and aborted records). The window
then moves to the first entry the decoder did not take (a batch cut by the window's end);
a batch larger than the window gets a window of its own size. Reading stops at the first
batch at or past ``end``.

Bad batches (a batch in the files whose CRC, records or compressed payload are bad, or
which inflates past the decoder's budget: a log written elsewhere, or before the broker
validated records) go to ``errors.report_data_loss`` as the loss of the batch's offsets
inside the range, the reason naming the batch (``Record batch of t-0 at offsets [5, 9]
(byte position 73) is invalid: record 3: key length -7 out of range``) and its segment
file: the query fails with failOnDataLoss, else a warning is logged and the read goes on
with the next batch. A broken framing (a batchLength below the header, an unknown magic)
leaves no next batch and raises ``CorruptRecordError`` / ``CorruptBatchError``.

Memory: one window (``max_bytes_per_batch``: mapped locally, unmapped before the next is
mapped; on an object store up to three windows' bytes: the last, the next one being read
ahead, and the one being assembled from them)
plus the decoder's unit (about twice ``max_bytes_per_batch`` of record bytes) and the
batch Spark is sending: about four times ``max_bytes_per_batch``, whatever the size of the
topic.

Data loss at read time (the log moved on since planning: retention deleted segments or
raised the log start offset, a partition directory disappeared, the log got shorter) goes
to ``errors.report_data_loss``: ``KafkaDataLossError`` naming the partition and the lost
offsets with ``fail_on_data_loss``, else a warning and the rows that remain.

Object stores: every path may be a URI (``s3://bucket/prefix``, ``gs://``, ``abfs://``,
``hdfs://``; ``storage_config``: Hadoop's ``fs.s3a.*`` keys, ``broker.log.storage``) holding
a copy or a backup of a log directory in the same layout. Reads go through
``broker.log.storage``: the same steps, but windows are ranged reads (``GET`` with a
``Range`` header on S3) of at most ``max_bytes_per_batch`` bytes instead of mappings, the
next one read ahead by a background thread while the current one is decoded (never past
the range's end position), the indexes are read whole (small), and a segment is never downloaded beyond the window
reads of the range's positions, so memory stays as bounded as locally and pruning (a
range starting in a later segment, from a pushed offset or timestamp filter) skips the
earlier segments' bytes entirely.

Thread-safety: readers hold no state between ``read`` calls beyond their configuration (and
the file-system clients built from it, thread-safe);
``DirectOffsetReader`` caches ``PartitionReader``s and is used by one planning thread.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from broker.log import files
from broker.log.reader import LogDirReader, PartitionReader, SegmentRange
from broker.log.storage import open_location
from broker.record.batch import LOG_ENTRY_PREFIX as _ENTRY  # baseOffset, batchLength

from ..errors import TopicPartition, report_data_loss

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DirectOffsetReader", "DirectRangeReader"]


class DirectOffsetReader:
    """Planning's view of a log directory (``planning.OffsetReader``)."""

    def __init__(self, paths: str | Path | Sequence[str | Path],
                 storage_config: Mapping[str, str] | None = None, *, read_committed: bool = False) -> None:
        self.paths = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
        self._log_dir = LogDirReader(self.paths, storage_config)
        self._readers: dict[TopicPartition, PartitionReader] = {}
        # kafka.isolation.level=read_committed: "latest" is the last stable offset, as a
        # read_committed consumer's end offsets are
        self.read_committed = read_committed

    def describe(self) -> str:
        if len(self.paths) == 1:
            return f"the log directory {self.paths[0]}"
        return f"the log directories {', '.join(self.paths)}"

    def topic_partitions(self, topics: Iterable[str] | None = None) -> list[TopicPartition]:
        tps = self._log_dir.topic_partitions()
        if topics is None:
            return tps
        wanted = set(topics)
        return [tp for tp in tps if tp[0] in wanted]

    def _reader(self, tp: TopicPartition) -> PartitionReader:
        reader = self._readers.get(tp)
        if reader is None:
            reader = self._readers[tp] = self._log_dir.partition(*tp)
        return reader

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._reader(tp).log_start_offset for tp in tps}

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        if self.read_committed:
            return {tp: self._reader(tp).last_stable_offset() for tp in tps}
        return {tp: self._reader(tp).log_end_offset for tp in tps}

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        return {tp: self._reader(tp).offset_for_timestamp(ts) for tp, ts in timestamps.items()}

    def topic_ids(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, object]:
        """The topic id each partition's files name (``PartitionReader.topic_id``; None
        when they name none)."""
        return {tp: self._reader(tp).topic_id() for tp in tps}

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()
        self._readers.clear()


class DirectRangeReader:
    """Decoded batches of one offset range, read from the segment files (``RangeReader``)."""

    def __init__(self, paths: str | Path | Sequence[str | Path], *, include_headers: bool,
                 max_bytes_per_batch: int, fail_on_data_loss: bool, verify_crc: bool = True,
                 storage_config: Mapping[str, str] | None = None) -> None:
        self.paths = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
        self.storage_config = dict(storage_config or {})
        self._storages: dict = {}  # location -> (storage, root), built on first use per process
        self.include_headers = include_headers
        self.max_bytes_per_batch = max_bytes_per_batch
        self.fail_on_data_loss = fail_on_data_loss
        self.verify_crc = verify_crc

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_storages"] = {}  # file system clients are rebuilt where the reader runs
        return state

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        """Rows of offsets [start, end) of ``topic``-``partition`` in offset order, as
        RecordBatches of ``broker.record.columnar.arrow_schema(include_headers)``."""
        tp = (topic, partition)
        if start >= end:
            return
        name = files.partition_dir_name(topic, partition)
        found = None
        for location in self.paths:
            if location not in self._storages:
                self._storages[location] = open_location(location, self.storage_config)
            storage, root = self._storages[location]
            if storage.is_dir(root / name):
                found = storage, root / name
                break
        if found is None:
            report_data_loss(tp, start, end, f"the partition directory {name} does not exist in "
                             f"{', '.join(self.paths)}", self.fail_on_data_loss)
            return
        reader = PartitionReader(found[1], storage=found[0])
        try:
            yield from self._read(reader, tp, start, end)
        finally:
            reader.close()

    def _read(self, reader: PartitionReader, tp: TopicPartition, start: int, end: int
              ) -> Iterator[pa.RecordBatch]:
        log_start = reader.log_start_offset
        if start < log_start:
            report_data_loss(tp, start, min(end, log_start),
                             f"the log now starts at offset {log_start}", self.fail_on_data_loss)
            start = min(log_start, end)
        if start >= end:
            return
        aborted = [(t.producer_id, t.first_offset, t.last_offset)
                   for t in reader.aborted_transactions(start, end)]
        for seg in reader.segment_ranges(start, end):
            try:
                done = yield from self._read_segment(reader, seg, tp, start, end, aborted)
            except FileNotFoundError:
                # retention deleted the segment since it was listed
                fresh = PartitionReader(reader.directory, storage=reader.storage)
                resume = max(start, seg.base_offset)
                report_data_loss(tp, resume, min(end, fresh.log_start_offset),
                                 f"segment {seg.path.name} was deleted before it was read (the log "
                                 f"now starts at offset {fresh.log_start_offset})",
                                 self.fail_on_data_loss)
                try:
                    yield from self._read(fresh, tp, max(resume, fresh.log_start_offset), end)
                finally:
                    fresh.close()
                return
            if done:
                return
        log_end = reader.log_end_offset
        if log_end < end:
            report_data_loss(tp, max(start, log_end), end, f"the log now ends at offset {log_end}",
                             self.fail_on_data_loss)

    def _read_segment(self, reader: PartitionReader, seg: SegmentRange, tp: TopicPartition,
                      start: int, end: int, aborted: list) -> Generator[pa.RecordBatch, None, bool]:
        """Decode ``seg``; returns True once a batch at or past ``end`` was reached."""
        from broker.record.columnar import DecodeProgress, iter_arrow
        from broker.record.errors import CorruptBatchError, CorruptRecordError

        window_at = 0  # file position of the window being decoded

        def on_bad_batch(error: CorruptBatchError) -> None:
            error = CorruptBatchError(error.reason, base_offset=error.base_offset,
                                      last_offset=error.last_offset,
                                      position=window_at + error.position,
                                      topic=tp[0], partition=tp[1])
            report_data_loss(tp, max(error.base_offset, start), min(error.last_offset + 1, end),
                             f"{error} in segment {seg.path.name}", self.fail_on_data_loss)

        budget = self.max_bytes_per_batch
        with reader.storage.open(seg.path, seg.size) as f:
            pos, limit, need = seg.start_position, seg.end_position, 0
            while pos < limit:
                length = min(max(budget, need), limit - pos)
                # mapped locally; remotely ranged reads, the next window read ahead up to limit
                window = f.window(pos, length, limit)
                view = window.view
                progress = DecodeProgress()
                window_at = pos
                it = iter_arrow(view, start, end, max_bytes_per_batch=budget,
                                include_headers=self.include_headers, aborted=aborted,
                                verify_crc=self.verify_crc, progress=progress,
                                on_bad_batch=on_bad_batch)
                try:
                    yield from it
                    consumed = progress.position
                    if consumed + _ENTRY.size <= len(view):
                        base, batch_length = _ENTRY.unpack_from(view, consumed)
                    else:
                        base = batch_length = None
                finally:
                    it.close()
                    del it, view
                    window.close()
                stop = pos + consumed
                if stop >= limit:
                    return False
                if base is None:
                    head = f.read_at(stop, _ENTRY.size)
                    if len(head) < _ENTRY.size:
                        return False
                    base, batch_length = _ENTRY.unpack(head)
                if base >= end:
                    return True
                need = batch_length + _ENTRY.size
                if consumed == 0 and need <= length:
                    raise CorruptRecordError(
                        f"{reader.storage.uri(seg.path)}: the entry at position {stop} could not be decoded")
                if stop + need > limit:
                    return False  # a partial entry at the valid end (a torn tail)
                pos = stop
        return False
