"""Interoperability with an independent implementation: kafka-python's protocol classes.

* Bytes kafka-python encodes (requests built the way its client builds them) decode with
  our tables, and re-encode to the same bytes.
* Bytes we encode, for every table and version kafka-python also defines, decode with
  kafka-python to the same fields and re-encode to the same bytes (tagged fields
  included).
* Whole frames: our responses (headers included, ApiVersions' v0 header) parse with
  kafka-python, and its request frames parse with our FrameDecoder + decode_request.
"""

from __future__ import annotations

import importlib
import pkgutil
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.codec import decode_request, encode_request, encode_response
from broker.protocol.frame import FrameDecoder
from broker.protocol.header import RequestHeader
from broker.protocol.primitives import ZERO_UUID
from broker.protocol.schema import Message, decode_bytes, encode_bytes, in_range
from broker.protocol.versions import request_schema, response_schema
from tests.support.protocol_strategies import (
    ALL_MESSAGES,
    SETTINGS,
    message_values,
    message_versions,
    versions_of,
)  # noqa: E402

kp = pytest.importorskip("kafka.protocol")
from kafka.protocol.api_message import ApiMessage  # noqa: E402


def _kafka_python_classes() -> dict[str, type]:
    for module in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        try:
            importlib.import_module(module.name)
        except ImportError:
            pass
    found: dict[str, type] = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
            found.setdefault(cls.name, cls)
    return found


KP = _kafka_python_classes()
PAIRS = [(m, v) for m, v in message_versions() if m.name in KP and v <= KP[m.name].max_version]
MESSAGES = [m for m in ALL_MESSAGES if m.name in KP]


class _Default:
    """Marks a tagged field left at its default: not on the wire, so kafka-python may show
    it as missing, None or its default; the byte comparisons cover it."""

    def __repr__(self) -> str:
        return "<default>"


DEFAULT = _Default()


def project(message: Message, sname: str, version: int, value: Any) -> Any:
    """Our to_dict() restricted to the fields that exist in ``version`` (kafka-python's
    to_dict leaves the others out); tagged fields at their default become DEFAULT."""
    if value is None:
        return None
    out = {}
    for f in message._struct_fields[sname]:
        if not in_range(f.versions, version):
            continue
        v = value[f.name]
        if f.struct_name is not None:
            if f.is_array:
                v = None if v is None else [project(message, f.struct_name, version, x) for x in v]
            else:
                v = project(message, f.struct_name, version, v)
        if in_range(f.tagged, version) and message.is_flexible(version):
            default = f.default_value(message.structs)
            if hasattr(default, "to_dict"):
                default = project(message, f.struct_name, version, default.to_dict())
            if v == default:
                v = DEFAULT
        out[f.name] = v
    return out


# kafka-python renames the *_authorized_operations bitfields and decodes them into sets of
# ACL operations; the byte-for-byte checks cover them, the field comparison skips them.
def _compared(key: str) -> bool:
    return not key.endswith("authorized_operations")


def normalize(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: normalize(x) for k, x in v.items() if _compared(k)}
    if isinstance(v, list):
        return [normalize(x) for x in v]
    if isinstance(v, uuid.UUID) and v == ZERO_UUID:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    return v


def assert_matches(ours: Any, theirs: Any, path: str = "") -> None:
    """Every field of ours (normalized projection) equals kafka-python's; kafka-python
    may have more keys (hand-built objects carry the fields of every version)."""
    if ours is DEFAULT:
        return
    if isinstance(ours, dict):
        assert isinstance(theirs, dict), (path, ours, theirs)
        for key, value in ours.items():
            if value is not DEFAULT:
                assert key in theirs, (path, key)
                assert_matches(value, theirs[key], f"{path}.{key}")
        return
    if isinstance(ours, list):
        assert isinstance(theirs, list) and len(ours) == len(theirs), (path, ours, theirs)
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_matches(a, b, f"{path}[{i}]")
        return
    assert ours == theirs, (path, ours, theirs)


def theirs_decode(message: Message, version: int, data: bytes) -> Any:
    obj = KP[message.name].decode(data, version=version)
    obj._header = None  # decode() bypasses __init__; encode() reads this slot
    return obj


@pytest.mark.parametrize("message", MESSAGES, ids=[m.name for m in MESSAGES])
@settings(SETTINGS, max_examples=3)
@given(data=st.data())
def test_our_bytes_through_kafka_python(message: Message, data) -> None:
    for version in versions_of(message):  # each example covers every version
        if version > KP[message.name].max_version:
            continue
        value = data.draw(message_values(message, version), label=f"v{version}")
        if message.name == "ApiVersionsResponse":
            value.error_code = 0  # kafka-python reads any error response as v0 (on purpose)
        ours = encode_bytes(message, version, value)
        theirs = theirs_decode(message, version, ours)
        assert theirs.encode(version=version) == ours
        ours_fields = normalize(project(message, message.name, version, value.to_dict()))
        assert_matches(ours_fields, normalize(theirs.to_dict(json=False)))


def test_kafka_python_covers_the_advertised_versions() -> None:
    names = {m.name for m, _ in PAIRS}
    assert {"ProduceRequest", "FetchResponse", "MetadataRequest", "ApiVersionsResponse"} <= names
    assert len(PAIRS) >= 400


# --- requests built with kafka-python ---------------------------------------------------


def _kafka_python_requests() -> list[tuple[str, Any]]:
    from kafka.protocol.admin import CreateTopicsRequest
    from kafka.protocol.consumer import (
        FetchRequest,
        JoinGroupRequest,
        ListOffsetsRequest,
        OffsetCommitRequest,
        OffsetFetchRequest,
    )
    from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
    from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

    batch = bytes(range(61)) * 2
    topic = ProduceRequest.TopicProduceData
    part = topic.PartitionProduceData
    ftopic = FetchRequest.FetchTopic
    out = []
    for v in (3, 7, 8, 9, 10, 11):
        out.append((f"Produce v{v}", ProduceRequest[v](
            transactional_id=None, acks=-1, timeout_ms=30000,
            topic_data=[topic(name="orders", partition_data=[part(index=0, records=batch),
                                                             part(index=3, records=None)])])))
    for v in (4, 7, 11, 12):
        out.append((f"Fetch v{v}", FetchRequest[v](
            replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52428800, isolation_level=1,
            session_id=0, session_epoch=-1,
            topics=[ftopic(topic="orders", partitions=[ftopic.FetchPartition(
                partition=0, fetch_offset=42, log_start_offset=-1, partition_max_bytes=1048576)])],
            forgotten_topics_data=[], rack_id="")))
    for v in (0, 1, 4, 8, 9, 12):
        topics = [MetadataRequest.MetadataRequestTopic(name="orders")] if v else []
        out.append((f"Metadata v{v}", MetadataRequest[v](
            topics=topics, allow_auto_topic_creation=True,
            include_topic_authorized_operations=False)))
    out.append(("Metadata v1 all", MetadataRequest[1](topics=None)))
    for v in (0, 3, 4):
        out.append((f"ApiVersions v{v}", ApiVersionsRequest[v](
            client_software_name="kafka-python", client_software_version="3.0.12")))
    out.append(("FindCoordinator v2", FindCoordinatorRequest[2](key="g", key_type=0)))
    out.append(("JoinGroup v5", JoinGroupRequest[5](
        group_id="g", session_timeout_ms=45000, rebalance_timeout_ms=300000, member_id="",
        group_instance_id=None, protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")])))
    ot = OffsetCommitRequest.OffsetCommitRequestTopic
    out.append(("OffsetCommit v7", OffsetCommitRequest[7](
        group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[ot(name="orders", partitions=[ot.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=10, committed_leader_epoch=-1,
            committed_metadata="m")])])))
    out.append(("OffsetFetch v5", OffsetFetchRequest[5](group_id="g", topics=None)))
    lt = ListOffsetsRequest.ListOffsetsTopic
    out.append(("ListOffsets v5", ListOffsetsRequest[5](
        replica_id=-1, isolation_level=0, topics=[lt(name="orders", partitions=[
            lt.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])))
    for v in (1, 4):
        out.append((f"InitProducerId v{v}", InitProducerIdRequest[v](
            transactional_id=None, transaction_timeout_ms=-1, producer_id=-1, producer_epoch=-1)))
    ct = CreateTopicsRequest.CreatableTopic
    out.append(("CreateTopics v4", CreateTopicsRequest[4](
        topics=[ct(name="t", num_partitions=-1, replication_factor=-1, assignments=[],
                   configs=[ct.CreatableTopicConfig(name="cleanup.policy", value="compact")])],
        timeout_ms=1000, validate_only=False)))
    return out


REQUESTS = _kafka_python_requests()


@pytest.mark.parametrize(("label", "request_obj"), REQUESTS, ids=[r[0] for r in REQUESTS])
def test_kafka_python_request_frames_decode(label: str, request_obj: Any) -> None:
    request_obj.with_header(correlation_id=123, client_id="kafka-python-3.0.12")
    frame_bytes = request_obj.encode(header=True, framed=True)
    decoder = FrameDecoder()
    frames = []
    for i in range(0, len(frame_bytes), 7):  # arrives in small chunks
        frames.extend(decoder.feed(frame_bytes[i : i + 7]))
    (frame,) = frames
    request = decode_request(frame)
    version = request_obj.API_VERSION
    assert request.header.api_key == request_obj.API_KEY
    assert request.header.api_version == version
    assert request.header.correlation_id == 123
    assert request.header.client_id == "kafka-python-3.0.12"
    message = request_schema(request.header.api_key, version)
    ours_fields = normalize(project(message, message.name, version, request.body.to_dict()))
    assert_matches(ours_fields, normalize(request_obj.to_dict(json=False)))
    again = b"".join(bytes(p) for p in encode_request(request.header, request.body))
    assert again == frame_bytes


# --- our response frames parsed by kafka-python --------------------------------------------


def _responses() -> list[tuple[str, int, int, dict]]:
    records = bytes(range(70))
    return [
        ("ApiVersions", 18, 3, {"api_keys": [{"api_key": 0, "min_version": 0, "max_version": 8},
                                             {"api_key": 18, "min_version": 0, "max_version": 3}]}),
        ("ApiVersions", 18, 0, {"api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}),
        ("Produce", 0, 8, {"responses": [{"name": "orders", "partition_responses": [
            {"index": 0, "base_offset": 100, "log_append_time_ms": -1, "log_start_offset": 0}]}]}),
        ("Fetch", 1, 11, {"responses": [{"topic": "orders", "partitions": [
            {"partition_index": 0, "high_watermark": 5, "last_stable_offset": 5,
             "log_start_offset": 0, "aborted_transactions": None, "records": records}]}]}),
        ("Fetch", 1, 12, {"responses": [{"topic": "orders", "partitions": [
            {"partition_index": 0, "high_watermark": 5, "records": records,
             "current_leader": {"leader_id": 1, "leader_epoch": 0}}]}]}),
        ("Metadata", 3, 8, {"brokers": [{"node_id": 1, "host": "localhost", "port": 9092}],
                            "cluster_id": "c", "controller_id": 1,
                            "topics": [{"name": "orders", "partitions": [
                                {"partition_index": 0, "leader_id": 1, "replica_nodes": [1],
                                 "isr_nodes": [1]}]}]}),
        ("Metadata", 3, 12, {"brokers": [{"node_id": 1, "host": "localhost", "port": 9092}],
                             "topics": [{"name": "orders", "topic_id": uuid.uuid4()}]}),
    ]


RESPONSES = _responses()


@pytest.mark.parametrize(
    ("label", "key", "version", "body"), RESPONSES, ids=[f"{r[0]} v{r[2]}" for r in RESPONSES]
)
def test_our_response_frames_parse_in_kafka_python(label: str, key: int, version: int, body: dict) -> None:
    header = RequestHeader(key, version, 77, "client")
    frame = b"".join(bytes(p) for p in encode_response(header, body))
    message = response_schema(key, version)
    theirs = KP[message.name].decode(frame, version=version, header=True, framed=True)
    assert theirs.header.correlation_id == 77
    ours = decode_bytes(message, version, frame[4 + (5 if message.is_flexible(version) and key != 18 else 4):])
    ours_fields = normalize(project(message, message.name, version, ours.to_dict()))
    assert_matches(ours_fields, normalize(theirs.to_dict(json=False)))


def test_api_versions_unsupported_version_answer_parses_everywhere() -> None:
    """PROTOCOL.md 3.2: an ApiVersions request above our max gets header v0 + a v0 body
    with error 35; kafka-python reads it as v0 whatever version it sent."""
    header = RequestHeader(18, 4, 9, "kafka-python")
    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}]}
    frame = b"".join(bytes(p) for p in encode_response(header, body, version=0))
    assert frame.hex() == "00000010" "00000009" "0023" "00000001" "0012" "0000" "0003"
    theirs = KP["ApiVersionsResponse"].decode(frame, version=4, header=True, framed=True)
    assert theirs.error_code == 35
    assert [(k.api_key, k.max_version) for k in theirs.api_keys] == [(18, 3)]
