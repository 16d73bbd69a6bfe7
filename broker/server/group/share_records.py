"""The share-group records of ``__consumer_offsets`` this broker writes, byte for byte as
Kafka's group coordinator writes them (``tools/kafka-spec/group-coordinator/
ShareGroupMetadata*.json``).

KEY ``int16 11`` (ShareGroupMetadataKey) then the group id (non-flexible string); VALUE
``int16 0`` then the flexible ShareGroupMetadataValue (the group epoch, and Kafka 4.2's
metadata hash of the subscribed topics, written as 0: this broker recomputes the
assignment from the topics it holds). A null value is a
tombstone (the group was deleted). Share-group members are not persisted: after a
restart a member heartbeats with its epoch, gets UNKNOWN_MEMBER_ID and joins again, as a
client does after a coordinator change; the group, its epoch (which only grows) and its
share-partition state (``__share_group_state``) survive.

Decoders raise ``RecordFormatError`` (``records.py``) for unreadable bytes.

Thread-safety: pure functions.
"""

from __future__ import annotations

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.primitives import Reader, Writer
from broker.protocol.schema import Field, Message, decode_bytes, encode_bytes
from broker.server.group.records import RecordFormatError

SHARE_METADATA = 11
VALUE_VERSION = 0

METADATA_VALUE = Message("ShareGroupMetadataValue", api_key=-1, kind="request", valid="0", flexible="0+", fields=(
    Field("epoch", "int32", "0+"),
    Field("metadata_hash", "int64", "0+", default=0),
))


def encode_key(group_id: str) -> bytes:
    w = Writer()
    w.int16(SHARE_METADATA)
    w.string(group_id)
    return w.getvalue()


def decode_key(data: bytes | memoryview) -> str | None:
    """The group id of a ShareGroupMetadataKey, None for any other record type."""
    try:
        r = Reader(data)
        if r.int16() != SHARE_METADATA:
            return None
        group = r.string()
        if r.pos != r.end or group is None:
            raise RecordFormatError("a share group key with trailing bytes or a null group id")
        return group
    except ProtocolDecodeError as exc:
        raise RecordFormatError(f"unreadable share group key: {exc}") from None


def encode_value(epoch: int) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    return w.getvalue() + encode_bytes(METADATA_VALUE, VALUE_VERSION, METADATA_VALUE.new(epoch=epoch))


def decode_value(data: bytes | memoryview) -> int:
    """The group epoch."""
    try:
        r = Reader(data)
        version = r.int16()
        if version < 0:
            raise RecordFormatError(f"bad value version {version}")
        return decode_bytes(METADATA_VALUE, VALUE_VERSION, bytes(data[2:])).epoch
    except ProtocolDecodeError as exc:
        raise RecordFormatError(f"unreadable share group value: {exc}") from None


def metadata_record(group_id: str, epoch: int) -> tuple[bytes, bytes]:
    return encode_key(group_id), encode_value(epoch)


def group_tombstones(group_id: str) -> list[tuple[bytes, bytes | None]]:
    return [(encode_key(group_id), None)]


__all__ = ["SHARE_METADATA", "decode_key", "decode_value", "group_tombstones", "metadata_record"]
