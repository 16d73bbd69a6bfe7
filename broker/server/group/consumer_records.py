"""The KIP-848 consumer-group records of ``__consumer_offsets``, byte for byte as Kafka's
group coordinator writes them (``tools/kafka-spec/group-coordinator/ConsumerGroup*.json``).

A record KEY is ``int16 version`` (the record type) then non-flexible strings::

    3  ConsumerGroupMetadataKey                 group
    4  ConsumerGroupPartitionMetadataKey        group
    5  ConsumerGroupMemberMetadataKey           group, member id
    6  ConsumerGroupTargetAssignmentMetadataKey group
    7  ConsumerGroupTargetAssignmentMemberKey   group, member id
    8  ConsumerGroupCurrentMemberAssignmentKey  group, member id

A VALUE is ``int16 version`` (0) then the flexible struct of its JSON spec (compact
strings/arrays, tagged fields), encoded with the protocol schema machinery
(``broker.protocol.schema``). A null value is a tombstone. Kafka writes the member's
records (member metadata, target member assignment, current member assignment)
as tombstones when the member leaves, and all of the group's when it is deleted;
``ConsumerGroupMetadata`` carries the group epoch, ``TargetAssignmentMetadata`` the
assignment epoch.

Decoders raise ``RecordFormatError`` (``records.py``) for unreadable bytes.

Thread-safety: pure functions; the ``Message`` tables compile their codecs under a lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.primitives import Reader, Writer
from broker.protocol.schema import Field, Message, decode_bytes, encode_bytes
from broker.server.group.records import RecordFormatError

METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
_WITH_MEMBER = (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)
CONSUMER_KEY_TYPES = (METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_ASSIGNMENT_METADATA,
                      TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)
VALUE_VERSION = 0


@dataclass(frozen=True)
class ConsumerGroupKey:
    type: int  # one of CONSUMER_KEY_TYPES
    group: str
    member_id: str | None = None  # for the per-member types


def _tps(name: str) -> Field:
    return Field(name, "[]TopicPartitions", "0+", fields=(
        Field("topic_id", "uuid", "0+"), Field("partitions", "[]int32", "0+")))


def _value(name: str, *fields: Field) -> Message:
    return Message(name, api_key=-1, kind="request", valid="0", flexible="0+", fields=fields)


VALUES: dict[int, Message] = {
    METADATA: _value("ConsumerGroupMetadataValue", Field("epoch", "int32", "0+")),
    PARTITION_METADATA: _value("ConsumerGroupPartitionMetadataValue", Field(
        "topics", "[]TopicMetadata", "0+", fields=(
            Field("topic_id", "uuid", "0+"), Field("topic_name", "string", "0+"),
            Field("num_partitions", "int32", "0+"),
            Field("partition_metadata", "[]PartitionMetadata", "0+", fields=(
                Field("partition", "int32", "0+"), Field("racks", "[]string", "0+"))),
        ))),
    MEMBER_METADATA: _value(
        "ConsumerGroupMemberMetadataValue",
        Field("instance_id", "string", "0+", nullable="0+", default=None),
        Field("rack_id", "string", "0+", nullable="0+", default=None),
        Field("client_id", "string", "0+"),
        Field("client_host", "string", "0+"),
        Field("subscribed_topic_names", "[]string", "0+"),
        Field("subscribed_topic_regex", "string", "0+", nullable="0+", default=None),
        Field("rebalance_timeout_ms", "int32", "0+", default=-1),
        Field("server_assignor", "string", "0+", nullable="0+", default=None),
    ),
    TARGET_ASSIGNMENT_METADATA: _value("ConsumerGroupTargetAssignmentMetadataValue",
                                       Field("assignment_epoch", "int32", "0+")),
    TARGET_ASSIGNMENT_MEMBER: _value("ConsumerGroupTargetAssignmentMemberValue", Field(
        "topic_partitions", "[]TopicPartition", "0+", fields=(
            Field("topic_id", "uuid", "0+"), Field("partitions", "[]int32", "0+")))),
    CURRENT_MEMBER_ASSIGNMENT: _value(
        "ConsumerGroupCurrentMemberAssignmentValue",
        Field("member_epoch", "int32", "0+"),
        Field("previous_member_epoch", "int32", "0+"),
        Field("state", "int8", "0+"),
        _tps("assigned_partitions"),
        _tps("partitions_pending_revocation"),
    ),
}


def encode_consumer_key(key: ConsumerGroupKey) -> bytes:
    if key.type not in CONSUMER_KEY_TYPES:
        raise TypeError(f"not a consumer group record type: {key.type}")
    w = Writer()
    w.int16(key.type)
    w.string(key.group)
    if key.type in _WITH_MEMBER:
        w.string(key.member_id or "")
    return w.getvalue()


def decode_consumer_key(data: bytes | memoryview) -> ConsumerGroupKey | None:
    """The key, or None when ``data`` is not a consumer group record key."""
    try:
        r = Reader(data)
        version = r.int16()
        if version not in CONSUMER_KEY_TYPES:
            return None
        group = r.string()
        member = r.string() if version in _WITH_MEMBER else None
        if r.pos != r.end:
            raise RecordFormatError(f"trailing bytes after a consumer group key of type {version}")
        return ConsumerGroupKey(version, group, member)
    except ProtocolDecodeError as exc:
        raise RecordFormatError(f"unreadable consumer group key: {exc}") from None


def encode_consumer_value(type_: int, **fields) -> bytes:
    message = VALUES[type_]
    w = Writer()
    w.int16(VALUE_VERSION)
    return w.getvalue() + encode_bytes(message, VALUE_VERSION, message.new(**fields))


def decode_consumer_value(type_: int, data: bytes | memoryview):
    """The value struct (attribute access by snake_case field name)."""
    message = VALUES[type_]
    try:
        r = Reader(data)
        version = r.int16()
        if version < 0:
            raise RecordFormatError(f"bad value version {version}")
        # later versions only add tagged fields (KIP-915): read them as version 0
        return decode_bytes(message, VALUE_VERSION, bytes(data)[2:])
    except ProtocolDecodeError as exc:
        raise RecordFormatError(f"unreadable {message.name}: {exc}") from None


def topic_partitions(assignment) -> list[dict]:
    """{topic id: partitions} -> the records' [TopicPartitions] (sorted, deterministic)."""
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))
            if ps]


def from_topic_partitions(tps) -> dict:
    return {tp.topic_id: frozenset(tp.partitions) for tp in tps or () if tp.partitions}


__all__ = ["CONSUMER_KEY_TYPES", "CURRENT_MEMBER_ASSIGNMENT", "ConsumerGroupKey", "MEMBER_METADATA", "METADATA",
           "PARTITION_METADATA", "TARGET_ASSIGNMENT_MEMBER", "TARGET_ASSIGNMENT_METADATA", "decode_consumer_key",
           "decode_consumer_value", "encode_consumer_key", "encode_consumer_value", "from_topic_partitions",
           "topic_partitions"]
