"""The ``cleaner-offset-checkpoint`` file of a log directory (Kafka's ``OffsetCheckpointFile``).

Owns: the first dirty offset of each compacted log of one log directory, i.e. where the
next cleaning starts (everything below it has been cleaned at least once). Format (shared
with the recovery-point checkpoint, read and written by ``files.read_offset_checkpoint`` /
``files.write_offset_checkpoint``, atomically)::

    0                 <- version
    2                 <- number of entries
    topic-a 0 1234    <- topic partition firstDirtyOffset
    topic-b 3 99

Invariants: an entry only moves forward except when the log is truncated below it or its
start offset passes it (the manager then resets it); a missing or unreadable file means
"nothing cleaned yet" (a warning is logged for an unreadable one: cleaning restarts from
the log start, which is safe).

Thread-safety: ``CleanerCheckpoints`` serialises reads and writes of each directory's file
under its own lock.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from .. import files

__all__ = ["CLEANER_OFFSET_CHECKPOINT_FILE", "CleanerCheckpoints"]

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"


class CleanerCheckpoints:
    def __init__(self) -> None:
        self._lock = threading.Lock()

    @staticmethod
    def path(log_dir: Path | str) -> Path:
        return Path(log_dir) / CLEANER_OFFSET_CHECKPOINT_FILE

    def read(self, log_dir: Path | str) -> dict[tuple[str, int], int]:
        with self._lock:
            return self._read(log_dir)

    def _read(self, log_dir) -> dict[tuple[str, int], int]:
        try:
            return files.read_offset_checkpoint(self.path(log_dir))
        except (ValueError, OSError) as exc:
            log.warning("unreadable cleaner checkpoint in %s (%s): cleaning restarts from the log start",
                        log_dir, exc)
            return {}

    def update(self, log_dir: Path | str, topic_partition: tuple[str, int], offset: int | None) -> None:
        """Set (or with ``offset=None`` remove) one log's entry."""
        with self._lock:
            entries = self._read(log_dir)
            if offset is None:
                if entries.pop(topic_partition, None) is None:
                    return
            else:
                entries[topic_partition] = offset
            files.write_offset_checkpoint(self.path(log_dir), entries)
