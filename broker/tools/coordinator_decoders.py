"""The record decoders of ``kafkalog dump-log --offsets-decoder`` and
``--transaction-log-decoder``: the keys and values of ``__consumer_offsets`` and
``__transaction_state`` records as JSON, the text Kafka 4's ``kafka-dump-log.sh`` prints
(its ``OffsetsMessageParser`` and ``TransactionLogMessageParser``).

Owns the JSON form of a coordinator record, read generically from the spec tables of
``coordinator_schemas.py`` (generated from Kafka's JSON record specs):

* key: ``{"type":"<record type>","data":{...}}``: the type is the key's leading int16
  (0 and 1 OffsetCommit, 2 GroupMetadata, 3-8 the KIP-848 ConsumerGroup* records, 9-15
  the share groups'; 0 TransactionLog in ``__transaction_state``);
* value: ``{"version":"<value version>","data":{...}}``, or ``<DELETE>`` for a tombstone;
* ``data`` holds the fields present in that version, in the spec's order, named as Kafka's
  JSON converters name them (camelCase); tagged fields only when not at their default;
  bytes are base64, UUIDs Kafka's base64 form. In a ``GroupMetadataValue`` of protocol
  type ``consumer`` each member's ``subscription`` and ``assignment`` are decoded as
  ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment`` JSON (left base64
  when they do not decode, as Kafka does);
* a key of an unknown type: ``Unknown record type N at offset O, skipping.`` in place of
  the key and no payload; an undecodable key or value:
  ``Error at offset O, skipping. <what is wrong>``.

A value of a version above the highest the spec knows is read as that highest version
(KIP-915: later versions only add tagged fields), its own version still printed.

Thread-safety: pure functions over immutable tables (their codecs compile under a lock).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.primitives import Reader
from broker.protocol.schema import Field, Message, decode, in_range

from .coordinator_schemas import (
    CONSUMER_PROTOCOL_ASSIGNMENT,
    CONSUMER_PROTOCOL_SUBSCRIPTION,
    GROUP_RECORDS,
    TXN_RECORDS,
)

__all__ = ["RecordDecoder", "offsets_decoder", "transaction_log_decoder", "to_json"]

TOMBSTONE = "<DELETE>"
CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_METADATA_TYPE = 2

# (offset, key, value) -> (text after "key: " or None, text after "payload: " or None)
RecordDecoder = Callable[[int, "bytes | memoryview | None", "bytes | memoryview | None"],
                         tuple["str | None", "str | None"]]


class _UnknownRecordType(Exception):
    def __init__(self, record_type: int) -> None:
        super().__init__(record_type)
        self.record_type = record_type


def _dumps(node: Any) -> str:
    """Compact JSON, as Jackson's ``JsonNode.toString`` (non-ASCII left as it is)."""
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False)


def _version(reader: Reader, what: str) -> int:
    try:
        return reader.int16()
    except ProtocolDecodeError:
        raise ValueError(f"Could not read version from {what}'s buffer.") from None


def _read(message: Message, version: int, reader: Reader, what: str) -> Any:
    lo, hi = message.valid_versions
    try:
        if version < lo:
            raise ValueError(f"Can't read version {version} of {message.name}")
        return decode(message, min(version, hi), reader)
    except ValueError as exc:  # ProtocolDecodeError is one
        raise ValueError(f"Could not read record with version {version} from {what}'s buffer "
                         f"due to: {exc}.") from None


def _value_json(value: Any, f: Field, version: int) -> Any:
    if value is None:
        return None
    if f.is_array:
        return [_element_json(v, f, version) for v in value]
    return _element_json(value, f, version)


def _element_json(value: Any, f: Field, version: int) -> Any:
    if f.fields is not None:
        return to_json(value, f.fields, version)
    kind = f.element_type
    if kind in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "uuid":
        return _uuid_text(value)
    return value


def _uuid_text(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def to_json(struct: Any, fields: tuple[Field, ...], version: int) -> dict[str, Any]:
    """The JSON object of a decoded struct, as Kafka's generated ``JsonConverter.write``:
    the fields of ``version`` in spec order, tagged ones only when not at their default."""
    node: dict[str, Any] = {}
    for f in fields:
        if not in_range(f.versions, version):
            continue
        value = getattr(struct, f.name)
        if in_range(f.tagged, version) and _is_default(value, f):
            continue
        node[f.name] = _value_json(value, f, version)
    return node


def _is_default(value: Any, f: Field) -> bool:
    if f.fields is not None:  # a tagged struct: Kafka's specs give them a null default
        return value is None
    return value == f.default_value({})


def _embedded(blob: str, message: Message, convert: Callable[[Any, int], Any]) -> Any:
    """Decode a base64 field holding ``int16 version`` + ``message`` (Kafka's replace()),
    or None when it does not decode."""
    try:
        reader = Reader(base64.b64decode(blob))
        version = reader.int16()
        lo, hi = message.valid_versions
        if version < lo:
            return None
        v = min(version, hi)
        return convert(decode(message, v, reader), v)
    except (ProtocolDecodeError, ValueError):
        return None


def _group_metadata_json(node: dict[str, Any]) -> dict[str, Any]:
    if node.get("protocolType") != CONSUMER_PROTOCOL_TYPE:
        return node
    for member in node.get("members") or ():
        for name, message in (("subscription", CONSUMER_PROTOCOL_SUBSCRIPTION),
                              ("assignment", CONSUMER_PROTOCOL_ASSIGNMENT)):
            blob = member.get(name)
            if isinstance(blob, str):
                decoded = _embedded(blob, message, lambda s, v, m=message: to_json(s, m.fields, v))
                if decoded is not None:
                    member[name] = decoded
    return node


def _decoder(records: dict[int, tuple[Message, Message]]) -> RecordDecoder:
    def parse(offset: int, key: bytes | memoryview | None,
              value: bytes | memoryview | None) -> tuple[str | None, str | None]:
        if key is None:
            return (f"Error at offset {offset}, skipping. Failed to decode message at offset {offset} "
                    f"using the specified decoder (message had a missing key)"), None
        try:
            return _parse(records, key, value)
        except _UnknownRecordType as exc:
            return f"Unknown record type {exc.record_type} at offset {offset}, skipping.", None
        except ValueError as exc:
            return f"Error at offset {offset}, skipping. {' '.join(str(exc).split())}", None
    return parse


def _parse(records: dict[int, tuple[Message, Message]], key: bytes | memoryview,
           value: bytes | memoryview | None) -> tuple[str, str]:
    reader = Reader(key)
    record_type = _version(reader, "key")
    tables = records.get(record_type)
    if tables is None:
        raise _UnknownRecordType(record_type)
    key_message, value_message = tables
    # a key's version is its record type (Kafka 4.1+'s layout: 0, the type is the apiKey)
    key_version = min(record_type, key_message.valid_versions[1])
    key_struct = _read(key_message, key_version, reader, "key")
    key_text = _dumps({"type": str(record_type),
                       "data": to_json(key_struct, key_message.fields, key_version)})
    if value is None:
        return key_text, TOMBSTONE
    reader = Reader(value)
    version = _version(reader, "value")
    value_struct = _read(value_message, version, reader, "value")
    effective = min(version, value_message.valid_versions[1])
    data = to_json(value_struct, value_message.fields, effective)
    if record_type == GROUP_METADATA_TYPE and records is GROUP_RECORDS:
        data = _group_metadata_json(data)
    return key_text, _dumps({"version": str(version), "data": data})


offsets_decoder: RecordDecoder = _decoder(GROUP_RECORDS)
transaction_log_decoder: RecordDecoder = _decoder(TXN_RECORDS)

