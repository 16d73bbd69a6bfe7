"""broker.protocol.primitives: byte layouts, round trips and bounds of every primitive."""

from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.errors import (
    InvalidValueError,
    ProtocolDecodeError,
    ProtocolEncodeError,
    TruncatedFrameError,
)
from broker.protocol.primitives import MAX_STRING_BYTES, Reader, Writer


def written(method: str, *args) -> bytes:
    w = Writer()
    getattr(w, method)(*args)
    return w.getvalue()


@pytest.mark.parametrize(
    ("method", "value", "expected"),
    [
        ("int8", -1, "ff"),
        ("int16", 258, "0102"),
        ("int32", -2, "fffffffe"),
        ("int64", 1, "0000000000000001"),
        ("uint16", 65535, "ffff"),
        ("uint32", 2**32 - 1, "ffffffff"),
        ("float64", 1.5, "3ff8000000000000"),
        ("boolean", True, "01"),
        ("uuid", uuid.UUID(int=1), "00" * 15 + "01"),
        ("uvarint", 0, "00"),
        ("uvarint", 127, "7f"),
        ("uvarint", 128, "8001"),
        ("uvarint", 300, "ac02"),
        ("uvarint", 2**32 - 1, "ffffffff0f"),
        ("varint", 0, "00"),
        ("varint", -1, "01"),
        ("varint", 1, "02"),
        ("varint", -64, "7f"),
        ("varint", 2**31 - 1, "feffffff0f"),
        ("varint", -(2**31), "ffffffff0f"),
        ("varlong", -(2**63), "ffffffffffffffffff01"),
        ("string", "ab", "00026162"),
        ("nullable_string", None, "ffff"),
        ("compact_string", "ab", "036162"),
        ("compact_string", "", "01"),
        ("compact_nullable_string", None, "00"),
        ("bytes", b"\x01", "0000000101"),
        ("nullable_bytes", None, "ffffffff"),
        ("compact_bytes", b"\x01", "0201"),
        ("compact_nullable_bytes", None, "00"),
        ("records", b"\x07\x08", "000000020708"),
        ("records", None, "ffffffff"),
        ("compact_records", b"\x07", "0207"),
        ("compact_records", None, "00"),
    ],
)
def test_golden_bytes(method: str, value, expected: str) -> None:
    data = written(method, value)
    assert data.hex() == expected
    reader_method = {"boolean": "boolean"}.get(method, method)
    r = Reader(data)
    decoded = getattr(r, reader_method)()
    assert decoded == value
    assert r.remaining == 0


def test_arrays_golden() -> None:
    w = Writer()
    w.array([1, 2], Writer.int16)
    w.nullable_array(None, Writer.int16)
    w.compact_array([3], Writer.int32)
    w.compact_nullable_array(None, Writer.int32)
    data = w.getvalue()
    assert data.hex() == "00000002" "0001" "0002" "ffffffff" "02" "00000003" "00"
    r = Reader(data)
    assert r.array(Reader.int16, 2) == [1, 2]
    assert r.nullable_array(Reader.int16, 2) is None
    assert r.compact_array(Reader.int32, 4) == [3]
    assert r.compact_nullable_array(Reader.int32, 4) is None


@settings(max_examples=200)
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**32 - 1),
    st.text(max_size=50),
    st.one_of(st.none(), st.binary(max_size=50)),
    st.floats(allow_nan=False),
)
def test_round_trip(i32: int, i64: int, u32: int, text: str, blob, f: float) -> None:
    w = Writer()
    w.int32(i32)
    w.int64(i64)
    w.varint(i32)
    w.varlong(i64)
    w.uvarint(u32)
    w.compact_string(text)
    w.string(text)
    w.compact_nullable_bytes(blob)
    w.nullable_bytes(blob)
    w.float64(f)
    r = Reader(w.getvalue())
    assert r.int32() == i32
    assert r.int64() == i64
    assert r.varint() == i32
    assert r.varlong() == i64
    assert r.uvarint() == u32
    assert r.compact_string() == text
    assert r.string() == text
    assert r.compact_nullable_bytes() == blob
    assert r.nullable_bytes() == blob
    assert r.float64() == f
    assert r.remaining == 0


def test_records_are_zero_copy_views() -> None:
    frame = bytearray(b"\x00\x00\x00\x03abc")
    r = Reader(frame)
    view = r.records()
    assert isinstance(view, memoryview) and view == b"abc"
    frame[4] = ord("z")  # same memory
    assert view.tobytes() == b"zbc"


def test_reader_offset_and_end_bound_reads() -> None:
    r = Reader(b"\x00\x01\x00\x02\x00\x03", offset=2, end=4)
    assert r.int16() == 2
    with pytest.raises(TruncatedFrameError):
        r.int16()


@pytest.mark.parametrize(
    "method",
    ["int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "boolean", "uuid",
     "uvarint", "varlong", "string", "compact_string", "bytes", "compact_bytes", "records",
     "compact_records"],
)
def test_truncation_raises_truncated_frame_error(method: str) -> None:
    for data in (b"", b"\x00", b"\x00\x05", b"\x05a", b"\x80"):
        r = Reader(data)
        try:
            getattr(r, method)()
        except TruncatedFrameError:
            pass
        except ProtocolDecodeError as e:  # e.g. a null in a non-nullable string
            assert isinstance(e, InvalidValueError)


def test_null_in_non_nullable_fields_is_invalid() -> None:
    for method, data in [
        ("string", b"\xff\xff"),
        ("compact_string", b"\x00"),
        ("bytes", b"\xff\xff\xff\xff"),
        ("compact_bytes", b"\x00"),
    ]:
        with pytest.raises(InvalidValueError):
            getattr(Reader(data), method)()
    with pytest.raises(InvalidValueError):
        Reader(b"\xff\xff\xff\xff").array(Reader.int8)
    with pytest.raises(InvalidValueError):
        Reader(b"\x00").compact_array(Reader.int8)


def test_varint_length_limits() -> None:
    with pytest.raises(InvalidValueError):
        Reader(b"\xff" * 5 + b"\x01").uvarint()  # 6 bytes
    with pytest.raises(InvalidValueError):
        Reader(b"\xff\xff\xff\xff\x7f").uvarint()  # 5 bytes but > 32 bits
    with pytest.raises(InvalidValueError):
        Reader(b"\xff" * 10 + b"\x01").varlong()
    with pytest.raises(TruncatedFrameError):
        Reader(b"\xff\xff").uvarint()


def test_strings_longer_than_short_max_are_rejected() -> None:
    w = Writer()
    w.uvarint(MAX_STRING_BYTES + 2)
    w.raw(b"a" * (MAX_STRING_BYTES + 1))
    with pytest.raises(InvalidValueError):
        Reader(w.getvalue()).compact_string()
    with pytest.raises(ProtocolEncodeError):
        Writer().compact_string("a" * (MAX_STRING_BYTES + 1))


def test_invalid_utf8_is_invalid_value() -> None:
    with pytest.raises(InvalidValueError):
        Reader(b"\x00\x02\xff\xfe").string()


def test_huge_counts_fail_before_allocating() -> None:
    start = time.perf_counter()
    for data in (
        b"\x7f\xff\xff\xff" + b"\x00" * 10,  # classic array of 2**31-1 items
        b"\xff\xff\xff\xff\x07" + b"\x00" * 10,  # compact array of 2**31-2 items
    ):
        r = Reader(data)
        method = r.array if data[0] == 0x7F else r.compact_array
        with pytest.raises(TruncatedFrameError):
            method(Reader.int8, 1)
    with pytest.raises(TruncatedFrameError):
        Reader(b"\x00\x00\x00\x03" + b"\x00" * 10).array(Reader.int32, 4)  # 12 > 10 bytes
    with pytest.raises(TruncatedFrameError):
        Reader(b"\x7f\xff\xff\xff\x00").bytes()
    with pytest.raises(TruncatedFrameError):
        Reader(b"\xff\xff\xff\x7f\x00").tagged_count()
    assert time.perf_counter() - start < 1.0  # nothing was allocated for 2**31 items


def test_tagged_fields_read_write() -> None:
    w = Writer()
    w.tagged_fields([(5, b"\x01\x02"), (1, b"")])
    data = w.getvalue()
    assert data.hex() == "02" "0100" "05020102"
    r = Reader(data)
    assert [(t, v.tobytes()) for t, v in r.tagged_fields()] == [(1, b""), (5, b"\x01\x02")]
    r = Reader(data + b"\x09")
    r.skip_tagged_fields()
    assert r.int8() == 9


def test_sub_reader_is_bounded() -> None:
    r = Reader(b"\x00\x01\x00\x02")
    sub = r.sub(2)
    assert r.pos == 2
    assert sub.int16() == 1
    with pytest.raises(TruncatedFrameError):
        sub.int8()
    with pytest.raises(TruncatedFrameError):
        r.sub(3)


@pytest.mark.parametrize(
    ("method", "value"),
    [("int8", 128), ("int16", -(2**15) - 1), ("int32", 2**31), ("uint16", -1),
     ("uvarint", -1), ("uvarint", 2**32), ("varint", 2**31), ("string", None),
     ("string", 5), ("compact_string", b"x"), ("bytes", None), ("uuid", "x")],
)
def test_unencodable_values_raise_encode_error(method: str, value) -> None:
    with pytest.raises(ProtocolEncodeError):
        getattr(Writer(), method)(value)


def test_writer_keeps_large_buffers_as_parts() -> None:
    w = Writer(zero_copy_min=8)
    big = memoryview(b"x" * 10)
    w.int8(1)
    w.records(big)
    w.int8(2)
    parts = w.buffers()
    assert len(parts) == 3 and parts[1] is big
    assert len(w) == 1 + 4 + 10 + 1
    assert w.getvalue() == b"\x01\x00\x00\x00\x0a" + b"x" * 10 + b"\x02"
    w = Writer(zero_copy_min=8)
    w.compact_records([b"ab", b"c"])  # several batches back to back
    assert w.getvalue() == b"\x04abc"
