"""The Delta table target of an export (deltalake, delta-rs), on the driver.

Owns ``DeltaTarget``: a Delta table at a local path or an object-store URI
(``s3://bucket/prefix``; ``storage_options`` are deltalake's: ``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ALLOW_HTTP``, ...).

- Offsets (``base.py``): every kafkalog commit holds one application transaction (``txn``
  action) per topic-partition, app id ``TableOffsets.app_id(p)``, version = the partition's
  next offset, and the whole offsets JSON in its commit info under ``kafkalog.offsets``.
  ``load`` takes the topic and its partitions from the newest commit info that holds them
  (walking the history back past commits of other writers: OPTIMIZE, other appends) and
  each partition's next offset from the txn actions, which are the authoritative ones
  (checkpoints and OPTIMIZE keep them; commit infos are not kept by checkpoints).
- Commits: one ``create_write_transaction`` per export run on the version the run's state
  was loaded at, with ``max_commit_retries=0``: delta-rs commits version ``base + 1`` or
  fails. Without it delta-rs rebases an append over a concurrent append silently (appends
  do not conflict in Delta), which would add the same Kafka records twice; a failed commit
  is a ``CommitConflictError`` when another version landed after ``base`` (nothing of ours
  was committed: each commit carries a unique ``kafkalog.commitId`` that says whose the
  next version is).
- Safe commits on S3: deltalake 1.6 writes ``_delta_log/<version>.json`` with one
  conditional PUT (``If-None-Match: *``: object_store's ``aws_conditional_put=etag``, its
  default, which this target sets explicitly for ``s3://`` tables so that an environment
  variable cannot turn it off); S3 (since 2024), MinIO, R2 and moto answer the second
  writer of a version with 412, which delta-rs reports as "version exists". deltalake 1.6
  has no DynamoDB locking provider any more (``AWS_S3_LOCKING_PROVIDER=dynamodb`` is
  ignored, with an error in its log) and no rename-based commit:
  ``AWS_S3_ALLOW_UNSAFE_RENAME=true`` only wraps the store, its commits stay conditional
  PUTs. This target still never sets it (an environment variable of that name is
  overridden; only the user's ``storage_options`` can set it) and refuses
  ``aws_conditional_put=disabled`` (deltalake cannot commit to S3 without it).
- Data files: the executors write under ``<table>/kafkalog-runs/<run id>/`` (inside the
  table's root, so that vacuum and ``remove_orphans`` see them); commits add them with
  paths relative to the root, their partition values, and Delta's statistics (the
  writer's, or read from the Parquet footer).
- Log cleanup: once the commit infos holding the offsets are gone (delta-rs deletes
  commits past ``delta.logRetentionDuration`` that a checkpoint covers), ``load`` reads the
  txn actions of the checkpoint and of the commits after it.
- Maintenance: ``compact`` is deltalake's OPTIMIZE (the txn actions stay); ``expire`` is a
  vacuum of the files removed before the limit (and before the last ``retain_last``
  versions) plus deltalake's log cleanup; ``remove_orphans`` deletes files of runs that
  never committed. deltalake's ``vacuum(full=True)`` would delete those too, but anywhere
  under the table's root and by vacuum's retention, not only kafkalog's runs.

Schema compatibility (what ``ensure`` adds or refuses) is ``delta_schema.py``'s.

Errors: whatever deltalake raises (a bad URI, missing credentials, a corrupt log) becomes a
``TableError`` of one line naming the table.

Thread-safety: a ``DeltaTarget`` is used by one thread at a time; concurrent writers (other
processes, other targets on the same table) are serialised by Delta's optimistic
concurrency, never by a lock here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlparse

from .base import (
    OFFSETS_PROPERTY,
    CommitConflictError,
    TableError,
    TableOffsets,
    TableState,
    TableTarget,
    WrittenFile,
)
from .delta_schema import adds_fields, bare_type, mismatch

__all__ = ["DeltaTarget", "RUNS_DIR", "COMMIT_ID_PROPERTY"]

RUNS_DIR = "kafkalog-runs"
COMMIT_ID_PROPERTY = "kafkalog.commitId"
_COLUMN = re.compile(r"^[A-Za-z_][\w]*$")
_RUN_ID = re.compile(r"^[\w.-]+$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SCHEMES = ("", "file", "s3", "s3a", "gs", "gcs", "az", "adl", "azure", "abfs", "abfss", "lakefs", "memory")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(\.\d{10}\.\d{10})?\.parquet$")
_HISTORY_PAGES = (16, 128, 1024, None)
_STATS_STRING_LIMIT = 32
_DEFAULT_DELETED_FILE_RETENTION_HOURS = 168
_INTERVAL = re.compile(r"^\s*interval\s+(\d+)\s+(\w+?)s?\s*$", re.IGNORECASE)
_HOURS_PER_UNIT = {"second": 1 / 3600, "minute": 1 / 60, "hour": 1, "day": 24, "week": 168}


def _one_line(exc: BaseException) -> str:
    text = " ".join(_ANSI.sub("", str(exc)).split())
    return (text[:300] + "...") if len(text) > 300 else (text or type(exc).__name__)


def _is_s3(uri: str) -> bool:
    return urlparse(uri).scheme in ("s3", "s3a")


def _norm_uri(uri: str) -> str:
    """``uri`` in one spelling per place: ``file:///abs/path`` for local paths, ``s3://``
    for ``s3a://``, no trailing slash."""
    import os

    parsed = urlparse(uri)
    if parsed.scheme == "":
        return "file://" + os.path.abspath(uri).rstrip("/")
    if parsed.scheme == "file":
        return "file://" + os.path.abspath(parsed.path).rstrip("/")
    if parsed.scheme == "s3a":
        return "s3://" + uri.split("://", 1)[1].rstrip("/")
    return uri.rstrip("/")


class DeltaTarget(TableTarget):
    """One Delta table (module docstring)."""

    format = "delta"

    def __init__(self, table: str, *, topic: str, storage_options: Mapping[str, str] | None = None) -> None:
        if not table:
            raise TableError("a Delta table needs a path or a URI")
        self.table = table.rstrip("/") or table
        scheme = urlparse(self.table).scheme
        if scheme not in _SCHEMES:
            raise TableError(f"Delta table {self.table}: unknown scheme {scheme!r} (a path, or one of "
                             f"{', '.join(s + '://' for s in _SCHEMES if s)})")
        self.topic = topic
        self._root = _norm_uri(self.table)
        self._options = self._effective_options(dict(storage_options or {}))

    def __repr__(self) -> str:
        return f"DeltaTarget({self.table!r}, topic={self.topic!r})"

    # -- options ---------------------------------------------------------------------------

    def _effective_options(self, user: dict[str, str]) -> dict[str, str]:
        """The user's options, plus the safe-commit ones for S3 (module docstring)."""
        if not _is_s3(self.table):
            return user
        upper = {k.upper(): k for k in user}
        options = dict(user)
        put_key = upper.get("AWS_CONDITIONAL_PUT") or upper.get("CONDITIONAL_PUT")
        if put_key is None:
            options["aws_conditional_put"] = "etag"
        elif str(user[put_key]).strip().lower() == "disabled":
            raise TableError(f"Delta table {self.table}: {put_key}=disabled: deltalake commits to S3 with a "
                             f"conditional PUT (If-None-Match), it cannot commit without one")
        if "AWS_S3_ALLOW_UNSAFE_RENAME" not in upper:
            # an environment variable of that name would reach delta-rs: only the user's word counts
            options["AWS_S3_ALLOW_UNSAFE_RENAME"] = "false"
        return options

    def storage_options(self) -> dict[str, str]:
        return dict(self._options)

    # -- deltalake access --------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except TableError:
            raise
        except Exception as exc:  # noqa: BLE001 - deltalake raises DeltaError, OSError, ValueError, ...
            raise TableError(f"Delta table {self.table}: {action}: {_one_line(exc)}") from exc

    def _open(self, version: int | None = None):
        """The ``DeltaTable`` (at ``version``, else the latest), None when there is no table."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        with self._errors("cannot read"):
            try:
                return DeltaTable(self.table, version=version, storage_options=self._options)
            except TableNotFoundError:
                if version is not None:
                    raise
                return None

    def _require(self, version: int | None = None):
        table = self._open(version)
        if table is None:
            raise TableError(f"Delta table {self.table}: does not exist")
        return table

    # -- state -------------------------------------------------------------------------------

    def load(self) -> TableState:
        table = self._open()
        if table is None:
            return TableState(self.format, self.table, None, None)
        return self._state(table)

    def _state(self, table, offsets: TableOffsets | None = None, *, known: bool = False) -> TableState:
        import pyarrow as pa

        with self._errors("cannot read"):
            version = table.version()
            schema = pa.schema(table.schema().to_arrow())
            files = tuple(table.file_uris())
        if not known:
            offsets = self._offsets(table)
        return TableState(self.format, self.table, version, offsets, schema, files)

    def scan_files(self, version: int) -> list[tuple[str, dict[str, Any]]]:
        import pyarrow as pa

        table = self._require(version)
        with self._errors("cannot read"):
            actions = pa.table(table.get_add_actions(flatten=True))
            root = table.table_uri.rstrip("/")
        paths = actions.column("path").to_pylist()
        parts = {name[len("partition."):]: actions.column(name).to_pylist()
                 for name in actions.column_names if name.startswith("partition.")}
        out = []
        for i, path in enumerate(paths):
            uri = path if "://" in path else f"{root}/{unquote(path)}"
            out.append((uri, {name: values[i] for name, values in parts.items()}))
        return out

    def _commit_infos(self, table) -> Iterator[dict[str, Any]]:
        """The commit infos of ``table``'s versions, newest first (as far as the log goes)."""
        version = table.version()
        seen = 0
        for limit in _HISTORY_PAGES:
            with self._errors("cannot read the history"):
                page = table.history(limit)
            history = [h for h in page if int(h.get("version", -1)) <= version]
            yield from history[seen:]
            seen = len(history)
            if limit is None or len(page) < limit:
                return

    def _offsets(self, table) -> TableOffsets | None:
        """The offsets ``table`` holds (module docstring), None when it holds none. When
        no commit info in the log holds them and the log no longer goes back to version 0
        (log cleanup after a checkpoint), the txn actions of the checkpoint and the commits
        after it say which partitions the table holds (``_offsets_from_log``)."""
        stored = None
        oldest = None
        for info in self._commit_infos(table):
            oldest = int(info.get("version", -1))
            raw = info.get(OFFSETS_PROPERTY)
            if raw is None:
                continue
            try:
                stored = TableOffsets.from_json(raw if isinstance(raw, str | bytes) else json.dumps(raw))
            except TableError as exc:
                raise TableError(f"Delta table {self.table}: version {info.get('version')}: {exc}") from None
            break
        if stored is None:
            return self._offsets_from_log(table) if oldest != 0 else None
        next_offsets: dict[int, int] = {}
        with self._errors("cannot read the application transactions"):
            for partition, offset in stored.next_offsets.items():
                txn = table.transaction_version(stored.app_id(partition))
                next_offsets[partition] = int(txn) if txn is not None else offset
        return TableOffsets(stored.topic, stored.topic_id, next_offsets)

    def _offsets_from_log(self, table) -> TableOffsets | None:
        """The offsets of the kafkalog txn actions in the newest checkpoint at or below
        ``table``'s version and the commits after it; of several topic ids, the one updated
        last. None when there are none."""
        import pyarrow.parquet as pq
        from pyarrow import fs as pafs

        from .files import filesystem_for

        version = table.version()
        txns: dict[str, tuple[int, int]] = {}        # app id -> (next offset, last updated)
        with self._errors("cannot read the log"):
            fs, root = filesystem_for(self.table, self._options)
            log = f"{root.rstrip('/')}/_delta_log"
            names = {i.base_name for i in fs.get_file_info(pafs.FileSelector(log)) if i.type == pafs.FileType.File}
            checkpoints: dict[int, list[str]] = {}
            for name in names:
                match = _CHECKPOINT.match(name)
                if match and int(match.group(1)) <= version:
                    checkpoints.setdefault(int(match.group(1)), []).append(name)
                elif ".checkpoint." in name and int(name[:20]) <= version:
                    raise TableError(f"Delta table {self.table}: checkpoint {name}: only classic checkpoints are "
                                     f"read for the offsets")
            start = 0
            if checkpoints:
                start = max(checkpoints)
                for name in sorted(checkpoints[start]):
                    with fs.open_input_file(f"{log}/{name}") as handle:
                        part = pq.ParquetFile(handle)
                        if "txn" not in part.schema_arrow.names:
                            continue
                        rows = part.read(columns=["txn"]).column("txn").to_pylist()
                    for txn in rows:
                        if txn and txn.get("appId"):
                            txns[txn["appId"]] = (int(txn["version"]), int(txn.get("lastUpdated") or 0))
                start += 1
            for v in range(start, version + 1):
                name = f"{v:020d}.json"
                if name not in names:
                    raise TableError(f"Delta table {self.table}: the log lacks {name}")
                with fs.open_input_stream(f"{log}/{name}") as stream:
                    for line in stream.read().decode().splitlines():
                        txn = json.loads(line).get("txn") if line.strip() else None
                        if txn and txn.get("appId"):
                            txns[txn["appId"]] = (int(txn["version"]), int(txn.get("lastUpdated") or 0))
        by_topic: dict[str, dict[int, tuple[int, int]]] = {}
        for app_id, entry in txns.items():
            prefix, _, partition = app_id.rpartition(":")
            if prefix.startswith("kafkalog:") and partition.isdigit():
                by_topic.setdefault(prefix[len("kafkalog:"):], {})[int(partition)] = entry
        if not by_topic:
            return None
        topic_id = max(by_topic, key=lambda t: max(u for _, u in by_topic[t].values()))
        return TableOffsets(self.topic, None if topic_id == self.topic else topic_id,
                            {p: o for p, (o, _) in by_topic[topic_id].items()})

    # -- schema ------------------------------------------------------------------------------

    def ensure(self, schema: Any, partition_by: Sequence[str]) -> TableState:
        import pyarrow as pa

        schema = pa.schema(schema)
        partition_by = list(partition_by)
        for column in partition_by:
            if not _COLUMN.match(column):
                raise TableError(f"Delta table {self.table}: partition by {column!r}: Delta partitions by columns, "
                                 f"not transforms (partition by a column holding the value, e.g. timestamp_date)")
            if column not in schema.names:
                raise TableError(f"Delta table {self.table}: partition column {column!r} is not in the schema")
        table = self._open()
        if table is None:
            table = self._create(schema, partition_by)
        with self._errors("cannot read"):
            existing = table.metadata().partition_columns
        if list(existing) != partition_by:
            raise TableError(f"Delta table {self.table}: partitioned by {existing}, not {partition_by}")
        added = self._evolve(table, schema)
        return self._state(self._require() if added else table)

    def _create(self, schema, partition_by: list[str]):
        from deltalake import DeltaTable

        try:
            with self._errors("cannot create"):
                return DeltaTable.create(self.table, schema=schema, partition_by=partition_by or None, mode="error",
                                         storage_options=self._options)
        except TableError:
            table = self._open()             # created by another writer meanwhile?
            if table is None:
                raise
            return table

    def _evolve(self, table, schema) -> bool:
        """Adds ``schema``'s columns ``table`` lacks (and new fields of struct columns);
        refuses a changed type. True when the schema changed."""
        from deltalake import Field

        with self._errors("cannot read the schema"):
            current = {f.name: f for f in table.schema().fields}
        fields = []
        for arrow_field in schema:
            with self._errors(f"column {arrow_field.name!r}"):
                new = Field.from_arrow(arrow_field.with_nullable(True))
            old = current.get(arrow_field.name)
            if old is None:
                fields.append(new)
                continue
            old_type, new_type = bare_type(old.to_json()), bare_type(new.to_json())
            found = mismatch(old_type, new_type, arrow_field.name)
            if found is not None:
                raise TableError(f"Delta table {self.table}: column {found}: an incompatible change")
            if adds_fields(old_type, new_type):
                fields.append(new)           # deltalake merges the struct's new fields in
        if not fields:
            return False
        with self._errors("cannot add columns " + ", ".join(f.name for f in fields)):
            table.alter.add_columns(fields)
        return True

    # -- commits -----------------------------------------------------------------------------

    def data_location(self, run_id: str) -> str:
        if not _RUN_ID.match(run_id):
            raise TableError(f"run id {run_id!r}: letters, digits, '_', '-' and '.' only")
        return f"{self.table}/{RUNS_DIR}/{run_id}"

    def _relative(self, uri: str) -> str:
        norm = _norm_uri(uri)
        if not norm.startswith(self._root + "/"):
            raise TableError(f"Delta table {self.table}: data file {uri} is not under the table's root")
        return norm[len(self._root) + 1:]

    def commit(self, base: TableState, files: Sequence[WrittenFile], offsets: TableOffsets) -> TableState:
        from deltalake.transaction import AddAction, CommitProperties, Transaction

        if base.version is None:
            raise TableError(f"Delta table {self.table}: does not exist (ensure creates it)")
        if offsets.topic != self.topic:
            raise TableError(f"Delta table {self.table}: offsets of topic {offsets.topic!r}, the table's is "
                             f"{self.topic!r}")
        table = self._require(base.version)
        with self._errors("cannot read"):
            partition_columns = list(table.metadata().partition_columns)
            schema = table.schema()
        stored = self._stored_offsets(table, base, offsets)
        now = int(time.time() * 1000)
        actions, seen = [], set()
        for f in files:
            path = self._relative(f.path)
            if path in seen:
                raise TableError(f"Delta table {self.table}: data file {f.path} given twice")
            seen.add(path)
            if set(f.partition_values) != set(partition_columns):
                raise TableError(f"Delta table {self.table}: data file {f.path} has partition values for "
                                 f"{sorted(f.partition_values)}, the table is partitioned by {partition_columns}")
            stats = f.stats if f.stats is not None else self._footer_stats(f)
            actions.append(AddAction(path, int(f.size), dict(f.partition_values), now, True, stats))
        commit_id = uuid.uuid4().hex
        properties = CommitProperties(
            custom_metadata={OFFSETS_PROPERTY: stored.to_json(), COMMIT_ID_PROPERTY: commit_id},
            max_commit_retries=0,
            app_transactions=[Transaction(stored.app_id(p), int(o), now)
                              for p, o in sorted(stored.next_offsets.items())])
        try:
            table.create_write_transaction(actions, "append", schema, partition_columns,
                                           commit_properties=properties)
        except Exception as exc:  # noqa: BLE001 - decided below: ours, a conflict, or an error
            outcome = self._whose_next(base.version, commit_id)
            if outcome == "ours":            # committed; a post-commit step (checkpoint) failed
                return self._state(self._require(base.version + 1), stored, known=True)
            if outcome == "theirs":
                raise CommitConflictError(f"Delta table {self.table}: another writer committed version "
                                          f"{base.version + 1} after version {base.version}: nothing committed") \
                    from None
            raise TableError(f"Delta table {self.table}: commit failed: {_one_line(exc)}") from exc
        return self._state(self._require(base.version + 1), stored, known=True)

    def _stored_offsets(self, table, base: TableState, offsets: TableOffsets) -> TableOffsets:
        """``offsets`` plus the base's partitions it lacks (same topic id); refuses an
        offset going back."""
        merged = dict(offsets.next_offsets)
        previous = base.offsets
        if previous is not None and previous.topic_id == offsets.topic_id and previous.topic == offsets.topic:
            for p, o in previous.next_offsets.items():
                merged.setdefault(p, o)
        with self._errors("cannot read the application transactions"):
            for p, o in merged.items():
                txn = table.transaction_version(offsets.app_id(p))
                if txn is not None and int(txn) > o:
                    raise TableError(f"Delta table {self.table}: partition {p}: the table holds offsets up to "
                                     f"{txn}, the commit would set {o}: offsets never go back")
        return TableOffsets(offsets.topic, offsets.topic_id, merged)

    def _whose_next(self, version: int, commit_id: str) -> str:
        """After a failed commit on ``version``: ``ours`` (version + 1 is this commit),
        ``theirs`` (another writer's), ``none`` (no version + 1)."""
        try:
            latest = self._require()
            if latest.version() <= version:
                return "none"
            for info in self._commit_infos(latest):
                if int(info.get("version", -1)) == version + 1:
                    return "ours" if info.get(COMMIT_ID_PROPERTY) == commit_id else "theirs"
            return "theirs"
        except TableError:
            return "none"

    def _footer_stats(self, f: WrittenFile) -> str:
        """Delta's statistics of ``f`` from its Parquet footer: numRecords, and for its
        top-level primitive columns nullCount and minValues / maxValues (timestamps to the
        millisecond, the minimum rounded down and the maximum up; strings up to 32
        characters)."""
        import pyarrow.parquet as pq

        from .files import filesystem_for

        with self._errors(f"cannot read the footer of {f.path}"):
            fs, path = filesystem_for(f.path, self._options)
            with fs.open_input_file(path) as handle:
                meta = pq.ParquetFile(handle).metadata
        mins: dict[str, Any] = {}
        maxs: dict[str, Any] = {}
        nulls: dict[str, int] = {}
        top = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
        for name in meta.schema.to_arrow_schema().names:
            index = top.get(name)
            if index is None:
                continue                     # a nested column: no statistics (unknown to readers)
            column_stats = [meta.row_group(g).column(index).statistics for g in range(meta.num_row_groups)]
            if column_stats and all(s is not None and s.has_null_count for s in column_stats):
                nulls[name] = int(sum(s.null_count for s in column_stats))
            with_values = [s for s in column_stats if s is not None and s.has_min_max]
            if not with_values or len(with_values) != len(column_stats):
                continue
            lo = _stats_value(min(s.min for s in with_values), up=False)
            hi = _stats_value(max(s.max for s in with_values), up=True)
            if lo is not None and hi is not None:
                mins[name], maxs[name] = lo, hi
        return json.dumps({"numRecords": int(meta.num_rows), "minValues": mins, "maxValues": maxs,
                           "nullCount": nulls}, separators=(",", ":"))

    # -- maintenance -------------------------------------------------------------------------

    def compact(self, target_file_size: int) -> TableState:
        table = self._require()
        with self._errors("compaction failed"):
            table.optimize.compact(target_size=int(target_file_size))
        return self.load()

    def expire(self, older_than_ms: int, retain_last: int) -> int:
        table = self._require()
        cutoff = int(older_than_ms)
        keep: list[int] = []
        if retain_last > 0:
            infos = []
            for info in self._commit_infos(table):
                infos.append(info)
                if len(infos) >= retain_last:
                    break
            keep = [int(i["version"]) for i in infos]
            if infos and infos[-1].get("timestamp") is not None:
                cutoff = min(cutoff, int(infos[-1]["timestamp"]))
        hours = self._retention_hours(cutoff)
        with self._errors("vacuum failed"):
            table_hours = self._table_retention_hours(table)
            removed = table.vacuum(retention_hours=hours, dry_run=False,
                                   enforce_retention_duration=hours >= table_hours, keep_versions=keep or None)
        with self._errors("log cleanup failed"):
            table.cleanup_metadata()         # commits past delta.logRetentionDuration, before a checkpoint
        return len(removed)

    @staticmethod
    def _retention_hours(cutoff_ms: int) -> int:
        """Vacuum's retention (whole hours) for ``cutoff_ms``: rounded up (keeps more), a
        minute of slack for "now"."""
        age = int(time.time() * 1000) - cutoff_ms - 60_000
        return max(0, math.ceil(age / 3_600_000))

    @staticmethod
    def _table_retention_hours(table) -> float:
        text = (table.metadata().configuration or {}).get("delta.deletedFileRetentionDuration")
        match = _INTERVAL.match(text or "")
        if not match or match.group(2).lower() not in _HOURS_PER_UNIT:
            return _DEFAULT_DELETED_FILE_RETENTION_HOURS
        return int(match.group(1)) * _HOURS_PER_UNIT[match.group(2).lower()]

    def remove_orphans(self, older_than_ms: int) -> int:
        """Deletes the files under ``<table>/kafkalog-runs/`` that are neither in the
        current version nor removed by a version vacuum has not yet cleaned (those belong
        to ``expire``), and were last modified before ``older_than_ms``."""
        from pyarrow import fs as pafs

        from .files import filesystem_for

        table = self._require()
        with self._errors("cannot list the files"):
            current = {self._relative(u) for u in table.file_uris()}
            tombstones = {p.split(self._root + "/", 1)[-1] for p in
                          table.vacuum(retention_hours=0, dry_run=True, enforce_retention_duration=False)}
            fs, root = filesystem_for(self.table, self._options)
            runs = f"{root.rstrip('/')}/{RUNS_DIR}"
            infos = fs.get_file_info(pafs.FileSelector(runs, recursive=True, allow_not_found=True))
        gone = 0
        for info in infos:
            if info.type != pafs.FileType.File or info.mtime is None:
                continue
            relative = f"{RUNS_DIR}/{info.path[len(runs) + 1:]}"
            if relative in current or relative in tombstones:
                continue
            if info.mtime.timestamp() * 1000 >= older_than_ms:
                continue
            with self._errors(f"cannot delete {relative}"):
                fs.delete_file(info.path)
            gone += 1
        return gone


def _stats_value(value: Any, *, up: bool) -> Any:
    """A Parquet statistic as Delta's statistics JSON holds it (None: leave it out)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        value = value.astimezone(dt.UTC)
        truncated = value.replace(microsecond=value.microsecond // 1000 * 1000)
        if up and truncated != value:
            truncated += dt.timedelta(milliseconds=1)
        return truncated.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value if len(value) <= _STATS_STRING_LIMIT else None
    return None                              # binary, decimal, ...: no statistics
