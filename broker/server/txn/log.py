"""The records of ``__transaction_state`` (Kafka's ``TransactionLog``): one record per
transactional id and state change, key = the id, value = its whole ``TransactionMetadata``;
a tombstone (null value) when an id expires. The topic is compacted, so the latest value of
each id is what survives.

Formats (tools/kafka-spec/transaction-coordinator/TransactionLogKey.json, ...Value.json),
each prefixed by its int16 version, big-endian::

    key v0   = version int16 (0) | transactional_id string (int16 length + UTF-8)
    value v0 = version int16 (0) | producer_id int64 | producer_epoch int16
               | transaction_timeout_ms int32 | transaction_status int8
               | partitions: int32 count, each (topic string, int32 count, int32 ids...) (-1: null)
               | last_update_timestamp_ms int64 | start_timestamp_ms int64
    value v1 = the same fields in the flexible encoding (compact strings and arrays,
               varint lengths + 1, a tagged-field section after each struct; tags 0
               PreviousProducerId, 1 NextProducerId, 2 ClientTransactionVersion)

This broker writes value v0 for transactions of clients on transaction versions 0 and 1
(what Kafka 3 writes) and v1 for those of transaction version 2 (the tags carry the version,
so that a retried EndTxn is recognised after a restart), and reads both. Kafka writes no
partitions for Empty / Complete* states; they are kept here only while a transaction is
Ongoing or Prepare*.

Thread-safety: pure functions.
"""

from __future__ import annotations

import struct

from broker.record.errors import DecodeError
from broker.record.varint import decode_uvarint, encode_uvarint
from broker.server.txn.state import TransactionMetadata, TransactionState

KEY_VERSION = 0
VALUE_VERSION = 0


class TransactionLogFormatError(ValueError):
    """A record of ``__transaction_state`` this broker cannot read."""


def _string(s: str) -> bytes:
    data = s.encode("utf-8")
    return struct.pack(">h", len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    try:
        version, length = struct.unpack_from(">hh", data, 0)
        if version != KEY_VERSION:
            raise TransactionLogFormatError(f"unknown TransactionLogKey version {version}")
        if length < 0 or 4 + length > len(data):
            raise TransactionLogFormatError("truncated TransactionLogKey")
        return bytes(data[4:4 + length]).decode("utf-8")
    except (struct.error, UnicodeDecodeError) as exc:
        raise TransactionLogFormatError(f"unreadable TransactionLogKey: {exc}") from None


def _grouped(partitions) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        topics.setdefault(topic, []).append(p)
    return topics


def _encode_value_v1(md: TransactionMetadata, topics: dict[str, list[int]]) -> bytes:
    out = bytearray(struct.pack(">hqhib", 1, md.producer_id, md.producer_epoch, md.txn_timeout_ms, int(md.state)))
    out += encode_uvarint(len(topics) + 1)
    for topic, ids in topics.items():
        name = topic.encode("utf-8")
        out += encode_uvarint(len(name) + 1) + name + encode_uvarint(len(ids) + 1) + struct.pack(f">{len(ids)}i", *ids)
        out += b"\x00"  # the struct's tagged fields: none
    out += struct.pack(">qq", md.txn_last_update_timestamp, md.txn_start_timestamp)
    tags = ((0, struct.pack(">q", md.previous_producer_id)), (1, struct.pack(">q", md.next_producer_id)),
            (2, struct.pack(">h", md.client_transaction_version)))
    out += encode_uvarint(len(tags))
    for tag, payload in tags:
        out += encode_uvarint(tag) + encode_uvarint(len(payload)) + payload
    return bytes(out)


def encode_value(md: TransactionMetadata) -> bytes:
    keep_partitions = md.state in (TransactionState.ONGOING, TransactionState.PREPARE_COMMIT,
                                   TransactionState.PREPARE_ABORT, TransactionState.PREPARE_EPOCH_FENCE)
    out = bytearray(struct.pack(">hqhib", VALUE_VERSION, md.producer_id, md.producer_epoch,
                                md.txn_timeout_ms, int(md.state)))
    topics = _grouped(md.partitions) if keep_partitions else {}
    if md.client_transaction_version >= 2:
        return _encode_value_v1(md, topics)
    out += struct.pack(">i", len(topics))
    for topic, ids in topics.items():
        out += _string(topic) + struct.pack(f">i{len(ids)}i", len(ids), *ids)
    out += struct.pack(">qq", md.txn_last_update_timestamp, md.txn_start_timestamp)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def unpack(self, fmt: str):
        s = struct.Struct(fmt)
        if self.pos + s.size > len(self.data):
            raise TransactionLogFormatError("truncated TransactionLogValue")
        values = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return values

    def varint(self) -> int:
        value, self.pos = decode_uvarint(self.data, self.pos, len(self.data))
        return value

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TransactionLogFormatError("truncated TransactionLogValue")
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def string(self, flexible: bool) -> str:
        n = self.varint() - 1 if flexible else self.unpack(">h")[0]
        return self.raw(n).decode("utf-8")

    def count(self, flexible: bool) -> int:
        return self.varint() - 1 if flexible else self.unpack(">i")[0]

    def tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.varint()):
            tag = self.varint()
            out[tag] = self.raw(self.varint())
        return out


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    try:
        r = _Reader(data)
        (version,) = r.unpack(">h")
        if version not in (0, 1):
            raise TransactionLogFormatError(f"unknown TransactionLogValue version {version}")
        flexible = version >= 1
        producer_id, epoch, timeout, status = r.unpack(">qhib")
        partitions: set[tuple[str, int]] = set()
        n = r.count(flexible)
        for _ in range(max(n, 0)):
            topic = r.string(flexible)
            for _ in range(max(r.count(flexible), 0)):
                partitions.add((topic, r.unpack(">i")[0]))
            if flexible:
                r.tags()
        last_update, start = r.unpack(">qq")
        previous = following = -1
        client_version = 0
        if flexible:
            tags = r.tags()
            if len(tags.get(0, b"")) == 8:
                (previous,) = struct.unpack(">q", tags[0])
            if len(tags.get(1, b"")) == 8:
                (following,) = struct.unpack(">q", tags[1])
            if len(tags.get(2, b"")) == 2:
                (client_version,) = struct.unpack(">h", tags[2])
        return TransactionMetadata(transactional_id, producer_id, epoch, timeout, TransactionState(status),
                                   partitions, start, last_update, previous_producer_id=previous,
                                   next_producer_id=following, client_transaction_version=client_version)
    except (struct.error, UnicodeDecodeError, ValueError, IndexError, DecodeError) as exc:
        if isinstance(exc, TransactionLogFormatError):
            raise
        raise TransactionLogFormatError(f"unreadable TransactionLogValue: {exc}") from None
