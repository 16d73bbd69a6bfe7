"""The Schema Registry's REST API: Confluent's v1 routes over ``SchemaStore``, independent
of HTTP (``http.py`` feeds it requests and writes its answers).

``RegistryApi.handle(method, path, query, body, principal)`` answers
``(status, payload)``: a JSON-able payload, or a ``RawText`` for the ``/schema`` routes
(the schema itself, not a JSON string). Errors are ``{"error_code": N, "message": "..."}``
with Confluent's codes (``store.RegistryError``): 40401 subject, 40402 version, 40403
schema not found, 40404 / 40405 subject (not) soft-deleted, 40406 / 40407 version (not)
soft-deleted, 40408 / 40409 no subject-level config / mode, 409 incompatible, 42201
invalid schema, 42202 invalid version, 42203 invalid compatibility level, 42204 invalid
mode, 42205 operation not permitted, 42206 reference exists, 42207 id in use, 40301 not
authorized (with 403), 404 / 405 unknown route or method, 400 bad JSON, 50001 store error.

Routes (``{s}`` a URL-encoded subject, ``{v}`` a version number, ``latest`` or -1):

    GET    /                                        {}
    GET    /subjects                                ?deleted ?deletedOnly ?subjectPrefix
    POST   /subjects/{s}                            lookup          ?normalize ?deleted
    DELETE /subjects/{s}                            soft / ?permanent=true
    GET    /subjects/{s}/versions                   ?deleted ?deletedOnly
    POST   /subjects/{s}/versions                   register        ?normalize
    GET    /subjects/{s}/versions/{v}               ?deleted ?format
    GET    /subjects/{s}/versions/{v}/schema        the schema text
    GET    /subjects/{s}/versions/{v}/referencedby  ids
    DELETE /subjects/{s}/versions/{v}               soft / ?permanent=true
    GET    /subjects/{s}/metadata                   ?key=K&value=V ... ?deleted
    GET    /schemas                                 ?subjectPrefix ?deleted ?deletedOnly ?latestOnly ?offset ?limit
    GET    /schemas/ids/{id}                        ?subject ?format ?reference_format ?fetchMaxId
    GET    /schemas/ids/{id}/schema | /versions | /subjects
    GET    /schemas/guids/{guid}                    ?format
    GET    /schemas/types
    POST   /compatibility/subjects/{s}/versions     ?verbose ?normalize (against the level's versions)
    POST   /compatibility/subjects/{s}/versions/{v} ?verbose ?normalize
    GET|PUT|DELETE /config  /config/{s}             ?defaultToGlobal
    GET|PUT|DELETE /mode    /mode/{s}               ?defaultToGlobal ?force
    GET    /contexts                                ["."]: the default context only

Writes (register, deletes, config and mode changes) ask ``may_write(principal)``; reads
need only an authenticated principal (``http.py`` checks that before calling here).

Thread-safety: stateless over the store, which locks.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from broker.schema import SCHEMA_TYPES, SchemaError, SchemaReference
from broker.server.registry.store import Registered, RegistryError, SchemaStore, StoredSchema, schema_json

log = logging.getLogger(__name__)

MAX_VERSION = 2**31 - 1


@dataclass(frozen=True)
class RawText:
    """A response that is text as it is (the ``/schema`` routes)."""

    text: str


Answer = tuple[int, Any]


def _default_context(schema_id: str, q: Mapping[str, str]) -> None:
    """Confluent's ``?subject=`` on the by-id routes names the context to find the id in,
    not a filter: an id is found in the subject's context even when that subject does not
    hold it (a deserializer asks with ``<topic>-value`` for an id a RecordNameStrategy
    producer registered under the record's name). This registry has the default context
    only: an id is found for any subject of it, and for none of another context
    (``:.ctx:subject``)."""
    subject = q.get("subject") or ""
    if subject.startswith(":.") and not subject.startswith(":.:"):
        raise RegistryError(404, 40403, f"Schema {schema_id} not found")


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "false").lower() == "true"


def _version(value: str) -> int | str:
    if value == "latest":
        return "latest"
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number == -1:
        return "latest"
    if not 1 <= number <= MAX_VERSION:
        raise RegistryError(422, 42202, f"The specified version '{value}' is not a valid version id. Allowed values "
                            f"are between [1, {MAX_VERSION}] and the string \"latest\"")
    return number


def _schema_id(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise RegistryError(404, 40403, f"Schema {value} not found") from None


def _body(body: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryError(400, 400, f"Unexpected JSON in the request body: {exc}") from None
    if not isinstance(obj, dict):
        raise RegistryError(422, 422, "The request body must be a JSON object")
    return obj


def _references(obj: Mapping[str, Any]) -> list[SchemaReference]:
    raw = obj.get("references") or []
    if not isinstance(raw, list):
        raise RegistryError(422, 42201, "Invalid schema: references must be a list")
    out = []
    for ref in raw:
        try:
            name, subject, version = ref["name"], ref["subject"], ref["version"]
        except (KeyError, TypeError):
            raise RegistryError(422, 42201, "Invalid schema: a reference needs name, subject and version") from None
        if not isinstance(name, str) or not isinstance(subject, str) or not isinstance(version, int):
            raise RegistryError(422, 42201, "Invalid schema: a reference's name and subject are strings, its "
                                "version a number")
        out.append(SchemaReference(name, subject, version))
    return out


def _schema_type(obj: Mapping[str, Any]) -> str:
    kind = obj.get("schemaType") or "AVRO"
    if not isinstance(kind, str) or kind.upper() not in SCHEMA_TYPES:
        raise RegistryError(422, 42201, f"Invalid schema: unknown schema type {kind!r}; use one of "
                            f"{', '.join(SCHEMA_TYPES)}")
    return kind.upper()


class RegistryApi:
    """Confluent's v1 routes (module docstring)."""

    def __init__(self, store: SchemaStore, may_write: Callable[[str | None], bool] = lambda principal: True) -> None:
        self.store = store
        self.may_write = may_write
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., Answer], bool]] = []
        for method, pattern, handler, write in (
            ("GET", r"", self.root, False),
            ("GET", r"/subjects", self.list_subjects, False),
            ("POST", r"/subjects/([^/]+)", self.lookup, False),
            ("DELETE", r"/subjects/([^/]+)", self.delete_subject, True),
            ("GET", r"/subjects/([^/]+)/versions", self.list_versions, False),
            ("POST", r"/subjects/([^/]+)/versions", self.register, True),
            ("GET", r"/subjects/([^/]+)/versions/([^/]+)", self.get_version, False),
            ("GET", r"/subjects/([^/]+)/versions/([^/]+)/schema", self.get_version_schema, False),
            ("GET", r"/subjects/([^/]+)/versions/([^/]+)/referencedby", self.referenced_by, False),
            ("DELETE", r"/subjects/([^/]+)/versions/([^/]+)", self.delete_version, True),
            ("GET", r"/subjects/([^/]+)/metadata", self.latest_with_metadata, False),
            ("GET", r"/schemas", self.list_schemas, False),
            ("GET", r"/schemas/types", self.schema_types, False),
            ("GET", r"/schemas/ids/([^/]+)", self.get_by_id, False),
            ("GET", r"/schemas/ids/([^/]+)/schema", self.get_by_id_schema, False),
            ("GET", r"/schemas/ids/([^/]+)/versions", self.versions_of_id, False),
            ("GET", r"/schemas/ids/([^/]+)/subjects", self.subjects_of_id, False),
            ("GET", r"/schemas/guids/([^/]+)", self.get_by_guid, False),
            ("GET", r"/schemas/guids/([^/]+)/schema", self.get_by_guid_schema, False),
            ("POST", r"/compatibility/subjects/([^/]+)/versions", self.check_all, False),
            ("POST", r"/compatibility/subjects/([^/]+)/versions/([^/]+)", self.check_one, False),
            ("GET", r"/config", self.get_config, False),
            ("PUT", r"/config", self.put_config, True),
            ("DELETE", r"/config", self.delete_config, True),
            ("GET", r"/config/([^/]+)", self.get_config, False),
            ("PUT", r"/config/([^/]+)", self.put_config, True),
            ("DELETE", r"/config/([^/]+)", self.delete_config, True),
            ("GET", r"/mode", self.get_mode, False),
            ("PUT", r"/mode", self.put_mode, True),
            ("DELETE", r"/mode", self.delete_mode, True),
            ("GET", r"/mode/([^/]+)", self.get_mode, False),
            ("PUT", r"/mode/([^/]+)", self.put_mode, True),
            ("DELETE", r"/mode/([^/]+)", self.delete_mode, True),
            ("GET", r"/contexts", self.contexts, False),
        ):
            self._routes.append((method, re.compile(pattern + "/?"), handler, write))

    # --- dispatch ---

    def handle(self, method: str, path: str, query: Mapping[str, Any], body: bytes,
               principal: str | None = None) -> Answer:
        try:
            return self._dispatch(method, path, query, body, principal)
        except RegistryError as exc:
            return exc.http_status, {"error_code": exc.error_code, "message": exc.message}
        except SchemaError as exc:
            return 422, {"error_code": exc.error_code, "message": f"Invalid schema: {exc}"}
        except Exception as exc:  # noqa: BLE001 - a request never takes the registry down
            log.exception("schema registry: %s %s failed", method, path)
            return 500, {"error_code": 50001, "message": f"Error in the backend data store: {exc}"}

    def _dispatch(self, method: str, path: str, query: Mapping[str, Any], body: bytes,
                  principal: str | None) -> Answer:
        if path.startswith("/contexts/:.:"):  # Confluent's default-context prefix
            path = path[len("/contexts/:.:"):] or "/"
        matched_path = False
        for m, pattern, handler, write in self._routes:
            found = pattern.fullmatch(path)
            if found is None:
                continue
            matched_path = True
            if m != method:
                continue
            if write and not self.may_write(principal):
                raise RegistryError(403, 40301, f"User {principal or 'ANONYMOUS'} is denied operation Write on "
                                    "the schema registry (it needs ALTER on the CLUSTER resource or to be a "
                                    "super user)")
            args = [unquote(g) for g in found.groups()]
            q = {k: (v[-1] if isinstance(v, list) else v) for k, v in query.items()}
            if handler in (self.latest_with_metadata,):
                return handler(*args, q, query, body=body)
            return handler(*args, q, body=body)
        if matched_path:
            return 405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"}
        return 404, {"error_code": 404, "message": "HTTP 404 Not Found"}

    # --- routes ---

    def root(self, q: Mapping[str, str], body: bytes) -> Answer:
        return 200, {}

    def contexts(self, q: Mapping[str, str], body: bytes) -> Answer:
        return 200, ["."]

    def schema_types(self, q: Mapping[str, str], body: bytes) -> Answer:
        return 200, sorted(SCHEMA_TYPES, key=lambda t: ("JSON", "PROTOBUF", "AVRO").index(t))

    def list_subjects(self, q: Mapping[str, str], body: bytes) -> Answer:
        return 200, self.store.subject_names(deleted=_flag(q, "deleted"), deleted_only=_flag(q, "deletedOnly"),
                                             prefix=q.get("subjectPrefix", "") or "")

    def list_versions(self, subject: str, q: Mapping[str, str], body: bytes) -> Answer:
        return 200, self.store.versions(subject, deleted=_flag(q, "deleted"), deleted_only=_flag(q, "deletedOnly"))

    def _formatted(self, s: StoredSchema, fmt: str | None) -> str:
        if not fmt:
            return s.schema
        with self.store.lock():
            try:
                return self.store.parsed(s.id).formatted(fmt)
            except Exception:  # noqa: BLE001 - a schema that cannot be parsed is shown as stored
                return s.schema

    def get_version(self, subject: str, version: str, q: Mapping[str, str], body: bytes) -> Answer:
        reg = self.store.get_version(subject, _version(version), deleted=_flag(q, "deleted"))
        return 200, reg.to_json(schema_text=self._formatted(reg.schema, q.get("format")))

    def get_version_schema(self, subject: str, version: str, q: Mapping[str, str], body: bytes) -> Answer:
        reg = self.store.get_version(subject, _version(version), deleted=_flag(q, "deleted"))
        return 200, RawText(self._formatted(reg.schema, q.get("format")))

    def referenced_by(self, subject: str, version: str, q: Mapping[str, str], body: bytes) -> Answer:
        reg = self.store.get_version(subject, _version(version), deleted=_flag(q, "deleted"))
        with self.store.lock():
            return 200, self.store.referenced_by(subject, reg.version)

    def latest_with_metadata(self, subject: str, q: Mapping[str, str], query: Mapping[str, Any],
                             body: bytes) -> Answer:
        keys = query.get("key", [])
        values = query.get("value", [])
        keys = keys if isinstance(keys, list) else [keys]
        values = values if isinstance(values, list) else [values]
        wanted = dict(zip(keys, values, strict=False))
        versions = self.store.versions(subject, deleted=_flag(q, "deleted"))
        for v in reversed(versions):
            reg = self.store.get_version(subject, v, deleted=_flag(q, "deleted"))
            props = ((reg.schema.metadata or {}).get("properties") or {}) if isinstance(reg.schema.metadata,
                                                                                       dict) else {}
            if all(props.get(k) == val for k, val in wanted.items()):
                return 200, reg.to_json()
        raise RegistryError(404, 40403, f"Schema with metadata {wanted} not found in subject '{subject}'")

    def list_schemas(self, q: Mapping[str, str], body: bytes) -> Answer:
        found = self.store.all_schemas(prefix=q.get("subjectPrefix", "") or "", deleted=_flag(q, "deleted"),
                                       deleted_only=_flag(q, "deletedOnly"), latest_only=_flag(q, "latestOnly"))
        offset = int(q.get("offset", 0) or 0)
        limit = int(q.get("limit", -1) or -1)
        found = found[offset:] if limit < 0 else found[offset:offset + limit]
        return 200, [reg.to_json() for reg in found]

    def _by_id(self, schema_id: str, q: Mapping[str, str]) -> StoredSchema:
        s = self.store.schema_by_id(_schema_id(schema_id))
        _default_context(schema_id, q)
        return s

    def get_by_id(self, schema_id: str, q: Mapping[str, str], body: bytes) -> Answer:
        s = self._by_id(schema_id, q)
        out = schema_json(s, self._formatted(s, q.get("format")))
        if _flag(q, "fetchMaxId"):
            out["maxId"] = self.store.max_id
        return 200, out

    def get_by_id_schema(self, schema_id: str, q: Mapping[str, str], body: bytes) -> Answer:
        s = self._by_id(schema_id, q)
        return 200, RawText(self._formatted(s, q.get("format")))

    def get_by_guid(self, guid: str, q: Mapping[str, str], body: bytes) -> Answer:
        s = self.store.schema_by_guid(guid)
        return 200, schema_json(s, self._formatted(s, q.get("format")), with_id=True)

    def get_by_guid_schema(self, guid: str, q: Mapping[str, str], body: bytes) -> Answer:
        s = self.store.schema_by_guid(guid)
        return 200, RawText(self._formatted(s, q.get("format")))

    def versions_of_id(self, schema_id: str, q: Mapping[str, str], body: bytes) -> Answer:
        pairs = self.store.subject_versions_of(_schema_id(schema_id), deleted=_flag(q, "deleted"))
        _default_context(schema_id, q)
        return 200, [{"subject": s, "version": v} for s, v in pairs]

    def subjects_of_id(self, schema_id: str, q: Mapping[str, str], body: bytes) -> Answer:
        pairs = self.store.subject_versions_of(_schema_id(schema_id), deleted=_flag(q, "deleted"))
        _default_context(schema_id, q)
        return 200, sorted({s for s, _ in pairs})

    def lookup(self, subject: str, q: Mapping[str, str], body: bytes) -> Answer:
        obj = _body(body)
        reg = self.store.lookup(subject, _schema_type(obj), obj.get("schema"), _references(obj),
                                normalize=_flag(q, "normalize"), deleted=_flag(q, "deleted"),
                                metadata=obj.get("metadata"), rule_set=obj.get("ruleSet"))
        return 200, reg.to_json()

    def register(self, subject: str, q: Mapping[str, str], body: bytes) -> Answer:
        obj = _body(body)
        schema_id = obj.get("id")
        version = obj.get("version")
        if schema_id is not None and not isinstance(schema_id, int) or version is not None and not isinstance(
                version, int):
            raise RegistryError(422, 42201, "Invalid schema: id and version must be numbers")
        reg: Registered = self.store.register(
            subject, _schema_type(obj), obj.get("schema"), _references(obj), normalize=_flag(q, "normalize"),
            metadata=obj.get("metadata"), rule_set=obj.get("ruleSet"), schema_id=schema_id, version=version,
            guid=obj.get("guid") if isinstance(obj.get("guid"), str) else None)
        return 200, reg.to_json()

    def delete_subject(self, subject: str, q: Mapping[str, str], body: bytes) -> Answer:
        return 200, self.store.delete_subject(subject, permanent=_flag(q, "permanent"))

    def delete_version(self, subject: str, version: str, q: Mapping[str, str], body: bytes) -> Answer:
        return 200, self.store.delete_version(subject, _version(version), permanent=_flag(q, "permanent"))

    def _check(self, subject: str, version: int | str | None, q: Mapping[str, str], body: bytes) -> Answer:
        obj = _body(body)
        store = self.store
        with store.lock():
            parsed = store.parse(_schema_type(obj), obj.get("schema"), _references(obj),
                                 normalize=_flag(q, "normalize"))
            level = store.compatibility_level(subject)
            against: list[int] | None = None
            if version is not None:
                reg = store.get_version(subject, version)
                against = [reg.version]
                level = level.replace("_TRANSITIVE", "")
            elif subject not in store.subjects:
                against = []
            errors = store.compatibility_errors(subject, parsed, against=against, level=level)
        out: dict[str, Any] = {"is_compatible": not errors}
        if _flag(q, "verbose"):
            out["messages"] = errors
        return 200, out

    def check_all(self, subject: str, q: Mapping[str, str], body: bytes) -> Answer:
        return self._check(subject, None, q, body)

    def check_one(self, subject: str, version: str, q: Mapping[str, str], body: bytes) -> Answer:
        return self._check(subject, _version(version), q, body)

    def get_config(self, *args: Any, body: bytes) -> Answer:
        subject, q = (args[0], args[1]) if len(args) == 2 else (None, args[0])
        cfg = self.store.config(subject, default_to_global=subject is None or _flag(q, "defaultToGlobal"))
        if cfg is None:
            if subject is not None and subject not in self.store.subjects:
                raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
            raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility "
                                "configured")
        return 200, cfg

    def put_config(self, *args: Any, body: bytes) -> Answer:
        subject = args[0] if len(args) == 2 else None
        return 200, self.store.set_config(subject, _body(body))

    def delete_config(self, *args: Any, body: bytes) -> Answer:
        subject = args[0] if len(args) == 2 else None
        return 200, self.store.delete_config(subject)

    def get_mode(self, *args: Any, body: bytes) -> Answer:
        subject, q = (args[0], args[1]) if len(args) == 2 else (None, args[0])
        mode = self.store.mode(subject, default_to_global=subject is None or _flag(q, "defaultToGlobal"))
        if mode is None:
            raise RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")
        return 200, {"mode": mode}

    def put_mode(self, *args: Any, body: bytes) -> Answer:
        subject, q = (args[0], args[1]) if len(args) == 2 else (None, args[0])
        obj = _body(body)
        return 200, {"mode": self.store.set_mode(subject, obj.get("mode", ""), force=_flag(q, "force"))}

    def delete_mode(self, *args: Any, body: bytes) -> Answer:
        return 200, {"mode": self.store.delete_mode(args[0] if len(args) == 2 else None)}


__all__ = ["RawText", "RegistryApi"]
