"""Remote log segment metadata (Kafka's ``RemoteLogSegmentMetadata``) and its manifest file.

Owns: ``RemoteLogSegmentMetadata`` (one copied segment: id, offsets, max timestamp, size,
leader epochs, the names of its data objects) and its JSON form, the *manifest*
``<20-digit base offset>.remote-segment.json``, plus the object names of a remote segment.

Format of a manifest (UTF-8 JSON, one object; unknown keys are ignored by readers)::

    {"version": 1, "topic": "t", "partition": 0, "topic_id": "<base64 id or null>",
     "segment_id": "<uuid hex>", "base_offset": 0, "end_offset": 99,
     "max_timestamp_ms": 1700000000000, "segment_size_in_bytes": 12345,
     "segment_leader_epochs": {"0": 0, "3": 57}, "state": "COPY_SEGMENT_FINISHED",
     "event_timestamp_ms": 1700000000000,
     "objects": ["00000000000000000000.log", "00000000000000000000.index", ...]}

``segment_leader_epochs`` maps each leader epoch of the segment to its first offset in
it (keys are decimal strings: JSON object keys). ``objects`` lists every data object of
the segment, relative to the partition's prefix: Kafka's own local file names
(``.log``, ``.index``, ``.timeindex``, ``.txnindex`` when the segment has aborted
transactions, ``<20-digit next offset>.snapshot`` when a producer snapshot exists at the
segment's end, and ``<20-digit base>.leader-epoch-checkpoint``, the leader-epoch
checkpoint text format restricted to the segment's epochs).

Invariants: a manifest is written only after every object it lists (a segment exists
remotely iff its manifest exists); immutable once written.

Thread-safety: the dataclass is immutable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .. import files

__all__ = ["RemoteLogSegmentMetadata", "MANIFEST_SUFFIX", "COPY_SEGMENT_FINISHED",
           "LEADER_EPOCH_SUFFIX", "manifest_name", "object_name", "base_offset_of"]

MANIFEST_SUFFIX = ".remote-segment.json"
LEADER_EPOCH_SUFFIX = ".leader-epoch-checkpoint"
COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
_VERSION = 1


def object_name(offset: int, suffix: str) -> str:
    """``<20-digit offset><suffix>``: Kafka's local file name of a segment's file."""
    return files.filename_prefix_from_offset(offset) + suffix


def manifest_name(base_offset: int) -> str:
    return object_name(base_offset, MANIFEST_SUFFIX)


def base_offset_of(name: str) -> int | None:
    """The offset in the name of a remote object (``None`` when it is not one of ours)."""
    prefix = name.split(".", 1)[0]
    if len(prefix) != 20 or not prefix.isdigit():
        return None
    return int(prefix)


@dataclass(frozen=True)
class RemoteLogSegmentMetadata:
    """One segment in remote storage (format in the module docstring)."""

    topic: str
    partition: int
    segment_id: str
    base_offset: int
    end_offset: int
    max_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: dict[int, int] = field(default_factory=dict)
    objects: tuple[str, ...] = ()
    topic_id: str | None = None
    event_timestamp_ms: int = 0
    state: str = COPY_SEGMENT_FINISHED

    @property
    def log_object(self) -> str:
        return object_name(self.base_offset, files.LOG_FILE_SUFFIX)

    def object_with_suffix(self, suffix: str) -> str | None:
        """The name of the object ending with ``suffix`` (``None`` when not copied)."""
        for name in self.objects:
            if name.endswith(suffix):
                return name
        return None

    def epoch_for_offset(self, offset: int) -> int | None:
        found = None
        for epoch, start in sorted(self.segment_leader_epochs.items(), key=lambda e: e[1]):
            if start <= offset:
                found = epoch
        return found

    def to_json(self) -> bytes:
        return json.dumps({
            "version": _VERSION, "topic": self.topic, "partition": self.partition,
            "topic_id": self.topic_id, "segment_id": self.segment_id,
            "base_offset": self.base_offset, "end_offset": self.end_offset,
            "max_timestamp_ms": self.max_timestamp_ms,
            "segment_size_in_bytes": self.segment_size_in_bytes,
            "segment_leader_epochs": {str(k): v for k, v in self.segment_leader_epochs.items()},
            "state": self.state, "event_timestamp_ms": self.event_timestamp_ms,
            "objects": list(self.objects)}, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> RemoteLogSegmentMetadata:
        """Parse a manifest; ValueError when it is not one (a clear message)."""
        try:
            d = json.loads(data)
            return cls(topic=d["topic"], partition=int(d["partition"]), segment_id=d["segment_id"],
                       base_offset=int(d["base_offset"]), end_offset=int(d["end_offset"]),
                       max_timestamp_ms=int(d["max_timestamp_ms"]),
                       segment_size_in_bytes=int(d["segment_size_in_bytes"]),
                       segment_leader_epochs={int(k): int(v) for k, v in d["segment_leader_epochs"].items()},
                       objects=tuple(d["objects"]), topic_id=d.get("topic_id"),
                       event_timestamp_ms=int(d.get("event_timestamp_ms", 0)),
                       state=d.get("state", COPY_SEGMENT_FINISHED))
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a remote segment manifest: {exc!r}") from exc
