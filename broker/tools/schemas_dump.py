"""``kafkalog schemas --export`` / ``--import``: dumps of a Schema Registry, read and
written, and replayed into a registry through its REST API.

A dump is the records of a ``_schemas`` topic (Confluent's registry, Karapace and this
broker's keep the same ones): a JSON key (``{"keytype":"SCHEMA","subject":"s",
"version":1,"magic":1}``, ``CONFIG``, ``MODE``, ``DELETE_SUBJECT``, ``CLEAR_SUBJECT``,
``NOOP``) and a JSON value or a tombstone. Formats read (detected from the first bytes):

* console: what ``kafka-console-consumer --property print.key=true`` prints, one record
  a line, ``KEY<TAB>VALUE``, ``null`` for a tombstone; the timestamp, partition and
  offset fields that ``print.timestamp`` / ``print.partition`` / ``print.offset`` put
  first (``CreateTime:1700000000000``, ``Partition:0``, ``Offset:5``) are skipped;
* Karapace's backup v1: a JSON array of ``[key, value]`` pairs, each a JSON text (or an
  object) or ``"null"`` / null;
* Karapace's backup v2: the line ``/V2`` then ``KEY<TAB>VALUE`` lines, each field the
  record's bytes in upper-case hexadecimal (``base64.b16encode``, Karapace's
  ``backends/v2.py``) or ``null``. (v3, a directory of Avro-framed files with a
  ``.metadata`` file, is refused with a message.)

``--export`` writes the console format: the registry's state as the records that make it,
schemas in id order (a referenced schema before the ones using it), each version with
its ``deleted`` flag, then the global and subject configs, then the subject modes and a
global mode other than READWRITE. ``kafka-console-producer --property parse.key=true``
writes such a file back into a ``_schemas`` topic.

``RegistryState.fold(records)`` applies the records in order as a registry loading the
topic does (a later record of a key replaces an earlier one; a tombstone removes it;
DELETE_SUBJECT soft-deletes the versions up to its version; CLEAR_SUBJECT removes the
soft-deleted ones); unknown key types (Confluent's CONTEXT, KEK, DEK ...) are counted and
skipped. ``replay(client, state)`` makes a registry hold that state with the same ids and
versions: the global mode set to IMPORT (with ``force`` when the registry refuses it
without), each version registered with its ``id`` and ``version`` (references first),
the soft-deleted ones then deleted (dependants first), configs and subject modes set, and
in the end the global mode of the dump, else the mode the registry had (also after a
failure). GUIDs are the target registry's (they travel only with ``--direct``).

Errors are ``CliError``s naming the file and line (or record). Thread-safety: a command
runs on the main thread.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .common import CliError

SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP = (
    "SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP")
CONSOLE, KARAPACE_V1, KARAPACE_V2 = "console", "karapace-v1", "karapace-v2"
_V2_MARKER = b"/V2\n"
_V3_MARKER = b"/V3\n"
# the fields kafka-console-consumer's print.timestamp / print.partition / print.offset add
_CONSUMER_FIELD = re.compile(r"^(?:(?:CreateTime|LogAppendTime):-?\d+|NO_TIMESTAMP|Partition:\d+|Offset:\d+)$")


@dataclass(frozen=True)
class DumpRecord:
    """One ``_schemas`` record: its key and value bytes (None: a tombstone), and where it
    came from (``file line N`` / ``file record N``) for messages."""

    key: bytes
    value: bytes | None
    where: str = ""


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


# --- reading and writing files ---------------------------------------------------------------

def detect_format(head: bytes) -> str:
    if head.startswith(_V3_MARKER) or head.startswith(b"/V3"):
        raise CliError("Karapace backup v3 (Avro-framed data files with a .metadata file) is not supported: "
                       "restore it with karapace_schema_backup, or back up in v2 (--use-format-v2)")
    if head.startswith(_V2_MARKER) or head.startswith(b"/V2\r\n"):
        return KARAPACE_V2
    if head.lstrip().startswith(b"["):
        return KARAPACE_V1
    return CONSOLE


def read_dump(path: str) -> tuple[str, list[DumpRecord]]:
    """The format and records of the dump at ``path`` (``-``: stdin)."""
    import sys

    label = "stdin" if path == "-" else path
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    fmt = detect_format(data[:16])
    if fmt == KARAPACE_V2:
        return fmt, list(_read_v2(data, label))
    if fmt == KARAPACE_V1:
        return fmt, list(_read_v1(data, label))
    return fmt, list(_read_console(data, label))


def _text(data: bytes, label: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{label}: not UTF-8 text at byte {exc.start}") from None


def _read_console(data: bytes, label: str) -> Iterator[DumpRecord]:
    for n, line in enumerate(_text(data, label).splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        while len(fields) > 2 and _CONSUMER_FIELD.match(fields[0]):
            fields.pop(0)
        if len(fields) < 2:
            raise CliError(f"{label} line {n}: not KEY<TAB>VALUE (a record as kafka-console-consumer "
                           "--property print.key=true prints it)")
        key, value = fields[0], "\t".join(fields[1:])
        if key == "null":
            raise CliError(f"{label} line {n}: a record without a key is not a _schemas record")
        yield DumpRecord(key.encode(), None if value == "null" else value.encode(), f"{label} line {n}")


def _read_v1(data: bytes, label: str) -> Iterator[DumpRecord]:
    try:
        items = json.loads(_text(data, label))
    except ValueError as exc:
        raise CliError(f"{label}: not a Karapace v1 backup (a JSON array of [key, value] pairs): {exc}") from None
    if not isinstance(items, list):
        raise CliError(f"{label}: not a Karapace v1 backup (a JSON array of [key, value] pairs)")
    for n, item in enumerate(items, 1):
        where = f"{label} record {n}"
        if not isinstance(item, list) or len(item) != 2:
            raise CliError(f"{where}: not a [key, value] pair")
        key, value = item
        if key is None or key == "null":
            raise CliError(f"{where}: a record without a key is not a _schemas record")
        yield DumpRecord(_v1_bytes(key), None if value is None or value == "null" else _v1_bytes(value), where)


def _v1_bytes(item: Any) -> bytes:
    return item.encode() if isinstance(item, str) else _dumps(item)


def _read_v2(data: bytes, label: str) -> Iterator[DumpRecord]:
    text = _text(data, label)
    lines = text.splitlines()
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split("\t")]
        where = f"{label} line {n}"
        if len(fields) != 2:
            raise CliError(f"{where}: not KEY<TAB>VALUE (hexadecimal bytes or null)")
        try:
            key = base64.b16decode(fields[0], casefold=True) if fields[0] != "null" else None
            value = base64.b16decode(fields[1], casefold=True) if fields[1] != "null" else None
        except (binascii.Error, ValueError):
            raise CliError(f"{where}: a field is neither hexadecimal bytes nor null") from None
        if key is None:
            raise CliError(f"{where}: a record without a key is not a _schemas record")
        yield DumpRecord(key, value, where)


def write_console(records: Iterable[DumpRecord], out: TextIO) -> int:
    """Write ``records`` in the console format; how many."""
    n = 0
    for record in records:
        value = "null" if record.value is None else record.value.decode()
        out.write(f"{record.key.decode()}\t{value}\n")
        n += 1
    return n


# --- the state a dump describes ----------------------------------------------------------------

def _decode(raw: bytes, what: str, where: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CliError(f"{where}: the {what} is not JSON ({exc}): {raw[:120]!r}") from None


def _check_schema_value(value: dict[str, Any], where: str) -> None:
    kind = value.get("schemaType")
    if kind is not None and not isinstance(kind, str):
        raise CliError(f"{where}: schemaType is not a string")
    refs = value.get("references")
    if refs is not None and (not isinstance(refs, list) or not all(
            isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("subject"), str)
            and isinstance(r.get("version"), int) for r in refs)):
        raise CliError(f"{where}: references is not a list of {{name, subject, version}}")
    for name in ("metadata", "ruleSet"):
        if value.get(name) is not None and not isinstance(value[name], dict):
            raise CliError(f"{where}: {name} is not a JSON object")
    if not isinstance(value.get("deleted", False), bool):
        raise CliError(f"{where}: deleted is not true or false")


@dataclass
class RegistryState:
    """What a registry holds after loading the records (module docstring):
    ``schemas[(subject, version)]`` the SCHEMA value (with ``deleted``), ``configs`` and
    ``modes`` by subject (None: global)."""

    schemas: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    configs: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    @classmethod
    def fold(cls, records: Iterable[DumpRecord]) -> RegistryState:
        state = cls()
        for record in records:
            state.apply(record)
        return state

    def apply(self, record: DumpRecord) -> None:
        where = record.where or "a record"
        key = _decode(record.key, "key", where)
        if not isinstance(key, dict) or not isinstance(key.get("keytype"), str):
            raise CliError(f"{where}: the key has no keytype: {record.key[:120]!r}")
        kind = key["keytype"]
        value = None if record.value is None else _decode(record.value, "value", where)
        if value is not None and not isinstance(value, dict):
            raise CliError(f"{where}: the value is not a JSON object: {(record.value or b'')[:120]!r}")
        subject = key.get("subject")
        if kind == NOOP:
            return
        if kind not in (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT):
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
            return
        if kind in (CONFIG, MODE):
            if subject is not None and not isinstance(subject, str):
                raise CliError(f"{where}: the key's subject is not a string")
            if kind == CONFIG:
                if value is None:
                    self.configs.pop(subject, None)
                else:
                    self.configs[subject] = value
            elif value is None:
                self.modes.pop(subject, None)
            else:
                mode = value.get("mode")
                if not isinstance(mode, str):
                    raise CliError(f"{where}: a MODE value needs a mode")
                self.modes[subject] = mode
            return
        if not isinstance(subject, str):
            raise CliError(f"{where}: a {kind} key needs a subject")
        if kind == SCHEMA:
            version = key.get("version")
            if not isinstance(version, int):
                raise CliError(f"{where}: a SCHEMA key needs a version number")
            if value is None:
                self.schemas.pop((subject, version), None)
                return
            if not isinstance(value.get("id"), int) or not isinstance(value.get("schema"), str):
                raise CliError(f"{where}: a SCHEMA value needs an id and a schema")
            _check_schema_value(value, where)
            self.schemas[(subject, version)] = {**value, "subject": subject, "version": version}
        elif kind == DELETE_SUBJECT:
            upto = (value or {}).get("version")
            for (s, v), schema in self.schemas.items():
                if s == subject and (not isinstance(upto, int) or v <= upto):
                    schema["deleted"] = True
        else:  # CLEAR_SUBJECT
            for k in [k for k, s in self.schemas.items() if k[0] == subject and s.get("deleted")]:
                del self.schemas[k]

    def ordered(self) -> list[dict[str, Any]]:
        """The schemas, each after the versions it references (when they are in the
        dump), else in id order."""
        out: list[dict[str, Any]] = []
        done: set[tuple[str, int]] = set()

        def visit(key: tuple[str, int], path: tuple[tuple[str, int], ...]) -> None:
            if key in done or key in path or key not in self.schemas:
                return
            schema = self.schemas[key]
            for ref in schema.get("references") or ():
                if isinstance(ref, dict):
                    visit((ref.get("subject"), ref.get("version")), path + (key,))  # type: ignore[arg-type]
            done.add(key)
            out.append(schema)

        for key in sorted(self.schemas, key=lambda k: (self.schemas[k]["id"], k)):
            visit(key, ())
        return out

    def records(self) -> list[DumpRecord]:
        """The records that make this state (what ``--export`` writes)."""
        out = []
        for schema in self.ordered():
            key = {"keytype": SCHEMA, "subject": schema["subject"], "version": schema["version"], "magic": 1}
            out.append(DumpRecord(_dumps(key), _dumps(schema_value(schema))))
        for subject in sorted(self.configs, key=lambda s: (s is not None, s or "")):
            out.append(DumpRecord(_dumps({"keytype": CONFIG, "subject": subject, "magic": 0}),
                                  _dumps(self.configs[subject])))
        for subject in sorted(self.modes, key=lambda s: (s is not None, s or "")):
            out.append(DumpRecord(_dumps({"keytype": MODE, "subject": subject, "magic": 0}),
                                  _dumps({"mode": self.modes[subject]})))
        return out

    def summary(self) -> str:
        subjects = {s for s, _ in self.schemas}
        ids = {v["id"] for v in self.schemas.values()}
        deleted = sum(1 for v in self.schemas.values() if v.get("deleted"))
        text = (f"{len(self.schemas)} schema versions ({len(ids)} ids, {len(subjects)} subjects, "
                f"{deleted} soft-deleted), {len(self.configs)} configs, {len(self.modes)} modes")
        if self.skipped:
            text += "; skipped " + ", ".join(f"{n} {k} records" for k, n in sorted(self.skipped.items()))
        return text


def schema_value(schema: dict[str, Any]) -> dict[str, Any]:
    """A SCHEMA record's value in Confluent's field order, without empty fields."""
    out: dict[str, Any] = {"subject": schema["subject"], "version": schema["version"], "id": schema["id"]}
    if schema.get("guid"):
        out["guid"] = schema["guid"]
    if (schema.get("schemaType") or "AVRO").upper() != "AVRO":
        out["schemaType"] = schema["schemaType"].upper()
    for name in ("references", "metadata", "ruleSet"):
        if schema.get(name):
            out[name] = schema[name]
    out["schema"] = schema["schema"]
    out["deleted"] = bool(schema.get("deleted"))
    return out


# --- export and import through the REST API ---------------------------------------------------------

def export_state(client: Any) -> RegistryState:
    """The state of the registry behind ``client`` (a ``SchemaRegistryClient``)."""
    from broker.client.registry import SchemaRegistryError

    state = RegistryState()
    for subject in client.get_subjects(deleted=True):
        try:
            live = set(client.get_versions(subject))
        except SchemaRegistryError as exc:
            if exc.error_code != SchemaRegistryError.SUBJECT_NOT_FOUND:
                raise
            live = set()
        for version in client.get_versions(subject, deleted=True):
            reg = client.get_version(subject, version, deleted=True)
            value: dict[str, Any] = {"subject": subject, "version": version, "id": reg.id, "guid": reg.guid,
                                     "schemaType": reg.schema_type,
                                     "references": [r.to_json() for r in reg.references],
                                     "metadata": reg.metadata, "ruleSet": reg.rule_set, "schema": reg.schema,
                                     "deleted": version not in live}
            state.schemas[(subject, version)] = value
        config = _optional(client.get_config, subject)
        if config:
            state.configs[subject] = config
        mode = _optional(client.get_mode, subject)
        if mode:
            state.modes[subject] = mode
    state.configs[None] = client.get_config(None)
    global_mode = client.get_mode(None)
    if global_mode != "READWRITE":
        state.modes[None] = global_mode
    return state


def _optional(call: Callable[..., Any], subject: str) -> Any:
    """``call(subject)`` (not defaulting to the global setting), or None when the subject
    has no setting of its own (40401, 40408, 40409)."""
    from broker.client.registry import SchemaRegistryError

    try:
        return call(subject, default_to_global=False)
    except SchemaRegistryError as exc:
        if exc.error_code in (SchemaRegistryError.SUBJECT_NOT_FOUND,
                              SchemaRegistryError.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED,
                              SchemaRegistryError.SUBJECT_LEVEL_MODE_NOT_CONFIGURED):
            return None
        raise


def _config_request(config: dict[str, Any]) -> dict[str, Any]:
    """A CONFIG record's value as a PUT /config body (``compatibilityLevel`` is
    ``compatibility`` there)."""
    body = {k: v for k, v in config.items() if v is not None}
    if "compatibilityLevel" in body:
        body["compatibility"] = body.pop("compatibilityLevel")
    return body


def replay(client: Any, state: RegistryState) -> None:
    """Make the registry behind ``client`` hold ``state`` (module docstring)."""
    from broker.client.registry import Schema, SchemaRegistryError, references_from

    previous = client.get_mode(None)
    try:
        client.set_mode("IMPORT")
    except SchemaRegistryError as exc:
        if exc.error_code != SchemaRegistryError.OPERATION_NOT_PERMITTED:
            raise
        client.set_mode("IMPORT", force=True)
    try:
        ordered = state.ordered()
        for value in ordered:
            schema = Schema(value["schema"], value.get("schemaType") or "AVRO",
                            references_from(value.get("references") or ()), value.get("metadata") or None,
                            value.get("ruleSet") or None)
            try:
                client.register_schema_full_response(value["subject"], schema, id=value["id"],
                                                     version=value["version"])
            except SchemaRegistryError as exc:
                raise CliError(f"subject {value['subject']!r} version {value['version']} (id {value['id']}): "
                               f"{exc}") from None
        for value in reversed(ordered):
            if value.get("deleted"):
                client.delete_version(value["subject"], value["version"])
        for subject, config in sorted(state.configs.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")):
            client.set_config(subject, _config_request(config))
        for subject, mode in sorted(state.modes.items(), key=lambda kv: kv[0] or ""):
            if subject is not None:
                client.set_mode(mode, subject, force=True)
    finally:
        client.set_mode(state.modes.get(None, previous), force=True)


__all__ = ["CONSOLE", "DumpRecord", "KARAPACE_V1", "KARAPACE_V2", "RegistryState", "detect_format",
           "export_state", "read_dump", "replay", "schema_value", "write_console"]
