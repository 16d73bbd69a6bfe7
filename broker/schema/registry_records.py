"""The Schema Registry's records in ``_schemas``: their keys and values, as Confluent's
registry and Karapace write them, so that a ``_schemas`` topic moves between them and this
broker with the same ids. Sans-IO, here rather than beside the registry, so that readers
of a log directory (the Spark source's direct mode, the tools) decode ``_schemas`` without
a server.

Keys are compact JSON objects (no spaces), ``keytype`` first, ``magic`` last:

    SCHEMA          {"keytype":"SCHEMA","subject":"s","version":1,"magic":1}
    CONFIG          {"keytype":"CONFIG","subject":"s","magic":0}      (subject null: global)
    MODE            {"keytype":"MODE","subject":"s","magic":0}        (subject null: global)
    DELETE_SUBJECT  {"keytype":"DELETE_SUBJECT","subject":"s","magic":0}
    CLEAR_SUBJECT   {"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}
    NOOP            {"keytype":"NOOP","magic":0}

Values:

    SCHEMA          {"subject":"s","version":1,"id":1,"schemaType":"PROTOBUF","references":[...],
                     "metadata":{...},"ruleSet":{...},"schema":"...","deleted":false,"guid":"..."}
                    (``schemaType`` left out for AVRO; ``references`` / ``metadata`` /
                    ``ruleSet`` left out when empty; ``guid`` is this broker's; a record
                    without one gets a GUID derived from its id when loaded)
    CONFIG          {"compatibilityLevel":"FULL", ...Confluent's other config fields}
    MODE            {"mode":"READONLY"}
    DELETE_SUBJECT  {"subject":"s","version":3}   (every version up to 3 soft-deleted)
    CLEAR_SUBJECT   {"subject":"s"}               (the soft-deleted versions removed)

A null value (a tombstone) under a SCHEMA key removes that version for good (a permanent
delete); under a CONFIG or MODE key it removes that setting. Compaction keeps the last
record of each key, which is all the state needs.

Owns ``encode_*`` (the bytes written) and ``decode_key`` / ``decode_value`` (tolerant: key
order, spaces and unknown fields do not matter; Karapace's and Confluent's variants load).
Decoding a record that is not one of these raises ``ValueError``; the store logs and skips
it.

Thread-safety: pure functions.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"
KEY_TYPES = (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP)

# The namespace of GUIDs given to schemas loaded without one (a dump of another registry):
# the same id always gets the same GUID, on every load.
_GUID_NAMESPACE = uuid.UUID("6f1b1c0e-8d5a-4c1e-9a49-3f0d2c6b7a10")


def _dumps(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class RegistryKey:
    """A decoded key: ``keytype``, ``subject`` (None: global, or NOOP), ``version``
    (SCHEMA keys only)."""

    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        if self.keytype == SCHEMA:
            return _dumps({"keytype": SCHEMA, "subject": self.subject, "version": self.version, "magic": 1})
        if self.keytype == NOOP:
            return _dumps({"keytype": NOOP, "magic": 0})
        return _dumps({"keytype": self.keytype, "subject": self.subject, "magic": 0})


def schema_key(subject: str, version: int) -> RegistryKey:
    return RegistryKey(SCHEMA, subject, version)


def decode_key(data: bytes | None) -> RegistryKey:
    if data is None:
        raise ValueError("a record without a key")
    obj = json.loads(data)
    if not isinstance(obj, dict) or obj.get("keytype") not in KEY_TYPES:
        raise ValueError(f"not a registry key: {data[:100]!r}")
    keytype = obj["keytype"]
    subject = obj.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise ValueError(f"a key whose subject is not a string: {data[:100]!r}")
    if keytype == SCHEMA:
        version = obj.get("version")
        if not isinstance(subject, str) or not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"a SCHEMA key without subject and version: {data[:100]!r}")
        return RegistryKey(SCHEMA, subject, version)
    if keytype in (DELETE_SUBJECT, CLEAR_SUBJECT) and subject is None:
        raise ValueError(f"a {keytype} key without a subject: {data[:100]!r}")
    return RegistryKey(keytype, subject)


@dataclass(frozen=True)
class SchemaValue:
    """The value of a SCHEMA record."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[tuple[str, str, int], ...] = ()  # (name, subject, version)
    metadata: Any = None
    rule_set: Any = None
    deleted: bool = False
    guid: str = ""

    def encode(self) -> bytes:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [{"name": n, "subject": s, "version": v} for n, s, v in self.references]
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.rule_set is not None:
            out["ruleSet"] = self.rule_set
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        out["guid"] = self.guid
        return _dumps(out)


def guid_for_id(schema_id: int) -> str:
    """The GUID of a schema loaded without one: stable per id."""
    return str(uuid.uuid5(_GUID_NAMESPACE, str(schema_id)))


def decode_schema_value(data: bytes) -> SchemaValue:
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("a SCHEMA value that is not an object")
    try:
        subject, version, schema_id, schema = obj["subject"], obj["version"], obj["id"], obj["schema"]
    except KeyError as exc:
        raise ValueError(f"a SCHEMA value without {exc.args[0]}") from None
    if not (isinstance(subject, str) and isinstance(version, int) and isinstance(schema_id, int)
            and isinstance(schema, str)):
        raise ValueError("a SCHEMA value with fields of the wrong type")
    refs = []
    for ref in obj.get("references") or ():
        refs.append((str(ref["name"]), str(ref["subject"]), int(ref["version"])))
    return SchemaValue(subject=subject, version=version, id=schema_id, schema=schema,
                       schema_type=(obj.get("schemaType") or "AVRO").upper(), references=tuple(refs),
                       metadata=obj.get("metadata"), rule_set=obj.get("ruleSet"),
                       deleted=bool(obj.get("deleted", False)), guid=obj.get("guid") or guid_for_id(schema_id))


def decode_object(data: bytes) -> dict[str, Any]:
    obj = json.loads(data)
    if not isinstance(obj, dict):
        raise ValueError("a value that is not a JSON object")
    return obj


def encode_object(obj: Mapping[str, Any]) -> bytes:
    return _dumps(obj)


__all__ = ["CLEAR_SUBJECT", "CONFIG", "DELETE_SUBJECT", "KEY_TYPES", "MODE", "NOOP", "RegistryKey", "SCHEMA",
           "SchemaValue", "decode_key", "decode_object", "decode_schema_value", "encode_object", "guid_for_id",
           "schema_key"]
