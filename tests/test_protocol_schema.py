"""broker.protocol.schema: golden bytes, round trips for every table and version,
defaults, tagged fields, nullability and zero-copy records."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.errors import (
    InvalidValueError,
    ProtocolEncodeError,
    TruncatedFrameError,
    UnsupportedApiVersionError,
)
from broker.protocol.messages import api_versions, fetch, metadata, produce
from broker.protocol.primitives import ZERO_UUID, Reader
from broker.protocol.schema import Message, decode, decode_bytes, encode_bytes
from tests.support.protocol_strategies import (
    ALL_MESSAGES,
    SETTINGS,
    message_values,
    message_versions,
    versions_of,
)  # noqa: E402

PAIRS = message_versions()

PRODUCE_REQ = produce.PRODUCE_REQUEST
FETCH_RESP = fetch.FETCH_RESPONSE
API_VERSIONS_REQ = api_versions.API_VERSIONS_REQUEST
API_VERSIONS_RESP = api_versions.API_VERSIONS_RESPONSE


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=[m.name for m in ALL_MESSAGES])
@settings(SETTINGS, max_examples=3)
@given(data=st.data())
def test_round_trip_every_table_and_version(message: Message, data) -> None:
    for version in versions_of(message):  # each example covers every version
        value = data.draw(message_values(message, version), label=f"v{version}")
        encoded = encode_bytes(message, version, value)
        decoded = decode_bytes(message, version, encoded)
        assert decoded == value
        assert encode_bytes(message, version, decoded) == encoded


def test_defaults_round_trip() -> None:
    for message, version in PAIRS:
        encoded = encode_bytes(message, version, message.new())
        assert decode_bytes(message, version, encoded) == message.new()
        assert encode_bytes(message, version, {}) == encoded  # missing fields take defaults


# --- golden bytes --------------------------------------------------------------------


def test_api_versions_v3_request_golden() -> None:
    value = API_VERSIONS_REQ.new(client_software_name="librdkafka", client_software_version="2.16.0")
    expected = b"\x0blibrdkafka" + b"\x072.16.0" + b"\x00"
    assert encode_bytes(API_VERSIONS_REQ, 3, value) == expected
    assert decode_bytes(API_VERSIONS_REQ, 3, expected) == value
    assert encode_bytes(API_VERSIONS_REQ, 0, value) == b""  # v0 has an empty body


def test_api_versions_v3_response_golden() -> None:
    value = API_VERSIONS_RESP.new(
        api_keys=[API_VERSIONS_RESP.cls.ApiVersion(api_key=18, min_version=0, max_version=3)]
    )
    body = bytes.fromhex("0000" "02" "0012" "0000" "0003" "00" "00000000" "00")
    assert encode_bytes(API_VERSIONS_RESP, 3, value) == body
    assert encode_bytes(API_VERSIONS_RESP, 0, value) == bytes.fromhex(
        "0000" "00000001" "0012" "0000" "0003"
    )


def test_metadata_v1_request_golden() -> None:
    req = metadata.METADATA_REQUEST
    value = req.new(topics=[{"name": "test"}])
    assert encode_bytes(req, 1, value) == bytes.fromhex("00000001" "0004") + b"test"
    assert encode_bytes(req, 1, req.new(topics=None)) == bytes.fromhex("ffffffff")
    assert decode_bytes(req, 1, bytes.fromhex("ffffffff")).topics is None
    with pytest.raises(InvalidValueError):  # v0 topics are not nullable
        decode_bytes(req, 0, bytes.fromhex("ffffffff"))


def test_produce_v3_request_golden_and_zero_copy_records() -> None:
    frame = bytearray(
        bytes.fromhex("ffff" "ffff" "00007530" "00000001" "0001")
        + b"t"
        + bytes.fromhex("00000001" "00000000" "00000003")
        + b"abc"
    )
    value = decode_bytes(PRODUCE_REQ, 3, frame)
    assert value.transactional_id is None and value.acks == -1 and value.timeout_ms == 30000
    records = value.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records == b"abc"
    assert records.obj is frame  # a view of the request buffer, not a copy
    assert encode_bytes(PRODUCE_REQ, 3, value) == bytes(frame)


def test_fetch_v12_tagged_fields_golden() -> None:
    partition = FETCH_RESP.cls.PartitionData(
        partition_index=1, records=b"", current_leader={"leader_id": 7, "leader_epoch": 3}
    )
    value = FETCH_RESP.new(responses=[{"topic": "t", "partitions": [partition]}])
    data = encode_bytes(FETCH_RESP, 12, value)
    tags = bytes.fromhex("01" "01" "09" "00000007" "00000003" "00")
    assert data.endswith(bytes.fromhex("01") + tags + b"\x00" + b"\x00")
    decoded = decode_bytes(FETCH_RESP, 12, data)
    leader = decoded.responses[0].partitions[0].current_leader
    assert (leader.leader_id, leader.leader_epoch) == (7, 3)
    # Defaults are not written: the same partition without a leader has no tags.
    plain = FETCH_RESP.new(responses=[{"topic": "t", "partitions": [{"partition_index": 1}]}])
    assert len(encode_bytes(FETCH_RESP, 12, plain)) == len(data) - len(tags) + 1


def test_unknown_tags_are_skipped() -> None:
    encoded = encode_bytes(API_VERSIONS_REQ, 3, {"client_software_name": "a"})
    assert encoded.endswith(b"\x00")
    with_tags = encoded[:-1] + bytes.fromhex("02" "05" "01" "ff" "63" "00")
    value = decode_bytes(API_VERSIONS_REQ, 3, with_tags)
    assert value.client_software_name == "a"
    with pytest.raises(TruncatedFrameError):
        decode_bytes(API_VERSIONS_REQ, 3, encoded[:-1] + bytes.fromhex("01" "05" "09" "ff"))


def test_known_tag_decoded_from_its_bounded_slice() -> None:
    resp = API_VERSIONS_RESP
    data = encode_bytes(resp, 3, resp.new(finalized_features_epoch=12, zk_migration_ready=True))
    value = decode_bytes(resp, 3, data)
    assert value.finalized_features_epoch == 12 and value.zk_migration_ready is True
    # A tag whose declared size is too small for its value is truncated, not over-read.
    assert data.endswith(bytes.fromhex("02" "01" "08" "000000000000000c" "03" "01" "01"))
    bad = data[:-13] + bytes.fromhex("01" "01" "04" "0000000c")
    with pytest.raises(TruncatedFrameError):
        decode_bytes(resp, 3, bad)


# --- defaults, absent fields, coercion ----------------------------------------------


def test_absent_fields_decode_to_defaults() -> None:
    data = encode_bytes(PRODUCE_REQ, 0, PRODUCE_REQ.new(transactional_id="tx", acks=1))
    value = decode_bytes(PRODUCE_REQ, 0, data)
    assert value.transactional_id is None  # v0 has no transactional_id: default null
    resp = FETCH_RESP.new()
    assert resp.responses == [] and resp.node_endpoints == []
    part = FETCH_RESP.cls.PartitionData()
    assert part.preferred_read_replica == -1  # explicit default in the JSON
    assert part.current_leader.leader_id == -1
    assert part.records is None
    topic = FETCH_RESP.cls.FetchableTopicResponse()
    assert topic.topic_id == ZERO_UUID


def test_defaults_are_fresh_objects() -> None:
    a, b = FETCH_RESP.new(), FETCH_RESP.new()
    a.responses.append(1)
    assert b.responses == []
    p1, p2 = FETCH_RESP.cls.PartitionData(), FETCH_RESP.cls.PartitionData()
    assert p1.current_leader is not p2.current_leader


def test_encode_accepts_dicts_and_namespaces() -> None:
    from types import SimpleNamespace

    as_struct = PRODUCE_REQ.new(acks=1, topic_data=[
        PRODUCE_REQ.cls.TopicProduceData(name="t", partition_data=[
            PRODUCE_REQ.cls.PartitionProduceData(index=2, records=b"x")])])
    as_dict = {"acks": 1, "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": b"x"}]}]}
    as_ns = SimpleNamespace(acks=1, topic_data=[SimpleNamespace(name="t", partition_data=[
        SimpleNamespace(index=2, records=b"x")])])
    expected = encode_bytes(PRODUCE_REQ, 8, as_struct)
    assert encode_bytes(PRODUCE_REQ, 8, as_dict) == expected
    assert encode_bytes(PRODUCE_REQ, 8, as_ns) == expected


def test_struct_api() -> None:
    value = PRODUCE_REQ.new(acks=1)
    assert value == PRODUCE_REQ.new(acks=1) and value != PRODUCE_REQ.new(acks=0)
    assert "acks=1" in repr(value)
    assert value.to_dict()["acks"] == 1
    with pytest.raises(TypeError):
        PRODUCE_REQ.new(no_such_field=1)
    with pytest.raises(AttributeError):
        value.no_such_field = 1  # __slots__


# --- errors ---------------------------------------------------------------------------


def test_version_outside_the_table_is_unsupported() -> None:
    with pytest.raises(UnsupportedApiVersionError):
        decode(PRODUCE_REQ, 13, Reader(b""))
    with pytest.raises(UnsupportedApiVersionError):
        encode_bytes(PRODUCE_REQ, -1, {})


def test_exact_decode_rejects_trailing_bytes() -> None:
    data = encode_bytes(API_VERSIONS_REQ, 0, {})
    assert decode_bytes(API_VERSIONS_REQ, 0, data + b"x", exact=False) == API_VERSIONS_REQ.new()
    with pytest.raises(InvalidValueError):
        decode_bytes(API_VERSIONS_REQ, 0, data + b"x")


@pytest.mark.parametrize(
    "value",
    [
        {"acks": 1 << 20},
        {"acks": "1"},
        {"topic_data": None},
        {"topic_data": [{"name": None}]},
        {"topic_data": [{"partition_data": [{"records": 5}]}]},
        {"topic_data": [object()]},
    ],
)
def test_bad_values_raise_encode_error(value: dict) -> None:
    with pytest.raises(ProtocolEncodeError):
        encode_bytes(PRODUCE_REQ, 8, value)


def test_uuid_fields() -> None:
    tid = uuid.uuid4()
    req = metadata.METADATA_REQUEST
    data = encode_bytes(req, 10, {"topics": [{"topic_id": tid, "name": None}]})
    assert decode_bytes(req, 10, data).topics[0].topic_id == tid


def test_codec_source_is_inspectable() -> None:
    source = PRODUCE_REQ.codec(8).source
    assert "r.records()" in source and "r.nullable_string()" in source


def test_element_budget_counts_every_array_and_tagged_section_of_a_request() -> None:
    """The broker's request reader refuses more than its element budget in all (nested
    arrays and tagged sections included, sub-readers sharing it); readers without a
    budget (clients, tools) are unlimited (issue 19: tiny-element amplification)."""
    from broker.protocol import TooManyElementsError
    from broker.protocol.primitives import MAX_REQUEST_ELEMENTS

    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": f"t{i}", "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1} for p in range(10)]} for i in range(10)]}
    for version in (11, 12):  # non-flexible and flexible
        schema = fetch.FETCH_REQUEST
        data = encode_bytes(schema, version, body)
        assert decode(schema, version, Reader(data)).topics[9].partitions[9].partition == 9
        r = Reader(data)
        r.limit_elements(10 + 10 * 10 + 1)  # topics + partitions + forgotten (0): fits
        decode(schema, version, r)
        r = Reader(data)
        r.limit_elements(100)  # 10 topics x 10 partitions + the topics themselves: over
        with pytest.raises(TooManyElementsError):
            decode(schema, version, r)
    assert MAX_REQUEST_ELEMENTS >= 1_000_000
    # a sub-reader (a tagged field's bytes) spends from the same budget
    r = Reader(bytes(8))
    r.limit_elements(3)
    s = r.sub(4)
    s.spend(2)
    with pytest.raises(TooManyElementsError):
        r.spend(2)
