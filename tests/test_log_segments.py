"""Tests of broker/log/segments.py: LogSegments navigation (after Kafka's LogSegmentsTest)
and copy-on-write reads while a writer adds and removes segments."""

from __future__ import annotations

import threading

import pytest

from broker.log.clock import MockTime
from broker.log.segment import LogSegment
from broker.log.segments import LogSegments
from broker.record.batch import encode_batch


@pytest.fixture
def segments(tmp_path):
    segs = LogSegments("t-0")
    yield segs
    segs.close()


def seg(tmp_path, base):
    return LogSegment.open(tmp_path, base, time=MockTime(), max_index_size=80)


def test_add_get_remove_and_replace(tmp_path, segments):
    assert segments.is_empty() and segments.active_segment is None and len(segments) == 0
    s1, s2, s3 = seg(tmp_path, 1), seg(tmp_path, 2), seg(tmp_path, 3)
    assert segments.add(s2) is None
    segments.add(s3)
    segments.add(s1)
    assert segments.base_offsets() == [1, 2, 3] and segments.number_of_segments == 3
    assert segments.active_segment is s3 and segments.first_segment() is s1
    assert segments.first_segment_base_offset() == 1 and segments.last_segment() is s3
    assert segments.get(2) is s2 and 2 in segments and segments.contains(3) and segments.get(4) is None
    replacement = LogSegment.open(_sub(tmp_path), 2, max_index_size=80)
    assert segments.add(replacement) is s2
    assert segments.get(2) is replacement and len(segments) == 3
    assert segments.remove(2) is replacement and segments.remove(2) is None
    assert segments.base_offsets() == [1, 3]
    replacement.close()
    s2.close()
    segments.clear()
    assert segments.is_empty()
    s1.close()
    s3.close()


def _sub(tmp_path):
    d = tmp_path / "other"
    d.mkdir(exist_ok=True)
    return d


def test_navigation(tmp_path, segments):
    s = {b: seg(tmp_path, b) for b in (10, 20, 30)}
    for x in s.values():
        segments.add(x)
    assert segments.floor_segment(5) is None
    assert segments.floor_segment(10) is s[10] and segments.floor_segment(29) is s[20]
    assert segments.floor_segment(10**9) is s[30]
    assert segments.lower_segment(10) is None and segments.lower_segment(20) is s[10]
    assert segments.lower_segment(21) is s[20]
    assert segments.higher_segment(10) is s[20] and segments.higher_segment(9) is s[10]
    assert segments.higher_segment(30) is None
    assert segments.higher_segments(10) == [s[20], s[30]] and segments.higher_segments(30) == []


def test_values_ranges(tmp_path, segments):
    s = {b: seg(tmp_path, b) for b in (5, 15, 25, 35)}
    for x in s.values():
        segments.add(x)
    assert segments.values() == [s[5], s[15], s[25], s[35]]
    assert segments.values(5, 5) == []
    assert segments.values(5, 6) == [s[5]]
    assert segments.values(5, 15) == [s[5]]
    assert segments.values(7, 26) == [s[5], s[15], s[25]]
    assert segments.values(0, 15) == [s[5]]
    assert segments.values(15, 10**9) == [s[15], s[25], s[35]]
    with pytest.raises(ValueError):
        segments.values(10, 9)
    assert segments.non_active_log_segments_from(0) == [s[5], s[15], s[25]]
    assert segments.non_active_log_segments_from(16) == [s[15], s[25]]
    assert segments.non_active_log_segments_from(36) == []


def test_size_in_bytes(tmp_path, segments):
    a, b = seg(tmp_path, 0), seg(tmp_path, 10)
    batch = encode_batch([(b"k", b"v", 1)], base_offset=0)
    a.append(0, 1, 0, batch)
    b.append(10, 1, 10, encode_batch([(b"k", b"v", 1)], base_offset=10))
    segments.add(a)
    segments.add(b)
    assert segments.size_in_bytes() == 2 * len(batch) == LogSegments.size_in_bytes_of([a, b])


def test_readers_see_consistent_snapshots_while_a_writer_changes_the_map(tmp_path):
    segments = LogSegments()
    pool = [seg(tmp_path, b) for b in range(0, 400, 2)]
    stop = threading.Event()
    bad = []

    def reader():
        while not stop.is_set():
            bases = segments.base_offsets()
            if bases != sorted(bases):
                bad.append(bases)
            for x in segments.values():
                floor = segments.floor_segment(x.base_offset + 1)
                if floor is None or floor.base_offset > x.base_offset + 1:
                    bad.append(("floor", x.base_offset))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for x in pool:
        segments.add(x)
    for x in pool[::3]:
        segments.remove(x.base_offset)
    stop.set()
    for t in threads:
        t.join()
    assert bad == []
    assert len(segments) == len(pool) - len(pool[::3])
    for x in pool:
        x.close()
