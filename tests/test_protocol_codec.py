"""broker.protocol.codec: whole request / response frames, as the server sees them."""

from __future__ import annotations

import pytest

from broker.protocol.api_keys import ApiKey
from broker.protocol.codec import decode_request, decode_response, encode_request, encode_response
from broker.protocol.errors import ErrorCode, UnknownApiKeyError, UnsupportedApiVersionError
from broker.protocol.frame import FrameDecoder, encode_frame
from broker.protocol.header import RequestHeader
from broker.protocol.versions import advertised_apis, response_schema


def joined(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


# ApiVersions v3 as librdkafka sends it first on every connection (PROTOCOL.md 1.2, 3.1).
LIBRDKAFKA_API_VERSIONS = bytes.fromhex(
    "00000025"  # frame size
    "0012" "0003" "00000001"  # ApiVersions v3, correlation id 1
    "0007" "72646b61666b61"  # client_id "rdkafka" (int16 length even in header v2)
    "00"  # header tags
    "0b" "6c696272646b61666b61"  # compact "librdkafka"
    "07" "322e31362e30"  # compact "2.16.0"
    "00"  # body tags
)


def test_librdkafka_api_versions_golden_frame() -> None:
    (frame,) = FrameDecoder().feed(LIBRDKAFKA_API_VERSIONS)
    request = decode_request(frame)
    assert request.header == RequestHeader(18, 3, 1, "rdkafka", 2)
    assert request.body.client_software_name == "librdkafka"
    assert request.body.client_software_version == "2.16.0"
    assert joined(encode_request(request.header, request.body)) == LIBRDKAFKA_API_VERSIONS


def test_api_versions_response_keeps_header_v0() -> None:
    request = decode_request(FrameDecoder().feed(LIBRDKAFKA_API_VERSIONS)[0])
    keys = [{"api_key": a.api_key, "min_version": a.min_version, "max_version": a.max_version}
            for a in advertised_apis()]
    frame = joined(encode_response(request.header, {"api_keys": keys}))
    # size, correlation id, then straight into error_code: no header tag byte.
    assert frame[4:8] == b"\x00\x00\x00\x01" and frame[8:10] == b"\x00\x00"
    assert frame[10] == len(keys) + 1
    header, body = decode_response(frame[4:], 18, 3)
    assert header.correlation_id == 1 and len(body.api_keys) == len(keys)


def test_unsupported_api_versions_request_is_answered_as_v0() -> None:
    frame = encode_frame([bytes.fromhex("0012" "0005" "00000009" "0002") + b"kp" + b"\x00" + b"??"])
    with pytest.raises(UnsupportedApiVersionError) as info:
        decode_request(FrameDecoder().feed(frame)[0])
    header = info.value.header  # type: ignore[attr-defined]
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 5, 9)
    body = {"error_code": ErrorCode.UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    out = joined(encode_response(header, body, version=0))
    assert out == bytes.fromhex("00000010" "00000009" "0023" "00000001" "0012" "0000" "0003")


def test_unknown_api_key_error_carries_the_header() -> None:
    frame = bytes.fromhex("0400" "0000" "00000003" "ffff")
    with pytest.raises(UnknownApiKeyError) as info:
        decode_request(frame)
    header = info.value.header  # type: ignore[attr-defined]
    assert header.correlation_id == 3 and not header.known_api


def test_produce_round_trip_keeps_records_zero_copy() -> None:
    batch = bytes(range(256)) * 100
    header = RequestHeader(ApiKey.PRODUCE, 8, 5, "producer-1")
    body = {"acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": batch}]}]}
    parts = encode_request(header, body)
    assert any(p is batch for p in parts)  # big record sets are not copied into the frame
    (frame,) = FrameDecoder().feed(joined(parts))
    request = decode_request(frame)
    records = request.body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records == batch
    assert records.obj is frame.obj  # a view of the received frame


def test_flexible_responses_have_header_tags() -> None:
    header = RequestHeader(ApiKey.METADATA, 9, 4, "c")
    frame = joined(encode_response(header, response_schema(3, 9).new()))
    assert frame[4:9] == b"\x00\x00\x00\x04\x00"
    _, body = decode_response(frame[4:], 3, 9)
    assert body == response_schema(3, 9).new()
