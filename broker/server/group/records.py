"""The keys and values of the ``__consumer_offsets`` records, byte for byte as Kafka's group
coordinator writes them (``kafka-spec/group-coordinator/*.json``), so that Kafka's tools
(``kafka-console-consumer --formatter ...OffsetsMessageFormatter``, ``kafka-dump-log
--offsets-decoder``) and a Kafka broker can read this broker's log, and this broker can
load a log that Kafka wrote.

Owns the codecs of:

* the record KEY: ``int16 version`` then the key struct. Versions 0 and 1 are an
  ``OffsetCommitKey``, version 2 a ``GroupMetadataKey``; 3 and above are the records of
  KIP-848 / share groups (``UnknownKey`` here; the KIP-848 types 3-8 are read by
  ``consumer_records.py``, the others skipped by the loader)::

      OffsetCommitKey  v0-1 (written: 1)    group string, topic string, partition int32
      GroupMetadataKey v2                   group string

* the record VALUE: ``int16 version`` then the value struct (null value = tombstone)::

      OffsetCommitValue v0-4 (written: 3, or 1 when an expire timestamp is set, as Kafka)
        offset int64 | leaderEpoch int32 (v3+) | metadata string
        | commitTimestamp int64 | expireTimestamp int64 (v1 only) | tagged fields (v4+)

      GroupMetadataValue v0-4 (written: 3)
        protocolType string | generation int32 | protocol nullable string
        | leader nullable string | currentStateTimestamp int64 (v2+)
        | members [MemberMetadata] | tagged fields (v4+)
      MemberMetadata
        memberId string | groupInstanceId nullable string (v3+) | clientId string
        | clientHost string | rebalanceTimeout int32 (v1+) | sessionTimeout int32
        | subscription bytes | assignment bytes | tagged fields (v4+)

  Strings are int16-length UTF-8 (-1 = null), bytes and arrays int32-length, big-endian;
  version 4 (flexible, KIP-482) uses compact strings, bytes and arrays (uvarint length +
  1) and ends every struct with a tagged-field section. A value of a version above the
  highest known one is read as that highest version (KIP-915: later versions only add
  tagged fields), as Kafka does.

Invariants: decoders raise only ``RecordFormatError`` (truncated input, bad UTF-8, a
negative count, an unknown low version, trailing bytes); encoders produce what the
decoders read back unchanged.

Thread-safety: pure functions and immutable values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.protocol.errors import ProtocolDecodeError, ProtocolEncodeError
from broker.protocol.primitives import Reader, Writer

OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
OFFSET_COMMIT_KEY_VERSION = 1  # what Kafka writes (CoordinatorRecordType.OFFSET_COMMIT)
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_MAX_VERSION = 4
OFFSET_COMMIT_VALUE_VERSION = 3  # MetadataVersion.offsetCommitValueVersion(false) since 2.1
OFFSET_COMMIT_VALUE_EXPIRE_VERSION = 1  # the only version with expireTimestamp
GROUP_METADATA_VALUE_MAX_VERSION = 4
GROUP_METADATA_VALUE_VERSION = 3  # MetadataVersion.groupMetadataValueVersion() since 2.3
_FIRST_FLEXIBLE = 4  # both values: version 4 is the first flexible one


class RecordFormatError(ValueError):
    """A ``__consumer_offsets`` key or value that cannot be read."""


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class UnknownKey:
    """A key of another record type (KIP-848 records, read by ``consumer_records``; share groups)."""

    version: int


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1  # -1: none
    expire_timestamp: int = -1  # -1: none (only version 1 stores one)


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    session_timeout: int = 0
    rebalance_timeout: int = -1
    group_instance_id: str | None = None
    subscription: bytes = b""
    assignment: bytes = b""


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


# --- keys ---

def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    w = Writer()
    if isinstance(key, OffsetCommitKey):
        w.int16(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    elif isinstance(key, GroupMetadataKey):
        w.int16(GROUP_METADATA_KEY_VERSION)
        w.string(key.group)
    else:
        raise TypeError(f"not a __consumer_offsets key: {key!r}")
    return w.getvalue()


def decode_key(data: bytes | memoryview | None) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    if data is None:
        raise RecordFormatError("a __consumer_offsets record without a key")
    try:
        r = Reader(data)
        version = r.int16()
        if version in OFFSET_COMMIT_KEY_VERSIONS:
            key: OffsetCommitKey | GroupMetadataKey | UnknownKey = OffsetCommitKey(
                r.string(), r.string(), r.int32())
        elif version == GROUP_METADATA_KEY_VERSION:
            key = GroupMetadataKey(r.string())
        elif version > GROUP_METADATA_KEY_VERSION:
            return UnknownKey(version)
        else:
            raise RecordFormatError(f"unknown key version {version}")
    except ProtocolDecodeError as exc:
        raise RecordFormatError(f"unreadable key: {exc}") from None
    _check_end(r, "key")
    return key


# --- OffsetCommitValue ---

def offset_commit_value_version(value: OffsetCommitValue) -> int:
    """The version Kafka writes for ``value``: 1 with an expire timestamp, else 3."""
    return OFFSET_COMMIT_VALUE_EXPIRE_VERSION if value.expire_timestamp >= 0 else OFFSET_COMMIT_VALUE_VERSION


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    if version is None:
        version = offset_commit_value_version(value)
    if not 0 <= version <= OFFSET_COMMIT_VALUE_MAX_VERSION:
        raise ValueError(f"OffsetCommitValue has no version {version}")
    flexible = version >= _FIRST_FLEXIBLE
    w = Writer()
    try:
        w.int16(version)
        w.int64(value.offset)
        if version >= 3:
            w.int32(value.leader_epoch)
        _write_string(w, value.metadata, flexible)
        w.int64(value.commit_timestamp)
        if version == 1:
            w.int64(value.expire_timestamp)
        if flexible:
            w.uvarint(0)
    except ProtocolEncodeError as exc:
        raise ValueError(f"OffsetCommitValue: {exc}") from None
    return w.getvalue()


def decode_offset_commit_value(data: bytes | memoryview) -> OffsetCommitValue:
    try:
        r = Reader(data)
        version = min(r.int16(), OFFSET_COMMIT_VALUE_MAX_VERSION)
        if version < 0:
            raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
        flexible = version >= _FIRST_FLEXIBLE
        offset = r.int64()
        leader_epoch = r.int32() if version >= 3 else -1
        metadata = _read_string(r, flexible)
        commit_timestamp = r.int64()
        expire_timestamp = r.int64() if version == 1 else -1
        if flexible:
            r.skip_tagged_fields()
    except ProtocolDecodeError as exc:
        raise RecordFormatError(f"unreadable OffsetCommitValue: {exc}") from None
    if not flexible:
        _check_end(r, "OffsetCommitValue")
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


# --- GroupMetadataValue ---

def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if not 0 <= version <= GROUP_METADATA_VALUE_MAX_VERSION:
        raise ValueError(f"GroupMetadataValue has no version {version}")
    flexible = version >= _FIRST_FLEXIBLE
    w = Writer()
    try:
        w.int16(version)
        _write_string(w, value.protocol_type, flexible)
        w.int32(value.generation)
        _write_nullable_string(w, value.protocol, flexible)
        _write_nullable_string(w, value.leader, flexible)
        if version >= 2:
            w.int64(value.current_state_timestamp)
        if flexible:
            w.uvarint(len(value.members) + 1)
        else:
            w.int32(len(value.members))
        for m in value.members:
            _write_string(w, m.member_id, flexible)
            if version >= 3:
                _write_nullable_string(w, m.group_instance_id, flexible)
            _write_string(w, m.client_id, flexible)
            _write_string(w, m.client_host, flexible)
            if version >= 1:
                w.int32(m.rebalance_timeout)
            w.int32(m.session_timeout)
            if flexible:
                w.compact_bytes(m.subscription)
                w.compact_bytes(m.assignment)
                w.uvarint(0)
            else:
                w.bytes(m.subscription)
                w.bytes(m.assignment)
        if flexible:
            w.uvarint(0)
    except ProtocolEncodeError as exc:
        raise ValueError(f"GroupMetadataValue: {exc}") from None
    return w.getvalue()


def decode_group_metadata_value(data: bytes | memoryview) -> GroupMetadataValue:
    try:
        r = Reader(data)
        version = min(r.int16(), GROUP_METADATA_VALUE_MAX_VERSION)
        if version < 0:
            raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
        flexible = version >= _FIRST_FLEXIBLE
        protocol_type = _read_string(r, flexible)
        generation = r.int32()
        protocol = _read_nullable_string(r, flexible)
        leader = _read_nullable_string(r, flexible)
        current_state_timestamp = r.int64() if version >= 2 else -1
        count = r.uvarint() - 1 if flexible else r.int32()
        if count < 0:
            raise RecordFormatError("GroupMetadataValue: null or negative member count")
        r.check_count(count, 10)  # a lower bound of one member's encoded size
        members = []
        for _ in range(count):
            member_id = _read_string(r, flexible)
            instance_id = _read_nullable_string(r, flexible) if version >= 3 else None
            client_id = _read_string(r, flexible)
            client_host = _read_string(r, flexible)
            rebalance_timeout = r.int32() if version >= 1 else -1
            session_timeout = r.int32()
            if flexible:
                subscription = r.compact_bytes()
                assignment = r.compact_bytes()
                r.skip_tagged_fields()
            else:
                subscription = r.bytes()
                assignment = r.bytes()
            members.append(MemberMetadata(member_id, client_id, client_host, session_timeout,
                                          rebalance_timeout, instance_id, subscription, assignment))
        if flexible:
            r.skip_tagged_fields()
    except ProtocolDecodeError as exc:
        raise RecordFormatError(f"unreadable GroupMetadataValue: {exc}") from None
    if not flexible:
        _check_end(r, "GroupMetadataValue")
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp,
                              tuple(members))


# --- helpers ---

def _write_string(w: Writer, value: str, flexible: bool) -> None:
    if flexible:
        w.compact_string(value)
    else:
        w.string(value)


def _write_nullable_string(w: Writer, value: str | None, flexible: bool) -> None:
    if flexible:
        w.compact_nullable_string(value)
    else:
        w.nullable_string(value)


def _read_nullable_string(r: Reader, flexible: bool) -> str | None:
    return r.compact_nullable_string() if flexible else r.nullable_string()


def _read_string(r: Reader, flexible: bool) -> str:
    value = _read_nullable_string(r, flexible)
    if value is None:
        raise RecordFormatError("a null string in a non-nullable field")
    return value


def _check_end(r: Reader, what: str) -> None:
    if r.remaining:
        raise RecordFormatError(f"{r.remaining} trailing bytes after the {what}")


__all__ = [
    "GROUP_METADATA_KEY_VERSION", "GROUP_METADATA_VALUE_VERSION", "GroupMetadataKey",
    "GroupMetadataValue", "MemberMetadata", "OFFSET_COMMIT_KEY_VERSION", "OFFSET_COMMIT_VALUE_VERSION",
    "OffsetCommitKey", "OffsetCommitValue", "RecordFormatError", "UnknownKey", "decode_group_metadata_value",
    "decode_key", "decode_offset_commit_value", "encode_group_metadata_value", "encode_key",
    "encode_offset_commit_value", "offset_commit_value_version",
]
