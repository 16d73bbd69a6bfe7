"""Tests of broker/record/varint.py: the zigzag table, bounds, and round trips."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.record.errors import CorruptRecordError, DecodeError, EncodeError, TruncatedError
from broker.record.varint import (
    decode_uvarint,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_varint,
    encode_varlong,
    size_of_varint,
    zigzag_decode,
    zigzag_encode,
)

# The table of Kafka's ByteUtilsTest / the protobuf documentation.
ZIGZAG_TABLE = [(0, 0), (-1, 1), (1, 2), (-2, 3), (2, 4), (2147483647, 4294967294),
                (-2147483648, 4294967295)]
VARINT_BYTES = [(0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"),
                (-65, "8101"), (8191, "fe7f"), (-8192, "ff7f"), (8192, "808001"),
                (2147483647, "feffffff0f"), (-2147483648, "ffffffff0f")]


@pytest.mark.parametrize("n,z", ZIGZAG_TABLE)
def test_zigzag_table(n, z):
    assert zigzag_encode(n) & 0xFFFFFFFF == z
    assert zigzag_decode(z) == n


@pytest.mark.parametrize("n,hexbytes", VARINT_BYTES)
def test_varint_golden_bytes(n, hexbytes):
    raw = bytes.fromhex(hexbytes)
    assert encode_varint(n) == raw
    assert decode_varint(raw, 0, len(raw)) == (n, len(raw))
    assert size_of_varint(n) == len(raw)


def test_varlong_extremes():
    for n in (-(1 << 63), (1 << 63) - 1):
        raw = encode_varlong(n)
        assert len(raw) == 10
        assert decode_varlong(raw, 0, len(raw)) == (n, 10)


def test_bounds_are_typed_errors():
    with pytest.raises(TruncatedError):
        decode_varint(b"\x80\x80", 0, 2)
    with pytest.raises(TruncatedError):
        decode_varint(b"", 0, 0)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff" * 6, 0, 6)  # int32 varint longer than 5 bytes
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff\xff\xff\xff\x7f", 0, 5)  # does not fit in 32 bits
    with pytest.raises(EncodeError):
        encode_varint(1 << 31)
    with pytest.raises(EncodeError):
        encode_uvarint(-1)


@given(st.integers(-(1 << 31), (1 << 31) - 1))
def test_varint_round_trip(n):
    raw = encode_varint(n)
    assert decode_varint(raw, 0, len(raw)) == (n, len(raw))
    assert size_of_varint(n) == len(raw)


@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varlong_round_trip(n):
    raw = encode_varlong(n)
    assert decode_varlong(raw, 0, len(raw)) == (n, len(raw))


@given(st.binary(max_size=12))
def test_fuzz_only_decode_errors(data):
    for fn in (decode_varint, decode_varlong, decode_uvarint):
        try:
            fn(data, 0, len(data))
        except DecodeError:
            pass


def test_matches_kafka_python():
    from kafka.record.util import decode_varint as kp_decode
    from kafka.record.util import encode_varint as kp_encode
    for n in (0, 1, -1, 300, -300, 2 ** 31 - 1, -(2 ** 31), 2 ** 40, -(2 ** 40)):
        out = bytearray()
        kp_encode(n, out.append)
        assert encode_varlong(n) == bytes(out)
        assert kp_decode(bytes(out), 0)[0] == n
