"""Topics as tables: what the Iceberg and the Delta targets share.

Owns the table side of an export (``spark_kafkalog.tables``), independent of the format:

- ``TableOffsets``: the offsets a table holds, per topic-partition the next offset to
  export (every offset below it is in the table, or held no record), with the topic's
  name and id. A table is its own checkpoint: the offsets are written in the same atomic
  commit as the data files, so that a table never holds data its offsets do not cover, or
  offsets whose data is missing.
  - Iceberg: the snapshot summary property ``kafkalog.offsets`` (``OFFSETS_PROPERTY``),
    the JSON of ``TableOffsets.to_json``; a snapshot without it (a maintenance commit of
    another tool) inherits its parent's, found by walking back to the newest ancestor
    that has it.
  - Delta: one application transaction (``txn`` action) per topic-partition, app id
    ``TableOffsets.app_id(p)`` = ``kafkalog:<topic id>:<partition>``, version = the next
    offset; and the whole JSON in the commit info under ``kafkalog.offsets``.
- ``WrittenFile``: one Parquet data file an executor wrote for one commit: its URI, size,
  record count, the Kafka partition and offset range of its rows, and the values of the
  table's partition columns its rows share.
- ``TableState``: a table as of one commit: its version (Iceberg snapshot id, Delta
  version), offsets, Arrow schema and data files.
- ``TableTarget``: what each format implements (``iceberg.py``, ``delta.py``): load the
  state, say where a run writes its files, commit atomically (creating the table on the
  first commit, evolving its schema), compact, expire old versions, remove orphans.
- The errors: ``TableError`` (one line for the user), ``CommitConflictError`` (another
  writer committed since the state a commit was based on: nothing was committed, reload
  and drop the overlap), ``TopicIdMismatchError`` (the table holds another incarnation of
  the topic).

The layout of a table (its columns and partitioning) is ``layout.py``'s.

Invariants: ``TableOffsets.next_offsets`` never decreases across commits of one table;
``TableOffsets.from_json`` accepts exactly what ``to_json`` writes (and fails with
``TableError`` on anything else); a ``WrittenFile`` holds rows of one Kafka partition, with
offsets in ``[first_offset, last_offset]``.

Thread-safety: the dataclasses are immutable; a ``TableTarget`` is used by one thread at a
time (the driver's), its commits serialised by the table format's own optimistic
concurrency, never by a lock of this process.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "OFFSETS_PROPERTY", "TableError", "CommitConflictError", "TopicIdMismatchError", "TableOffsets",
    "WrittenFile", "TableState", "TableTarget",
]

OFFSETS_PROPERTY = "kafkalog.offsets"
_OFFSETS_VERSION = 1


class TableError(Exception):
    """A table could not be read, created or committed to; the message is one line for
    the user."""


class CommitConflictError(TableError):
    """Another writer committed to the table after the state a commit was based on. The
    commit did not happen; the caller reloads the table and drops what is now in it."""


class TopicIdMismatchError(TableError):
    """The table holds offsets of a topic of the same name but another topic id (the topic
    was deleted and created again): its offsets mean nothing for the new one."""


@dataclass(frozen=True)
class TableOffsets:
    """The offsets a table holds: per partition, the next offset to export."""

    topic: str
    topic_id: str | None                 # Kafka's topic id as Kafka prints it; None: unknown
    next_offsets: Mapping[int, int] = field(default_factory=dict)

    def to_json(self) -> str:
        """``{"version":1,"topic":...,"topicId":...,"partitions":{"0":N,...}}``, compact,
        partitions in numeric order."""
        parts = {str(p): int(o) for p, o in sorted(self.next_offsets.items())}
        return json.dumps({"version": _OFFSETS_VERSION, "topic": self.topic, "topicId": self.topic_id,
                           "partitions": parts}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> TableOffsets:
        try:
            obj = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise TableError(f"{OFFSETS_PROPERTY} is not JSON: {exc}") from None
        if not isinstance(obj, dict) or obj.get("version") != _OFFSETS_VERSION:
            raise TableError(f"{OFFSETS_PROPERTY}: not kafkalog's offsets of version {_OFFSETS_VERSION}: "
                             f"{str(text)[:200]}")
        topic, topic_id, parts = obj.get("topic"), obj.get("topicId"), obj.get("partitions")
        if not isinstance(topic, str) or not topic or not (topic_id is None or isinstance(topic_id, str)) \
                or not isinstance(parts, dict):
            raise TableError(f"{OFFSETS_PROPERTY}: topic, topicId or partitions missing or of the wrong type")
        offsets: dict[int, int] = {}
        for p, o in parts.items():
            if not (isinstance(p, str) and p.isdigit() and isinstance(o, int) and not isinstance(o, bool)
                    and o >= 0):
                raise TableError(f"{OFFSETS_PROPERTY}: partition {p!r} -> {o!r} is not a partition and an offset")
            offsets[int(p)] = o
        return cls(topic, topic_id, offsets)

    def app_id(self, partition: int) -> str:
        """Delta's application transaction id for ``partition``."""
        return f"kafkalog:{self.topic_id or self.topic}:{partition}"

    def advanced(self, next_offsets: Mapping[int, int]) -> TableOffsets:
        """These offsets with ``next_offsets`` merged in (per partition the larger)."""
        merged = dict(self.next_offsets)
        for p, o in next_offsets.items():
            merged[p] = max(o, merged.get(p, 0))
        return TableOffsets(self.topic, self.topic_id, merged)


@dataclass(frozen=True)
class WrittenFile:
    """One data file an executor wrote (Parquet), not yet in the table."""

    path: str                            # absolute URI: file:///..., s3://bucket/key
    size: int                            # bytes
    records: int
    partition: int                       # the Kafka partition of every row
    first_offset: int
    last_offset: int
    # the table's partition columns -> their value in every row, as text (Delta's
    # partitionValues form; None: null)
    partition_values: Mapping[str, str | None] = field(default_factory=dict)
    # Delta's per-file statistics JSON (numRecords, minValues, maxValues, nullCount) as
    # the writer computed them; None: the target reads them from the file's footer
    stats: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "records": self.records, "partition": self.partition,
                "first_offset": self.first_offset, "last_offset": self.last_offset,
                "partition_values": dict(self.partition_values), "stats": self.stats}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WrittenFile:
        return cls(d["path"], int(d["size"]), int(d["records"]), int(d["partition"]), int(d["first_offset"]),
                   int(d["last_offset"]), dict(d.get("partition_values") or {}), d.get("stats"))


@dataclass(frozen=True)
class TableState:
    """A table as of one commit. ``version`` None: the table does not exist yet."""

    format: str                          # "iceberg" or "delta"
    location: str                        # the table's URI (or catalog identifier for messages)
    version: int | None                  # Iceberg snapshot id, Delta version
    offsets: TableOffsets | None
    schema: Any = None                   # pyarrow.Schema of the table, None before the first commit
    files: tuple[str, ...] = ()          # the data files' URIs (bridge reads)


class TableTarget(ABC):
    """One table of one format, on the driver.

    ``storage_options``: what the executors need to write files where ``data_location``
    says (``{}`` locally; for S3 ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ... as
    deltalake names them), kept out of reprs."""

    format: ClassVar[str]

    @abstractmethod
    def load(self) -> TableState:
        """The table's latest state (``version`` None when it does not exist). Raises
        ``TableError`` when it exists but cannot be read."""

    @abstractmethod
    def ensure(self, schema: Any, partition_by: Sequence[str]) -> TableState:
        """Create the table when it does not exist, with ``schema`` (a pyarrow.Schema: the
        layout's columns, partition columns included) partitioned by ``partition_by``
        (``layout.py``'s spelling: a column name for identity partitioning, or
        ``day(col)`` / ``hour(col)`` / ``month(col)`` / ``year(col)`` for Iceberg's time
        transforms); when it exists, add the columns of ``schema`` it lacks (as nullable
        columns: a compatible evolution) and refuse, with ``TableError``, a column whose
        type changed incompatibly. Creating or evolving is a commit of its own, without
        data or offsets. Returns the state after it."""

    @abstractmethod
    def data_location(self, run_id: str) -> str:
        """The URI prefix under which one run's executors write their data files; a run's
        files are never referenced until ``commit`` adds them."""

    @abstractmethod
    def storage_options(self) -> dict[str, str]:
        """What the executors need to open ``data_location`` (see the class docstring)."""

    @abstractmethod
    def commit(self, base: TableState, files: Sequence[WrittenFile], offsets: TableOffsets) -> TableState:
        """Add ``files`` (written under ``data_location``, with the table's schema; for
        Delta without the partition columns, whose values are ``partition_values``) and
        store ``offsets``, in one atomic commit on top of ``base`` (a state ``ensure`` or
        ``load`` returned). ``files`` may be empty: the offsets still advance (a range
        that held no record). Raises ``CommitConflictError`` when the table changed after
        ``base`` (nothing committed), ``TableError`` otherwise. Returns the new state."""

    @abstractmethod
    def compact(self, target_file_size: int) -> TableState:
        """Rewrite small files into files of about ``target_file_size`` bytes; the offsets
        stored stay what they were."""

    @abstractmethod
    def expire(self, older_than_ms: int, retain_last: int) -> int:
        """Iceberg: expire snapshots older than ``older_than_ms`` (epoch ms) but the last
        ``retain_last``; Delta: vacuum files no version after ``older_than_ms`` needs.
        Returns how many snapshots or files went."""

    @abstractmethod
    def scan_files(self, version: int) -> list[tuple[str, dict[str, Any]]]:
        """The data files of the table as of ``version`` (a ``TableState.version``), each
        with the values of the partition columns its rows share that the file does not
        hold (Delta's ``partitionValues``, typed; ``{}`` for Iceberg, whose files hold every
        column): what a bridge read scans. Raises ``TableError`` when the version is gone
        (expired, vacuumed) or cannot be read."""

    @abstractmethod
    def remove_orphans(self, older_than_ms: int) -> int:
        """Delete data files under this table's run locations that no version references and
        that are older than ``older_than_ms`` (runs killed before their commit). Returns
        how many went."""
