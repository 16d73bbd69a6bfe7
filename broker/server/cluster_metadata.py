"""Dynamic cluster metadata: what Kafka keeps as records of its KRaft metadata log
(``ClientQuotaRecord``, ``UserScramCredentialRecord``, ``ConfigRecord`` of client-metrics
resources, ``AccessControlEntryRecord``...), kept by a single node in one small file.

Owns ``ClusterMetadataStore``: named sections, each a JSON object of the section owner's
design (documented by that owner), in ``kafkalog-cluster-metadata.json``, written
atomically (``broker.log.files.atomic_write``: temp file, fsync, rename, fsync dir) to
EVERY online log directory on each change, exactly as the topic registry
(``metadata.py``). Format::

    {"version": 1,            # format version (1)
     "epoch": 7,              # +1 on every write; the highest readable copy wins
     "node_id": 1,
     "sections": {"client_quotas": [...], ...}}

Invariants: a change is visible in memory only once at least one copy is on disk (a
crash leaves the old or the new content, never a mix); a section's value is whatever its
owner stored (plain JSON types), returned as a deep copy, so callers never share state.

Thread-safety: ``update`` is a read-modify-write under the store's lock (changes are
rare: admin requests); ``get`` returns a copy of the current snapshot.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from broker.log import files
from broker.log.errors import KafkaStorageError

log = logging.getLogger(__name__)

METADATA_FILE = "kafkalog-cluster-metadata.json"
METADATA_VERSION = 1


class ClusterMetadataStore:
    """See the module docstring. ``live_dirs`` gives the online log directories now."""

    def __init__(self, log_dirs: Iterable[Path], node_id: int,
                 live_dirs: Callable[[], list[Path]] | None = None) -> None:
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        self.node_id = node_id
        self.live_dirs = live_dirs or (lambda: list(self.log_dirs))
        self.epoch = 0
        self._sections: dict[str, Any] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        """Read the highest-epoch readable copy; unreadable copies are logged and skipped."""
        best: tuple[int, dict[str, Any]] | None = None
        for d in self.log_dirs:
            path = d / METADATA_FILE
            if not path.exists():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if data.get("version") != METADATA_VERSION:
                    raise ValueError(f"unknown version {data.get('version')!r}")
                sections = data["sections"]
                if not isinstance(sections, dict):
                    raise ValueError("sections is not an object")
                epoch = int(data["epoch"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("ignoring unreadable cluster metadata %s: %s", path, exc)
                continue
            if best is None or epoch > best[0]:
                best = (epoch, sections)
        if best is not None:
            self.epoch, self._sections = best

    def get(self, section: str, default: Any = None) -> Any:
        with self._lock:
            value = self._sections.get(section, default)
            return copy.deepcopy(value)

    def update(self, section: str, change: Callable[[Any], Any], default: Any = None) -> Any:
        """Store ``change(current copy of section)`` (durably, then in memory); returns
        the new value. ``change`` may raise to abort: nothing is written."""
        with self._lock:
            current = copy.deepcopy(self._sections.get(section, default))
            new = change(current)
            sections = dict(self._sections)
            sections[section] = new
            self._write(sections)
            self._sections = sections
            return copy.deepcopy(new)

    def _write(self, sections: dict[str, Any]) -> None:
        epoch = self.epoch + 1
        data = json.dumps({"version": METADATA_VERSION, "epoch": epoch, "node_id": self.node_id,
                           "sections": sections}, indent=1, sort_keys=True).encode("utf-8")
        written = 0
        dirs = self.live_dirs()
        for d in dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
                files.atomic_write(d / METADATA_FILE, data)
                written += 1
            except OSError as exc:
                log.error("could not write the cluster metadata to %s: %s", d, exc)
        if not written:
            raise KafkaStorageError(f"the cluster metadata could not be written to any of {dirs}")
        self.epoch = epoch


__all__ = ["METADATA_FILE", "ClusterMetadataStore"]
