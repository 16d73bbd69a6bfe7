"""Tests of broker/log/txn_index.py: AbortedTxn layout, TransactionIndex append / search /
truncate / lifecycle, and R13 at the index level (after Kafka's TransactionIndexTest)."""

from __future__ import annotations

import struct

import pytest

from broker.log.errors import CorruptIndexError
from broker.log.txn_index import ABORTED_TXN_SIZE, AbortedTxn, TransactionIndex


@pytest.fixture
def index(tmp_path):
    idx = TransactionIndex(0, tmp_path / "00000000000000000000.txnindex")
    yield idx
    idx.close()


def test_aborted_txn_is_34_bytes_big_endian():
    txn = AbortedTxn(producer_id=7, first_offset=100, last_offset=106, last_stable_offset=99)
    data = txn.encode()
    assert ABORTED_TXN_SIZE == 34 and len(data) == 34
    assert data == struct.pack(">hqqqq", 0, 7, 100, 106, 99)
    assert AbortedTxn.decode(data) == txn
    assert txn.as_aborted_transaction() == (7, 100)


def test_file_created_only_on_first_append(index, tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    assert index.collect_aborted_txns(0, 100).aborted_transactions == []
    index.reset()
    index.flush()
    index.sanity_check()
    assert not path.exists()
    index.append(AbortedTxn(1, 0, 10, 11))
    assert path.read_bytes() == struct.pack(">hqqqq", 0, 1, 0, 10, 11)


def test_append_requires_increasing_last_offset(index):
    index.append(AbortedTxn(1, 0, 10, 11))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 5, 10, 11))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 5, 9, 11))
    index.append(AbortedTxn(2, 5, 11, 11))


def test_collect_aborted_transactions(index):
    txns = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25),
            AbortedTxn(3, 32, 50, 40)]
    for txn in txns:
        index.append(txn)
    r = index.collect_aborted_txns(0, 100)
    assert r.aborted_transactions == txns and not r.is_complete
    r = index.collect_aborted_txns(0, 32)
    assert r.aborted_transactions == txns[:3] and r.is_complete
    r = index.collect_aborted_txns(0, 35)
    assert r.aborted_transactions == txns and r.is_complete
    r = index.collect_aborted_txns(10, 35)
    assert r.aborted_transactions == txns and r.is_complete
    r = index.collect_aborted_txns(11, 35)
    assert r.aborted_transactions == txns[1:4] and r.is_complete
    r = index.collect_aborted_txns(20, 41)
    assert r.aborted_transactions == txns[2:4] and not r.is_complete


def test_truncate_and_reset(index):
    txns = [AbortedTxn(0, 0, 10, 2), AbortedTxn(1, 5, 15, 16), AbortedTxn(2, 18, 35, 25),
            AbortedTxn(3, 32, 50, 40)]
    for txn in txns:
        index.append(txn)
    index.truncate_to(51)
    assert index.all_aborted_txns() == txns
    index.truncate_to(50)
    assert index.all_aborted_txns() == txns[:3]
    assert index.last_offset == 35
    index.append(AbortedTxn(4, 40, 45, 41))  # appends continue after the cut
    assert index.all_aborted_txns() == txns[:3] + [AbortedTxn(4, 40, 45, 41)]
    index.reset()
    assert index.collect_aborted_txns(0, 100).aborted_transactions == []
    assert index.file.stat().st_size == 0
    index.append(AbortedTxn(5, 0, 1, 0))  # reset forgets the last offset


def test_reopen_reads_entries_and_last_offset(tmp_path):
    path = tmp_path / "5.txnindex"
    idx = TransactionIndex(5, path)
    many = [AbortedTxn(i, 10 * i + 5, 10 * i + 9, 10 * i + 5) for i in range(1500)]  # > one read chunk
    for txn in many:
        idx.append(txn)
    idx.flush()
    idx.close()
    again = TransactionIndex(5, path)
    assert again.all_aborted_txns() == many
    assert again.last_offset == many[-1].last_offset
    with pytest.raises(ValueError):
        again.append(AbortedTxn(1, 0, many[-1].last_offset, 0))
    again.sanity_check()
    r = again.collect_aborted_txns(10 * 1400, 10 * 1401)
    assert r.aborted_transactions == [many[1400]] and r.is_complete
    again.close()


def test_sanity_check_detects_corruption(tmp_path):
    below = TransactionIndex(100, tmp_path / "a.txnindex")
    below.append(AbortedTxn(1, 50, 99, 50))  # ends before the segment's base offset
    with pytest.raises(CorruptIndexError):
        below.sanity_check()
    below.close()
    (tmp_path / "b.txnindex").write_bytes(struct.pack(">hqqqq", 1, 1, 100, 101, 100))
    with pytest.raises(CorruptIndexError):
        TransactionIndex(100, tmp_path / "b.txnindex").sanity_check()
    (tmp_path / "c.txnindex").write_bytes(AbortedTxn(1, 100, 101, 100).encode() + b"\x00" * 10)
    torn = TransactionIndex(100, tmp_path / "c.txnindex")
    assert torn.all_aborted_txns() == [AbortedTxn(1, 100, 101, 100)]
    with pytest.raises(CorruptIndexError):
        torn.sanity_check()
    torn.append(AbortedTxn(2, 100, 105, 100))  # the torn bytes are cut first
    assert torn.all_aborted_txns() == [AbortedTxn(1, 100, 101, 100), AbortedTxn(2, 100, 105, 100)]
    torn.sanity_check()
    torn.close()


def test_rename_and_delete(tmp_path):
    idx = TransactionIndex(0, tmp_path / "0.txnindex")
    idx.rename_to(tmp_path / "0.txnindex.deleted")  # no file yet: only the name changes
    assert idx.file == tmp_path / "0.txnindex.deleted" and not idx.file.exists()
    idx.append(AbortedTxn(1, 0, 1, 0))
    assert (tmp_path / "0.txnindex.deleted").exists()
    idx.rename_to(tmp_path / "0.txnindex")
    assert (tmp_path / "0.txnindex").exists() and not (tmp_path / "0.txnindex.deleted").exists()
    assert idx.all_aborted_txns() == [AbortedTxn(1, 0, 1, 0)]
    assert idx.delete_if_exists() is True
    assert idx.delete_if_exists() is False
    assert idx.all_aborted_txns() == []


def test_r13_one_aborted_transaction_at_the_index_level(tmp_path):
    # pid1 (100..101) commits at 107; pid2 (102..103) aborts at 106 while pid1 is open, so
    # the LSO recorded with the abort is 100
    idx = TransactionIndex(100, tmp_path / "100.txnindex")
    idx.append(AbortedTxn(producer_id=10, first_offset=102, last_offset=106, last_stable_offset=100))
    r = idx.collect_aborted_txns(100, 108)
    assert r.aborted_transactions == [AbortedTxn(10, 102, 106, 100)]
    assert not r.is_complete  # LSO 100 < 108: later segments may hold more
    assert idx.collect_aborted_txns(107, 108).aborted_transactions == []
    assert idx.collect_aborted_txns(100, 102).aborted_transactions == []
    idx.close()
