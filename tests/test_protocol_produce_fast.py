"""Produce's fast codec (``broker.protocol.produce_fast``) against the generic schema codec,
byte for byte: every request it parses, it parses as the generic decoder does (and it
declines, never misreads, what it does not take on); every response it writes is the
generic encoder's bytes. Issue 20 (the fast path of the hot request)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol import (
    ProtocolDecodeError,
    Reader,
    RequestHeader,
    encode_request,
    encode_response,
    parse_request_header,
)
from broker.protocol.messages.produce import PRODUCE_REQUEST, PRODUCE_RESPONSE
from broker.protocol.produce_fast import (
    MAX_VERSION,
    MIN_VERSION,
    ProduceResult,
    encode_produce_response,
    from_struct,
    parse_produce_request,
)
from broker.protocol.schema import decode
from tests.support.protocol_strategies import SETTINGS, message_values

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)


def _frame(version: int, body, client_id: str | None = "c", correlation_id: int = 7) -> bytes:
    parts = encode_request(RequestHeader(0, version, correlation_id, client_id), body)
    return b"".join(bytes(p) for p in parts)[4:]  # without the size prefix


def _generic(frame: bytes):
    """The generic decode of a request frame, or None where it raises."""
    reader = Reader(memoryview(frame))
    reader.limit_elements()
    try:
        header, _ = parse_request_header(reader)
        body = decode(PRODUCE_REQUEST, header.api_version, reader)
    except ProtocolDecodeError:
        return None
    return header, from_struct(body)


def _plain(parsed):
    """Comparable form: records memoryviews as bytes."""
    header, body = parsed
    return header, body._replace(topic_data=[(name, [(i, None if r is None else bytes(r)) for i, r in parts])
                                             for name, parts in body.topic_data])


def _same_as_generic(frame: bytes) -> None:
    fast = parse_produce_request(memoryview(frame))
    generic = _generic(frame)
    if generic is None:
        assert fast is None, "the fast codec accepted what the generic decoder refuses"
    elif fast is not None:
        assert _plain(fast) == _plain(generic)


@settings(SETTINGS, max_examples=300)
@given(data=st.data(), version=st.sampled_from(VERSIONS),
       client_id=st.one_of(st.none(), st.text(max_size=8)), correlation_id=st.integers(-2**31, 2**31 - 1))
def test_parses_every_request_as_the_generic_decoder(data, version, client_id, correlation_id) -> None:
    body = data.draw(message_values(PRODUCE_REQUEST, version))
    frame = _frame(version, body, client_id, correlation_id)
    fast = parse_produce_request(memoryview(frame))
    assert fast is not None, "a plain request must take the fast path"
    assert _plain(fast) == _plain(_generic(frame))
    assert fast[0].header_version == (2 if version >= 9 else 1)


@settings(SETTINGS, max_examples=300)
@given(data=st.data(), version=st.sampled_from(VERSIONS))
def test_truncated_or_mutated_frames_are_declined_or_read_as_the_generic_decoder(data, version) -> None:
    body = data.draw(message_values(PRODUCE_REQUEST, version))
    frame = bytearray(_frame(version, body))
    cut = data.draw(st.integers(0, len(frame)))
    _same_as_generic(bytes(frame[:cut]))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    _same_as_generic(bytes(frame))


def test_records_are_views_of_the_frame_not_copies() -> None:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 100,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"x" * 300}]}]}
    for version in (8, 9):
        frame = bytearray(_frame(version, body))
        _, parsed = parse_produce_request(memoryview(frame))
        records = parsed.topic_data[0][1][0][1]
        assert isinstance(records, memoryview) and bytes(records) == b"x" * 300
        frame[-10 if version == 8 else -13] = ord("y")  # the frame's bytes show through
        assert bytes(records).count(b"y") == 1


@pytest.mark.parametrize("version", [9, 12])
def test_tagged_fields_are_left_to_the_generic_decoder(version: int) -> None:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 100, "topic_data": []}
    frame = bytearray(_frame(version, body))
    assert parse_produce_request(memoryview(frame)) is not None
    # the body's tagged-field count (its last byte) set to one unknown tag of 1 byte
    frame[-1:] = b"\x01\x05\x01\x00"
    assert parse_produce_request(memoryview(bytes(frame))) is None
    header, parsed = _generic(bytes(frame))
    assert parsed.topic_data == []


def test_other_requests_and_versions_are_declined() -> None:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 100, "topic_data": []}
    assert parse_produce_request(memoryview(_frame(3, body))) is not None
    frame = bytearray(_frame(3, body))
    struct.pack_into(">h", frame, 2, 2)  # Produce v2: not served
    assert parse_produce_request(memoryview(bytes(frame))) is None
    struct.pack_into(">hh", frame, 0, 1, 3)  # Fetch
    assert parse_produce_request(memoryview(bytes(frame))) is None
    assert parse_produce_request(memoryview(b"")) is None
    assert parse_produce_request(memoryview(b"\x00\x00\x00\x09")) is None


# --- responses -----------------------------------------------------------------------

_TEXT = st.one_of(st.none(), st.text(max_size=6))
_PARTITION = st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(-2**15, 2**15 - 1),
                       st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1),
                       st.integers(-2**63, 2**63 - 1),
                       st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), _TEXT), max_size=2), _TEXT)


def _generic_response(version: int, result: ProduceResult):
    topic_cls = PRODUCE_RESPONSE.structs["TopicProduceResponse"]
    part_cls = PRODUCE_RESPONSE.structs["PartitionProduceResponse"]
    error_cls = PRODUCE_RESPONSE.structs["BatchIndexAndErrorMessage"]
    return PRODUCE_RESPONSE.cls(
        responses=[topic_cls(name=name, partition_responses=[
            part_cls(index=i, error_code=code, base_offset=base, log_append_time_ms=append_time,
                     log_start_offset=start, error_message=message,
                     record_errors=[error_cls(batch_index=b, batch_index_error_message=m) for b, m in errors])
            for i, code, base, append_time, start, errors, message in parts])
            for name, parts in result.responses],
        throttle_time_ms=result.throttle_time_ms)


@settings(SETTINGS, max_examples=400)
@given(version=st.sampled_from(VERSIONS), correlation_id=st.integers(-2**31, 2**31 - 1),
       responses=st.lists(st.tuples(st.text(max_size=8), st.lists(_PARTITION, max_size=3)), max_size=3),
       throttle=st.integers(0, 2**31 - 1))
def test_responses_are_the_generic_encoders_bytes(version, correlation_id, responses, throttle) -> None:
    result = ProduceResult(responses, throttle)
    if version < 8:  # fields the version does not carry are written by neither
        result.responses = [(n, [p[:5] + ([], None) for p in parts]) for n, parts in responses]
    fast = b"".join(bytes(b) for b in encode_produce_response(correlation_id, version, result))
    generic = b"".join(bytes(b) for b in encode_response(RequestHeader(0, version, correlation_id, "c"),
                                                          _generic_response(version, result)))
    assert fast == generic
