"""The broker's Schema Registry against registry clients other than confluent-kafka's:
python-schema-registry-client (httpx), and, where node is present, the npm
``@kafkajs/confluent-schema-registry`` client, which registers Protobuf as ``.proto`` text
and encodes and decodes values itself.

The npm package is found in ``SCHEMA_REGISTRY_JS_DIR`` or installed into
``build/srjs`` on first use; without node or npm (or the npm registry) that test skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from schema_registry.client import SchemaRegistryClient, schema

from tests.support.broker import BrokerProcess

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "support" / "js" / "schema_registry_client.js"
JS_CLIENT = "@kafkajs/confluent-schema-registry@3.9.0"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("registry-clients"),
                      {"schema.registry.listeners": "http://127.0.0.1:0"}, name="registry-clients")
    b.start()
    yield b
    b.kill()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_python_schema_registry_client(broker):
    client = SchemaRegistryClient(url=broker.schema_registry_url)
    subject = unique("psrc-value")
    v1 = schema.AvroSchema({"type": "record", "name": "Psrc", "fields": [{"name": "a", "type": "int"}]})
    v2 = schema.AvroSchema({"type": "record", "name": "Psrc", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""}]})
    bad = schema.AvroSchema({"type": "record", "name": "Psrc", "fields": [{"name": "a", "type": "string"}]})
    sid = client.register(subject, v1)
    assert client.register(subject, v1) == sid
    assert client.get_by_id(sid).raw_schema["name"] == "Psrc"
    found = client.check_version(subject, v1)
    assert found is not None and found.version == 1 and found.schema_id == sid
    assert client.test_compatibility(subject, v2) is True
    assert client.test_compatibility(subject, bad) is False
    assert client.register(subject, v2) != sid
    assert client.get_versions(subject) == [1, 2]
    assert client.get_schema(subject, "latest").version == 2
    assert client.update_compatibility("FULL", subject)
    assert client.get_compatibility(subject) == "FULL"
    json_subject = unique("psrc-json-value")
    js = schema.JsonSchema({"type": "object", "properties": {"n": {"type": "integer"}}})
    jid = client.register(json_subject, js, schema_type="JSON")
    assert client.get_by_id(jid).schema_type == "JSON"
    assert client.delete_subject(subject) == [1, 2]
    assert subject not in client.get_subjects()


@pytest.fixture(scope="module")
def js_dir() -> Path:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    configured = os.environ.get("SCHEMA_REGISTRY_JS_DIR")
    if configured:
        return Path(configured)
    target = REPO / "build" / "srjs"
    if not (target / "node_modules" / "@kafkajs" / "confluent-schema-registry").is_dir():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed")
        target.mkdir(parents=True, exist_ok=True)
        try:
            r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(target), JS_CLIENT],
                               capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            pytest.skip("npm install timed out (no registry?)")
        if r.returncode != 0:
            pytest.skip(f"npm install {JS_CLIENT} failed: {r.stderr[-500:]}")
    return target


def test_the_kafkajs_registry_client_registers_protobuf_as_proto_text(broker, js_dir):
    prefix = unique("js")
    env = dict(os.environ, NODE_PATH=str(js_dir / "node_modules"))
    r = subprocess.run(["node", str(SCRIPT), broker.schema_registry_url, prefix], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["avro"]["again"] == out["avro"]["id"]
    assert out["avro"]["decoded"] == {"name": "ann", "age": 41}
    assert out["avro"]["magic"] == 0 and out["avro"]["framedId"] == out["avro"]["id"]
    assert out["proto"]["decoded"] == {"x": 3, "y": 4, "label": "p"}
    assert out["proto"]["latest"] == out["proto"]["id"]
    assert out["json"]["decoded"] == {"n": 7} and out["json"]["invalidRefused"] is True
    # the registry answers the .proto text it stores; confluent-kafka's Python serializer's
    # base64 descriptor of the same file resolves to the same id
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient

    from broker.schema import parse_schema

    sr = ConfluentClient({"url": broker.schema_registry_url})
    stored = sr.get_schema(out["proto"]["id"])
    assert "message Point" in stored.schema_str
    serialized = parse_schema("PROTOBUF", stored.schema_str).formatted("serialized")
    assert sr.register_schema(f"{prefix}-proto-value", Schema(serialized, "PROTOBUF")) == out["proto"]["id"]
