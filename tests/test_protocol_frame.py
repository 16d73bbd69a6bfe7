"""broker.protocol.frame: size-prefixed framing under any chunking, and its limits."""

from __future__ import annotations

import hashlib
import struct
import weakref

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


def _receive_all(decoder: FrameDecoder, stream: bytes, cuts: list[int]) -> list[memoryview]:
    """Deliver ``stream`` as a socket would through recv_buffer/advance, each receive at
    most the next cut's size, taking frames out between receives."""
    frames, done, k = [], 0, 0
    while True:
        while (frame := decoder.next_frame()) is not None:
            frames.append(frame)
        if done == len(stream):
            return frames
        space = decoder.recv_buffer()
        assert len(space) > 0
        n = min(len(space), len(stream) - done, max(1, cuts[k % len(cuts)] if cuts else len(stream)))
        k += 1
        space[:n] = stream[done:done + n]
        space.release()
        decoder.advance(n)
        done += n


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.one_of(st.integers(0, 300), st.integers(100_000, 400_000)), max_size=6),
       cuts=st.lists(st.integers(1, 300_000), max_size=8))
def test_receive_in_place_yields_the_same_frames_and_never_overwrites_one(sizes: list[int], cuts: list[int]) -> None:
    """Issue 20: receives write straight into the decoder's chunks (or a large frame's own
    buffer); frames are views that later receives never touch."""
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    stream = b"".join(encode_frame([p]) for p in payloads)
    frames = _receive_all(FrameDecoder(), stream, cuts)
    assert [bytes(f) for f in frames] == payloads  # checked after every receive happened
    for f in frames:
        assert not f.readonly  # the broker stamps offsets into produce frames in place


def test_receive_buffers_are_mapped_lazily_and_bad_sizes_still_refused_first() -> None:
    decoder = FrameDecoder(max_frame_bytes=1 << 20)
    space = decoder.recv_buffer()
    space[:8] = struct.pack(">i", 600_000) + b"abcd"  # a large frame announced, 4 bytes sent
    space.release()
    decoder.advance(8)
    assert decoder.next_frame() is None
    space = decoder.recv_buffer()  # the frame's own buffer, the rest of its size
    assert len(space) == 600_000 - 4
    assert decoder.bytes_wanted == 600_000 - 4 and decoder.buffered_bytes == 8
    space.release()
    bad = FrameDecoder(max_frame_bytes=1024)
    space = bad.recv_buffer()
    space[:4] = struct.pack(">i", 2**31 - 1)
    space.release()
    bad.advance(4)
    with pytest.raises(InvalidFrameSizeError):
        bad.next_frame()
    with pytest.raises(InvalidFrameSizeError):
        bad.recv_buffer()


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.one_of(st.integers(0, 3000), st.integers(100_000, 400_000)), max_size=8),
       cuts=st.lists(st.integers(1, 300_000), max_size=8))
def test_buffers_are_reused_once_their_frames_are_gone(sizes: list[int], cuts: list[int]) -> None:
    """The server's pattern: each frame is handled and dropped before the next receive, so
    the decoder reuses its chunk and its large-frame buffer (pending bytes moved to the
    front in place): the frames still come out whole and in order."""
    payloads = [bytes([(i * 7 + j) % 251 for j in range(min(n, 5))]) * (n // 5) + bytes(n % 5)
                for i, n in enumerate(sizes)]
    stream = b"".join(encode_frame([p]) for p in payloads)
    decoder = FrameDecoder()
    got, done, k = [], 0, 0
    while True:
        while (frame := decoder.next_frame()) is not None:
            got.append(hashlib.sha256(frame).hexdigest())
            frame.release()
        if done == len(stream):
            break
        space = decoder.recv_buffer()
        n = min(len(space), len(stream) - done, cuts[k % len(cuts)] if cuts else len(stream))
        k += 1
        space[:n] = stream[done:done + n]
        space.release()
        decoder.advance(n)
        done += n
    assert got == [hashlib.sha256(p).hexdigest() for p in payloads]


def test_a_chunk_is_reused_only_when_no_frame_of_it_is_alive() -> None:
    decoder = FrameDecoder()
    kept = decoder.feed(encode_frame([b"a" * 1000]))
    first_chunk = decoder._buf
    for _ in range(300):  # fill past the chunk while the first frame is kept
        decoder.feed(encode_frame([b"b" * 1000]))
    assert decoder._buf is not first_chunk and bytes(kept[0]) == b"a" * 1000
    chunk = weakref.ref(decoder._buf)  # (a strong reference would itself prevent reuse)
    for _ in range(300):  # frames dropped at once: the same chunk serves every receive
        for f in decoder.feed(encode_frame([b"c" * 1000])):
            f.release()
    assert decoder._buf is chunk()
