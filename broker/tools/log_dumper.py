"""The engine of ``kafkalog dump-log``: reads one log file at a time and prints it in the
format of Kafka's ``kafka-dump-log.sh`` (``DumpLogSegments``).

Owns: the walk over a ``.log`` that tolerates what a dump must survive (any magic, a torn
tail, a corrupt header, a batch whose records cannot be decoded), the text of each line,
the checks of ``.index`` / ``.timeindex`` entries against the log, and the report of
problems printed at the end (stderr, as Kafka does). The command and its options are in
``dump_log.py``; the byte layouts come from ``broker.record`` and ``broker.log``.

Output, per file (stdout)::

    Dumping 00000000000000000000.log
    Log starting offset: 0
    baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1
      producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false
      deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 90
      magic: 2 compresscodec: none crc: 123456 isvalid: true          (one line per batch)
    | offset: 0 CreateTime: 1700000000000 keySize: 3 valueSize: 5 sequence: -1
      headerKeys: [h1] key: abc payload: hello     (--deep-iteration; key and payload with
                                                    --print-data-log; control records end
                                                    with "endTxnMarker: COMMIT coordinatorEpoch: 0")
    Found 17 invalid bytes at the end of 00000000000000000000.log

Magic 0/1 entries print ``offset: <last offset> position: ...`` and their records add
``isValid: true crc: <crc>``. ``.index`` prints ``offset: O position: P``; ``.timeindex``
``timestamp: T offset: O``; ``.txnindex`` ``version: 0 producerId: .. firstOffset: ..
lastOffset: .. lastStableOffset: ..``; ``.snapshot`` one line per producer (``producerId:
.. producerEpoch: .. coordinatorEpoch: .. currentTxnFirstOffset: OptionalLong.empty
lastTimestamp: .. firstSequence: .. lastSequence: .. lastOffset: .. offsetDelta: ..
timestamp: ..``). Keys and payloads are decoded as UTF-8 (invalid bytes replaced), as
Kafka's default ``StringDecoder`` does; with ``--offsets-decoder`` or
``--transaction-log-decoder`` (``DumpOptions.decoder``, from ``coordinator_decoders.py``)
they are the JSON of ``__consumer_offsets`` / ``__transaction_state`` records instead::

    | offset: 0 CreateTime: .. keySize: 19 valueSize: 28 sequence: -1 headerKeys: []
      key: {"type":"1","data":{"group":"g","topic":"t","partition":0}}
      payload: {"version":"3","data":{"offset":5,"leaderEpoch":-1,"metadata":"","commitTimestamp":..}}

Differences from Kafka, all on damaged input, where Kafka throws: a header that cannot be
a batch (unknown magic, impossible size) ends the walk like a torn tail (``Found N invalid
bytes``, plus one warning line naming the position); a batch whose records cannot be
decoded prints ``| records could not be decoded: <reason>`` (e.g. ``record 3: key length
-7 out of range``, ``zstd data inflates beyond the budget of N bytes``), the walk goes on
and the batch is listed again in the report, with its offsets, where it makes the exit
code 1 (Kafka's tool fails at such a batch); an index
entry pointing past the log is a mismatch with log offset -1; a zero first index entry
(a preallocated, never written index) reads as empty. A failed ``--index-sanity-check``
prints one error line and makes the exit code 1; everything else exits 0.

Memory: a ``.log`` is read in ``READ_CHUNK`` pieces; a batch larger than a chunk is read
whole only when its records are printed (its CRC is computed in pieces). Index files are
streamed too; only the lists of problems grow (one pair per bad entry).

Thread-safety: one ``LogDumper`` per command, on one thread.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TextIO

from broker.log import files as logfiles
from broker.log.errors import CorruptIndexError, CorruptSnapshotError
from broker.log.index import OFFSET_ENTRY, TIME_ENTRY, OffsetIndex, TimeIndex
from broker.log.producer_state import read_snapshot
from broker.log.txn_index import ABORTED_TXN_SIZE, AbortedTxn
from broker.record.batch import (
    ATTRIBUTES_OFFSET,
    CURRENT_MAGIC,
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    crc32c,
    decode_records,
    peek_entry,
    read_header,
    records_payload,
)
from broker.record.codecs import CompressionType
from broker.record.control import ControlRecordType, parse_end_txn_marker
from broker.record.errors import DecodeError
from broker.record.legacy import RECORD_OVERHEAD_V0, RECORD_OVERHEAD_V1, iter_legacy_records

__all__ = ["DumpOptions", "LogDumper", "LogWalk", "LogEntry", "READ_CHUNK"]

READ_CHUNK = 1024 * 1024  # bytes of .log read per step
_INDEX_CHUNK = 8 * 12 * 1024  # a multiple of both index entry sizes (8 and 12 bytes)
_TXN_CHUNK = ABORTED_TXN_SIZE * 512
RECORD_INDENT = "|"
_SEQUENCE_MODULUS = 1 << 31

# Legacy message header after the 12-byte entry prefix:
#   crc uint32 @12 | magic int8 @16 | attributes int8 @17 | timestamp int64 @18 (magic 1)
_LEGACY_HEADER = struct.Struct(">IBb")
_LEGACY_TIMESTAMP = struct.Struct(">q")
_LEGACY_CRC_START = LOG_OVERHEAD + 4  # the CRC covers magic .. end of the message
_LAST_OFFSET_DELTA = struct.Struct(">i")  # v2 header @23
_LAST_OFFSET_DELTA_POS = 23
_LEGACY_TIMESTAMP_TYPE_MASK = 0x08
_CONTROL_KEY = struct.Struct(">hh")  # version, type


@dataclass(frozen=True)
class DumpOptions:
    deep_iteration: bool = False
    print_data_log: bool = False
    index_sanity_check: bool = False
    verify_index_only: bool = False
    skip_record_metadata: bool = False
    max_bytes: int | None = None  # per .log file; None: the whole file
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    # --offsets-decoder / --transaction-log-decoder (coordinator_decoders.py): (offset, key,
    # value) -> the texts after "key: " and "payload: "; None: keys and payloads as UTF-8
    decoder: Callable[[int, bytes | memoryview | None, bytes | memoryview | None],
                      tuple[str | None, str | None]] | None = None

    @property
    def printing_data(self) -> bool:
        """Kafka: a decoder implies --print-data-log."""
        return self.print_data_log or self.decoder is not None

    @property
    def deep(self) -> bool:
        """Kafka: --print-data-log implies --deep-iteration."""
        return self.deep_iteration or self.printing_data


class LogEntry(NamedTuple):
    """One batch (magic 2) or message set entry (magic 0/1) found by ``LogWalk``."""

    position: int
    size: int
    magic: int
    data: memoryview | None  # the entry's bytes, or None when it is larger than a chunk


class LogWalk:
    """Walk the entries of a ``.log`` from ``start`` to ``end`` in ``READ_CHUNK`` reads.

    Stops at a torn tail (an entry running past ``end``, or fewer than 17 bytes left) or
    at a header that cannot be an entry (``problem`` then says why). ``valid_end`` is the
    position after the last whole entry yielded, so ``end - valid_end`` are the bytes that
    could not be read."""

    def __init__(self, fd: int, start: int, end: int) -> None:
        self._fd = fd
        self._end = end
        self.valid_end = start
        self.problem: str | None = None

    def __iter__(self) -> Iterator[LogEntry]:
        fd, end = self._fd, self._end
        pos = self.valid_end
        while pos < end:
            buf = _pread(fd, pos, min(READ_CHUNK, end - pos))
            view = memoryview(buf)
            n = len(buf)
            rel = 0
            peek = None
            while True:
                peek = peek_entry(buf, rel, n)
                if peek is None:
                    break
                _, size, magic = peek
                problem = _entry_problem(size, magic)
                if problem is not None:
                    self.problem = f"{problem} at position {pos + rel}"
                    return
                if size > end - (pos + rel):
                    return  # torn tail
                if size > n - rel:
                    break  # continues in the next chunk
                yield LogEntry(pos + rel, size, magic, view[rel:rel + size])
                rel += size
                self.valid_end = pos + rel
            if rel == 0:
                if peek is None:
                    return  # fewer than 17 bytes left: a torn tail
                yield LogEntry(pos, size, magic, None)  # larger than a chunk
                rel = size
                self.valid_end = pos + rel
            pos += rel


def _entry_problem(size: int, magic: int) -> str | None:
    if magic == CURRENT_MAGIC:
        minimum = RECORD_BATCH_OVERHEAD
    elif magic == 1:
        minimum = LOG_OVERHEAD + RECORD_OVERHEAD_V1
    elif magic == 0:
        minimum = LOG_OVERHEAD + RECORD_OVERHEAD_V0
    else:
        return f"unknown magic {magic}"
    if size < minimum:
        return f"entry of {size} bytes is smaller than the {minimum} bytes of a magic {magic} header"
    return None


def _pread(fd: int, position: int, size: int) -> bytes:
    """Up to ``size`` bytes at ``position`` (fewer only at the end of the file)."""
    if size <= 0:
        return b""
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _entry_bytes(fd: int, entry: LogEntry) -> bytes | memoryview:
    return entry.data if entry.data is not None else _pread(fd, entry.position, entry.size)


def _stream_crc(fd: int, start: int, end: int, crc_fn: Callable[[bytes, int], int]) -> int:
    crc = 0
    pos = start
    while pos < end:
        chunk = os.pread(fd, min(READ_CHUNK, end - pos), pos)
        if not chunk:
            break
        crc = crc_fn(chunk, crc)
        pos += len(chunk)
    return crc


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _codec_name(codec: int) -> str:
    try:
        return CompressionType(codec).name.lower()
    except ValueError:
        return f"unknown({codec})"


def _size(blob: bytes | None) -> int:
    return -1 if blob is None else len(blob)


def _text(blob: bytes) -> str:
    return blob.decode("utf-8", "replace")


def _optional_long(value: int | None) -> str:
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def base_offset_of(path: Path) -> int | None:
    """The offset a segment or snapshot file name starts with, or None."""
    prefix = path.name.split(".", 1)[0]
    return int(prefix) if prefix.isdigit() else None


def _control_text(key: bytes | None, value: bytes | None) -> str:
    if key is None or len(key) < _CONTROL_KEY.size:
        return "controlType: UNKNOWN(-1)"
    type_id = _CONTROL_KEY.unpack_from(key)[1]
    try:
        kind = ControlRecordType(type_id)
    except ValueError:
        return f"controlType: UNKNOWN({type_id})"
    if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        try:
            marker = parse_end_txn_marker(key, value)
        except DecodeError as exc:
            return f"endTxnMarker: {kind.name} (invalid value: {exc})"
        return f"endTxnMarker: {marker.type.name} coordinatorEpoch: {marker.coordinator_epoch}"
    return f"controlType: {kind.name}({type_id})"


class _Offsets:
    """Non-consecutive record offsets of one file (deep iteration only)."""

    def __init__(self, report: list[tuple[int, int]]) -> None:
        self.last = -1
        self.report = report

    def see(self, offset: int) -> None:
        if self.last != -1 and offset != self.last + 1:
            self.report.append((self.last, offset))
        self.last = offset


class LogDumper:
    """Prints files to ``out`` and problems to ``err``; ``print_report()`` at the end."""

    def __init__(self, out: TextIO, err: TextIO, options: DumpOptions,
                 advance: Callable[[int], None] | None = None, command: str = "dump-log") -> None:
        self._write = out.write
        self._err = err
        self.options = options
        self._advance = advance or (lambda n: None)
        self._command = command
        self.index_mismatches: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.time_mismatches: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.time_out_of_order: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.time_not_found: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.non_consecutive: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.failed_sanity_checks = 0
        self.undecodable_batches = 0
        # per .log: (base offset, last offset, position, reason) of batches not decoded
        self.undecodable: dict[str, list[tuple[int, int, int, str]]] = defaultdict(list)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed_sanity_checks or self.undecodable_batches else 0

    def _warn(self, message: str) -> None:
        print(f"kafkalog {self._command}: warning: {message}", file=self._err, flush=True)

    def _error(self, message: str) -> None:
        print(f"kafkalog {self._command}: error: {message}", file=self._err, flush=True)

    # --- dispatch ---

    def dump(self, path: Path, label: str | None = None) -> None:
        """Print one file, by suffix (the caller has checked it is a known one)."""
        path = Path(path)
        self._write(f"Dumping {label or path}\n")
        suffix = path.suffix
        if suffix == logfiles.LOG_FILE_SUFFIX:
            self.dump_log(path)
            return
        size = path.stat().st_size
        if suffix == logfiles.INDEX_FILE_SUFFIX:
            self.dump_offset_index(path)
        elif suffix == logfiles.TIME_INDEX_FILE_SUFFIX:
            self.dump_time_index(path)
        elif suffix == logfiles.TXN_INDEX_FILE_SUFFIX:
            self.dump_txn_index(path)
        elif suffix == logfiles.PRODUCER_SNAPSHOT_FILE_SUFFIX:
            self.dump_snapshot(path)
        else:
            raise ValueError(f"{path}: unknown file type {suffix!r}")
        self._advance(size)

    # --- .log ---

    def dump_log(self, path: Path) -> None:
        base = base_offset_of(path)
        if base is not None:
            self._write(f"Log starting offset: {base}\n")
        max_bytes = self.options.max_bytes
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            end = size if max_bytes is None else min(size, max_bytes)
            walk = LogWalk(fd, 0, end)
            offsets = _Offsets(self.non_consecutive[str(path.absolute())])
            done = 0
            undecodable = self.undecodable[str(path.absolute())]
            for entry in walk:
                if entry.magic == CURRENT_MAGIC:
                    self._batch(fd, entry, offsets, undecodable)
                else:
                    self._legacy_entry(fd, entry, offsets, undecodable)
                self._advance(entry.position + entry.size - done)
                done = entry.position + entry.size
            if walk.problem is not None:
                self._warn(f"{path}: {walk.problem}")
            trailing = size - walk.valid_end
            if trailing > 0 and (max_bytes is None or max_bytes >= size):
                self._write(f"Found {trailing} invalid bytes at the end of {path.name}\n")
            self._advance(size - done)
        finally:
            os.close(fd)

    def _batch(self, fd: int, entry: LogEntry, offsets: _Offsets,
               undecodable: list[tuple[int, int, int, str]]) -> None:
        data = entry.data
        if data is not None:
            h = read_header(data)
            crc = crc32c(data[ATTRIBUTES_OFFSET:])
        else:
            h = read_header(_pread(fd, entry.position, RECORD_BATCH_OVERHEAD))
            crc = _stream_crc(fd, entry.position + ATTRIBUTES_OFFSET, entry.position + entry.size,
                              crc32c)
        ts_type = "LogAppendTime" if h.timestamp_type == LOG_APPEND_TIME else "CreateTime"
        horizon = _optional_long(h.base_timestamp if h.has_delete_horizon else None)
        self._write(
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
            f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
            f"deleteHorizonMs: {horizon} position: {entry.position} {ts_type}: {h.max_timestamp} "
            f"size: {entry.size} magic: {h.magic} compresscodec: {_codec_name(h.compression)} "
            f"crc: {h.crc} isvalid: {_bool(crc == h.crc)}\n")
        if not self.options.deep:
            return
        budget = self.options.max_decompressed_bytes
        try:
            payload = records_payload(_entry_bytes(fd, entry), 0, h, budget)
            records = decode_records(payload, h)
        except DecodeError as exc:
            reason = str(exc)
            self.undecodable_batches += 1
            undecodable.append((h.base_offset, h.last_offset, entry.position, reason))
            offsets.last = h.last_offset  # reported above, not again as non-consecutive
            self._write(f"{RECORD_INDENT} records could not be decoded: {reason}\n")
            return
        metadata = not self.options.skip_record_metadata
        is_control = h.is_control
        data = self.options.printing_data and not is_control
        base_sequence, base_offset = h.base_sequence, h.base_offset
        see = offsets.see
        lines = []
        for rec in records:
            see(rec.offset)
            parts = []
            if metadata:
                seq = NO_SEQUENCE if base_sequence == NO_SEQUENCE else (
                    (base_sequence + rec.offset - base_offset) % _SEQUENCE_MODULUS)
                key, value = rec.key, rec.value
                parts.append(f"offset: {rec.offset} {ts_type}: {rec.timestamp} "
                             f"keySize: {-1 if key is None else len(key)} "
                             f"valueSize: {-1 if value is None else len(value)} sequence: {seq} "
                             f"headerKeys: [{','.join([k for k, _ in rec.headers])}]")
                if is_control:
                    parts.append(_control_text(rec.key, rec.value))
            if data:
                self._append_data(parts, rec.offset, rec.key, rec.value)
            lines.append(f"{RECORD_INDENT} {' '.join(parts)}".rstrip())
        lines.append("")
        self._write("\n".join(lines))

    def _append_data(self, parts: list[str], offset: int, key: bytes | None, value: bytes | None) -> None:
        decoder = self.options.decoder
        if decoder is not None:
            key_text, value_text = decoder(offset, key, value)
            if key_text is not None:
                parts.append(f"key: {key_text}")
            if value_text is not None:
                parts.append(f"payload: {value_text}")
            return
        if key is not None:
            parts.append(f"key: {_text(key)}")
        if value is not None:
            parts.append(f"payload: {_text(value)}")

    def _legacy_entry(self, fd: int, entry: LogEntry, offsets: _Offsets,
                      undecodable: list[tuple[int, int, int, str]]) -> None:
        data = _entry_bytes(fd, entry)
        offset = struct.unpack_from(">q", data, 0)[0]
        crc, magic, attributes = _LEGACY_HEADER.unpack_from(data, LOG_OVERHEAD)
        if magic == 1:
            timestamp = _LEGACY_TIMESTAMP.unpack_from(data, LOG_OVERHEAD + _LEGACY_HEADER.size)[0]
            ts_type = "LogAppendTime" if attributes & _LEGACY_TIMESTAMP_TYPE_MASK else "CreateTime"
        else:
            timestamp, ts_type = NO_TIMESTAMP, "NoTimestampType"
        valid = zlib.crc32(data[_LEGACY_CRC_START:]) == crc
        self._write(f"offset: {offset} position: {entry.position} {ts_type}: {timestamp} "
                    f"size: {entry.size} magic: {magic} compresscodec: {_codec_name(attributes & 0x07)} "
                    f"crc: {crc} isvalid: {_bool(valid)}\n")
        if not self.options.deep:
            return
        try:
            records = list(iter_legacy_records(data, self.options.max_decompressed_bytes))
        except DecodeError as exc:
            self.undecodable_batches += 1
            undecodable.append((offset, offset, entry.position, str(exc)))
            self._write(f"{RECORD_INDENT} records could not be decoded: {exc}\n")
            return
        for rec in records:
            offsets.see(rec.offset)
            parts = []
            if not self.options.skip_record_metadata:
                parts.append(f"offset: {rec.offset} {ts_type}: {rec.timestamp} "
                             f"keySize: {_size(rec.key)} valueSize: {_size(rec.value)} "
                             f"isValid: true crc: {rec.crc}")
            if self.options.printing_data:
                self._append_data(parts, rec.offset, rec.key, rec.value)
            self._write(f"{RECORD_INDENT} {' '.join(parts)}".rstrip() + "\n")

    # --- .index / .timeindex ---

    def _sibling(self, path: Path, suffix: str) -> Path:
        return path.with_name(path.name.split(".", 1)[0] + suffix)

    def _sanity_check(self, path: Path, make_index) -> None:
        index = make_index()
        try:
            index.sanity_check()
        except CorruptIndexError as exc:
            self.failed_sanity_checks += 1
            self._error(f"{path} failed sanity check: {exc}")
            return
        finally:
            index.close_handler()
        self._write(f"{path} passed sanity check.\n")

    def dump_offset_index(self, path: Path) -> None:
        base = self._index_base(path)
        with open(path, "rb") as f:
            empty = _offset_index_first(f.read(OFFSET_ENTRY.size)) is None
        if empty:
            self._write(f"{path} is empty.\n")
            return
        if self.options.index_sanity_check:
            self._sanity_check(path, lambda: OffsetIndex(path, base, -1, writable=False))
            return
        log_path = self._sibling(path, logfiles.LOG_FILE_SUFFIX)
        fd = self._open_log_for(path, log_path)
        mismatches = self.index_mismatches[str(path.absolute())]
        verify_only = self.options.verify_index_only
        try:
            for offset, position in _offset_index_entries(path, base):
                if fd is not None:
                    log_offset = _last_offset_at(fd, position)
                    if log_offset != offset:
                        mismatches.append((offset, log_offset))
                if not verify_only:
                    self._write(f"offset: {offset} position: {position}\n")
        finally:
            if fd is not None:
                os.close(fd)

    def dump_time_index(self, path: Path) -> None:
        base = self._index_base(path)
        if self.options.index_sanity_check:
            self._sanity_check(path, lambda: TimeIndex(path, base, -1, writable=False))
            return
        log_path = self._sibling(path, logfiles.LOG_FILE_SUFFIX)
        index_path = self._sibling(path, logfiles.INDEX_FILE_SUFFIX)
        fd = self._open_log_for(path, log_path)
        offset_index = None
        if fd is not None and index_path.exists():
            offset_index = OffsetIndex(index_path, base, -1, writable=False)
        key = str(path.absolute())
        verify_only = self.options.verify_index_only
        try:
            log_size = os.fstat(fd).st_size if fd is not None else 0
            prev_timestamp = NO_TIMESTAMP
            for timestamp, offset in _time_index_entries(path, base):
                if fd is not None:
                    position = offset_index.lookup(offset).position if offset_index is not None else 0
                    found = None
                    for entry in LogWalk(fd, position, log_size):
                        if _last_offset_of(fd, entry) >= offset:
                            found = entry
                            break
                    if found is None:
                        self.time_not_found[key].append((offset, -1))
                    elif (last := _last_offset_of(fd, found)) != offset:
                        self.time_not_found[key].append((offset, last))
                    else:
                        log_ts = self._max_record_timestamp(fd, found)
                        if log_ts != timestamp:
                            self.time_mismatches[key].append((timestamp, log_ts))
                        if prev_timestamp >= timestamp:
                            self.time_out_of_order[key].append((timestamp, prev_timestamp))
                if not verify_only:
                    self._write(f"timestamp: {timestamp} offset: {offset}\n")
                prev_timestamp = timestamp
        finally:
            if offset_index is not None:
                offset_index.close_handler()
            if fd is not None:
                os.close(fd)

    def _index_base(self, path: Path) -> int:
        base = base_offset_of(path)
        if base is None:
            raise ValueError(f"{path}: the file name does not start with the segment's base offset")
        return base

    def _open_log_for(self, index_path: Path, log_path: Path) -> int | None:
        try:
            return os.open(log_path, os.O_RDONLY)
        except FileNotFoundError:
            self._warn(f"{index_path}: no {log_path.name} beside it, entries are not verified")
            return None

    def _max_record_timestamp(self, fd: int, entry: LogEntry) -> int:
        data = _entry_bytes(fd, entry)
        try:
            if entry.magic == CURRENT_MAGIC:
                header = read_header(data)
                payload = records_payload(data, 0, header, self.options.max_decompressed_bytes)
                timestamps = [r.timestamp for r in decode_records(payload, header)]
            else:
                timestamps = [r.timestamp for r in
                              iter_legacy_records(data, self.options.max_decompressed_bytes)]
        except DecodeError:
            return NO_TIMESTAMP
        return max(timestamps, default=NO_TIMESTAMP)

    # --- .txnindex / .snapshot ---

    def dump_txn_index(self, path: Path) -> None:
        with open(path, "rb") as f:
            while True:
                chunk = f.read(_TXN_CHUNK)
                whole = len(chunk) - len(chunk) % ABORTED_TXN_SIZE
                for pos in range(0, whole, ABORTED_TXN_SIZE):
                    txn = AbortedTxn.decode(chunk, pos)
                    self._write(f"version: {txn.version} producerId: {txn.producer_id} "
                                f"firstOffset: {txn.first_offset} lastOffset: {txn.last_offset} "
                                f"lastStableOffset: {txn.last_stable_offset}\n")
                if len(chunk) < _TXN_CHUNK:
                    if whole < len(chunk):
                        self._write(f"Found {len(chunk) - whole} invalid bytes at the end of {path.name}\n")
                    return

    def dump_snapshot(self, path: Path) -> None:
        try:
            entries = read_snapshot(path)
        except CorruptSnapshotError as exc:
            self._warn(f"{path}: {exc}")
            return
        for e in entries:
            line = (f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} "
                    f"coordinatorEpoch: {e.coordinator_epoch} "
                    f"currentTxnFirstOffset: {_optional_long(e.current_txn_first_offset)} "
                    f"lastTimestamp: {e.last_timestamp}")
            if e.batch_metadata:
                m = e.batch_metadata[0]
                line += (f" firstSequence: {m.first_seq} lastSequence: {m.last_seq} "
                         f"lastOffset: {m.last_offset} offsetDelta: {m.offset_delta} "
                         f"timestamp: {m.timestamp}")
            self._write(line + "\n")

    # --- the report (stderr, after every file, in Kafka's words) ---

    def print_report(self) -> None:
        err = self._err
        for name, pairs in self.index_mismatches.items():
            if pairs:
                print(f"Mismatches in :{name}", file=err)
                for index_offset, log_offset in pairs:
                    print(f"  Index offset: {index_offset}, log offset: {log_offset}", file=err)
        for name, pairs in self.time_mismatches.items():
            if pairs:
                print(f"Found timestamp mismatch in :{name}", file=err)
                for index_ts, log_ts in pairs:
                    print(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}", file=err)
        for name, pairs in self.time_out_of_order.items():
            if pairs:
                print(f"Found out of order timestamp in :{name}", file=err)
                for index_ts, prev_ts in pairs:
                    print(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}",
                          file=err)
        for pairs in self.time_not_found.values():
            if pairs:
                print("The following indexed offsets are not found in the log.", file=err)
                for indexed, found in pairs:
                    print(f"Indexed offset: {indexed}, found log offset: {found}", file=err)
        for name, pairs in self.non_consecutive.items():
            if pairs:
                print(f"Non-consecutive offsets in {name}", file=err)
                for first, second in pairs:
                    print(f"  {first} is followed by {second}", file=err)
        for name, bad in self.undecodable.items():
            if bad:
                print(f"Found {len(bad)} batches whose records could not be decoded in :{name}",
                      file=err)
                for base, last, position, reason in bad:
                    print(f"  baseOffset: {base} lastOffset: {last} position: {position}: "
                          f"{reason}", file=err)
        err.flush()


def _offset_index_first(head: bytes) -> tuple[int, int] | None:
    """The first (relative offset, position) of an offset index, or None when empty."""
    if len(head) < OFFSET_ENTRY.size:
        return None
    rel, position = OFFSET_ENTRY.unpack_from(head)
    return None if rel == 0 else (rel, position)


def _offset_index_entries(path: Path, base: int) -> Iterator[tuple[int, int]]:
    """(offset, position) of each entry, streamed; stops at the preallocated zero tail (a
    relative offset 0 never starts a real entry: position 0 is never indexed)."""
    for rel, position in _index_records(path, OFFSET_ENTRY):
        if rel == 0:
            return
        yield base + rel, position


def _time_index_entries(path: Path, base: int) -> Iterator[tuple[int, int]]:
    """(timestamp, offset) of each entry; stops at a zero entry after the first (Kafka's
    rule) or at an all-zero first entry."""
    for i, (timestamp, rel) in enumerate(_index_records(path, TIME_ENTRY)):
        if rel == 0 and (i > 0 or timestamp == 0):
            return
        yield timestamp, base + rel


def _index_records(path: Path, entry: struct.Struct) -> Iterator[tuple[int, int]]:
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_INDEX_CHUNK)
            whole = len(chunk) - len(chunk) % entry.size
            yield from entry.iter_unpack(memoryview(chunk)[:whole])
            if len(chunk) < _INDEX_CHUNK:
                return


def _last_offset_at(fd: int, position: int) -> int:
    """Last offset of the entry at ``position`` of the log, or -1 when none starts there."""
    head = _pread(fd, position, RECORD_BATCH_OVERHEAD)
    peek = peek_entry(head, 0, len(head))
    if peek is None:
        return -1
    base_offset, size, magic = peek
    if _entry_problem(size, magic) is not None:
        return -1
    if magic == CURRENT_MAGIC:
        if len(head) < RECORD_BATCH_OVERHEAD:
            return -1
        return base_offset + _LAST_OFFSET_DELTA.unpack_from(head, _LAST_OFFSET_DELTA_POS)[0]
    return base_offset  # a magic 0/1 entry (a wrapper carries its last inner offset)


def _last_offset_of(fd: int, entry: LogEntry) -> int:
    if entry.data is not None:
        base_offset = struct.unpack_from(">q", entry.data, 0)[0]
        if entry.magic == CURRENT_MAGIC:
            return base_offset + _LAST_OFFSET_DELTA.unpack_from(entry.data, _LAST_OFFSET_DELTA_POS)[0]
        return base_offset
    return _last_offset_at(fd, entry.position)

