"""The project's Schema Registry client: Confluent's v1 REST API, with confluent-kafka's
``SchemaRegistryClient`` method names, over the standard library.

Owns:

* ``SchemaRegistryClient(conf)``: ``conf`` holds Confluent's client keys (``url``,
  ``basic.auth.user.info``, ``ssl.*``, ``request.timeout.ms``, ``max.retries``,
  ``latest.cache.ttl.sec`` ...; ``broker.client.registry_http`` lists them and does the
  HTTP). Methods, each one REST call (or none, from a cache):

    register_schema(subject, schema, normalize) -> id        POST /subjects/{s}/versions
    register_schema_full_response(...) -> RegisteredSchema   (also ``id=`` / ``version=``
                                                              for IMPORT mode)
    lookup_schema(subject, schema, normalize, deleted)       POST /subjects/{s}
    get_schema(id, subject, fmt) / get_schema_by_guid(guid)  GET /schemas/ids/{id}, /guids/{g}
    get_schema_types(), get_subjects_by_schema_id(id), get_schema_versions(id)
    get_subjects(prefix, deleted, deleted_only)              GET /subjects
    get_versions(subject, deleted, deleted_only)             GET /subjects/{s}/versions
    get_version(subject, version|"latest", deleted, fmt), get_latest_version(subject)
    get_referenced_by(subject, version)
    delete_subject(subject, permanent) -> versions, delete_version(subject, v, permanent)
    get_compatibility / set_compatibility / delete_compatibility (subject or global),
    get_config / set_config / delete_config (the whole config object)
    get_mode / set_mode(mode, subject, force) / delete_mode
    test_compatibility(subject, schema, version, normalize, verbose) -> CompatibilityResult
    clear_caches(), clear_latest_caches(), close()

  A schema is a ``Schema`` (text, ``schema_type``, ``references`` as
  ``broker.schema.SchemaReference``, optional ``metadata`` / ``rule_set``); answers are
  ``RegisteredSchema(subject, version, id, guid, schema_type, schema, references,
  metadata, rule_set)`` (subject and version None where the call does not say them).
* Caches (bounded by ``cache.capacity``, least recently used first out): schemas by id
  and by GUID; ids by (subject, schema); registered schemas by (subject, schema) and by
  (subject, version). The latest version of a subject is cached only when
  ``latest.cache.ttl.sec`` is set, and for no longer. Only answers in the default format
  are cached; deletes drop the subject's entries (the version's, where they are known by
  version), a register drops the subject's latest.
* Errors: ``SchemaRegistryError(http_status, error_code, message)`` (Confluent's codes);
  ``SchemaRegistryUnreachableError`` when no URL answers, one line naming the URLs and
  the cause.

Imports the standard library and ``broker.schema``'s base types only (nothing of the
server). Thread-safety: one client may be shared by threads; the caches are under one
lock, never held during a request.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from broker.client.registry_http import (
    RegistrySettings,
    RestTransport,
    SchemaRegistryError,
    SchemaRegistryUnreachableError,
    path_segment,
)
from broker.schema.base import AVRO, SchemaReference

Version = int | Literal["latest"]


@dataclass(frozen=True)
class Schema:
    """A schema to register, look up or check: its text, type (AVRO, PROTOBUF, JSON),
    references, and Confluent's optional ``metadata`` and ``rule_set`` objects (compared,
    not hashed)."""

    schema_str: str
    schema_type: str = AVRO
    references: tuple[SchemaReference, ...] = ()
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)
    rule_set: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "references", tuple(self.references))
        object.__setattr__(self, "schema_type", (self.schema_type or AVRO).upper())

    def to_json(self) -> dict[str, Any]:
        """The request body of Confluent's register, lookup and compatibility calls."""
        out: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != AVRO:
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        if self.metadata is not None:
            out["metadata"] = dict(self.metadata)
        if self.rule_set is not None:
            out["ruleSet"] = dict(self.rule_set)
        return out


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it: ``id`` and ``guid``, and when the call says
    them, the ``subject`` and ``version`` it is registered under."""

    subject: str | None
    version: int | None
    id: int | None
    guid: str | None
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...] = ()
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)
    rule_set: Mapping[str, Any] | None = field(default=None, hash=False)

    @property
    def schema_id(self) -> int | None:  # confluent-kafka's name
        return self.id

    def to_schema(self) -> Schema:
        return Schema(self.schema, self.schema_type, self.references, self.metadata, self.rule_set)

    @classmethod
    def from_json(cls, obj: Any, *, subject: str | None = None, version: int | None = None,
                  schema_id: int | None = None, schema: Schema | None = None) -> RegisteredSchema:
        """From an answer of the registry; what it leaves out comes from the arguments."""
        if not isinstance(obj, dict):
            raise SchemaRegistryError(200, -1, f"unexpected answer of the registry: {str(obj)[:200]!r}")
        refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"]))
                     for r in obj.get("references") or () if isinstance(r, dict))
        text = obj.get("schema")
        return cls(
            subject=obj.get("subject", subject),
            version=obj.get("version", version),
            id=obj.get("id", schema_id),
            guid=obj.get("guid"),
            schema_type=(obj.get("schemaType") or (schema.schema_type if schema and text is None else AVRO)).upper(),
            schema=text if text is not None else (schema.schema_str if schema else ""),
            references=refs if "references" in obj or schema is None else schema.references,
            metadata=obj.get("metadata", schema.metadata if schema and text is None else None),
            rule_set=obj.get("ruleSet", schema.rule_set if schema and text is None else None),
        )


@dataclass(frozen=True)
class CompatibilityResult:
    """The answer of a compatibility check: ``is_compatible`` and, when asked for
    (``verbose``), the registry's ``messages``. True when compatible."""

    is_compatible: bool
    messages: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.is_compatible


class _Lru:
    """A bounded mapping, least recently used out first (caller holds the lock)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.data: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any:
        value = self.data.get(key)
        if value is not None:
            self.data.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.capacity:
            self.data.popitem(last=False)

    def drop(self, predicate) -> None:
        for key in [k for k in self.data if predicate(k)]:
            del self.data[key]


def _schema(value: Schema | str) -> Schema:
    return value if isinstance(value, Schema) else Schema(value)


def _bool_query(**flags: bool) -> dict[str, bool]:
    return {k: True for k, v in flags.items() if v}


class SchemaRegistryClient:
    """A Confluent Schema Registry client (module docstring)."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        self.settings = RegistrySettings.from_config(conf)
        self._http = RestTransport(self.settings)
        self._lock = threading.Lock()
        capacity = self.settings.cache_capacity
        self._by_id = _Lru(capacity)  # id -> RegisteredSchema (subject/version None)
        self._by_guid = _Lru(capacity)  # guid -> RegisteredSchema
        self._ids = _Lru(capacity)  # (subject, Schema) -> (id, guid)
        self._by_schema = _Lru(capacity)  # (subject, Schema) -> RegisteredSchema (lookup)
        self._by_version = _Lru(capacity)  # (subject, version) -> RegisteredSchema
        self._latest = _Lru(capacity)  # subject -> (RegisteredSchema, expires at, monotonic)

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the idle connections (the client still works afterwards, reconnecting)."""
        self._http.close()

    def _call(self, method: str, path: str, *, query: Mapping[str, Any] | None = None, body: Any = None) -> Any:
        return self._http.request(method, path, query=query, body=body)

    # -- schemas --

    def register_schema(self, subject_name: str, schema: Schema | str, normalize_schemas: bool = False) -> int:
        """Register ``schema`` under ``subject_name`` (a new version unless it is there);
        its id."""
        registered = self.register_schema_full_response(subject_name, schema, normalize_schemas)
        assert registered.id is not None
        return registered.id

    def register_schema_full_response(self, subject_name: str, schema: Schema | str,
                                      normalize_schemas: bool = False, *, id: int | None = None,
                                      version: int | None = None) -> RegisteredSchema:
        """``register_schema`` with the whole answer (id, guid, and version when the
        registry says it). ``id`` and ``version`` ask for them (the registry must be in
        IMPORT mode), as when a registry's contents are copied."""
        schema = _schema(schema)
        key = (subject_name, schema)
        if id is None and version is None:
            with self._lock:
                cached = self._ids.get(key)
            if cached is not None:
                return RegisteredSchema(subject_name, None, cached[0], cached[1], schema.schema_type,
                                        schema.schema_str, schema.references, schema.metadata, schema.rule_set)
        body = schema.to_json()
        if id is not None:
            body["id"] = id
        if version is not None:
            body["version"] = version
        answer = self._call("POST", f"/subjects/{path_segment(subject_name)}/versions",
                            query=_bool_query(normalize=normalize_schemas), body=body)
        if not isinstance(answer, dict) or not isinstance(answer.get("id"), int):
            raise SchemaRegistryError(200, -1, f"unexpected answer of the registry: {str(answer)[:200]!r}")
        registered = RegisteredSchema.from_json(answer, subject=subject_name, schema=schema)
        with self._lock:
            self._ids.put(key, (registered.id, registered.guid))
            self._latest.drop(lambda k: k == subject_name)
        return registered

    def lookup_schema(self, subject_name: str, schema: Schema | str, normalize_schemas: bool = False,
                      deleted: bool = False) -> RegisteredSchema:
        """The version of ``subject_name`` holding ``schema`` (40401 no subject, 40403 not
        there)."""
        schema = _schema(schema)
        key = (subject_name, schema, normalize_schemas, deleted)
        with self._lock:
            cached = self._by_schema.get(key)
        if cached is not None:
            return cached
        answer = self._call("POST", f"/subjects/{path_segment(subject_name)}",
                            query=_bool_query(normalize=normalize_schemas, deleted=deleted), body=schema.to_json())
        registered = RegisteredSchema.from_json(answer, subject=subject_name, schema=schema)
        with self._lock:
            self._by_schema.put(key, registered)
            if registered.id is not None and not normalize_schemas:
                self._ids.put((subject_name, schema), (registered.id, registered.guid))
        return registered

    def get_schema(self, schema_id: int, subject_name: str | None = None, fmt: str | None = None) -> RegisteredSchema:
        """The schema of ``schema_id`` (40403 when there is none); ``fmt`` Confluent's
        ``format`` (``serialized`` for Protobuf's descriptor, ``resolved`` for Avro)."""
        cacheable = subject_name is None and not fmt
        if cacheable:
            with self._lock:
                cached = self._by_id.get(int(schema_id))
            if cached is not None:
                return cached
        answer = self._call("GET", f"/schemas/ids/{int(schema_id)}",
                            query={"subject": subject_name, "format": fmt or None})
        registered = RegisteredSchema.from_json(answer, schema_id=int(schema_id))
        registered = RegisteredSchema(None, None, int(schema_id), registered.guid, registered.schema_type,
                                      registered.schema, registered.references, registered.metadata,
                                      registered.rule_set)
        if cacheable:
            with self._lock:
                self._by_id.put(int(schema_id), registered)
                if registered.guid:
                    self._by_guid.put(registered.guid, registered)
        return registered

    def get_schema_by_guid(self, guid: str, fmt: str | None = None) -> RegisteredSchema:
        """The schema of ``guid`` (40403 when there is none)."""
        guid = str(guid)
        if not fmt:
            with self._lock:
                cached = self._by_guid.get(guid)
            if cached is not None:
                return cached
        answer = self._call("GET", f"/schemas/guids/{path_segment(guid)}", query={"format": fmt or None})
        found = RegisteredSchema.from_json(answer)
        registered = RegisteredSchema(None, None, found.id, found.guid or guid, found.schema_type, found.schema,
                                      found.references, found.metadata, found.rule_set)
        if not fmt:
            with self._lock:
                self._by_guid.put(guid, registered)
                if registered.id is not None:
                    self._by_id.put(registered.id, registered)
        return registered

    def get_schema_types(self) -> list[str]:
        return list(self._call("GET", "/schemas/types"))

    def get_subjects_by_schema_id(self, schema_id: int, subject_name: str | None = None,
                                  deleted: bool = False) -> list[str]:
        return list(self._call("GET", f"/schemas/ids/{int(schema_id)}/subjects",
                               query={"subject": subject_name, **_bool_query(deleted=deleted)}))

    def get_schema_versions(self, schema_id: int, subject_name: str | None = None,
                            deleted: bool = False) -> list[tuple[str, int]]:
        """The (subject, version) pairs holding ``schema_id``."""
        answer = self._call("GET", f"/schemas/ids/{int(schema_id)}/versions",
                            query={"subject": subject_name, **_bool_query(deleted=deleted)})
        return [(item["subject"], int(item["version"])) for item in answer]

    # -- subjects and versions --

    def get_subjects(self, subject_prefix: str | None = None, deleted: bool = False,
                     deleted_only: bool = False) -> list[str]:
        return list(self._call("GET", "/subjects", query={
            "subjectPrefix": subject_prefix or None, **_bool_query(deleted=deleted, deletedOnly=deleted_only)}))

    def get_versions(self, subject_name: str, deleted: bool = False, deleted_only: bool = False) -> list[int]:
        return [int(v) for v in self._call("GET", f"/subjects/{path_segment(subject_name)}/versions",
                                           query=_bool_query(deleted=deleted, deletedOnly=deleted_only))]

    def get_version(self, subject_name: str, version: Version = "latest", deleted: bool = False,
                    fmt: str | None = None) -> RegisteredSchema:
        """Version ``version`` (a number, or ``"latest"``) of ``subject_name``; ``deleted``
        finds a soft-deleted one too."""
        if version == "latest" or version == -1:
            if not deleted and not fmt:
                return self.get_latest_version(subject_name)
            version = "latest"
        else:
            version = int(version)
        cacheable = version != "latest" and not deleted and not fmt
        if cacheable:
            with self._lock:
                cached = self._by_version.get((subject_name, version))
            if cached is not None:
                return cached
        answer = self._call("GET", f"/subjects/{path_segment(subject_name)}/versions/{version}",
                            query={"format": fmt or None, **_bool_query(deleted=deleted)})
        registered = RegisteredSchema.from_json(answer, subject=subject_name)
        if cacheable:
            with self._lock:
                self._by_version.put((subject_name, version), registered)
        return registered

    def get_latest_version(self, subject_name: str, fmt: str | None = None) -> RegisteredSchema:
        """The newest live version of ``subject_name``; cached for ``latest.cache.ttl.sec``
        when that is set, else asked every time."""
        ttl = self.settings.latest_ttl_sec
        if ttl and not fmt:
            with self._lock:
                cached = self._latest.get(subject_name)
            if cached is not None and cached[1] > time.monotonic():
                return cached[0]
        answer = self._call("GET", f"/subjects/{path_segment(subject_name)}/versions/latest",
                            query={"format": fmt or None})
        registered = RegisteredSchema.from_json(answer, subject=subject_name)
        if not fmt:
            with self._lock:
                if ttl:
                    self._latest.put(subject_name, (registered, time.monotonic() + ttl))
                if registered.version is not None:
                    self._by_version.put((subject_name, registered.version), registered)
        return registered

    def get_referenced_by(self, subject_name: str, version: Version = "latest") -> list[int]:
        """The ids of the schemas referencing that version."""
        return [int(i) for i in self._call(
            "GET", f"/subjects/{path_segment(subject_name)}/versions/{path_segment(version)}/referencedby")]

    def delete_subject(self, subject_name: str, permanent: bool = False) -> list[int]:
        """Soft-delete every version of ``subject_name`` (``permanent``: remove the
        soft-deleted ones for good); the versions deleted."""
        answer = self._call("DELETE", f"/subjects/{path_segment(subject_name)}",
                            query=_bool_query(permanent=permanent))
        self._forget(subject_name, None)
        return [int(v) for v in answer]

    def delete_version(self, subject_name: str, version: Version, permanent: bool = False) -> int:
        """Soft-delete one version (``permanent``: remove a soft-deleted one); its number."""
        answer = self._call("DELETE", f"/subjects/{path_segment(subject_name)}/versions/{path_segment(version)}",
                            query=_bool_query(permanent=permanent))
        self._forget(subject_name, None if version in ("latest", -1) else int(version))
        return int(answer)

    def _forget(self, subject: str, version: int | None) -> None:
        with self._lock:
            self._latest.drop(lambda k: k == subject)
            self._by_version.drop(lambda k: k[0] == subject and (version is None or k[1] == version))
            self._by_schema.drop(lambda k: k[0] == subject and (version is None or
                                                                self._by_schema.data[k].version == version))
            # which schema the version held may not be known: every id of the subject goes
            # (registering a deleted schema again must reach the registry)
            self._ids.drop(lambda k: k[0] == subject)

    # -- compatibility --

    def test_compatibility(self, subject_name: str, schema: Schema | str, version: Version | None = "latest",
                           normalize: bool = False, verbose: bool = False) -> CompatibilityResult:
        """Whether ``schema`` could be registered as the next version of
        ``subject_name``: against ``version`` (``"latest"`` by default), or with
        ``version=None`` against every version the subject's compatibility level names."""
        path = f"/compatibility/subjects/{path_segment(subject_name)}/versions"
        if version is not None:
            path += f"/{path_segment(version)}"
        answer = self._call("POST", path, query=_bool_query(normalize=normalize, verbose=verbose),
                            body=_schema(schema).to_json())
        messages = answer.get("messages") or []
        if not isinstance(messages, list):
            messages = [messages]
        return CompatibilityResult(bool(answer.get("is_compatible")), tuple(str(m) for m in messages))

    def test_compatibility_all_versions(self, subject_name: str, schema: Schema | str, normalize: bool = False,
                                        verbose: bool = False) -> CompatibilityResult:
        return self.test_compatibility(subject_name, schema, None, normalize, verbose)

    # -- config and mode --

    @staticmethod
    def _config_path(kind: str, subject_name: str | None) -> str:
        return f"/{kind}" if subject_name is None else f"/{kind}/{path_segment(subject_name)}"

    def get_config(self, subject_name: str | None = None, default_to_global: bool = False) -> dict[str, Any]:
        """The config object (``compatibilityLevel`` ...) of a subject, or the global one;
        a subject without its own is 40408 unless ``default_to_global``."""
        return dict(self._call("GET", self._config_path("config", subject_name),
                               query=_bool_query(defaultToGlobal=default_to_global and subject_name is not None)))

    def set_config(self, subject_name: str | None = None, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
        if not config:
            raise ValueError("config must be set (e.g. {'compatibility': 'FULL'})")
        return dict(self._call("PUT", self._config_path("config", subject_name), body=dict(config)))

    def delete_config(self, subject_name: str | None = None) -> dict[str, Any]:
        """Remove a subject's config (or the global one, back to the broker's default); the
        config removed."""
        return dict(self._call("DELETE", self._config_path("config", subject_name)) or {})

    def get_compatibility(self, subject_name: str | None = None, default_to_global: bool = True) -> str:
        """The compatibility level of ``subject_name`` (the global one when it has none,
        unless ``default_to_global`` is False: then 40408), or the global level."""
        config = self.get_config(subject_name, default_to_global)
        return str(config.get("compatibilityLevel") or config.get("compatibility"))

    def set_compatibility(self, subject_name: str | None = None, level: str | None = None) -> str:
        if not level:
            raise ValueError("level must be set")
        answer = self.set_config(subject_name, {"compatibility": level.upper()})
        return str(answer.get("compatibility") or answer.get("compatibilityLevel"))

    def delete_compatibility(self, subject_name: str | None = None) -> str | None:
        answer = self.delete_config(subject_name)
        return answer.get("compatibilityLevel") or answer.get("compatibility")

    def get_mode(self, subject_name: str | None = None, default_to_global: bool = True) -> str:
        """READWRITE, READONLY, READONLY_OVERRIDE or IMPORT: of ``subject_name`` (the
        global mode when it has none, unless ``default_to_global`` is False: then 40409),
        or the global mode."""
        answer = self._call("GET", self._config_path("mode", subject_name),
                            query=_bool_query(defaultToGlobal=default_to_global and subject_name is not None))
        return str(answer["mode"])

    def set_mode(self, mode: str, subject_name: str | None = None, force: bool = False) -> str:
        """Set the mode (``force``: IMPORT even with schemas registered)."""
        answer = self._call("PUT", self._config_path("mode", subject_name), query=_bool_query(force=force),
                            body={"mode": mode.upper()})
        return str(answer["mode"])

    def delete_mode(self, subject_name: str | None = None) -> str:
        answer = self._call("DELETE", self._config_path("mode", subject_name))
        return str(answer["mode"])

    # confluent-kafka's names of the mode calls
    def get_global_mode(self) -> str:
        return self.get_mode(None)

    def update_mode(self, subject_name: str, mode: str, force: bool = False) -> str:
        return self.set_mode(mode, subject_name, force)

    def update_global_mode(self, mode: str, force: bool = False) -> str:
        return self.set_mode(mode, None, force)

    # -- caches --

    def clear_latest_caches(self) -> None:
        with self._lock:
            self._latest.data.clear()

    def clear_caches(self) -> None:
        with self._lock:
            for cache in (self._by_id, self._by_guid, self._ids, self._by_schema, self._by_version, self._latest):
                cache.data.clear()


def references_from(items: Sequence[Mapping[str, Any]]) -> tuple[SchemaReference, ...]:
    """Confluent's ``references`` JSON array as ``SchemaReference``s."""
    return tuple(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in items)


__all__ = ["CompatibilityResult", "RegisteredSchema", "Schema", "SchemaRegistryClient", "SchemaRegistryError",
           "SchemaRegistryUnreachableError", "references_from"]
