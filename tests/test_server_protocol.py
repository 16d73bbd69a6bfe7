"""Wire-level behaviour of the broker (``broker.server.apis`` and ``handlers``), with raw
requests built by ``broker.protocol`` over a socket to the broker subprocess: ApiVersions
and its fallback, Produce acks 0/1/all, Fetch long polling and size limits, ListOffsets,
Metadata semantics, DescribeConfigs, InitProducerId, OffsetForLeaderEpoch,
DeleteRecords, CreateTopics errors and pipelining.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from broker.protocol import ApiKey, ErrorCode, decode_response
from broker.record.batch import encode_batch
from broker.server.apis import HANDLERS, advertised_versions

pytestmark = pytest.mark.timeout(120)

BASE_TS = 1_700_000_000_000


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(client, name: str, partitions: int = 1, configs: dict | None = None) -> None:
    body = {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [], "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 10000, "validate_only": False}
    r = client.request(ApiKey.CREATE_TOPICS, 4, body)
    assert r.topics[0].error_code == 0, r


def produce_body(topic: str, batch: bytes, partition: int = 0, acks: int = 1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}


def batch_of(n: int, start_ts: int = BASE_TS, size: int = 10, **kw) -> bytes:
    return encode_batch([(b"k%d" % i, b"v" * size, start_ts + i * 1000) for i in range(n)], **kw)


def produce(client, topic: str, batch: bytes, partition: int = 0, acks: int = 1, version: int = 8):
    r = client.request(ApiKey.PRODUCE, version, produce_body(topic, batch, partition, acks))
    return r.responses[0].partition_responses[0]


def fetch_body(topic: str, offset: int = 0, partitions=(0,), max_wait_ms: int = 0, min_bytes: int = 1,
               max_bytes: int = 50 << 20, partition_max_bytes: int = 1 << 20, isolation: int = 0,
               session_id: int = 0) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": isolation, "session_id": session_id, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": partition_max_bytes} for p in partitions]}],
            "forgotten_topics_data": [], "rack_id": ""}


# --- ApiVersions ---

def test_api_versions_advertises_only_implemented_apis(raw_client):
    c = raw_client()
    for version in (0, 1, 2, 3):
        r = c.request(ApiKey.API_VERSIONS, version, {"client_software_name": "raw", "client_software_version": "1"})
        assert r.error_code == 0
        assert {(a.api_key, a.min_version, a.max_version) for a in r.api_keys} == set(advertised_versions())
    keys = {a.api_key for a in r.api_keys}
    # SASL waits for security
    assert ApiKey.SASL_HANDSHAKE not in keys
    table = {a.api_key: (a.min_version, a.max_version) for a in r.api_keys}
    # the classic group membership protocol (non-flexible versions, PROTOCOL.md section 2)
    assert (table[ApiKey.JOIN_GROUP], table[ApiKey.SYNC_GROUP], table[ApiKey.HEARTBEAT],
            table[ApiKey.LEAVE_GROUP], table[ApiKey.OFFSET_DELETE]) == ((0, 5), (0, 3), (0, 3), (0, 3), (0, 0))
    assert table[ApiKey.FIND_COORDINATOR] == (0, 2) and table[ApiKey.OFFSET_COMMIT] == (2, 9)  # v9: KIP-848
    assert table[ApiKey.OFFSET_FETCH] == (1, 9)
    assert table[ApiKey.PRODUCE] == (0, 12) and table[ApiKey.FETCH] == (4, 11)  # Produce v12: KIP-890 part 2
    assert table[ApiKey.END_TXN] == (0, 5) and table[ApiKey.TXN_OFFSET_COMMIT] == (0, 5)
    # v3 carries the features: transaction.version supported (from 1 in v3, KAFKA-17011) and finalized at 2;
    # share.version 1 (share groups, KIP-932)
    assert [(f.name, f.min_version, f.max_version) for f in r.supported_features] == [
        ("transaction.version", 1, 2), ("share.version", 1, 1)]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in r.finalized_features] == \
        [("transaction.version", 2, 2), ("share.version", 1, 1)]
    assert table[ApiKey.SHARE_FETCH] == (1, 2) and table[ApiKey.SHARE_GROUP_HEARTBEAT] == (1, 1)
    assert r.finalized_features_epoch > 0
    assert table[ApiKey.API_VERSIONS] == (0, 3) and table[ApiKey.METADATA] == (0, 12)
    for key, (lo, hi) in table.items():  # served ⊇ advertised, except Produce v0-2 (KAFKA-18659)
        api = HANDLERS[key]
        assert api.max_version == hi and api.min_version == (3 if key == ApiKey.PRODUCE else lo)


def test_api_versions_v4_gets_v0_unsupported_version(raw_client):
    """kafka-python starts with v4: answered with a v0 body and header (PROTOCOL.md 3.2)."""
    c = raw_client()
    c.send(ApiKey.API_VERSIONS, 4, {"client_software_name": "x", "client_software_version": "1"})
    frame = c.recv_frame()
    header, body = decode_response(frame, ApiKey.API_VERSIONS, 0)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(a.api_key, a.min_version, a.max_version) for a in body.api_keys] == [(18, 0, 3)]
    assert bytes(frame[4:6]) == b"\x00\x23"  # header v0: the int16 35 follows the correlation id
    assert len(frame) == 4 + 2 + 4 + 6  # no throttle time, no tagged fields


def test_api_versions_raw_high_version_answered_as_v0(raw_client):
    c = raw_client()
    # header v2 (flexible): api_key 18, version 99, correlation 7, client_id "z", no tags; junk body
    payload = b"\x00\x12\x00\x63\x00\x00\x00\x07\x00\x01z\x00" + b"\xff" * 10
    c.send_raw(len(payload).to_bytes(4, "big") + payload)
    header, body = decode_response(c.recv_frame(), ApiKey.API_VERSIONS, 0)
    assert header.correlation_id == 7
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(a.api_key, a.min_version, a.max_version) for a in body.api_keys] == [(18, 0, 3)]
    r = c.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "z", "client_software_version": "1"})
    assert r.error_code == 0


# --- Produce ---

def test_produce_acks_0_sends_no_response(raw_client):
    c = raw_client()
    topic = unique("acks0")
    create_topic(c, topic)
    for _ in range(3):
        c.send(ApiKey.PRODUCE, 8, produce_body(topic, batch_of(2), acks=0))
    # the next response on the connection answers the Metadata request, not a produce
    cid = c.send(ApiKey.METADATA, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
    got, body = c.recv(ApiKey.METADATA, 8)
    assert got == cid
    r = c.request(ApiKey.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    assert r.topics[0].partitions[0].offset == 6


def test_produce_acks_0_error_closes_connection(raw_client):
    c = raw_client()
    c.send(ApiKey.PRODUCE, 8, produce_body(unique("no-such-topic"), batch_of(1), acks=0))
    assert c.is_closed_by_peer()


@pytest.mark.parametrize("acks", [1, -1])
def test_produce_acks_1_and_all_answer_with_offsets(raw_client, acks):
    c = raw_client()
    topic = unique(f"acks{acks}")
    create_topic(c, topic)
    first = produce(c, topic, batch_of(3), acks=acks)
    second = produce(c, topic, batch_of(2), acks=acks)
    assert (first.error_code, first.base_offset, second.base_offset) == (0, 0, 3)
    assert first.log_append_time_ms == -1 and second.log_start_offset == 0


def test_produce_errors(raw_client):
    c = raw_client()
    topic = unique("perr")
    create_topic(c, topic, configs={"message.timestamp.type": "LogAppendTime"})
    assert produce(c, topic, batch_of(1), acks=2).error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert produce(c, topic, batch_of(1), partition=7).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    bad = bytearray(batch_of(2))
    bad[-1] ^= 0xFF  # breaks the CRC
    assert produce(c, topic, bytes(bad)).error_code == ErrorCode.CORRUPT_MESSAGE
    zstd = batch_of(2, compression=4)
    assert produce(c, topic, zstd, version=6).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    small = unique("small")
    create_topic(c, small, configs={"max.message.bytes": "200"})
    assert produce(c, small, batch_of(1)).error_code == 0
    assert produce(c, small, batch_of(20, size=50)).error_code == ErrorCode.MESSAGE_TOO_LARGE
    ok = produce(c, topic, zstd, version=7)
    assert ok.error_code == 0 and ok.base_offset == 0  # nothing was appended by the failures
    assert ok.log_append_time_ms > BASE_TS  # LogAppendTime topic


# --- Fetch ---

def test_fetch_long_poll_waits_for_max_wait_ms_without_data(raw_client):
    c = raw_client()
    topic = unique("poll")
    create_topic(c, topic)
    t0 = time.monotonic()
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, max_wait_ms=600))
    elapsed = time.monotonic() - t0
    assert 0.55 <= elapsed < 3
    p = r.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark, p.records) == (0, 0, b"")


def test_fetch_long_poll_returns_early_when_data_arrives(raw_client):
    c, producer = raw_client(), raw_client("producer")
    topic = unique("poll-early")
    create_topic(c, topic)

    def later():
        time.sleep(0.3)  # scenario: the data arrives while the fetch long-polls
        produce(producer, topic, batch_of(1))

    t = threading.Thread(target=later)
    t0 = time.monotonic()
    t.start()
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, max_wait_ms=10_000))
    elapsed = time.monotonic() - t0
    t.join()
    assert 0.25 <= elapsed < 3
    assert len(r.responses[0].partitions[0].records) > 0


def test_fetch_min_bytes_keeps_waiting_until_enough(raw_client):
    c, producer = raw_client(), raw_client("producer")
    topic = unique("minbytes")
    create_topic(c, topic)
    one = batch_of(1)

    def later():
        for _ in range(3):
            time.sleep(0.2)  # scenario: the bytes trickle in during the long poll
            produce(producer, topic, one)

    t = threading.Thread(target=later)
    t0 = time.monotonic()
    t.start()
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, max_wait_ms=10_000, min_bytes=len(one) * 3))
    elapsed = time.monotonic() - t0
    t.join()
    assert 0.5 <= elapsed < 5
    assert len(r.responses[0].partitions[0].records) == len(one) * 3


def test_fetch_size_limits_return_whole_batches(raw_client):
    c = raw_client()
    topic = unique("sizes")
    create_topic(c, topic, partitions=2)
    big = batch_of(20, size=2000)  # ~40 KB: sent with sendfile
    for p in (0, 1):
        for _ in range(3):
            produce(c, topic, big, partition=p)
    # partition_max_bytes below one batch: the first batch still comes whole (KIP-74)
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, partitions=(0, 1), partition_max_bytes=1))
    sizes = [len(p.records) for p in r.responses[0].partitions]
    assert sizes == [len(big), 0]
    # max_bytes across partitions
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, partitions=(0, 1), max_bytes=len(big) * 2 + 10))
    parts = r.responses[0].partitions
    assert len(parts[0].records) == len(big) * 2 + 10 or len(parts[0].records) >= len(big) * 2
    assert sum(len(p.records) for p in parts) <= len(big) * 2 + 10
    # from an offset inside a batch: the whole containing batch, from its base offset
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, offset=25, partitions=(1,)))
    data = bytes(r.responses[0].partitions[0].records)
    assert int.from_bytes(data[:8], "big") == 20 and len(data) == len(big) * 2
    assert data[12 * 0 + 61:61 + 10] == big[61:71]


def test_fetch_errors_and_boundaries(raw_client):
    c = raw_client()
    topic = unique("ferr")
    create_topic(c, topic)
    produce(c, topic, batch_of(5))
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, offset=5, partitions=(0, 3)))
    p0, p3 = r.responses[0].partitions
    assert (p0.error_code, p0.records, p0.high_watermark, p0.last_stable_offset, p0.log_start_offset,
            p0.preferred_read_replica, p0.aborted_transactions) == (0, b"", 5, 5, 0, -1, None)
    assert p3.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and p3.partition_index == 3
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, offset=6))
    p = r.responses[0].partitions[0]
    assert (p.error_code, p.high_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, 5)
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, isolation=1))
    p = r.responses[0].partitions[0]
    assert p.aborted_transactions == [] and p.last_stable_offset == 5 and len(p.records) > 0
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, session_id=42))
    assert r.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    r = c.request(ApiKey.FETCH, 4, fetch_body(topic))
    assert r.responses[0].partitions[0].high_watermark == 5


# --- ListOffsets, DeleteRecords ---

def list_offsets(c, topic: str, timestamp: int, version: int = 5, isolation: int = 0):
    r = c.request(ApiKey.LIST_OFFSETS, version, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                        "timestamp": timestamp}]}]})
    return r.topics[0].partitions[0]


def test_list_offsets_and_delete_records(raw_client):
    c = raw_client()
    topic = unique("lo")
    create_topic(c, topic)
    for i in range(4):
        produce(c, topic, batch_of(2, start_ts=BASE_TS + i * 10_000))
    earliest, latest = list_offsets(c, topic, -2), list_offsets(c, topic, -1)
    assert (earliest.offset, earliest.timestamp, latest.offset, latest.leader_epoch) == (0, -1, 8, 0)
    by_ts = list_offsets(c, topic, BASE_TS + 20_500)
    assert (by_ts.offset, by_ts.timestamp) == (5, BASE_TS + 21_000)
    assert list_offsets(c, topic, BASE_TS + 10 ** 9).offset == -1
    max_ts = list_offsets(c, topic, -3)
    assert (max_ts.offset, max_ts.timestamp) == (7, BASE_TS + 31_000)
    assert list_offsets(c, topic, -1, version=1).offset == 8
    r = c.request(ApiKey.DELETE_RECORDS, 1, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": 3}, {"partition_index": 1, "offset": 1}]}], "timeout_ms": 1000})
    a, b = r.topics[0].partitions
    assert (a.error_code, a.low_watermark) == (0, 3) and b.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert list_offsets(c, topic, -2).offset == 3
    # v10 (flexible, timeout_ms): -4 earliest local is the log start without tiered storage,
    # -5 latest tiered is -1 (nothing in remote storage); -3 as before
    tiered = [list_offsets(c, topic, ts, version=10) for ts in (-4, -5, -3, -2)]
    assert [(p.offset, p.timestamp, p.error_code) for p in tiered] == [
        (3, -1, 0), (-1, -1, 0), (7, BASE_TS + 31_000, 0), (3, -1, 0)]
    r = c.request(ApiKey.FETCH, 11, fetch_body(topic, offset=1))
    assert r.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    r = c.request(ApiKey.DELETE_RECORDS, 0, {"topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "offset": 99}]}], "timeout_ms": 1000})
    assert r.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


# --- Metadata ---

def metadata(c, topics, version: int = 8, allow: bool = True):
    body = {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": allow, "include_topic_authorized_operations": False}
    return c.request(ApiKey.METADATA, version, body)


def test_metadata_topic_selection_and_auto_creation(raw_client, kafka_broker):
    c = raw_client()
    topic = unique("md")
    create_topic(c, topic, partitions=2)
    everything = {t.name for t in metadata(c, None).topics}
    assert topic in everything
    assert {t.name for t in metadata(c, [], version=0).topics} == everything  # v0: [] = all
    assert metadata(c, []).topics == []  # v1+: [] = none
    r = metadata(c, [topic])
    assert (r.controller_id, r.brokers[0].node_id, r.brokers[0].port) == (1, 1, kafka_broker.port)
    assert r.cluster_id
    t = r.topics[0]
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) for p in t.partitions] \
        == [(0, 1, 0, [1], [1]), (1, 1, 0, [1], [1])]
    ghost = unique("ghost")
    assert metadata(c, [ghost], allow=False).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert metadata(c, ["bad/name"]).topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    created = metadata(c, [ghost], version=4).topics[0]
    assert created.error_code == 0 and len(created.partitions) == 1


# --- DescribeConfigs ---

def test_describe_configs_sources_and_synonyms(raw_client):
    c = raw_client()
    topic = unique("dc")
    create_topic(c, topic, configs={"retention.ms": "12345"})
    body = {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": ["retention.ms",
                                                                                            "segment.bytes"]},
                          {"resource_type": 2, "resource_name": unique("none"), "configuration_keys": None},
                          {"resource_type": 4, "resource_name": "1", "configuration_keys": ["num.partitions"]}],
            "include_synonyms": True, "include_documentation": True}
    r = c.request(ApiKey.DESCRIBE_CONFIGS, 3, body)
    found, missing, broker = r.results
    configs = {e.name: e for e in found.configs}
    assert set(configs) == {"retention.ms", "segment.bytes"}
    rm = configs["retention.ms"]
    assert (rm.value, rm.config_source, rm.config_type) == ("12345", 1, 5)
    assert [(s.name, s.source) for s in rm.synonyms][0] == ("retention.ms", 1)
    assert rm.synonyms[-1].name == "log.retention.ms" and rm.synonyms[-1].source == 5
    assert rm.documentation
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.error_code == 0 and broker.configs[0].name == "num.partitions"
    all_keys = c.request(ApiKey.DESCRIBE_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": topic, "configuration_keys": None}], "include_synonyms": False})
    names = {e.name for e in all_keys.results[0].configs}
    assert {"cleanup.policy", "max.message.bytes", "message.timestamp.type", "retention.bytes"} <= names
    assert all(e.synonyms == [] for e in all_keys.results[0].configs)


# --- CreateTopics details ---

def test_create_topics_request_level_errors(raw_client):
    c = raw_client()
    dup = unique("dup")
    good = unique("good")
    body = {"topics": [
        {"name": dup, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": dup, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": good, "num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": []},
        {"name": unique("zero"), "num_partitions": 0, "replication_factor": 1, "assignments": [], "configs": []},
        {"name": unique("huge"), "num_partitions": 2 ** 31 - 1, "replication_factor": 1, "assignments": [],
         "configs": []},
        {"name": unique("nullcfg"), "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": [{"name": "retention.ms", "value": None}]},
        {"name": unique("assigned"), "num_partitions": -1, "replication_factor": -1,
         "assignments": [{"partition_index": 0, "broker_ids": [1]}, {"partition_index": 1, "broker_ids": [1]}],
         "configs": []},
        {"name": unique("elsewhere"), "num_partitions": -1, "replication_factor": -1,
         "assignments": [{"partition_index": 0, "broker_ids": [2]}], "configs": []},
    ], "timeout_ms": 1000, "validate_only": False}
    r = c.request(ApiKey.CREATE_TOPICS, 4, body)
    codes = [t.error_code for t in r.topics]
    assert codes == [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST, 0, ErrorCode.INVALID_PARTITIONS,
                     ErrorCode.INVALID_PARTITIONS, ErrorCode.INVALID_REQUEST, 0,
                     ErrorCode.INVALID_REPLICA_ASSIGNMENT]
    assert all(t.error_message for t in r.topics if t.error_code)
    md = metadata(c, [good, body["topics"][6]["name"]], allow=False)
    assert [len(t.partitions) for t in md.topics] == [1, 2]


# --- InitProducerId, OffsetForLeaderEpoch ---

def test_init_producer_id(raw_client):
    c = raw_client()
    ids = [c.request(ApiKey.INIT_PRODUCER_ID, v, {"transactional_id": None, "transaction_timeout_ms": -1})
           for v in (0, 1, 1)]
    assert [r.error_code for r in ids] == [0, 0, 0]
    assert [r.producer_epoch for r in ids] == [0, 0, 0]
    assert len({r.producer_id for r in ids}) == 3
    txn_id = unique("tx")  # a transactional id: the transaction coordinator (test_server_transactions.py)
    txn = c.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": txn_id, "transaction_timeout_ms": 1000})
    again = c.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": txn_id, "transaction_timeout_ms": 1000})
    assert (txn.error_code, txn.producer_epoch, again.error_code) == (0, 0, 0)
    assert (again.producer_id, again.producer_epoch) == (txn.producer_id, 1)


def test_offset_for_leader_epoch(raw_client):
    c = raw_client()
    topic = unique("ofle")
    create_topic(c, topic)
    produce(c, topic, batch_of(4))

    def ask(epoch: int, current: int = -1):
        r = c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, {"topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]})
        return r.topics[0].partitions[0]

    p = ask(0)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 4)
    assert ask(0, current=0).error_code == 0
    assert ask(0, current=3).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert (ask(7).leader_epoch, ask(7).end_offset) == (-1, -1)


# --- pipelining ---

def test_pipelined_requests_answered_in_order(raw_client):
    c = raw_client()
    topic = unique("pipe")
    create_topic(c, topic)
    sent = []
    for i in range(30):
        if i % 3 == 0:
            sent.append((c.send(ApiKey.PRODUCE, 8, produce_body(topic, batch_of(1))), ApiKey.PRODUCE, 8))
        elif i % 3 == 1:
            sent.append((c.send(ApiKey.FETCH, 11, fetch_body(topic, max_wait_ms=50, min_bytes=10 ** 6)),
                         ApiKey.FETCH, 11))
        else:
            sent.append((c.send(ApiKey.API_VERSIONS, 3, {"client_software_name": "p",
                                                         "client_software_version": "1"}), ApiKey.API_VERSIONS, 3))
    got = [c.recv(key, version)[0] for _, key, version in sent]
    assert got == [cid for cid, _, _ in sent]
