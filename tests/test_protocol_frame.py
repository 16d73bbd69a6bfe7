"""broker.protocol.frame: size-prefixed framing under any chunking, and its limits."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.errors import InvalidFrameSizeError, ProtocolDecodeError
from broker.protocol.frame import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    encode_frame,
    frame_buffers,
)


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in points + [len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


def test_encode_frame_prefixes_the_size() -> None:
    assert encode_frame([b"ab", memoryview(b"cde")]) == b"\x00\x00\x00\x05abcde"
    parts = frame_buffers([b"ab"])
    assert parts[0] == b"\x00\x00\x00\x02" and parts[1] == b"ab"
    assert encode_frame([]) == b"\x00\x00\x00\x00"


def test_default_limit_is_kafkas_socket_request_max_bytes() -> None:
    assert DEFAULT_MAX_FRAME_BYTES == 104857600
    assert FrameDecoder().max_frame_bytes == 104857600


@settings(max_examples=300)
@given(
    payloads=st.lists(st.binary(max_size=40), max_size=8),
    cuts=st.lists(st.integers(0, 10_000), max_size=20),
)
def test_any_chunking_yields_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame([p]) for p in payloads)
    decoder = FrameDecoder(max_frame_bytes=64)
    frames = []
    for chunk in chunks(stream, cuts):
        frames.extend(bytes(f) for f in decoder.feed(chunk))
        # Never more than one incomplete frame (plus its prefix) stays buffered.
        assert decoder.buffered_bytes <= 4 + 64
    assert frames == payloads
    assert decoder.buffered_bytes == 0


@settings(max_examples=100)
@given(payloads=st.lists(st.binary(max_size=40), min_size=1, max_size=6))
def test_push_and_next_frame_one_at_a_time(payloads: list[bytes]) -> None:
    decoder = FrameDecoder()
    for p in payloads:
        decoder.push(encode_frame([p]))
    got = []
    while (frame := decoder.next_frame()) is not None:
        got.append(frame.tobytes())
    assert got == payloads


def test_frames_do_not_alias_the_receive_buffer() -> None:
    decoder = FrameDecoder()
    first, second = decoder.feed(encode_frame([b"one"]) + encode_frame([b"two"]) + b"\x00")
    decoder.feed(b"\x00\x00\x03xyz" + encode_frame([b"four"]))
    assert first == b"one" and second == b"two"  # untouched by later feeds


def test_bytes_wanted_hint() -> None:
    decoder = FrameDecoder()
    assert decoder.bytes_wanted == 4
    decoder.feed(b"\x00\x00")
    assert decoder.bytes_wanted == 2
    decoder.feed(b"\x00\x0a\x01")
    assert decoder.bytes_wanted == 9


@pytest.mark.parametrize("size", [-1, -(2**31), 1025, 2**31 - 1])
def test_bad_sizes_raise_before_allocating(size: int) -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    with pytest.raises(InvalidFrameSizeError) as info:
        decoder.feed(struct.pack(">i", size) + b"x" * 10)
    assert info.value.size == size
    assert decoder.buffered_bytes == 0
    with pytest.raises(InvalidFrameSizeError):  # the decoder stays failed
        decoder.feed(b"\x00\x00\x00\x01x")


def test_zero_size_frames_and_exact_limit() -> None:
    decoder = FrameDecoder(max_frame_bytes=3)
    assert [bytes(f) for f in decoder.feed(b"\x00\x00\x00\x00" + encode_frame([b"abc"]))] == [
        b"",
        b"abc",
    ]


@settings(max_examples=300)
@given(st.binary(max_size=200), st.lists(st.integers(0, 500), max_size=5))
def test_fuzz_only_protocol_errors_escape(data: bytes, cuts: list[int]) -> None:
    decoder = FrameDecoder(max_frame_bytes=100)
    try:
        for chunk in chunks(data, cuts):
            for frame in decoder.feed(chunk):
                assert len(frame) <= 100
    except ProtocolDecodeError:
        pass
    assert decoder.buffered_bytes <= len(data)
