"""The transaction index (.txnindex): the aborted transactions whose ABORT marker lies in
a segment, for READ_COMMITTED fetches.

Owns: ``AbortedTxn`` (its 34-byte layout) and ``TransactionIndex`` (append, truncate,
search, lifecycle), Kafka's ``TransactionIndex`` / ``AbortedTxn``. Deciding *which*
transactions aborted is the producer state's job; this module only stores them.

On-disk format: back-to-back entries, big-endian, no header, no checksum (the index is
rebuilt by segment recovery when in doubt). Schema ``AbortedTxn.json``, version 0::

    offset  size  field
    0       2     version           int16  (0)
    2       8     producerId        int64
    10      8     firstOffset       int64  first offset of the aborted transaction
    18      8     lastOffset        int64  offset of its ABORT marker
    26      8     lastStableOffset  int64  the LSO when the marker was written

Unlike the offset and time indexes the file is not preallocated nor mapped, and it is
created only when the first entry is appended: most segments never have one.

Invariants: entries are in append order with strictly increasing ``lastOffset`` (append
raises otherwise; the last offset is reloaded from the file on open, which Kafka does
not do). ``sanity_check()`` raises ``CorruptIndexError`` when an entry ends before the
segment's base offset, when a version is unknown, or when the file is not a whole number
of entries (a torn append); an append after a torn tail first cuts the partial entry.
``collect_aborted_txns`` and ``truncate_to`` stream the file in fixed-size chunks, so
memory does not grow with the index.

Thread-safety: one lock guards the descriptor and the size; the writer (holding the log's
lock) and fetch threads (READ_COMMITTED) may call in concurrently. Searches hold the lock
only while reading each chunk.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from .errors import CorruptIndexError

__all__ = ["AbortedTxn", "TransactionIndex", "TxnIndexSearchResult", "ABORTED_TXN_SIZE"]

# version int16 @0 | producerId int64 @2 | firstOffset int64 @10 | lastOffset int64 @18
# | lastStableOffset int64 @26  -> 34 bytes
ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = ABORTED_TXN.size
CURRENT_VERSION = 0
_ENTRIES_PER_READ = 512


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def encode(self) -> bytes:
        return ABORTED_TXN.pack(self.version, self.producer_id, self.first_offset,
                                self.last_offset, self.last_stable_offset)

    @classmethod
    def decode(cls, buf, pos: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = ABORTED_TXN.unpack_from(buf, pos)
        return cls(pid, first, last, lso, version)

    def as_aborted_transaction(self) -> tuple[int, int]:
        """(producer id, first offset): what a FetchResponse lists."""
        return self.producer_id, self.first_offset


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: list[AbortedTxn]
    # False when an entry's lastStableOffset >= upper bound was not seen, i.e. the search
    # must continue into the next segment (Kafka's isComplete).
    is_complete: bool


class TransactionIndex:
    def __init__(self, start_offset: int, file: Path | str) -> None:
        self._lock = threading.Lock()
        self._start_offset = start_offset
        self._file = Path(file)
        self._fd: int | None = None
        self._size = 0
        self._last_offset: int | None = None
        if self._file.exists():
            with self._lock:
                fd = self._open()
                whole = self._size - self._size % ABORTED_TXN_SIZE
                if whole:
                    buf = os.pread(fd, ABORTED_TXN_SIZE, whole - ABORTED_TXN_SIZE)
                    if len(buf) == ABORTED_TXN_SIZE:
                        self._last_offset = AbortedTxn.decode(buf).last_offset

    # --- descriptor (call under _lock) ---

    def _open(self, create: bool = False) -> int:
        if self._fd is None:
            flags = os.O_RDWR | (os.O_CREAT if create else 0)
            self._fd = os.open(self._file, flags, 0o644)
            self._size = os.fstat(self._fd).st_size
        return self._fd

    def _fd_if_exists(self) -> int | None:
        if self._fd is None:
            try:
                self._open()
            except FileNotFoundError:
                return None
        return self._fd

    # --- properties ---

    @property
    def file(self) -> Path:
        return self._file

    path = file

    @property
    def start_offset(self) -> int:
        return self._start_offset

    @property
    def last_offset(self) -> int | None:
        return self._last_offset

    def size_in_bytes(self) -> int:
        return self._size

    def update_parent_dir(self, parent_dir: Path | str) -> None:
        with self._lock:
            self._file = Path(parent_dir) / self._file.name

    # --- mutation ---

    def append(self, txn: AbortedTxn) -> None:
        with self._lock:
            if self._last_offset is not None and self._last_offset >= txn.last_offset:
                raise ValueError(
                    f"the last offset of appended transactions must increase, but "
                    f"{txn.last_offset} is not greater than the current last offset "
                    f"{self._last_offset} of index {self._file}")
            fd = self._open(create=True)
            torn = self._size % ABORTED_TXN_SIZE
            if torn:
                self._size -= torn
                os.ftruncate(fd, self._size)
            data = txn.encode()
            written = 0
            while written < len(data):
                written += os.pwrite(fd, data[written:], self._size + written)
            self._size += len(data)
            self._last_offset = txn.last_offset

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose last offset is >= ``offset``."""
        new_last = None
        for position, txn in self._iter_with_positions():
            if txn.last_offset >= offset:
                with self._lock:
                    if self._fd is not None:
                        os.ftruncate(self._fd, position)
                        self._size = position
                    self._last_offset = new_last
                return
            new_last = txn.last_offset

    def reset(self) -> None:
        """Remove every entry (the file, if any, is kept and emptied)."""
        with self._lock:
            fd = self._fd_if_exists()
            if fd is not None:
                os.ftruncate(fd, 0)
            self._size = 0
            self._last_offset = None

    def flush(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def delete_if_exists(self) -> bool:
        self.close()
        with self._lock:
            try:
                self._file.unlink()
                return True
            except FileNotFoundError:
                return False

    def rename_to(self, path: Path | str) -> None:
        path = Path(path)
        with self._lock:
            try:
                if self._file.exists():
                    os.replace(self._file, path)
            finally:
                self._file = path

    # --- reading ---

    def _iter_with_positions(self, check_version: bool = True) -> Iterator[tuple[int, AbortedTxn]]:
        position = 0
        while True:
            with self._lock:
                fd = self._fd_if_exists()
                if fd is None:
                    return
                whole = self._size - self._size % ABORTED_TXN_SIZE
                n = min(whole - position, ABORTED_TXN_SIZE * _ENTRIES_PER_READ)
                if n <= 0:
                    return
                buf = os.pread(fd, n, position)
            for p in range(0, len(buf) - ABORTED_TXN_SIZE + 1, ABORTED_TXN_SIZE):
                txn = AbortedTxn.decode(buf, p)
                if check_version and txn.version > CURRENT_VERSION:
                    raise CorruptIndexError(
                        f"unexpected aborted transaction version {txn.version} in transaction "
                        f"index {self._file}, current version is {CURRENT_VERSION}")
                yield position + p, txn
            if len(buf) < n:
                return
            position += n

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return [txn for _, txn in self._iter_with_positions()]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset), and whether
        the search is complete (an entry's LSO reached the upper bound)."""
        found: list[AbortedTxn] = []
        for _, txn in self._iter_with_positions():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        for _, txn in self._iter_with_positions():
            if txn.last_offset < self._start_offset:
                raise CorruptIndexError(
                    f"last offset of aborted transaction {txn} in index {self._file} is less "
                    f"than start offset {self._start_offset}")
        if self._size % ABORTED_TXN_SIZE:
            raise CorruptIndexError(
                f"transaction index {self._file} has {self._size} bytes, not a multiple of "
                f"{ABORTED_TXN_SIZE}")

    def __repr__(self) -> str:
        return f"TransactionIndex(file={str(self._file)!r}, start_offset={self._start_offset})"
