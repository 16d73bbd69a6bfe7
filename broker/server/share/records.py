"""The records of ``__share_group_state``, byte for byte as Kafka's share coordinator
writes them (``tools/kafka-spec/share-coordinator/Share{Snapshot,Update}{Key,Value}.json``,
Kafka 4.2).

A KEY is ``int16`` record type (0 ShareSnapshot, 1 ShareUpdate) then the non-flexible
fields group id (string), topic id (uuid), partition (int32). A VALUE is ``int16 0`` then
the flexible struct:

* ShareSnapshotValue: snapshot epoch, state epoch, leader epoch, start offset, (tag 0:
  delivery complete count, Kafka 4.2), create timestamp, write timestamp, state batches;
* ShareUpdateValue: snapshot epoch, leader epoch, start offset (-1: unchanged), (tag 0:
  delivery complete count), state batches (only the ranges that changed).

A state batch is (first offset int64, last offset int64, delivery state int8: 0
available, 2 acknowledged, 4 archived, delivery count int16). A null value is a
tombstone (the share-partition's state was deleted).

Decoders raise ``ShareRecordError`` for unreadable bytes. Thread-safety: pure functions.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.primitives import Reader, Writer
from broker.protocol.schema import Field, Message, decode_bytes, encode_bytes
from broker.server.share.partition import StateBatch

SNAPSHOT, UPDATE = 0, 1
VALUE_VERSION = 0


class ShareRecordError(ValueError):
    """An unreadable record of ``__share_group_state``."""


@dataclass(frozen=True)
class ShareStateKey:
    type: int  # SNAPSHOT or UPDATE
    group_id: str
    topic_id: uuid.UUID
    partition: int


_BATCHES = Field("state_batches", "[]StateBatch", "0+", fields=(
    Field("first_offset", "int64", "0+"), Field("last_offset", "int64", "0+"),
    Field("delivery_state", "int8", "0+"), Field("delivery_count", "int16", "0+")))
_COMPLETE = Field("delivery_complete_count", "int32", "0+", tagged="0+", tag=0, default=-1)

SNAPSHOT_VALUE = Message("ShareSnapshotValue", api_key=-1, kind="request", valid="0", flexible="0+", fields=(
    Field("snapshot_epoch", "int32", "0+"), Field("state_epoch", "int32", "0+"),
    Field("leader_epoch", "int32", "0+"), Field("start_offset", "int64", "0+"), _COMPLETE,
    Field("create_timestamp", "int64", "0+"), Field("write_timestamp", "int64", "0+"), _BATCHES))
UPDATE_VALUE = Message("ShareUpdateValue", api_key=-1, kind="request", valid="0", flexible="0+", fields=(
    Field("snapshot_epoch", "int32", "0+"), Field("leader_epoch", "int32", "0+"),
    Field("start_offset", "int64", "0+"), _COMPLETE, _BATCHES))
VALUES = {SNAPSHOT: SNAPSHOT_VALUE, UPDATE: UPDATE_VALUE}


def encode_key(key: ShareStateKey) -> bytes:
    w = Writer()
    w.int16(key.type)
    w.string(key.group_id)
    w.uuid(key.topic_id)
    w.int32(key.partition)
    return w.getvalue()


def decode_key(data: bytes | memoryview) -> ShareStateKey:
    try:
        r = Reader(data)
        type_ = r.int16()
        if type_ not in VALUES:
            raise ShareRecordError(f"unknown __share_group_state record type {type_}")
        group = r.string()
        topic_id = r.uuid()
        partition = r.int32()
        if r.pos != r.end or group is None:
            raise ShareRecordError("trailing bytes or a null group id in a share state key")
        return ShareStateKey(type_, group, topic_id, partition)
    except ProtocolDecodeError as exc:
        raise ShareRecordError(f"unreadable share state key: {exc}") from None


def _batches(message: Message, batches: list[StateBatch]) -> list:
    cls = message.structs["StateBatch"]
    return [cls(first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state,
                delivery_count=b.delivery_count) for b in batches]


def encode_snapshot(*, snapshot_epoch: int, state_epoch: int, leader_epoch: int, start_offset: int,
                    create_timestamp: int, write_timestamp: int, batches: list[StateBatch],
                    delivery_complete_count: int = -1) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    value = SNAPSHOT_VALUE.new(snapshot_epoch=snapshot_epoch, state_epoch=state_epoch, leader_epoch=leader_epoch,
                               start_offset=start_offset, delivery_complete_count=delivery_complete_count,
                               create_timestamp=create_timestamp, write_timestamp=write_timestamp,
                               state_batches=_batches(SNAPSHOT_VALUE, batches))
    return w.getvalue() + encode_bytes(SNAPSHOT_VALUE, VALUE_VERSION, value)


def encode_update(*, snapshot_epoch: int, leader_epoch: int, start_offset: int, batches: list[StateBatch],
                  delivery_complete_count: int = -1) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    value = UPDATE_VALUE.new(snapshot_epoch=snapshot_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
                             delivery_complete_count=delivery_complete_count,
                             state_batches=_batches(UPDATE_VALUE, batches))
    return w.getvalue() + encode_bytes(UPDATE_VALUE, VALUE_VERSION, value)


def batches_of(value) -> list[StateBatch]:
    """A decoded value's state batches as ``StateBatch``es."""
    return [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in value.state_batches]


def decode_value(type_: int, data: bytes | memoryview):
    """The value struct (snake_case attributes)."""
    try:
        r = Reader(data)
        version = r.int16()
        if version < 0:
            raise ShareRecordError(f"bad value version {version}")
        value = decode_bytes(VALUES[type_], VALUE_VERSION, bytes(data[2:]))
    except ProtocolDecodeError as exc:
        raise ShareRecordError(f"unreadable share state value: {exc}") from None
    return value


__all__ = ["SNAPSHOT", "UPDATE", "ShareRecordError", "ShareStateKey", "batches_of", "decode_key", "decode_value",
           "encode_key", "encode_snapshot", "encode_update"]
