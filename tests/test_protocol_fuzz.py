"""Fuzzing the decoders with arbitrary and mutated bytes: only ProtocolDecodeError
subclasses escape, and declared sizes never make the decoder allocate or loop beyond
the bytes actually present."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.codec import decode_request
from broker.protocol.errors import ProtocolDecodeError
from broker.protocol.header import parse_request_header
from broker.protocol.messages import REQUEST_SCHEMAS
from broker.protocol.schema import Message, decode_bytes, encode_bytes
from tests.support.protocol_strategies import ALL_MESSAGES, SETTINGS, message_values, message_versions  # noqa: E402

PAIRS = message_versions()
NAMES = [m.name for m in ALL_MESSAGES]


def decodes_or_rejects(message: Message, version: int, data: bytes) -> None:
    """Decoding either fails with a ProtocolDecodeError or yields a value that survives
    an encode / decode round trip. (A mutated float64 field may decode to NaN, which is
    unequal to itself: then the round trip is checked on the encodings.)"""
    try:
        value = decode_bytes(message, version, data, exact=False)
    except ProtocolDecodeError:
        return
    encoded = encode_bytes(message, version, value)
    again = decode_bytes(message, version, encoded)
    assert encode_bytes(message, version, again) == encoded
    assert again == value or "nan" in repr(value)


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=NAMES)
@settings(SETTINGS, max_examples=30)
@given(data=st.data())
def test_random_bytes(message: Message, data) -> None:
    version = data.draw(st.integers(*message.valid_versions))
    decodes_or_rejects(message, version, data.draw(st.binary(max_size=80)))


@st.composite
def mutated(draw, message: Message, version: int) -> bytes:
    encoded = bytearray(encode_bytes(message, version, draw(message_values(message, version))))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "truncate", "insert"]))
        pos = draw(st.integers(0, max(len(encoded) - 1, 0)))
        if kind == "truncate":
            del encoded[pos:]
        elif kind == "insert":
            encoded[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif encoded:
            if kind == "flip":
                encoded[pos] ^= 1 << draw(st.integers(0, 7))
            else:
                encoded[pos] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
    return bytes(encoded)


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=NAMES)
@settings(SETTINGS, max_examples=10)
@given(data=st.data())
def test_mutated_valid_encodings(message: Message, data) -> None:
    version = data.draw(st.integers(*message.valid_versions))
    decodes_or_rejects(message, version, data.draw(mutated(message, version)))


# Bodies whose every length / count field reads as huge: 0x7fffffff int32 counts,
# 0xffff... uvarints, and mixtures, with only a few bytes actually present.
ADVERSARIAL = [
    b"\x7f\xff\xff\xff" * 6,
    b"\xff\xff\xff\x0f" * 6,
    b"\xfe\xff\xff\xff\x07" * 5,
    b"\x00\x00" + b"\x7f\xff\xff\xff" * 5,
    b"\x00" * 3 + b"\x7f\xff\xff\xff" * 5,
    b"\x00" * 5 + b"\xff\xff\xff\xff\x07" * 4,
    b"\x01" * 24,
    b"\xff" * 24,
]


def test_huge_declared_sizes_fail_fast_without_allocating() -> None:
    for message, version in PAIRS:
        message.codec(version)  # compile outside the measurement
        tracemalloc.start()
        start = time.perf_counter()
        try:
            for data in ADVERSARIAL:
                decodes_or_rejects(message, version, data)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert time.perf_counter() - start < 1.0, (message, version)
        assert peak < 256 * 1024, (message, version, peak)


@settings(SETTINGS, max_examples=300)
@given(st.binary(max_size=40))
def test_request_header_parser(data: bytes) -> None:
    try:
        header, offset = parse_request_header(data)
    except ProtocolDecodeError:
        assert len(data) >= 0
        return
    assert len(data) >= 8 and 8 <= offset <= len(data)


@settings(SETTINGS, max_examples=400)
@given(
    api_key=st.sampled_from(sorted(REQUEST_SCHEMAS) + [-1, 999]),
    api_version=st.integers(-1, 20),
    rest=st.binary(max_size=60),
)
def test_decode_request_frames(api_key: int, api_version: int, rest: bytes) -> None:
    frame = api_key.to_bytes(2, "big", signed=True) + api_version.to_bytes(2, "big", signed=True) + rest
    try:
        request = decode_request(frame)
    except ProtocolDecodeError as e:
        if len(frame) >= 8:  # the header prefix was there: the error carries it
            assert e.header.api_key == api_key  # type: ignore[attr-defined]
        return
    assert request.header.api_key == api_key
