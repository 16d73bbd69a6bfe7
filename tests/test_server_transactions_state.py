"""The transaction state machine (broker/server/txn/state.py) and the __transaction_state
record formats (log.py): Kafka's transitions, key/value v0 round trips, a flexible v1 value
as Kafka 4 writes it (compact strings and arrays, tagged fields), unreadable records."""

from __future__ import annotations

import struct

import pytest

from broker.server.txn import log as txn_log
from broker.server.txn.state import IllegalStateTransition, TransactionMetadata, TransactionState

S = TransactionState


def test_kafka_transitions():
    md = TransactionMetadata("t", 7, 0, 60000)
    for state in (S.ONGOING, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.ONGOING, S.PREPARE_EPOCH_FENCE,
                  S.PREPARE_ABORT, S.COMPLETE_ABORT, S.EMPTY, S.DEAD):
        md.transition_to(state)
    assert md.state == S.DEAD
    for start, bad in ((S.EMPTY, S.PREPARE_COMMIT), (S.ONGOING, S.COMPLETE_COMMIT), (S.PREPARE_COMMIT, S.ONGOING),
                       (S.PREPARE_ABORT, S.COMPLETE_COMMIT), (S.ONGOING, S.DEAD)):
        md = TransactionMetadata("t", 7, 0, 60000, state=start)
        with pytest.raises(IllegalStateTransition):
            md.transition_to(bad)
        assert md.state == start
    assert S.from_name("PrepareEpochFence") == S.PREPARE_EPOCH_FENCE and S.from_name("nope") is None
    assert [int(s) for s in S] == [0, 1, 2, 3, 4, 5, 6, 7]  # the TransactionStatus bytes


def test_key_and_value_v0_round_trip():
    key = txn_log.encode_key("my-txn")
    assert key == struct.pack(">hh", 0, 6) + b"my-txn" and txn_log.decode_key(key) == "my-txn"
    md = TransactionMetadata("my-txn", 1234, 5, 30000, S.PREPARE_COMMIT, {("a", 1), ("a", 0), ("b", 3)},
                             txn_start_timestamp=111, txn_last_update_timestamp=222)
    value = txn_log.encode_value(md)
    assert value[:2] == b"\x00\x00"
    back = txn_log.decode_value("my-txn", value)
    assert (back.producer_id, back.producer_epoch, back.txn_timeout_ms, back.state, back.partitions,
            back.txn_start_timestamp, back.txn_last_update_timestamp) == (
        1234, 5, 30000, S.PREPARE_COMMIT, {("a", 0), ("a", 1), ("b", 3)}, 111, 222)
    md.state = S.COMPLETE_COMMIT  # Kafka keeps no partitions once complete
    assert txn_log.decode_value("my-txn", txn_log.encode_value(md)).partitions == set()


def test_value_v1_flexible_with_tagged_fields():
    def compact_string(s: str) -> bytes:
        return bytes([len(s) + 1]) + s.encode()

    value = (struct.pack(">hqhib", 1, 99, 3, 60000, int(S.ONGOING))
             + bytes([2]) + compact_string("orders") + bytes([3]) + struct.pack(">ii", 0, 2) + b"\x00"
             + struct.pack(">qq", 500, 400)
             + bytes([2, 0, 8]) + struct.pack(">q", 77) + bytes([2, 2]) + struct.pack(">h", 2))
    md = txn_log.decode_value("t", value)
    assert (md.producer_id, md.producer_epoch, md.state, md.partitions, md.txn_last_update_timestamp,
            md.txn_start_timestamp, md.previous_producer_id) == (99, 3, S.ONGOING, {("orders", 0), ("orders", 2)},
                                                                 500, 400, 77)
    assert (md.next_producer_id, md.client_transaction_version) == (-1, 2)
    # what this broker writes for a transaction version 2 client: exactly Kafka's v1 bytes
    md.next_producer_id = 123
    assert txn_log.encode_value(md) == (
        struct.pack(">hqhib", 1, 99, 3, 60000, int(S.ONGOING))
        + bytes([2]) + compact_string("orders") + bytes([3]) + struct.pack(">ii", 0, 2) + b"\x00"
        + struct.pack(">qq", 500, 400)
        + bytes([3, 0, 8]) + struct.pack(">q", 77) + bytes([1, 8]) + struct.pack(">q", 123)
        + bytes([2, 2]) + struct.pack(">h", 2))
    back = txn_log.decode_value("t", txn_log.encode_value(md))
    assert (back.previous_producer_id, back.next_producer_id, back.client_transaction_version) == (77, 123, 2)


def test_unreadable_records():
    with pytest.raises(txn_log.TransactionLogFormatError):
        txn_log.decode_key(b"\x00\x01\x00\x01x")  # version 1 keys do not exist
    with pytest.raises(txn_log.TransactionLogFormatError):
        txn_log.decode_key(b"\x00\x00\x00\x09abc")
    with pytest.raises(txn_log.TransactionLogFormatError):
        txn_log.decode_value("t", b"\x00\x00\x00\x00")
    with pytest.raises(txn_log.TransactionLogFormatError):
        txn_log.decode_value("t", struct.pack(">hqhib", 0, 1, 0, 1, 42) + struct.pack(">iqq", 0, 0, 0))  # status 42
