"""Where typed reads get their schemas: the Schema Registry, or the ``_schemas`` topic of a
direct-mode read's log directory.

Owns ``SchemaSource`` (what a source answers: subjects, a subject's live versions, a
version, a schema by id or GUID; ``SchemaNotFoundError`` when it holds no such thing) and
its two kinds:

* ``RegistrySchemaSource``: a Schema Registry through ``broker.client.registry``'s
  ``SchemaRegistryClient`` (the ``schema.registry.*`` options, without the prefix, are its
  configuration; its caches and failover apply);
* ``LogSchemaSource``: the ``_schemas`` partition(s) of Kafka log directories, local or on an
  object store (direct mode without ``schema.registry.url``), read with the direct-mode
  readers and decoded with ``broker.schema.registry_records``, replayed as the registry's
  store replays them: a SCHEMA record adds a version (``deleted``: soft-deleted), a
  tombstone under a SCHEMA key removes the version for good, DELETE_SUBJECT soft-deletes
  the versions up to the one it names, CLEAR_SUBJECT drops the soft-deleted ones; a record
  that is not the registry's is skipped with a warning. A schema is served by id while a
  version (soft-deleted or not) holds it, as the registry serves it.

``SourceConfig`` says which source, picklably (executors open their own); ``open_source``
opens it.

Invariants: a source raises ``SchemaNotFoundError`` for what it does not hold and lets the
registry client's other errors through (``SchemaRegistryUnreachableError`` is one line);
the registry's topic is ``SCHEMAS_TOPIC`` (Confluent's default ``kafkastore.topic``).

Thread-safety: a source is used by one thread at a time (``LogSchemaSource`` loads its
state once, on first use; ``close`` forgets it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.schema.base import SchemaReference

__all__ = ["SCHEMAS_TOPIC", "LogSchemaSource", "RegistrySchemaSource", "SchemaNotFoundError", "SchemaRecord",
           "SchemaSource", "SourceConfig", "open_source"]

log = logging.getLogger("spark_kafkalog")

SCHEMAS_TOPIC = "_schemas"  # Confluent's kafkastore.topic default, this broker's registry topic


class SchemaNotFoundError(LookupError):
    """A subject, version, id or GUID the source does not hold."""


@dataclass(frozen=True)
class SchemaRecord:
    """A schema as a source answers it (subject and version when asked by them)."""

    id: int | None
    guid: str | None
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...] = ()
    subject: str | None = None
    version: int | None = None


class SchemaSource(Protocol):
    def describe(self) -> str: ...

    def subjects(self) -> list[str]: ...

    def versions(self, subject: str) -> list[int]: ...

    def version(self, subject: str, version: int | None) -> SchemaRecord: ...

    def by_id(self, schema_id: int) -> SchemaRecord: ...

    def by_guid(self, guid: str) -> SchemaRecord: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SourceConfig:
    """Where schemas come from: ``registry`` (the client's configuration) or, without it,
    ``paths`` (direct mode's log directories, their ``_schemas`` partition)."""

    registry: Mapping[str, str] = field(default_factory=dict, repr=False)
    paths: tuple[str, ...] = ()
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)

    def key(self) -> tuple:
        return (tuple(sorted(self.registry.items())), self.paths, tuple(sorted(self.storage_options.items())))


def open_source(config: SourceConfig) -> SchemaSource:
    if config.registry:
        return RegistrySchemaSource(config.registry)
    return LogSchemaSource(config.paths, config.storage_options)


class RegistrySchemaSource:
    """Schemas from a Schema Registry (``schema.registry.url``)."""

    def __init__(self, conf: Mapping[str, str]) -> None:
        from broker.client.registry import SchemaRegistryClient

        self._client = SchemaRegistryClient(dict(conf))
        self._url = str(conf.get("url", ""))

    def describe(self) -> str:
        return f"the Schema Registry at {self._url.split('@')[-1]}"

    def _call(self, what: str, call: Any, *args: Any) -> Any:
        from broker.client.registry import SchemaRegistryError

        try:
            return call(*args)
        except SchemaRegistryError as exc:
            if exc.http_status == 404:
                raise SchemaNotFoundError(f"{what} not found in {self.describe()}") from None
            raise

    @staticmethod
    def _record(found: Any, subject: str | None = None, version: int | None = None) -> SchemaRecord:
        return SchemaRecord(found.id, found.guid, found.schema_type, found.schema, tuple(found.references),
                            found.subject or subject, found.version or version)

    def subjects(self) -> list[str]:
        return list(self._client.get_subjects())

    def versions(self, subject: str) -> list[int]:
        return list(self._call(f"subject {subject!r}", self._client.get_versions, subject))

    def version(self, subject: str, version: int | None) -> SchemaRecord:
        what = f"subject {subject!r}" if version is None else f"version {version} of subject {subject!r}"
        found = self._call(what, self._client.get_version, subject, "latest" if version is None else version)
        return self._record(found, subject, version)

    def by_id(self, schema_id: int) -> SchemaRecord:
        return self._record(self._call(f"schema id {schema_id}", self._client.get_schema, schema_id))

    def by_guid(self, guid: str) -> SchemaRecord:
        return self._record(self._call(f"schema guid {guid}", self._client.get_schema_by_guid, guid))

    def close(self) -> None:
        self._client.close()


class LogSchemaSource:
    """Schemas from the ``_schemas`` partition of Kafka log directories (direct mode
    without ``schema.registry.url``), read once, on first use."""

    def __init__(self, paths: Sequence[str], storage_options: Mapping[str, str] | None = None) -> None:
        self.paths = tuple(paths)
        self.storage_options = dict(storage_options or {})
        self._state: _RegistryState | None = None

    def describe(self) -> str:
        return f"the {SCHEMAS_TOPIC} topic of {', '.join(self.paths)}"

    def _loaded(self) -> _RegistryState:
        if self._state is None:
            self._state = self._load()
        return self._state

    def _load(self) -> _RegistryState:
        from ..readers.direct import DirectOffsetReader, DirectRangeReader

        offsets = DirectOffsetReader(self.paths, self.storage_options)
        try:
            tps = offsets.topic_partitions([SCHEMAS_TOPIC])
            if not tps:
                raise SchemaNotFoundError(
                    f"no {SCHEMAS_TOPIC} topic in {offsets.describe()}: set schema.registry.url to read typed "
                    "values with a Schema Registry")
            starts, ends = offsets.earliest_offsets(tps), offsets.latest_offsets(tps)
        finally:
            offsets.close()
        reader = DirectRangeReader(self.paths, include_headers=False, max_bytes_per_batch=4 << 20,
                                   fail_on_data_loss=False, storage_config=self.storage_options)
        state = _RegistryState()
        for tp in sorted(tps):
            for batch in reader.read(tp[0], tp[1], starts[tp], ends[tp]):
                keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
                for key, value in zip(keys, values, strict=True):
                    state.apply(key, value)
        return state

    def subjects(self) -> list[str]:
        return sorted(s for s, versions in self._loaded().subjects.items() if any(not d for _, d in versions.values()))

    def versions(self, subject: str) -> list[int]:
        live = sorted(v for v, (_, deleted) in self._loaded().subjects.get(subject, {}).items() if not deleted)
        if not live:
            raise SchemaNotFoundError(f"subject {subject!r} not found in {self.describe()}")
        return live

    def version(self, subject: str, version: int | None) -> SchemaRecord:
        state = self._loaded()
        live = self.versions(subject)
        number = live[-1] if version is None else version
        found = state.subjects.get(subject, {}).get(number)
        if found is None or found[1]:
            raise SchemaNotFoundError(f"version {number} of subject {subject!r} not found in {self.describe()}")
        record = state.schemas[found[0]]
        return SchemaRecord(record.id, record.guid, record.schema_type, record.schema, record.references,
                            subject, number)

    def by_id(self, schema_id: int) -> SchemaRecord:
        state = self._loaded()
        if schema_id not in state.schemas or not state.held(schema_id):
            raise SchemaNotFoundError(f"schema id {schema_id} not found in {self.describe()}")
        return state.schemas[schema_id]

    def by_guid(self, guid: str) -> SchemaRecord:
        state = self._loaded()
        schema_id = state.guids.get(guid)
        if schema_id is None:
            raise SchemaNotFoundError(f"schema guid {guid} not found in {self.describe()}")
        return self.by_id(schema_id)

    def close(self) -> None:
        self._state = None


class _RegistryState:
    """The registry's state replayed from ``_schemas`` records (as its store replays them)."""

    def __init__(self) -> None:
        self.schemas: dict[int, SchemaRecord] = {}
        self.guids: dict[str, int] = {}
        self.subjects: dict[str, dict[int, tuple[int, bool]]] = {}  # subject -> version -> (id, deleted)

    def held(self, schema_id: int) -> bool:
        return any(sid == schema_id for versions in self.subjects.values() for sid, _ in versions.values())

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        from broker.schema import registry_records as rec

        try:
            parsed = rec.decode_key(key)
            if parsed.keytype == rec.SCHEMA:
                assert parsed.subject is not None and parsed.version is not None
                versions = self.subjects.setdefault(parsed.subject, {})
                if value is None:
                    versions.pop(parsed.version, None)
                    return
                sv = rec.decode_schema_value(value)
                refs = tuple(SchemaReference(n, s, v) for n, s, v in sv.references)
                if sv.id not in self.schemas:
                    self.schemas[sv.id] = SchemaRecord(sv.id, sv.guid, sv.schema_type, sv.schema, refs)
                    self.guids[sv.guid] = sv.id
                versions[parsed.version] = (sv.id, sv.deleted)
            elif parsed.keytype == rec.DELETE_SUBJECT and value is not None:
                upto = rec.decode_object(value).get("version")
                versions = self.subjects.get(parsed.subject or "", {})
                for v, (sid, _) in list(versions.items()):
                    if upto is None or v <= upto:
                        versions[v] = (sid, True)
            elif parsed.keytype == rec.CLEAR_SUBJECT:
                versions = self.subjects.get(parsed.subject or "", {})
                for v in [v for v, (_, deleted) in versions.items() if deleted]:
                    del versions[v]
        except (ValueError, KeyError, TypeError) as exc:  # the registry skips such records too
            log.warning("%s: a record that is not the registry's was skipped: %s", SCHEMAS_TOPIC, exc)
