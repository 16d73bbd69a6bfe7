"""Bad input to the broker's Schema Registry (RELIABILITY.md's I-series: bad input gets a
clear error and changes nothing): malformed schemas of each type, unknown types, missing
and cyclic references, oversized bodies, bad JSON, unknown routes and methods, and bytes
that are not HTTP. Each gets Confluent's error shape and code, the registry keeps serving,
and ``_schemas`` gains no record (its end offset is unchanged).
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.broker import BrokerProcess

GOOD = json.dumps({"type": "record", "name": "Good", "fields": [{"name": "a", "type": "int"}]})


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("registry-bad"), {
        "schema.registry.listeners": "http://127.0.0.1:0", "schema.registry.max.request.bytes": "65536"},
        name="registry-bad")
    b.start()
    yield b
    b.kill()


def call(broker: BrokerProcess, method: str, path: str, body: bytes | str | None = None,
         headers: dict | None = None) -> tuple[int, object]:
    url = urllib.parse.urlsplit(broker.schema_registry_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=20)
    try:
        data = body.encode() if isinstance(body, str) else body
        conn.request(method, path, body=data, headers={"Content-Type": "application/vnd.schemaregistry.v1+json",
                                                        **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw.decode()
    finally:
        conn.close()


def end_offset(broker: BrokerProcess) -> int:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "registry-bad-watch"})
    try:
        return c.get_watermark_offsets(TopicPartition("_schemas", 0), timeout=10)[1]
    finally:
        c.close()


def register(broker: BrokerProcess, subject: str, payload: dict) -> tuple[int, object]:
    return call(broker, "POST", f"/subjects/{subject}/versions", json.dumps(payload))


@pytest.fixture
def unchanged(broker):
    """The registry's topic gains no record during the test, and the registry still serves."""
    assert register(broker, "baseline-value", {"schema": GOOD})[0] == 200  # the topic exists
    before = end_offset(broker)
    yield
    assert end_offset(broker) == before
    assert call(broker, "GET", "/subjects")[0] == 200


@pytest.mark.parametrize("schema_type, text, fragment", [
    ("AVRO", '{"type": "record", "fields": []}', "name"),
    ("AVRO", '{"type": "recrod", "name": "X", "fields": []}', "recrod"),
    ("AVRO", '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "int", "default": "x"}]}', "default"),
    ("AVRO", '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "Missing"}]}', "Missing"),
    ("AVRO", "not json at all", ""),
    ("PROTOBUF", 'syntax = "proto3"; message X { int32 a = 1', ""),
    ("PROTOBUF", 'syntax = "proto3"; message X { Unknown a = 1; }', "Unknown"),
    ("JSON", '{"type": "objekt"}', ""),
    ("JSON", '{"type": "object", "properties": {"a": {"minimum": "zero"}}}', ""),
    ("JSON", "[1, 2", ""),
])
def test_i_malformed_schemas_get_42201(broker, unchanged, schema_type, text, fragment):
    status, answer = register(broker, "bad-value", {"schema": text, "schemaType": schema_type})
    assert status == 422, answer
    assert answer["error_code"] == 42201
    assert fragment in answer["message"]


def test_i_unknown_schema_types_and_non_string_schemas(broker, unchanged):
    status, answer = register(broker, "bad-value", {"schema": GOOD, "schemaType": "XML"})
    assert (status, answer["error_code"]) == (422, 42201) and "XML" in answer["message"]
    status, answer = register(broker, "bad-value", {"schema": {"type": "string"}})
    assert (status, answer["error_code"]) == (422, 42201)
    status, answer = register(broker, "bad-value", {"schema": ""})
    assert (status, answer["error_code"]) == (422, 42201)


def test_i_missing_references_are_named(broker, unchanged):
    uses = json.dumps({"type": "record", "name": "Uses", "fields": [{"name": "o", "type": "com.x.Other"}]})
    status, answer = register(broker, "refs-value", {
        "schema": uses, "references": [{"name": "com.x.Other", "subject": "nowhere", "version": 1}]})
    assert (status, answer["error_code"]) == (422, 42201)
    assert "nowhere" in answer["message"]
    status, answer = register(broker, "refs-value", {"schema": uses, "references": [{"name": "x"}]})
    assert (status, answer["error_code"]) == (422, 42201)
    status, answer = register(broker, "refs-value", {"schema": uses, "references": "com.x.Other"})
    assert (status, answer["error_code"]) == (422, 42201)


def test_i_oversized_bodies_get_413_unread(broker, unchanged):
    status, answer = register(broker, "big-value", {"schema": GOOD, "pad": "x" * 70000})
    assert status == 413 and "schema.registry.max.request.bytes" in answer["message"]


@pytest.mark.parametrize("body", ["{bad json", "[1, 2, 3]", '"a string"', "\xff\xfe"])
def test_i_bad_json_bodies(broker, unchanged, body):
    status, answer = call(broker, "POST", "/subjects/x-value/versions", body)
    assert status in (400, 422) and answer["error_code"] in (400, 422)


def test_i_unknown_routes_methods_versions_and_ids(broker, unchanged):
    assert call(broker, "GET", "/nothing/here") == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert call(broker, "PATCH", "/subjects")[0] == 405
    assert call(broker, "DELETE", "/schemas/types")[0] == 405
    status, answer = call(broker, "GET", "/subjects/baseline-value/versions/abc")
    assert (status, answer["error_code"]) == (422, 42202)
    status, answer = call(broker, "GET", "/subjects/baseline-value/versions/0")
    assert (status, answer["error_code"]) == (422, 42202)
    status, answer = call(broker, "GET", "/schemas/ids/abc")
    assert (status, answer["error_code"]) == (404, 40403)
    status, answer = call(broker, "GET", "/schemas/ids/99999")
    assert (status, answer["error_code"]) == (404, 40403)
    status, answer = call(broker, "GET", "/subjects/nobody/versions/1")
    assert (status, answer["error_code"]) == (404, 40401)
    status, answer = call(broker, "GET", "/subjects/baseline-value/versions/99")
    assert (status, answer["error_code"]) == (404, 40402)
    status, answer = call(broker, "PUT", "/mode", json.dumps({"mode": "SIDEWAYS"}))
    assert (status, answer["error_code"]) == (422, 42204)


def test_i_bytes_that_are_not_http_leave_the_registry_serving(broker, unchanged):
    url = urllib.parse.urlsplit(broker.schema_registry_url)
    for junk in (b"\x00\x01\x02\x03" * 100, b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\n\r\n", b"POST / HTTP/1.1\r\n"
                 b"Content-Length: -5\r\n\r\n"):
        with socket.create_connection((url.hostname, url.port), timeout=10) as s:
            try:  # the registry may answer (400, 414) and close before all the junk is sent
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                s.recv(65536)
            except OSError:
                pass


def test_i_cyclic_references_in_a_loaded_topic_are_refused_not_followed(tmp_path):
    """Records written while the registry was off (an import of a damaged dump) make A
    reference B and B reference A; the registry loads, serves both, and refuses a schema
    referencing them instead of looping."""
    b = BrokerProcess(tmp_path / "cyc", {"num.partitions": "1"}).start()
    try:
        a = json.dumps({"type": "record", "name": "A", "fields": [{"name": "b", "type": ["null", "B"]}]})
        bb = json.dumps({"type": "record", "name": "B", "fields": [{"name": "a", "type": ["null", "A"]}]})
        p = Producer({"bootstrap.servers": b.bootstrap})
        for subject, sid, text, ref in (("a", 1, a, ("B", "b")), ("b", 2, bb, ("A", "a"))):
            key = json.dumps({"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1})
            value = json.dumps({"subject": subject, "version": 1, "id": sid, "schema": text, "deleted": False,
                                "references": [{"name": ref[0], "subject": ref[1], "version": 1}]})
            p.produce("_schemas", key=key.encode(), value=value.encode())
        assert p.flush(20) == 0
        b.stop()
        b.overrides["schema.registry.listeners"] = "http://127.0.0.1:0"
        b.start()
        assert call(b, "GET", "/subjects")[1] == ["a", "b"]
        assert call(b, "GET", "/schemas/ids/1")[0] == 200
        uses = json.dumps({"type": "record", "name": "C", "fields": [{"name": "x", "type": "A"}]})
        status, answer = register(b, "c", {"schema": uses, "references": [{"name": "A", "subject": "a",
                                                                            "version": 1}]})
        assert (status, answer["error_code"]) == (422, 42201)
        assert "cyclic" in answer["message"]
        assert call(b, "GET", "/subjects")[0] == 200
    finally:
        b.stop()
