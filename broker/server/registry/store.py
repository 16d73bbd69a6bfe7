"""The Schema Registry's state and its only writer: subjects, versions, schema ids and
GUIDs, configs and modes, kept in memory and in the ``_schemas`` topic (Confluent's
``KafkaSchemaRegistry`` and ``KafkaStore``, on one node).

The topic is the truth: every change is first appended to ``_schemas`` (one partition,
compacted; ``broker.schema.registry_records`` has the bytes) through the coordinator
runtime's writer, and only then applied to the cache, by the same ``_apply`` that replays the topic at startup
(``CoordinatorRuntime.startup(self._replay)``). A change the log refuses changes nothing.

The cache:

* ``schemas``: id -> ``StoredSchema`` (type, text, references, GUID); an id never names
  two schemas, and a new id is the highest id seen plus one (an IMPORT may give one);
* ``subjects``: subject -> version -> ``SubjectVersion`` (its schema id, soft-deleted or
  not, its metadata and rule set); a new version is the highest of the subject plus one;
* ``configs`` / ``modes``: subject (None: global) -> Confluent's config object / mode.

Identity: a schema is its type, its canonical string (``broker.schema``'s
``canonical_string()``: the parsed and re-serialised text), its references, and its
metadata and rule set; registering an identical schema under any subject returns the id it
already has. Schemas loaded from another registry's dump are indexed by their canonical
string the first time a registration needs it.

Errors are ``RegistryError(http_status, error_code, message)`` with Confluent's codes; the
API layer (``api.py``) renders them.

Thread-safety: one lock (``_lock``) around every read of the cache and around each write
(validation, append, apply), so writes are serialised and reads see whole changes.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from broker.log.clock import SYSTEM_TIME, Time
from broker.log.scheduler import Scheduler
from broker.protocol import ErrorCode
from broker.schema import ParsedSchema, SchemaError, SchemaReference, parse_schema
from broker.schema import registry_records as rec
from broker.server.coordinator import CoordinatorRecord, CoordinatorRuntime, InternalTopicSpec, storage_error_map
from broker.server.coordinator.topic import TopicSource
from broker.server.errors import ApiError
from broker.server.registry.config import COMPATIBILITY_LEVELS, MODES, RegistryConfig

log = logging.getLogger(__name__)

PARTITION = 0  # _schemas has one partition
MAX_REFERENCE_DEPTH = 32  # references deeper than this are refused (a cycle shows here)


class RegistryError(Exception):
    """An answer other than 200: the HTTP status, Confluent's error code, the message."""

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.error_code = error_code
        self.message = message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: Any) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(what: Any = None) -> RegistryError:
    return RegistryError(404, 40403, "Schema not found" if what is None else f"Schema {what} not found")


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {message}" if not message.startswith("Invalid") else message)


@dataclass(frozen=True)
class StoredSchema:
    """One schema id."""

    id: int
    guid: str
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...] = ()
    metadata: Any = None
    rule_set: Any = None


@dataclass(frozen=True)
class SubjectVersion:
    """One version of a subject."""

    subject: str
    version: int
    id: int
    deleted: bool = False


@dataclass(frozen=True)
class Registered:
    """A subject version with its schema, as the API returns it."""

    subject: str
    version: int
    schema: StoredSchema
    deleted: bool = False

    def to_json(self, *, schema_text: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version}
        out.update(schema_json(self.schema, self.schema.schema if schema_text is None else schema_text, with_id=True))
        if self.deleted:
            out["deleted"] = True
        return out


def schema_json(s: StoredSchema, text: str, *, with_id: bool = False) -> dict[str, Any]:
    """A schema's fields as the API answers them (``schemaType`` left out for AVRO, empty
    references, metadata and rule set left out)."""
    out: dict[str, Any] = {"id": s.id} if with_id else {}
    out["guid"] = s.guid
    if s.schema_type != "AVRO":
        out["schemaType"] = s.schema_type
    if s.references:
        out["references"] = [r.to_json() for r in s.references]
    if s.metadata is not None:
        out["metadata"] = s.metadata
    if s.rule_set is not None:
        out["ruleSet"] = s.rule_set
    out["schema"] = text
    return out


def _json_identity(value: Any) -> str:
    import json

    return "" if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _forward_errors(new: ParsedSchema, old: ParsedSchema) -> list[str]:
    """The breaks of reading data written with ``new`` using ``old``, worded from the
    registration's side (Avro's breaks name the old schema as the reader, as Confluent's
    FORWARD messages do)."""
    incompatibilities = getattr(old, "incompatibilities", None)
    if incompatibilities is not None and old.schema_type == new.schema_type:
        return [i.message("old", "new") for i in incompatibilities(new)]
    return old.backward_errors(new)


def _valid_guid(text: str) -> bool:
    try:
        uuid.UUID(text)
        return True
    except ValueError:
        return False


def registry_topic_spec(topic: str) -> InternalTopicSpec:
    """``_schemas``: one partition, compacted, as Confluent's ``KafkaStore`` creates it."""
    return InternalTopicSpec(topic, partitions_key=None, replication_key=None, segment_bytes_key=None,
                             load_buffer_key=None, default_partitions=1,
                             configs=(("cleanup.policy", "compact"), ("compression.type", "uncompressed")))


class SchemaStore:
    """The registry's state over ``_schemas`` (module docstring)."""

    def __init__(self, settings: RegistryConfig, topics: TopicSource, config: Mapping[str, Any], *,
                 time: Time = SYSTEM_TIME, scheduler: Scheduler | None = None,
                 on_append: Callable[[tuple[str, int]], None] | None = None) -> None:
        self.settings = settings
        self.runtime = CoordinatorRuntime(registry_topic_spec(settings.topic), topics, config, time=time,
                                          scheduler=scheduler, on_append=on_append,
                                          append_errors=storage_error_map(ErrorCode.MESSAGE_TOO_LARGE))
        self._lock = threading.RLock()
        self.schemas: dict[int, StoredSchema] = {}
        self.guids: dict[str, int] = {}
        self.subjects: dict[str, dict[int, SubjectVersion]] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self._by_text: dict[tuple, int] = {}  # (type, stored text, references, metadata, rule set) -> id
        self._parsed: dict[int, ParsedSchema] = {}
        self._unindexed: set[int] = set()  # ids not yet in _by_canonical (parsed on the first miss)
        self._by_canonical: dict[tuple, int] = {}

    # --- lifecycle ---

    def startup(self) -> None:
        results = self.runtime.startup(self._replay)
        applied = sum(r.applied for r in results)
        if results:
            log.info("schema registry loaded %d records of %s: %d schemas, %d subjects", applied,
                     self.settings.topic, len(self.schemas), len(self.subjects))

    def shutdown(self) -> None:
        self.runtime.shutdown()

    # --- replay: the one place the cache changes ---

    def _replay(self, record: CoordinatorRecord) -> bool:
        try:
            key = rec.decode_key(record.key)
        except ValueError as exc:
            log.warning("%s offset %d: skipped: %s", self.settings.topic, record.offset, exc)
            return False
        with self._lock:
            self._apply(key, record.value)
        return True

    def _apply(self, key: rec.RegistryKey, value: bytes | None) -> None:
        kind = key.keytype
        if kind == rec.SCHEMA:
            assert key.subject is not None and key.version is not None
            versions = self.subjects.setdefault(key.subject, {})
            if value is None:  # permanent delete of one version
                versions.pop(key.version, None)
                if not versions:
                    self.subjects.pop(key.subject, None)
                return
            sv = rec.decode_schema_value(value)
            refs = tuple(SchemaReference(n, s, v) for n, s, v in sv.references)
            existing = self.schemas.get(sv.id)
            if existing is None:
                stored = StoredSchema(sv.id, sv.guid, sv.schema_type, sv.schema, refs, sv.metadata, sv.rule_set)
                self.schemas[sv.id] = stored
                self.guids[sv.guid] = sv.id
                self._by_text[self._text_identity(stored)] = sv.id
                self._unindexed.add(sv.id)
            self.max_id = max(self.max_id, sv.id)
            versions[key.version] = SubjectVersion(key.subject, key.version, sv.id, sv.deleted)
        elif kind == rec.CONFIG:
            if value is None:
                self.configs.pop(key.subject, None)
            else:
                self.configs[key.subject] = rec.decode_object(value)
        elif kind == rec.MODE:
            if value is None:
                self.modes.pop(key.subject, None)
            else:
                mode = rec.decode_object(value).get("mode")
                if mode in MODES:
                    self.modes[key.subject] = mode
        elif kind == rec.DELETE_SUBJECT:
            assert key.subject is not None
            if value is None:
                return
            upto = rec.decode_object(value).get("version")
            versions = self.subjects.get(key.subject, {})
            for v, sv_ in list(versions.items()):
                if upto is None or v <= upto:
                    versions[v] = replace(sv_, deleted=True)
        elif kind == rec.CLEAR_SUBJECT:
            assert key.subject is not None
            versions = self.subjects.get(key.subject, {})
            for v in [v for v, sv_ in versions.items() if sv_.deleted]:
                del versions[v]
            if not versions:
                self.subjects.pop(key.subject, None)

    def _write(self, items: list[tuple[rec.RegistryKey, bytes | None]]) -> None:
        """Append ``items`` as one batch, then apply them (the caller holds ``_lock``)."""
        self.runtime.check_loaded()
        try:
            self.runtime.append(PARTITION, [(k.encode(), v) for k, v in items])
        except ApiError as exc:
            raise RegistryError(500, 50001, f"Error while storing the schema registry's record in "
                                f"{self.settings.topic}: {exc.code.name}") from exc
        for k, v in items:
            self._apply(k, v)

    # --- identity ---

    @staticmethod
    def _text_identity(s: StoredSchema) -> tuple:
        return (s.schema_type, s.schema, s.references, _json_identity(s.metadata), _json_identity(s.rule_set))

    def parsed(self, schema_id: int) -> ParsedSchema:
        """The parsed schema of ``schema_id`` (cached); the caller holds ``_lock``."""
        cached = self._parsed.get(schema_id)
        if cached is None:
            s = self.schemas[schema_id]
            cached = parse_schema(s.schema_type, s.schema, s.references, self.resolve_references(s.references))
            self._parsed[schema_id] = cached
        return cached

    def _find_identical(self, parsed: ParsedSchema, metadata: Any, rule_set: Any) -> int | None:
        candidate = StoredSchema(0, "", parsed.schema_type, parsed.canonical_string(), tuple(parsed.references),
                                 metadata, rule_set)
        found = self._by_text.get(self._text_identity(candidate))
        if found is not None:
            return found
        if self._unindexed:  # schemas stored as another registry wrote them: their canonical form, once each
            for sid in sorted(self._unindexed):
                try:
                    text = self.parsed(sid).canonical_string()
                except Exception:  # noqa: BLE001 - a stored schema this broker cannot parse is not a match
                    continue
                self._by_canonical[self._text_identity(replace(self.schemas[sid], schema=text))] = sid
            self._unindexed.clear()
        return self._by_canonical.get(self._text_identity(candidate))

    # --- references ---

    def resolve_references(self, references: tuple[SchemaReference, ...] | list[SchemaReference],
                           _depth: int = 0, _seen: frozenset[tuple[str, int]] = frozenset()) -> dict[str, str]:
        """Every schema text ``references`` reach, transitively, keyed by reference name,
        dependencies first (the caller holds ``_lock``)."""
        out: dict[str, str] = {}
        for ref in references:
            if _depth > MAX_REFERENCE_DEPTH or (ref.subject, ref.version) in _seen:
                raise invalid_schema(f"cyclic or too deep references at {ref.subject} version {ref.version}")
            target = self._version(ref.subject, ref.version, deleted=False, missing_ok=True)
            if target is None:
                raise invalid_schema(f"reference '{ref.name}' to subject '{ref.subject}' version {ref.version} "
                                     "does not exist")
            stored = self.schemas[target.id]
            out.update(self.resolve_references(stored.references, _depth + 1, _seen | {(ref.subject, ref.version)}))
            out[ref.name] = stored.schema
        return out

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """The ids of the live schemas referencing ``subject`` version ``version``."""
        ids = set()
        for versions in self.subjects.values():
            for sv in versions.values():
                if sv.deleted:
                    continue
                if any(r.subject == subject and r.version == version for r in self.schemas[sv.id].references):
                    ids.add(sv.id)
        return sorted(ids)

    # --- reads ---

    def lock(self) -> threading.RLock:
        return self._lock

    def _version(self, subject: str, version: int | str, *, deleted: bool, missing_ok: bool = False
                 ) -> SubjectVersion | None:
        versions = self.subjects.get(subject)
        live = {v: sv for v, sv in (versions or {}).items() if deleted or not sv.deleted}
        if not versions or (not live and not deleted):
            if missing_ok:
                return None
            raise subject_not_found(subject)
        if version in ("latest", -1):
            if not live:
                if missing_ok:
                    return None
                raise subject_not_found(subject)
            return live[max(live)]
        sv = live.get(int(version))
        if sv is None:
            if missing_ok:
                return None
            if int(version) in versions and versions[int(version)].deleted:
                raise RegistryError(404, 40402, f"Version {version} not found.")
            raise version_not_found(subject, version)
        return sv

    def get_version(self, subject: str, version: int | str, *, deleted: bool = False) -> Registered:
        with self._lock:
            sv = self._version(subject, version, deleted=deleted)
            assert sv is not None
            return Registered(subject, sv.version, self.schemas[sv.id], sv.deleted)

    def versions(self, subject: str, *, deleted: bool = False, deleted_only: bool = False) -> list[int]:
        with self._lock:
            versions = self.subjects.get(subject)
            if not versions:
                raise subject_not_found(subject)
            out = [v for v, sv in sorted(versions.items())
                   if (sv.deleted if deleted_only else deleted or not sv.deleted)]
            if not out and not deleted and not deleted_only:
                raise subject_not_found(subject)
            return out

    def subject_names(self, *, deleted: bool = False, deleted_only: bool = False, prefix: str = "") -> list[str]:
        with self._lock:
            out = []
            for subject, versions in self.subjects.items():
                if not subject.startswith(prefix):
                    continue
                live = any(not sv.deleted for sv in versions.values())
                dead = any(sv.deleted for sv in versions.values())
                if (deleted_only and dead and not live) or (not deleted_only and (live or (deleted and dead))):
                    out.append(subject)
            return sorted(out)

    def _held(self, schema_id: int) -> bool:
        """Whether a subject version (soft-deleted or not) still holds ``schema_id``: a
        schema whose every version was deleted permanently is not served any more (its id
        is never given again)."""
        return any(sv.id == schema_id for versions in self.subjects.values() for sv in versions.values())

    def schema_by_id(self, schema_id: int) -> StoredSchema:
        with self._lock:
            s = self.schemas.get(schema_id)
            if s is None or not self._held(schema_id):
                raise schema_not_found()
            return s

    def schema_by_guid(self, guid: str) -> StoredSchema:
        with self._lock:
            sid = self.guids.get(guid)
            if sid is None or not self._held(sid):
                raise schema_not_found()
            return self.schemas[sid]

    def subject_versions_of(self, schema_id: int, *, deleted: bool = False) -> list[tuple[str, int]]:
        with self._lock:
            if schema_id not in self.schemas:
                raise schema_not_found()
            return sorted((s, v) for s, versions in self.subjects.items() for v, sv in versions.items()
                          if sv.id == schema_id and (deleted or not sv.deleted))

    def all_schemas(self, *, prefix: str = "", deleted: bool = False, deleted_only: bool = False,
                    latest_only: bool = False) -> list[Registered]:
        with self._lock:
            out = []
            for subject in sorted(self.subjects):
                if not subject.startswith(prefix):
                    continue
                versions = self.subjects[subject]
                chosen = [sv for _, sv in sorted(versions.items())
                          if (sv.deleted if deleted_only else deleted or not sv.deleted)]
                if latest_only and chosen:
                    chosen = [chosen[-1]]
                out += [Registered(subject, sv.version, self.schemas[sv.id], sv.deleted) for sv in chosen]
            return out

    # --- configs and modes ---

    def config(self, subject: str | None, *, default_to_global: bool) -> dict[str, Any] | None:
        with self._lock:
            found = self.configs.get(subject)
            if found is None and subject is not None and default_to_global:
                found = self.configs.get(None)
            if found is None and (subject is None or default_to_global):
                return {"compatibilityLevel": self.settings.compatibility_level}
            return dict(found) if found is not None else None

    def compatibility_level(self, subject: str) -> str:
        cfg = self.config(subject, default_to_global=True) or {}
        level = cfg.get("compatibilityLevel") or cfg.get("compatibility") or self.settings.compatibility_level
        return str(level).upper()

    def set_config(self, subject: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if level is not None and str(level).upper() not in COMPATIBILITY_LEVELS:
            raise RegistryError(422, 42203, "Invalid compatibility level. Valid values are "
                                f"{', '.join(COMPATIBILITY_LEVELS)}")
        value = {k: v for k, v in body.items() if k not in ("compatibility", "compatibilityLevel")}
        with self._lock:
            self._check_writable(subject, config_change=True)
            current = dict(self.configs.get(subject) or {})
            current.update(value)
            if level is not None:
                current["compatibilityLevel"] = str(level).upper()
            self._write([(rec.RegistryKey(rec.CONFIG, subject), rec.encode_object(current))])
        out = dict(current)
        if "compatibilityLevel" in out:
            out["compatibility"] = out.pop("compatibilityLevel")
        return out

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        with self._lock:
            self._check_writable(subject, config_change=True)
            current = self.configs.get(subject)
            if subject is not None and current is None:
                if subject not in self.subjects:
                    raise subject_not_found(subject)
                raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility "
                                    "configured")
            self._write([(rec.RegistryKey(rec.CONFIG, subject), None)])
        return dict(current or {"compatibilityLevel": self.settings.compatibility_level})

    def mode(self, subject: str | None, *, default_to_global: bool) -> str | None:
        with self._lock:
            found = self.modes.get(subject)
            if found is None and subject is not None and default_to_global:
                found = self.modes.get(None)
            if found is None and (subject is None or default_to_global):
                return "READWRITE"
            return found

    def set_mode(self, subject: str | None, mode: str, *, force: bool = False) -> str:
        mode = str(mode).upper()
        if mode not in MODES:
            raise RegistryError(422, 42204, f"Invalid mode. Valid values are {', '.join(MODES)}")
        if not self.settings.mode_mutability:
            raise RegistryError(422, 42205, "Mode changes are not allowed")
        with self._lock:
            if mode == "IMPORT" and not force:
                has = (any(self.subjects.values()) if subject is None
                       else bool(self.subjects.get(subject)))
                if has and self.mode(subject, default_to_global=True) != "IMPORT":
                    raise RegistryError(422, 42205, "Cannot import since found existing subjects")
            self._write([(rec.RegistryKey(rec.MODE, subject), rec.encode_object({"mode": mode}))])
        return mode

    def delete_mode(self, subject: str | None) -> str:
        with self._lock:
            current = self.modes.get(subject)
            if current is None and subject is None:
                return "READWRITE"
            if current is None:
                if subject not in self.subjects:
                    raise subject_not_found(subject or "")
                raise RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")
            self._write([(rec.RegistryKey(rec.MODE, subject), None)])
            return current

    def _check_writable(self, subject: str | None, *, config_change: bool = False, importing: bool = False
                        ) -> str:
        mode = self.mode(subject, default_to_global=True) or "READWRITE"
        if mode == "READONLY" or (mode == "READONLY_OVERRIDE" and not config_change):
            raise RegistryError(422, 42205, f"Subject {subject if subject is not None else '(global)'} is in "
                                "read-only mode")
        return mode

    # --- compatibility ---

    def compatibility_errors(self, subject: str, parsed: ParsedSchema, *, against: list[int] | None = None,
                             level: str | None = None) -> list[str]:
        """The breaks of registering ``parsed`` under ``subject`` at its level (the caller
        holds ``_lock``); ``against``: the versions to check (default: by the level)."""
        level = level or self.compatibility_level(subject)
        if level == "NONE":
            return []
        versions = self.subjects.get(subject, {})
        live = [sv for _, sv in sorted(versions.items()) if not sv.deleted]
        if against is not None:
            previous = [sv for sv in live if sv.version in against]
        else:
            previous = live if level.endswith("_TRANSITIVE") else live[-1:]
        errors: list[str] = []
        for sv in reversed(previous):
            try:
                old = self.parsed(sv.id)
            except SchemaError as exc:
                errors.append(f"the schema of version {sv.version} cannot be read: {exc}")
                continue
            found: list[str] = []
            if level.startswith(("BACKWARD", "FULL")):
                found += parsed.backward_errors(old)
            if level.startswith(("FORWARD", "FULL")):
                found += _forward_errors(parsed, old)
            errors += [f"{msg} (version {sv.version})" if len(previous) > 1 else msg for msg in found]
        return errors

    # --- registration ---

    def parse(self, schema_type: str | None, text: Any, references: list[SchemaReference],
              *, normalize: bool = False) -> ParsedSchema:
        """Parse a schema a client sent, its references resolved (the caller holds ``_lock``)."""
        if not isinstance(text, str):
            raise invalid_schema("the schema must be a string")
        resolved = self.resolve_references(references)
        try:
            parsed = parse_schema(schema_type, text, references, resolved)
            return parsed.normalize() if normalize else parsed
        except SchemaError as exc:
            raise RegistryError(422, exc.error_code, f"Invalid schema: {exc}") from None

    def register(self, subject: str, schema_type: str | None, text: Any, references: list[SchemaReference], *,
                 normalize: bool = False, metadata: Any = None, rule_set: Any = None,
                 schema_id: int | None = None, version: int | None = None, guid: str | None = None
                 ) -> Registered:
        """POST /subjects/{subject}/versions (module docstring); ``guid`` is kept in IMPORT
        mode for a new schema."""
        with self._lock:
            mode = self._check_writable(subject)
            importing = mode == "IMPORT"
            if (schema_id is not None or version is not None) and not importing:
                if schema_id is not None and schema_id > 0 and schema_id not in self.schemas:
                    raise RegistryError(422, 42205, f"Subject {subject} is not in import mode")
            cfg = self.config(subject, default_to_global=True) or {}
            parsed = self.parse(schema_type, text, references, normalize=normalize or bool(cfg.get("normalize")))
            versions = self.subjects.get(subject, {})
            same = self._find_identical(parsed, metadata, rule_set)
            if same is not None and (schema_id is None or schema_id < 0 or schema_id == same):
                for sv in sorted(versions.values(), key=lambda sv: sv.version):
                    if sv.id == same and not sv.deleted and (version is None or version == sv.version):
                        return Registered(subject, sv.version, self.schemas[same])
            if importing:
                if schema_id is None or schema_id < 0:
                    if same is None:
                        raise RegistryError(422, 42205, "A schema id is needed in IMPORT mode")
                    schema_id = same
                existing = self.schemas.get(schema_id)
                if existing is not None and same != schema_id:
                    raise RegistryError(422, 42207, f"Overwrite new schema with id {schema_id} is not permitted.")
                if version is None:
                    version = max(versions, default=0) + 1
                elif version in versions and not versions[version].deleted:
                    if versions[version].id == schema_id:
                        return Registered(subject, version, self.schemas[schema_id])
                    raise RegistryError(422, 42205, f"Version {version} of subject {subject} already exists "
                                        "with another schema")
            else:
                errors = self.compatibility_errors(subject, parsed)
                if errors:
                    raise RegistryError(409, 409, f"Schema being registered is incompatible with an earlier schema "
                                        f"for subject \"{subject}\", details: [{', '.join(errors)}]")
                if same is not None:
                    schema_id = same
                elif schema_id is None or schema_id < 0 or schema_id in self.schemas:
                    schema_id = self.max_id + 1
                version = max(versions, default=0) + 1 if version is None or version <= 0 else version
            stored = self.schemas.get(schema_id)
            if stored is not None:
                guid = stored.guid
            elif not (importing and guid and _valid_guid(guid) and guid not in self.guids):
                guid = str(uuid.uuid4())
            value = rec.SchemaValue(
                subject=subject, version=version, id=schema_id, schema=parsed.canonical_string(),
                schema_type=parsed.schema_type, references=tuple((r.name, r.subject, r.version) for r in references),
                metadata=metadata, rule_set=rule_set, deleted=False, guid=guid)
            self._write([(rec.schema_key(subject, version), value.encode())])
            self._parsed.setdefault(schema_id, parsed)
            return Registered(subject, version, self.schemas[schema_id])

    def lookup(self, subject: str, schema_type: str | None, text: Any, references: list[SchemaReference], *,
               normalize: bool = False, deleted: bool = False, metadata: Any = None, rule_set: Any = None
               ) -> Registered:
        """POST /subjects/{subject}: the version of ``subject`` holding this schema."""
        with self._lock:
            versions = self.subjects.get(subject)
            if not versions or (not deleted and all(sv.deleted for sv in versions.values())):
                raise subject_not_found(subject)
            parsed = self.parse(schema_type, text, references, normalize=normalize)
            same = self._find_identical(parsed, metadata, rule_set)
            if same is None and metadata is None and rule_set is None:
                same = next((sid for sid, s in self.schemas.items()
                             if self._find_identical_ignoring_metadata(sid, parsed)), None)
            for sv in sorted(versions.values(), key=lambda sv: -sv.version):
                if sv.id == same and (deleted or not sv.deleted):
                    return Registered(subject, sv.version, self.schemas[sv.id], sv.deleted)
            raise schema_not_found()

    def _find_identical_ignoring_metadata(self, sid: int, parsed: ParsedSchema) -> bool:
        s = self.schemas[sid]
        if s.schema_type != parsed.schema_type or s.references != tuple(parsed.references):
            return False
        try:
            return s.schema == parsed.canonical_string() or self.parsed(sid).canonical_string() == \
                parsed.canonical_string()
        except Exception:  # noqa: BLE001
            return False

    # --- deletes ---

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        with self._lock:
            self._check_writable(subject)
            versions = self.subjects.get(subject)
            if not versions:
                raise subject_not_found(subject)
            live = sorted(v for v, sv in versions.items() if not sv.deleted)
            for v in live:
                if self.referenced_by(subject, v):
                    raise RegistryError(422, 42206, f"One or more references exist to the schema "
                                        f"{{subject={subject},version={v}}}.")
            if permanent:
                if live:
                    raise RegistryError(404, 40405, f"Subject '{subject}' was not deleted first before being "
                                        "permanently deleted")
                deleted = sorted(versions)
                items: list[tuple[rec.RegistryKey, bytes | None]] = [
                    (rec.schema_key(subject, v), None) for v in deleted]
                items += [(rec.RegistryKey(rec.CONFIG, subject), None)] if subject in self.configs else []
                items += [(rec.RegistryKey(rec.MODE, subject), None)] if subject in self.modes else []
                self._write(items)
                return deleted
            if not live:
                raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted. Set permanent=true to "
                                    "delete permanently")
            items = [(rec.schema_key(subject, v), self._deleted_value(subject, versions[v])) for v in live]
            items.append((rec.RegistryKey(rec.DELETE_SUBJECT, subject),
                          rec.encode_object({"subject": subject, "version": live[-1]})))
            self._write(items)
            return live

    def _deleted_value(self, subject: str, sv: SubjectVersion) -> bytes:
        s = self.schemas[sv.id]
        return rec.SchemaValue(subject=subject, version=sv.version, id=s.id, schema=s.schema,
                               schema_type=s.schema_type,
                               references=tuple((r.name, r.subject, r.version) for r in s.references),
                               metadata=s.metadata, rule_set=s.rule_set, deleted=True, guid=s.guid).encode()

    def delete_version(self, subject: str, version: int | str, *, permanent: bool = False) -> int:
        with self._lock:
            self._check_writable(subject)
            versions = self.subjects.get(subject)
            if not versions:
                raise subject_not_found(subject)
            if version in ("latest", -1):
                live = [v for v, sv in versions.items() if not sv.deleted]
                if not live:
                    raise subject_not_found(subject)
                number = max(live)
            else:
                number = int(version)
            sv = versions.get(number)
            if sv is None:
                raise version_not_found(subject, version)
            if permanent and not sv.deleted:
                raise RegistryError(404, 40407, f"Subject '{subject}' Version {number} was not deleted first "
                                    "before being permanently deleted")
            if not permanent and sv.deleted:
                raise RegistryError(404, 40406, f"Subject '{subject}' Version {number} was soft deleted. Set "
                                    "permanent=true to delete permanently")
            if not sv.deleted and self.referenced_by(subject, number):
                raise RegistryError(422, 42206, f"One or more references exist to the schema "
                                    f"{{subject={subject},version={number}}}.")
            value = None if permanent else self._deleted_value(subject, sv)
            self._write([(rec.schema_key(subject, number), value)])
            return number


__all__ = ["PARTITION", "Registered", "RegistryError", "SchemaStore", "StoredSchema", "SubjectVersion", "schema_json",
           "registry_topic_spec"]
