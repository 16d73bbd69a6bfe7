"""broker.protocol.header: request/response header layouts and which version applies."""

from __future__ import annotations

import pytest

from broker.protocol.api_keys import ApiKey
from broker.protocol.errors import TruncatedFrameError
from broker.protocol.header import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
)
from broker.protocol.primitives import Writer


def test_v1_header_golden() -> None:
    # Metadata v1, correlation id 7, client_id "c1"
    data = bytes.fromhex("0003" "0001" "00000007" "0002" "6331") + b"BODY"
    header, offset = parse_request_header(data)
    assert header == RequestHeader(3, 1, 7, "c1", 1)
    assert data[offset:] == b"BODY"


def test_v2_header_has_non_compact_client_id_and_tags() -> None:
    # ApiVersions v3 from librdkafka: header v2, client_id still int16-length
    data = bytes.fromhex("0012" "0003" "00000001" "0007") + b"rdkafka" + b"\x00" + b"BODY"
    header, offset = parse_request_header(data)
    assert header == RequestHeader(18, 3, 1, "rdkafka", 2)
    assert data[offset:] == b"BODY"


def test_v2_header_skips_unknown_tags() -> None:
    data = bytes.fromhex("0003" "0009" "00000002" "ffff" "01" "05" "02" "abcd") + b"B"
    header, offset = parse_request_header(data)
    assert header.client_id is None and header.header_version == 2
    assert data[offset:] == b"B"


def test_controlled_shutdown_v0_uses_header_v0() -> None:
    data = bytes.fromhex("0007" "0000" "00000003") + b"B"
    header, offset = parse_request_header(data)
    assert header.header_version == 0 and header.client_id is None and offset == 8


def test_unknown_api_key_still_yields_key_version_and_correlation_id() -> None:
    data = bytes.fromhex("03e7" "0005" "0000002a" "0001") + b"x" + b"junk"
    header, offset = parse_request_header(data)
    assert (header.api_key, header.api_version, header.correlation_id) == (999, 5, 42)
    assert header.client_id == "x" and not header.known_api and offset == 11
    # Even when what follows is not a valid client_id.
    header, offset = parse_request_header(bytes.fromhex("03e7" "0005" "0000002a" "7fff"))
    assert header.correlation_id == 42 and header.client_id is None and offset == 8


def test_api_versions_above_known_max_reads_a_flexible_header() -> None:
    # Kafka treats flexibleVersions "3+" as open-ended: v9 uses header v2.
    data = bytes.fromhex("0012" "0009" "00000001" "0001") + b"k" + b"\x00"
    header, offset = parse_request_header(data)
    assert header.header_version == 2 and offset == len(data)


def test_short_prefix_is_truncated() -> None:
    with pytest.raises(TruncatedFrameError):
        parse_request_header(b"\x00\x12\x00\x03\x00\x00\x00")


@pytest.mark.parametrize(
    ("key", "version", "request_header", "response_header"),
    [
        (ApiKey.PRODUCE, 8, 1, 0),
        (ApiKey.PRODUCE, 9, 2, 1),
        (ApiKey.METADATA, 8, 1, 0),
        (ApiKey.METADATA, 9, 2, 1),
        (ApiKey.FETCH, 11, 1, 0),
        (ApiKey.FETCH, 12, 2, 1),
        (ApiKey.API_VERSIONS, 2, 1, 0),
        (ApiKey.API_VERSIONS, 3, 2, 0),  # KIP-511: ApiVersions responses keep header v0
        (ApiKey.API_VERSIONS, 4, 2, 0),
        (ApiKey.SASL_HANDSHAKE, 1, 1, 0),  # never flexible
        (ApiKey.CONTROLLED_SHUTDOWN, 0, 0, 0),
        (ApiKey.CONTROLLED_SHUTDOWN, 3, 2, 1),
    ],
)
def test_header_versions(key: int, version: int, request_header: int, response_header: int) -> None:
    w = Writer()
    encode_request_header(w, RequestHeader(key, version, 5, "id"))
    header, offset = parse_request_header(w.getvalue())
    assert header.header_version == request_header
    assert header.correlation_id == 5 and offset == len(w)
    w = Writer()
    encode_response_header(w, 5, key, version)
    assert len(w) == 4 + response_header
    parsed, offset = parse_response_header(w.getvalue(), key, version)
    assert parsed.correlation_id == 5 and parsed.header_version == response_header
    assert offset == len(w)
