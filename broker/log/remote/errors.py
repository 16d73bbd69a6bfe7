"""Errors of tiered storage (KIP-405).

``OffsetMovedToTieredStorageError``: ``UnifiedLog.read`` of an offset in
[log_start_offset, local_log_start_offset): it lives only in remote storage. A subclass of
``LogOffsetOutOfRangeError``, so a caller that does not serve remote reads answers
OFFSET_OUT_OF_RANGE, as Kafka's replica fetcher path would. ``RemoteStorageError``: a
remote storage manager's failure (pyarrow's ``OSError`` wrapped with the object's URI).

No state; thread-safe.
"""

from __future__ import annotations

from ..errors import LogError, LogOffsetOutOfRangeError


class OffsetMovedToTieredStorageError(LogOffsetOutOfRangeError):
    """Kafka's OffsetMovedToTieredStorageException: the offset is below the local log start."""


class RemoteStorageError(LogError):
    """Kafka's RemoteStorageException: a remote storage manager's read or write failed."""
