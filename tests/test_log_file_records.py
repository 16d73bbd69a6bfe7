"""Tests of broker/log/file_records.py: FileRecords appends, slices, chunked batch walks
(batches larger than a chunk, corrupt headers, trailing partial batches), searches and
truncation."""

from __future__ import annotations

import pytest

from broker.log.errors import CorruptRecordError
from broker.log.file_records import EMPTY_RECORDS, FileRecords, MemoryRecords
from broker.record.batch import encode_batch

T0 = 1_600_000_000_000


def batch(offset, ts=T0, value=b"v", count=1, epoch=-1):
    return encode_batch([(b"k", value, ts + i) for i in range(count)], base_offset=offset,
                        partition_leader_epoch=epoch)


@pytest.fixture
def fr(tmp_path):
    records = FileRecords.open(tmp_path / "f.log")
    yield records
    records.close_handlers()


def test_append_slice_and_read(fr):
    data = batch(0) + batch(1)
    assert fr.append(data) == len(data) and fr.size_in_bytes == len(data)
    s = fr.slice(0, 10**6)
    assert s.size_in_bytes == len(data) and s.read_bytes() == data
    assert bytes(s.memoryview()) == data and len(s) == len(data)
    assert [h.base_offset for _, h in s.batches()] == [0, 1]
    assert fr.slice(len(data) + 5, 10).size_in_bytes == 0
    tail = fr.slice(len(batch(0)), 10**6)
    assert [(p, h.base_offset) for p, h in tail.batches()] == [(0, 1)]
    with pytest.raises(ValueError):
        fr.slice(-1, 3)
    assert MemoryRecords(data).last_batch().base_offset == 1
    assert EMPTY_RECORDS.size_in_bytes == 0 and EMPTY_RECORDS.last_batch() is None


def test_walks_batches_larger_than_a_chunk_and_stops_at_a_partial_tail(fr):
    big = batch(0, value=b"x" * 50_000)
    fr.append(big + batch(1) + batch(2, value=b"y" * 40_000) + batch(3))
    fr.append(batch(4)[:30])  # a torn tail
    walked = list(fr.iter_batches(chunk_size=1024, with_bytes=True))
    assert [h.base_offset for _, h, _ in walked] == [0, 1, 2, 3]
    assert all(len(b) == h.size_in_bytes for _, h, b in walked)
    assert bytes(walked[0][2]) == big
    assert [h.base_offset for _, h, b in fr.iter_batches(chunk_size=100)] == [0, 1, 2, 3]


def test_a_corrupt_header_raises_a_log_error_after_the_good_batches(fr):
    fr.append(batch(0) + b"\x00" * 80)
    seen = []
    with pytest.raises(CorruptRecordError):
        for _, header, _ in fr.iter_batches():
            seen.append(header.base_offset)
    assert seen == [0]


def test_searches(fr):
    fr.append(batch(0, ts=T0 + 50, count=2) + batch(2, ts=T0 + 10, epoch=4) + batch(3, ts=T0 + 70))
    first = len(batch(0, count=2))
    assert fr.search_for_offset_with_size(1, 0) == (1, 0, first)
    assert fr.search_for_offset_with_size(2, 0).position == first
    assert fr.search_for_offset_with_size(9, 0) is None
    assert fr.search_for_timestamp(T0 + 51, 0, 0) == (T0 + 51, 1, None)
    assert fr.search_for_timestamp(T0 + 5, 0, 2) == (T0 + 10, 2, 4)
    assert fr.search_for_timestamp(T0 + 71, 0, 0) is None
    assert fr.largest_timestamp_after(0) == (T0 + 70, 3, None)
    assert fr.largest_timestamp_after(fr.size_in_bytes) == (-1, -1, None)


def test_truncate_trim_rename_delete(tmp_path):
    fr = FileRecords.open(tmp_path / "p.log", preallocate=True, init_file_size=4096)
    assert (tmp_path / "p.log").stat().st_size == 4096 and fr.size_in_bytes == 0
    fr.append(batch(0) + batch(1))
    with pytest.raises(ValueError):
        fr.truncate_to(fr.size_in_bytes + 1)
    fr.trim()
    assert (tmp_path / "p.log").stat().st_size == fr.size_in_bytes
    one = len(batch(0))
    assert fr.truncate_to(one) == len(batch(1))
    assert fr.slice(0, 10**6).last_batch().base_offset == 0
    fr.rename_to(tmp_path / "q.log")
    assert fr.path.exists() and not (tmp_path / "p.log").exists()
    fr.close()
    reopened = FileRecords.open(tmp_path / "q.log", file_already_exists=True)
    assert reopened.size_in_bytes == one
    assert reopened.delete_if_exists() is True and not (tmp_path / "q.log").exists()
