"""The project's Schema Registry client (broker/client/registry.py, registry_http.py) against
the REAL broker's registry: every method, the caches (requests counted in the client's
DEBUG log, and answers from cache with the broker stopped), Confluent's error codes,
IMPORT mode with ids and versions, the latest-version TTL, HTTP Basic (401 without
credentials; user info in the URL), HTTPS with ``ssl.ca.location``, failover between URLs,
and unreachable registries named in one line.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid

import pytest

from broker.client.registry import (
    CompatibilityResult,
    RegisteredSchema,
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
    SchemaRegistryUnreachableError,
)
from broker.schema.base import SchemaReference
from tests.support.broker import BrokerProcess
from tests.support.tls import STORE_PASSWORD

pytestmark = pytest.mark.timeout(120)

REGISTRY = {"schema.registry.listeners": "http://127.0.0.1:0"}
AVRO_V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
AVRO_V2 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]})
AVRO_BREAKING = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "email", "type": "string"}]})
JSON_DOC = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("client-registry"), REGISTRY, name="client-registry")
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def client(registry):
    with SchemaRegistryClient({"url": registry.schema_registry_url}) as c:
        yield c


class Requests:
    """The client's requests, from its DEBUG log (``GET http://... -> 200``)."""

    def __init__(self, caplog) -> None:
        self.caplog = caplog
        caplog.set_level(logging.DEBUG, logger="broker.client.registry")

    def __call__(self) -> list[str]:
        return [r.getMessage() for r in self.caplog.records if r.name == "broker.client.registry"]

    def clear(self) -> None:
        self.caplog.clear()


@pytest.fixture
def requests(caplog):
    return Requests(caplog)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- registering and reading ---

def test_register_lookup_and_read_back(client):
    subject = unique("users-value")
    registered = client.register_schema_full_response(subject, Schema(AVRO_V1))
    assert isinstance(registered, RegisteredSchema) and registered.id is not None
    assert (registered.subject, registered.version, registered.schema_type) == (subject, 1, "AVRO")
    assert registered.guid and uuid.UUID(registered.guid)
    assert client.register_schema(subject, Schema(AVRO_V1)) == registered.id  # the same schema: the same id
    v2 = client.register_schema(subject, AVRO_V2)  # a str is an Avro schema
    assert v2 != registered.id

    found = client.lookup_schema(subject, Schema(AVRO_V1))
    assert (found.subject, found.version, found.id) == (subject, 1, registered.id)
    by_id = client.get_schema(registered.id)
    assert (by_id.id, by_id.guid, by_id.schema_type) == (registered.id, registered.guid, "AVRO")
    assert json.loads(by_id.schema) == json.loads(AVRO_V1)
    assert client.get_schema_by_guid(registered.guid).id == registered.id
    assert client.get_version(subject, 1).id == registered.id
    latest = client.get_latest_version(subject)
    assert (latest.version, latest.id) == (2, v2)
    assert client.get_version(subject, "latest").id == v2
    assert client.get_versions(subject) == [1, 2]
    assert subject in client.get_subjects()
    assert client.get_subjects(subject_prefix=subject[:-3]) == [subject]
    assert client.get_subjects_by_schema_id(registered.id) == [subject]
    assert client.get_schema_versions(registered.id) == [(subject, 1)]
    assert set(client.get_schema_types()) == {"AVRO", "PROTOBUF", "JSON"}


def test_json_schema_with_a_reference(client):
    base, user = unique("address"), unique("customer")
    address = json.dumps({"type": "object", "properties": {"street": {"type": "string"}}})
    address_id = client.register_schema(base, Schema(address, "json"))
    doc = json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}}})
    ref = SchemaReference("address.json", base, 1)
    reg = client.register_schema_full_response(user, Schema(doc, "JSON", (ref,)))
    assert reg.schema_type == "JSON"
    back = client.get_version(user, 1)
    assert back.references == (ref,) and back.schema_type == "JSON"
    assert client.get_schema(reg.id).references == (ref,)
    assert client.get_referenced_by(base, 1) == [reg.id]
    assert address_id != reg.id
    # a version that is referenced cannot be deleted
    with pytest.raises(SchemaRegistryError) as exc:
        client.delete_version(base, 1)
    assert exc.value.error_code == SchemaRegistryError.REFERENCE_EXISTS


def test_formats_are_not_cached(client, requests):
    subject = unique("fmt")
    schema_id = client.register_schema(subject, AVRO_V1)
    client.get_schema(schema_id)
    requests.clear()
    client.get_schema(schema_id, fmt="resolved")
    client.get_schema(schema_id, fmt="resolved")
    assert len(requests()) == 2


# --- deletes and errors ---

def test_soft_and_permanent_deletes(client):
    subject = unique("del")
    client.register_schema(subject, AVRO_V1)
    client.register_schema(subject, AVRO_V2)
    assert client.get_version(subject, 1).version == 1  # now cached
    assert client.delete_version(subject, 1) == 1
    assert client.get_versions(subject) == [2]
    assert client.get_versions(subject, deleted=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as gone:
        client.get_version(subject, 1)  # the cache forgot it
    assert gone.value.error_code == SchemaRegistryError.VERSION_NOT_FOUND
    assert client.get_version(subject, 1, deleted=True).version == 1
    assert client.delete_version(subject, 1, permanent=True) == 1
    assert client.get_versions(subject, deleted=True) == [2]
    with pytest.raises(SchemaRegistryError) as not_soft:
        client.delete_subject(subject, permanent=True)
    assert not_soft.value.error_code == SchemaRegistryError.SUBJECT_NOT_SOFT_DELETED
    assert client.delete_subject(subject) == [2]
    assert subject not in client.get_subjects()
    assert subject in client.get_subjects(deleted=True)
    assert client.delete_subject(subject, permanent=True) == [2]
    assert subject not in client.get_subjects(deleted=True)


def test_registering_again_after_a_delete_reaches_the_registry(client):
    subject = unique("again")
    first = client.register_schema(subject, AVRO_V1)
    client.delete_version(subject, 1)
    assert client.register_schema(subject, AVRO_V1) == first
    assert client.get_versions(subject) == [2]


@pytest.mark.parametrize("call,code,status", [
    (lambda c: c.get_version(unique("none"), 1), SchemaRegistryError.SUBJECT_NOT_FOUND, 404),
    (lambda c: c.get_versions(unique("none")), SchemaRegistryError.SUBJECT_NOT_FOUND, 404),
    (lambda c: c.get_schema(2_000_000_000), SchemaRegistryError.SCHEMA_NOT_FOUND, 404),
    (lambda c: c.get_schema_by_guid(str(uuid.uuid4())), SchemaRegistryError.SCHEMA_NOT_FOUND, 404),
    (lambda c: c.register_schema(unique("bad"), Schema('{"type": "nope"}')), SchemaRegistryError.INVALID_SCHEMA, 422),
    (lambda c: c.set_compatibility(None, "SIDEWAYS"), SchemaRegistryError.INVALID_COMPATIBILITY_LEVEL, 422),
    (lambda c: c.set_mode("SLEEPING"), SchemaRegistryError.INVALID_MODE, 422),
])
def test_error_codes(client, call, code, status):
    with pytest.raises(SchemaRegistryError) as exc:
        call(client)
    assert (exc.value.http_status, exc.value.error_code) == (status, code)
    assert str(exc.value).endswith(f"(HTTP {status}, error code {code})")
    assert exc.value.message and "\n" not in str(exc.value)


def test_version_of_a_subject_that_exists_but_not_that_version(client):
    subject = unique("v")
    client.register_schema(subject, AVRO_V1)
    with pytest.raises(SchemaRegistryError) as exc:
        client.get_version(subject, 7)
    assert exc.value.error_code == SchemaRegistryError.VERSION_NOT_FOUND
    with pytest.raises(SchemaRegistryError) as lookup:
        client.lookup_schema(subject, Schema(AVRO_V2))
    assert lookup.value.error_code == SchemaRegistryError.SCHEMA_NOT_FOUND


# --- compatibility, config, mode ---

def test_compatibility_levels_and_checks(client):
    subject = unique("compat")
    client.register_schema(subject, AVRO_V1)
    assert client.get_compatibility() == "BACKWARD"
    assert client.get_compatibility(subject) == "BACKWARD"  # the global one
    with pytest.raises(SchemaRegistryError) as none:
        client.get_compatibility(subject, default_to_global=False)
    assert none.value.error_code == SchemaRegistryError.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED

    ok = client.test_compatibility(subject, Schema(AVRO_V2))
    assert ok == CompatibilityResult(True) and ok
    bad = client.test_compatibility(subject, Schema(AVRO_BREAKING), verbose=True)
    assert not bad and bad.messages and any("email" in m for m in bad.messages)
    assert not client.test_compatibility_all_versions(subject, Schema(AVRO_BREAKING))
    assert client.test_compatibility(subject, Schema(AVRO_BREAKING), version=1).is_compatible is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, AVRO_BREAKING)
    assert (refused.value.http_status, refused.value.error_code) == (409, 409)

    assert client.set_compatibility(subject, "none") == "NONE"
    assert client.get_compatibility(subject, default_to_global=False) == "NONE"
    assert client.get_config(subject)["compatibilityLevel"] == "NONE"
    assert client.test_compatibility(subject, Schema(AVRO_BREAKING)).is_compatible
    assert client.register_schema(subject, AVRO_BREAKING) > 0
    assert client.delete_compatibility(subject) == "NONE"
    assert client.get_compatibility(subject) == "BACKWARD"
    assert client.set_config(subject, {"compatibility": "FULL"})["compatibility"] == "FULL"
    removed = client.delete_config(subject)
    assert removed.get("compatibilityLevel", removed.get("compatibility")) == "FULL"


def test_modes_and_import_with_ids(broker_factory):
    target = broker_factory(REGISTRY, name="import-target")
    with SchemaRegistryClient({"url": target.schema_registry_url}) as c:
        subject = unique("imported")
        assert c.get_mode() == "READWRITE" == c.get_global_mode()
        with pytest.raises(SchemaRegistryError) as not_import:
            c.register_schema_full_response(subject, Schema(AVRO_V1), id=1234, version=3)
        assert not_import.value.error_code in (SchemaRegistryError.OPERATION_NOT_PERMITTED, 42207)
        assert c.set_mode("IMPORT") == "IMPORT"
        reg = c.register_schema_full_response(subject, Schema(AVRO_V1), id=1234, version=3)
        assert (reg.id, reg.version) == (1234, 3)
        assert c.get_schema(1234).schema_type == "AVRO"
        assert c.get_versions(subject) == [3]
        assert c.update_global_mode("READWRITE") == "READWRITE"
        # a read-only subject refuses writes; its own mode, then removed
        assert c.update_mode(subject, "READONLY") == "READONLY"
        assert c.get_mode(subject, default_to_global=False) == "READONLY"
        with pytest.raises(SchemaRegistryError) as ro:
            c.register_schema(subject, AVRO_V2)
        assert ro.value.error_code == SchemaRegistryError.OPERATION_NOT_PERMITTED
        assert c.delete_mode(subject) == "READONLY"
        assert c.get_mode(subject) == "READWRITE"
        with pytest.raises(SchemaRegistryError) as unset:
            c.get_mode(subject, default_to_global=False)
        assert unset.value.error_code == SchemaRegistryError.SUBJECT_LEVEL_MODE_NOT_CONFIGURED
        # IMPORT on a registry with schemas needs force
        with pytest.raises(SchemaRegistryError) as busy:
            c.set_mode("IMPORT")
        assert busy.value.error_code == SchemaRegistryError.OPERATION_NOT_PERMITTED
        assert c.set_mode("IMPORT", force=True) == "IMPORT"
        assert c.set_mode("READWRITE") == "READWRITE"


# --- caches ---

def test_caches_answer_without_requests(client, requests):
    subject = unique("cached")
    schema = Schema(AVRO_V1)
    schema_id = client.register_schema(subject, schema)
    guid = client.get_schema(schema_id).guid
    client.get_version(subject, 1)
    client.lookup_schema(subject, schema)
    client.get_schema_by_guid(guid)
    requests.clear()
    for _ in range(3):
        assert client.register_schema(subject, Schema(AVRO_V1)) == schema_id
        assert client.get_schema(schema_id).id == schema_id
        assert client.get_schema_by_guid(guid).id == schema_id
        assert client.get_version(subject, 1).id == schema_id
        assert client.lookup_schema(subject, schema).version == 1
    assert requests() == []
    # the latest version is asked every time (no latest.cache.ttl.sec)
    client.get_latest_version(subject)
    client.get_latest_version(subject)
    assert len(requests()) == 2 and all("/versions/latest" in line for line in requests())
    client.clear_caches()
    requests.clear()
    client.get_schema(schema_id)
    assert len(requests()) == 1


def test_latest_is_cached_for_its_ttl(registry, requests):
    subject = unique("ttl")
    with SchemaRegistryClient({"url": registry.schema_registry_url, "latest.cache.ttl.sec": "0.5"}) as c:
        c.register_schema(subject, AVRO_V1)
        requests.clear()
        assert c.get_latest_version(subject).version == 1
        assert c.get_latest_version(subject).version == 1
        assert len(requests()) == 1
        with SchemaRegistryClient({"url": registry.schema_registry_url}) as other:
            other.register_schema(subject, AVRO_V2)
        assert c.get_latest_version(subject).version == 1  # still cached
        time.sleep(0.6)  # scenario: the cached latest version expires after its 0.5 s TTL
        assert c.get_latest_version(subject).version == 2
        c.register_schema(subject, AVRO_BREAKING.replace('"string"}]', '"string", "default": ""}]'))
        assert c.get_latest_version(subject).version == 3  # its own register dropped the entry


def test_answers_from_cache_with_the_broker_stopped(broker_factory):
    broker = broker_factory(REGISTRY, name="stopped")
    url = broker.schema_registry_url
    c = SchemaRegistryClient({"url": url, "max.retries": 0})
    subject = unique("s")
    schema_id = c.register_schema(subject, AVRO_V1)
    guid = c.get_schema(schema_id).guid
    c.get_version(subject, 1)
    broker.stop()
    assert c.get_schema(schema_id).guid == guid
    assert c.get_schema_by_guid(guid).id == schema_id
    assert c.register_schema(subject, AVRO_V1) == schema_id
    assert c.get_version(subject, 1).id == schema_id
    with pytest.raises(SchemaRegistryUnreachableError) as exc:
        c.get_latest_version(subject)
    assert str(exc.value).startswith(f"no schema registry of {url} reachable (")
    assert "\n" not in str(exc.value)


def test_one_client_from_many_threads(client):
    subject = unique("threads")
    ids = [client.register_schema(subject, AVRO_V1)]
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                assert client.get_schema(ids[0]).id == ids[0]
                assert client.get_latest_version(subject).id == ids[0]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# --- connections and failures ---

def test_unreachable_url_is_named_in_one_line():
    port = free_port()
    c = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}", "max.retries": "1", "retries.wait.ms": "10"})
    with pytest.raises(SchemaRegistryUnreachableError) as exc:
        c.get_subjects()
    message = str(exc.value)
    assert message.startswith(f"no schema registry of http://127.0.0.1:{port} reachable (connection refused); "
                              "waited ")
    assert message.endswith(" ms (max.retries 1)")
    assert (exc.value.http_status, exc.value.error_code, exc.value.cause) == (-1, -1, "connection refused")


def test_unknown_host():
    c = SchemaRegistryClient({"url": "http://no-such-host.invalid:8081", "max.retries": 0})
    with pytest.raises(SchemaRegistryUnreachableError) as exc:
        c.get_subjects()
    assert exc.value.cause == "unknown host" or exc.value.cause.startswith("DNS lookup failed")


def test_a_registry_that_never_answers_times_out():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        c = SchemaRegistryClient({"url": url, "request.timeout.ms": 300, "max.retries": 0})
        started = time.monotonic()
        with pytest.raises(SchemaRegistryUnreachableError) as exc:
            c.get_subjects()
        assert time.monotonic() - started < 5
    assert exc.value.cause == "no answer within 300 ms (request.timeout.ms)"


def test_the_next_url_is_tried(registry, requests):
    dead = f"http://127.0.0.1:{free_port()}"
    c = SchemaRegistryClient({"url": f"{dead}, {registry.schema_registry_url}/", "max.retries": 0})
    assert isinstance(c.get_subjects(), list)
    assert any("failed: connection refused" in line for line in requests())
    both_dead = SchemaRegistryClient({"url": f"{dead},http://127.0.0.1:{free_port()}", "max.retries": 0})
    with pytest.raises(SchemaRegistryUnreachableError) as exc:
        both_dead.get_subjects()
    assert exc.value.urls.count("http://") == 2 and exc.value.cause == "connection refused"


def test_kept_alive_connections_survive_a_registry_restart(broker_factory):
    broker = broker_factory(REGISTRY, name="restart")
    c = SchemaRegistryClient({"url": broker.schema_registry_url, "max.retries": 0})
    c.get_subjects()
    port = int(broker.schema_registry_url.rsplit(":", 1)[1])
    broker.overrides["schema.registry.listeners"] = f"http://127.0.0.1:{port}"
    broker.restart()
    assert c.get_subjects() == []  # the pooled connection was closed: a new one, no retry needed


class Unavailable:
    """A plain HTTP server standing where a load balancer would: it answers 503 (the body
    Confluent's registry uses for errors) to the first ``failures`` requests, then 200
    with an empty subject list, and counts the requests."""

    def __init__(self, failures: int) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self
        self.failures = failures
        self.hits = 0

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's hook
                outer.hits += 1
                failing = outer.hits <= outer.failures
                body = json.dumps({"error_code": 50301, "message": "Service Unavailable"} if failing else []).encode()
                self.send_response(503 if failing else 200)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_5xx_answers_are_retried_then_the_next_url():
    flaky = Unavailable(failures=2)
    try:
        c = SchemaRegistryClient({"url": flaky.url, "max.retries": 2, "retries.wait.ms": 5})
        assert c.get_subjects() == [] and flaky.hits == 3
        flaky.hits = 0
        impatient = SchemaRegistryClient({"url": flaky.url, "max.retries": 1, "retries.wait.ms": 5})
        with pytest.raises(SchemaRegistryError) as exc:
            impatient.get_subjects()
        assert (exc.value.http_status, exc.value.error_code, flaky.hits) == (503, 50301, 2)
        assert not isinstance(exc.value, SchemaRegistryUnreachableError)
    finally:
        flaky.close()
    down = Unavailable(failures=10**6)
    try:
        later = Unavailable(failures=0)
        try:
            c = SchemaRegistryClient({"url": f"{down.url},{later.url}", "max.retries": 1, "retries.wait.ms": 5})
            assert c.get_subjects() == [] and (down.hits, later.hits) == (2, 1)
        finally:
            later.close()
    finally:
        down.close()


@pytest.mark.parametrize("conf,message", [
    ({}, "Missing required configuration url"),
    ({"url": "ftp://x"}, "Invalid value ftp://x for configuration url"),
    ({"url": "http://a:b@h:1", "basic.auth.user.info": "nocolon"}, "USER:PASSWORD"),
    ({"url": "http://h:1", "basic.auth.credentials.source": "SASL_INHERIT"}, "USER_INFO or URL"),
    ({"url": "http://h:1", "basic.auth.credentials.source": "URL"}, "no user info in url"),
    ({"url": "http://h:1", "max.retries": "many"}, "max.retries: not an integer"),
    ({"url": "http://h:1", "request.timeout.ms": 0}, "request.timeout.ms: must be at least 1"),
    ({"url": "http://h:1", "bootstrap.servers": "x"}, "Unrecognized Schema Registry client properties: bootstrap"),
    ({"url": "https://h:1", "ssl.key.location": "/k.pem"}, "ssl.certificate.location is required"),
])
def test_bad_configs(conf, message):
    with pytest.raises(ValueError, match=message):
        SchemaRegistryClient(conf)


def test_user_info_never_shows():
    c = SchemaRegistryClient({"url": f"http://bob:s3cret@127.0.0.1:{free_port()}", "max.retries": 0})
    with pytest.raises(SchemaRegistryUnreachableError) as exc:
        c.get_subjects()
    assert "s3cret" not in str(exc.value) and "bob" not in str(exc.value)
    assert "s3cret" not in repr(c.settings)


# --- security ---

@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("client-registry-sec"), {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        **REGISTRY,
    }, name="client-registry-sec")
    broker.start()
    yield broker
    broker.stop()


def test_basic_auth(secured):
    url = secured.schema_registry_url
    with pytest.raises(SchemaRegistryError) as none:
        SchemaRegistryClient({"url": url}).get_subjects()
    assert none.value.http_status == 401
    with pytest.raises(SchemaRegistryError) as wrong:
        SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:wrong"}).get_subjects()
    assert wrong.value.http_status == 401 and "wrong" not in str(wrong.value)
    good = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:alice-secret",
                                 "basic.auth.credentials.source": "USER_INFO"})
    assert isinstance(good.get_subjects(), list)
    in_url = url.replace("http://", "http://alice:alice-secret@")
    assert isinstance(SchemaRegistryClient({"url": in_url}).get_subjects(), list)
    assert isinstance(SchemaRegistryClient({"url": in_url, "basic.auth.credentials.source": "URL"}).get_subjects(),
                      list)


def test_https_with_a_ca_location(broker_factory, pki):
    broker = broker_factory({
        "schema.registry.listeners": "https://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": pki.path("server.p12"),
        "ssl.keystore.password": STORE_PASSWORD,
        "ssl.key.password": STORE_PASSWORD,
    }, name="https")
    url = broker.schema_registry_url
    assert url.startswith("https://")
    assert SchemaRegistryClient({"url": url, "ssl.ca.location": pki.path("ca.pem")}).get_subjects() == []
    untrusting = SchemaRegistryClient({"url": url, "ssl.ca.location": pki.path("other-ca.pem"), "max.retries": 0})
    with pytest.raises(SchemaRegistryUnreachableError) as exc:
        untrusting.get_subjects()
    assert exc.value.cause.startswith("TLS handshake failed: certificate verify failed")
    with pytest.raises(ValueError, match="ssl.ca.location"):
        SchemaRegistryClient({"url": url, "ssl.ca.location": "/no/such/ca.pem"})
