"""``kafkalog schemas`` (broker/tools/schemas.py, schemas_dump.py): the real console script in a
subprocess against the REAL broker's Schema Registry: each action (--list, --versions,
--describe, --register with references, --check, --config, --mode, --delete) with its
output and exit status, --command-config (URL, HTTP Basic), one-line errors (the
registry's, an unreachable URL), usage errors (in-process through ``main``), import of
each dump format (kafka-console-consumer's print of ``_schemas``, Karapace's v1 and v2
backups) giving the same ids, versions, soft deletes, configs and modes, export -> import
into a fresh broker round trip, and --import --direct into a broker whose registry is off.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.registry import Schema, SchemaRegistryClient, SchemaRegistryError
from broker.schema.base import SchemaReference
from broker.tools.common import CliError
from broker.tools.schemas_dump import DumpRecord, RegistryState, read_dump
from spark_kafkalog.cli.main import main
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.timeout(180)

SCRIPT = Path(sys.executable).parent / "kafkalog"
REGISTRY = {"schema.registry.listeners": "http://127.0.0.1:0"}
AVRO_V1 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
AVRO_V2 = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""}]})
AVRO_BREAKING = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "total", "type": "double"}]})
ADDRESS = json.dumps({"type": "object", "properties": {"street": {"type": "string"}}})
CUSTOMER = json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}}})
PROTO = 'syntax = "proto3";\npackage shop;\n\nmessage Item {\n  string sku = 1;\n}\n'
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Result:
    def __init__(self, proc: subprocess.CompletedProcess) -> None:
        self.code = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    @property
    def error_line(self) -> str:
        lines = self.err.splitlines()
        assert len(lines) == 1, self.err
        return lines[0]


def schemas(url: str | None, *args: str, stdin: str | None = None) -> Result:
    cmd = [str(SCRIPT), "schemas", *args]
    if url is not None:
        cmd += ["--schema-registry-url", url]
    return Result(subprocess.run(cmd, capture_output=True, text=True, timeout=120, input=stdin))


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("tools-schemas"), REGISTRY, name="tools-schemas")
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture
def sr(registry):
    return lambda *args, stdin=None: schemas(registry.schema_registry_url, *args, stdin=stdin)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- the actions ---

def test_register_list_describe_check_delete(sr, tmp_path):
    subject = unique("orders-value")
    v1, v2, bad = (write(tmp_path, n, t) for n, t in (("v1.avsc", AVRO_V1), ("v2.avsc", AVRO_V2),
                                                       ("bad.avsc", AVRO_BREAKING)))
    r = sr("--register", "--subject", subject, "--schema-file", v1)
    assert r.code == 0 and r.err == "" and r.out.strip().isdigit()
    id1 = int(r.out)
    assert sr("--register", "--subject", subject, "--schema-file", v1).out == f"{id1}\n"  # the same schema
    id2 = int(sr("--register", "--subject", subject, "--schema-file", v2).out)

    assert subject in sr("--list").lines
    assert sr("--list", "--subject-prefix", subject).lines == [subject]
    assert sr("--versions", "--subject", subject).lines == ["1", "2"]

    r = sr("--describe", "--subject", subject)
    head, *rest = r.lines
    assert head.startswith(f"Subject: {subject}\tVersion: 2\tId: {id2}\tGuid: ") and head.endswith("\tType: AVRO")
    assert json.loads("\n".join(rest)) == json.loads(AVRO_V2)
    assert sr("--describe", "--subject", subject, "--version", "1").lines[0].startswith(
        f"Subject: {subject}\tVersion: 1\tId: {id1}\t")
    r = sr("--describe", "--id", str(id1))
    assert r.lines[0].startswith(f"Id: {id1}\tGuid: ") and r.lines[0].endswith(f"\tType: AVRO\tSubjects: {subject}:1")

    r = sr("--check", "--subject", subject, "--schema-file", v2)
    assert (r.code, r.out) == (0, "compatible\n")
    r = sr("--check", "--subject", subject, "--schema-file", bad, "--verbose")
    assert r.code == 1 and r.lines[0] == "incompatible" and len(r.lines) > 1 and "total" in r.out
    r = sr("--check", "--subject", subject, "--schema-file", bad, "--version", "1")
    assert (r.code, r.out, r.err) == (1, "incompatible\n", "")

    r = sr("--delete", "--subject", subject, "--version", "1")
    assert (r.code, r.out) == (0, f"Deleted version 1 of subject {subject}.\n")
    assert sr("--versions", "--subject", subject).lines == ["2"]
    assert sr("--versions", "--subject", subject, "--deleted").lines == ["1", "2"]
    assert sr("--describe", "--subject", subject, "--version", "1", "--deleted").code == 0
    assert sr("--delete", "--subject", subject).out == f"Deleted subject {subject} (versions 2).\n"
    assert subject not in sr("--list").lines and subject in sr("--list", "--deleted").lines
    r = sr("--delete", "--subject", subject, "--permanent")
    assert r.out == f"Deleted permanently subject {subject} (versions 1,2).\n"
    assert subject not in sr("--list", "--deleted").lines


def test_references_and_types(sr, tmp_path):
    base, user, item = unique("address"), unique("customer"), unique("item")
    address = write(tmp_path, "address.json", ADDRESS)
    customer = write(tmp_path, "customer.json", CUSTOMER)
    proto = write(tmp_path, "item.proto", PROTO)
    base_id = int(sr("--register", "--subject", base, "--schema-file", address, "--schema-type", "json").out)
    r = sr("--register", "--subject", user, "--schema-file", customer, "--schema-type", "JSON",
           "--reference", f"address.json={base}:1")
    assert r.code == 0, r.err
    head, refs, *text = sr("--describe", "--subject", user).lines
    assert head.endswith("\tType: JSON") and refs == f"References: address.json={base}:1"
    assert json.loads("\n".join(text)) == json.loads(CUSTOMER)
    assert base_id != int(r.out)
    assert sr("--register", "--subject", item, "--schema-file", proto).code == 0  # .proto: PROTOBUF
    assert sr("--describe", "--subject", item).lines[0].endswith("\tType: PROTOBUF")
    r = sr("--register", "--subject", unique("x"), "--schema-file", customer, "--reference", "address.json=nope")
    assert r.code == 1 and r.error_line == ("kafkalog schemas: error: --reference 'address.json=nope' is not of "
                                            "the form NAME=SUBJECT:VERSION")


def test_config_and_mode(sr, tmp_path):
    subject = unique("cfg")
    sr("--register", "--subject", subject, "--schema-file", write(tmp_path, "v1.avsc", AVRO_V1))
    assert sr("--config").out == "BACKWARD\n"
    assert sr("--config", "--subject", subject).out == "BACKWARD\n"
    r = sr("--config", "--subject", subject, "--compatibility", "full")
    assert (r.code, r.out) == (0, f"Compatibility level of subject {subject} set to FULL.\n")
    assert sr("--config", "--subject", subject).out == "FULL\n"
    assert sr("--config", "--subject", subject, "--delete").out == \
        f"Removed the subject {subject} compatibility level.\n"
    assert sr("--config", "--subject", subject).out == "BACKWARD\n"

    assert sr("--mode").out == "READWRITE\n"
    r = sr("--mode", "--subject", subject, "--set", "READONLY")
    assert (r.code, r.out) == (0, f"Mode of subject {subject} set to READONLY.\n")
    assert sr("--mode", "--subject", subject).out == "READONLY\n"
    r = sr("--register", "--subject", subject, "--schema-file", write(tmp_path, "v2.avsc", AVRO_V2))
    assert r.code == 1 and r.error_line.endswith("(HTTP 422, error code 42205)")
    assert sr("--mode", "--subject", subject, "--delete").out == f"Removed the mode of subject {subject}.\n"
    assert sr("--mode", "--subject", subject).out == "READWRITE\n"


def test_errors_are_one_line(sr, registry, tmp_path):
    missing = unique("missing")
    r = sr("--versions", "--subject", missing)
    assert r.code == 1 and r.out == ""
    assert r.error_line.startswith("kafkalog schemas: error: Subject ") and \
        r.error_line.endswith("(HTTP 404, error code 40401)")
    r = sr("--register", "--subject", missing, "--schema-file", write(tmp_path, "bad.avsc", '{"type": "nope"}'))
    assert r.code == 1 and r.error_line.endswith("(HTTP 422, error code 42201)")
    r = sr("--register", "--subject", missing, "--schema-file", str(tmp_path / "none.avsc"))
    assert r.code == 1 and "none.avsc" in r.error_line
    config = write(tmp_path, "fast.properties", "schema.registry.max.retries=0\n")
    r = schemas("http://127.0.0.1:1", "--list", "--command-config", config)
    assert r.code == 1 and r.out == ""
    assert r.error_line.startswith("kafkalog schemas: error: no schema registry of http://127.0.0.1:1 reachable "
                                   "(connection refused); waited ")
    bad = write(tmp_path, "bad.properties", "schema.registry.colour=blue\n")
    r = sr("--list", "--command-config", bad)
    assert r.code == 1 and "schema.registry.colour" in r.error_line


def test_command_config_with_basic_auth(broker_factory, tmp_path):
    broker = broker_factory({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        **REGISTRY}, name="schemas-auth")
    url = broker.schema_registry_url
    r = schemas(url, "--list")
    assert (r.code, r.error_line) == (1, "kafkalog schemas: error: Unauthorized (HTTP 401, error code 401)")
    good = write(tmp_path, "auth.properties", f"schema.registry.url={url}\nbasic.auth.user.info=alice:alice-secret\n")
    r = schemas(None, "--list", "--command-config", good)
    assert (r.code, r.out, r.err) == (0, "", "")
    wrong = write(tmp_path, "wrong.properties", f"schema.registry.url={url}\n"
                                                "schema.registry.basic.auth.user.info=alice:nope\n")
    r = schemas(None, "--mode", "--command-config", wrong)
    assert r.code == 1 and r.error_line.endswith("(HTTP 401, error code 401)") and "nope" not in r.err


@pytest.mark.parametrize("argv,message", [
    (["--lsit"], "unrecognized option '--lsit' (did you mean '--list'?)"),
    ([], "one of --list, --versions, --describe"),
    (["--list", "--versions"], "only one of --list, --versions can be given"),
    (["--versions"], "--subject is required with --versions"),
    (["--register", "--subject", "s"], "--schema-file is required with --register"),
    (["--describe"], "--describe needs --subject (and --version) or --id"),
    (["--list", "--permanent"], "--permanent can only be used with --delete"),
    (["--config", "--compatibility", "FULL", "--delete"], "--delete removes the config setting"),
    (["--mode", "--force"], "--force goes with --mode --set"),
    (["--import", "f", "--direct"], "--direct needs --bootstrap-server"),
    (["--describe", "--subject", "s", "--version", "x"], "--version 'x' is not a version number or latest"),
    (["--mode", "--set", "SLEEPING"], "argument --set: invalid choice"),
])
def test_usage_errors(capsys, argv, message):
    assert main(["schemas", *argv, "--schema-registry-url", "http://127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kafkalog schemas: error: ") and message in err and err.count("\n") == 1


# --- dumps ---

def _record(key: dict, value: dict | None) -> tuple[str, str | None]:
    return (json.dumps(key, separators=(",", ":")), None if value is None else json.dumps(value, separators=(",", ":")))


def schema_record(subject: str, version: int, schema_id: int, text: str, **extra) -> tuple[str, str | None]:
    return _record({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1},
                   {"subject": subject, "version": version, "id": schema_id, "schema": text, "deleted": False,
                    **extra})


# What a registry wrote to _schemas, in order: ids out of order (the referencing schema's id
# is lower than its reference's), a soft delete, a permanent delete (CLEAR_SUBJECT), a
# tombstone, configs and modes, a NOOP and a key type this tool does not replay.
RECORDS: list[tuple[str, str | None]] = [
    _record({"keytype": "NOOP", "magic": 0}, None),
    schema_record("orders-value", 1, 7, AVRO_V1),
    schema_record("address", 1, 30, ADDRESS, schemaType="JSON"),
    schema_record("customer", 1, 12, CUSTOMER, schemaType="JSON",
                  references=[{"name": "address.json", "subject": "address", "version": 1}]),
    schema_record("orders-value", 2, 9, AVRO_V2),
    schema_record("gone", 1, 20, AVRO_V1.replace("Order", "Gone")),
    _record({"keytype": "DELETE_SUBJECT", "subject": "gone", "magic": 0}, {"subject": "gone", "version": 1}),
    schema_record("purged", 1, 21, AVRO_V1.replace("Order", "Purged"), deleted=True),
    _record({"keytype": "CLEAR_SUBJECT", "subject": "purged", "magic": 0}, {"subject": "purged"}),
    schema_record("tomb", 1, 22, AVRO_V1.replace("Order", "Tomb")),
    _record({"keytype": "SCHEMA", "subject": "tomb", "version": 1, "magic": 1}, None),
    _record({"keytype": "CONFIG", "subject": "orders-value", "magic": 0}, {"compatibilityLevel": "FULL"}),
    _record({"keytype": "CONFIG", "subject": None, "magic": 0}, {"compatibilityLevel": "FORWARD"}),
    _record({"keytype": "MODE", "subject": "orders-value", "magic": 0}, {"mode": "READONLY"}),
    _record({"keytype": "KEK", "name": "kek1", "deleted": False, "magic": 0}, {"name": "kek1", "kmsType": "x"}),
]


def console_dump(records) -> str:
    lines = []
    for n, (key, value) in enumerate(records):
        prefix = f"CreateTime:{1700000000000 + n}\tPartition:0\tOffset:{n}\t" if n % 2 else ""
        lines.append(f"{prefix}{key}\t{'null' if value is None else value}")
    return "\n".join(lines) + "\n"


def karapace_v1(records) -> str:
    return json.dumps([[key, "null" if value is None else value] for key, value in records], indent=2)


def karapace_v2(records) -> str:
    def hexed(text: str | None) -> str:
        return "null" if text is None else base64.b16encode(text.encode()).decode()

    return "/V2\n" + "".join(f"{hexed(key)}\t{hexed(value)}\n" for key, value in records)


def check_imported(url: str, *, never_registered: bool = True) -> None:
    c = SchemaRegistryClient({"url": url})
    assert sorted(c.get_subjects()) == ["address", "customer", "orders-value"]
    assert sorted(c.get_subjects(deleted=True)) == ["address", "customer", "gone", "orders-value"]
    assert [(v, c.get_version("orders-value", v).id) for v in c.get_versions("orders-value")] == [(1, 7), (2, 9)]
    assert c.get_version("address", 1).id == 30
    customer = c.get_version("customer", 1)
    assert (customer.id, customer.schema_type, customer.references) == (
        12, "JSON", (SchemaReference("address.json", "address", 1),))
    assert c.get_versions("gone", deleted=True) == [1] and c.get_version("gone", 1, deleted=True).id == 20
    with pytest.raises(SchemaRegistryError):
        c.get_versions("gone")
    for gone in (21, 22):  # removed for good: no subject holds them, even soft-deleted
        if never_registered:
            with pytest.raises(SchemaRegistryError) as exc:
                c.get_schema(gone)
            assert exc.value.error_code == SchemaRegistryError.SCHEMA_NOT_FOUND
        else:
            assert c.get_schema_versions(gone, deleted=True) == []
    assert c.get_compatibility("orders-value", default_to_global=False) == "FULL"
    assert c.get_compatibility() == "FORWARD"
    assert c.get_mode("orders-value") == "READONLY"
    assert c.get_mode() == "READWRITE"  # restored after the import
    assert json.loads(c.get_schema(9).schema) == json.loads(AVRO_V2)


@pytest.mark.parametrize("fmt,render", [("console", console_dump), ("karapace-v1", karapace_v1),
                                        ("karapace-v2", karapace_v2)])
def test_import_each_dump_format_keeps_ids(broker_factory, tmp_path, fmt, render):
    broker = broker_factory(REGISTRY, name=f"import-{fmt}")
    dump = write(tmp_path, "dump.txt", render(RECORDS))
    r = schemas(broker.schema_registry_url, "--import", dump)
    assert r.code == 0, r.err
    assert r.out == (f"Imported 5 schema versions (5 ids, 4 subjects, 1 soft-deleted), 2 configs, 1 modes; "
                     f"skipped 1 KEK records from {dump} ({fmt} format); ids and versions kept.\n")
    check_imported(broker.schema_registry_url)


def test_import_from_stdin_and_bad_dumps(broker_factory, tmp_path):
    broker = broker_factory(REGISTRY, name="import-bad")
    url = broker.schema_registry_url
    r = schemas(url, "--import", "-", stdin=console_dump(RECORDS[:3]))
    assert r.code == 0, r.err
    assert SchemaRegistryClient({"url": url}).get_version("address", 1).id == 30
    for text, message in [
        ("just one field\n", "line 1: not KEY<TAB>VALUE"),
        ('{"keytype":"SCHEMA"\t{}\n', "line 1: the key is not JSON"),
        ('{"subject":"s"}\t{}\n', "line 1: the key has no keytype"),
        ('{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}\t{"schema":"x"}\n',
         "line 1: a SCHEMA value needs an id and a schema"),
        ("/V2\nZZ\tnull\n", "line 2: a field is neither hexadecimal bytes nor null"),
        ('[["{\\"keytype\\":\\"NOOP\\"}"]]', "record 1: not a [key, value] pair"),
        ("/V3\nbinary", "Karapace backup v3"),
    ]:
        r = schemas(url, "--import", write(tmp_path, "bad.txt", text))
        assert r.code == 1 and message in r.error_line, (text, r.err)
    assert SchemaRegistryClient({"url": url}).get_mode() == "READWRITE"


def test_export_import_round_trip(registry, broker_factory, tmp_path):
    source = broker_factory(REGISTRY, name="export-source")
    c = SchemaRegistryClient({"url": source.schema_registry_url})
    c.register_schema("orders-value", AVRO_V1)
    c.register_schema("orders-value", AVRO_V2)
    c.register_schema("address", Schema(ADDRESS, "JSON"))
    c.register_schema("customer", Schema(CUSTOMER, "JSON", (SchemaReference("address.json", "address", 1),)))
    c.register_schema("items", Schema(PROTO, "PROTOBUF"))
    c.register_schema("old", AVRO_V1.replace("Order", "Old"))
    c.delete_subject("old")
    c.delete_version("orders-value", 1)
    c.set_compatibility("items", "NONE")
    c.set_compatibility(None, "FULL")
    c.set_mode("READONLY", "address")

    first = tmp_path / "first.txt"
    r = schemas(source.schema_registry_url, "--export", str(first))
    assert r.code == 0, r.err
    assert r.out == f"Exported 6 schema versions (6 ids, 5 subjects, 2 soft-deleted), 2 configs, 1 modes to {first}.\n"
    lines = first.read_text().splitlines()
    assert all(len(line.split("\t")) == 2 for line in lines)
    keys = [json.loads(line.split("\t")[0]) for line in lines]
    assert [k["keytype"] for k in keys] == ["SCHEMA"] * 6 + ["CONFIG"] * 2 + ["MODE"]
    assert keys[0] == {"keytype": "SCHEMA", "subject": "orders-value", "version": 1, "magic": 1}

    target = broker_factory(REGISTRY, name="export-target")
    r = schemas(target.schema_registry_url, "--import", str(first))
    assert r.code == 0, r.err
    again = schemas(target.schema_registry_url, "--export", "-")
    assert again.code == 0 and again.err.startswith("kafkalog schemas: exported 6 schema versions")

    def without_guids(text: str) -> list[tuple[dict, dict | None]]:
        out = []
        for line in text.splitlines():
            key, value = line.split("\t")
            parsed = None if value == "null" else json.loads(value)
            if parsed is not None:
                parsed.pop("guid", None)
            out.append((json.loads(key), parsed))
        return out

    assert without_guids(again.out) == without_guids(first.read_text())
    t = SchemaRegistryClient({"url": target.schema_registry_url})
    assert t.get_mode("address") == "READONLY" and t.get_mode() == "READWRITE"
    assert t.get_version("customer", 1).id == c.get_version("customer", 1).id


def test_import_direct_into_a_broker_whose_registry_is_off(broker_factory, tmp_path):
    broker = broker_factory(name="direct")
    dump = write(tmp_path, "dump.txt", console_dump(RECORDS))
    r = schemas(None, "--import", dump, "--direct", "--bootstrap-server", broker.bootstrap)
    assert (r.code, r.err) == (0, ""), r.err
    assert r.out == f"Wrote {len(RECORDS)} records (console format) to _schemas.\n"
    broker.overrides.update(REGISTRY)
    broker.restart()
    # the records were loaded as they are, the removed versions' schemas with them
    check_imported(broker.schema_registry_url, never_registered=False)
    # with the registry on, the topic is the registry's alone
    r = schemas(None, "--import", dump, "--direct", "--bootstrap-server", broker.bootstrap)
    assert r.code == 1 and "_schemas" in r.error_line



def _console_lines(pairs) -> bytes:
    return "\n".join(f"{k}\t{'null' if v is None else v}" for k, v in pairs).encode()


def _records_text(records) -> bytes:
    return "\n".join(json.dumps({"keytype": t, "subject": s, "version": v}) + "\t" + json.dumps(value)
                     for t, s, v, value in records).encode()


_fields = st.sampled_from(["id", "schema", "mode", "version", "subject", "schemaType", "references", "deleted",
                           "metadata"])
_json = st.recursive(st.none() | st.booleans() | st.integers(-1, 3) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                         st.sampled_from(["name", "subject", "version"]), inner, max_size=3), max_leaves=6)
_values = st.one_of(st.none(), st.dictionaries(_fields, _json), st.fixed_dictionaries(
    {"id": st.integers(0, 5), "schema": st.text(max_size=5)},
    optional={k: _json for k in ("schemaType", "references", "deleted", "metadata", "ruleSet")}))
_record = st.tuples(st.sampled_from(["SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP", "KEK"]),
                    st.one_of(st.none(), st.text(max_size=5)), st.one_of(st.none(), st.integers(-2, 3)), _values)
_dumps = st.one_of(
    st.binary(max_size=200),
    st.lists(st.tuples(st.text(max_size=30), st.one_of(st.none(), st.text(max_size=30))), max_size=5).map(
        _console_lines),
    st.lists(_record, max_size=6).map(_records_text),
    st.lists(_record, max_size=6).map(lambda r: b"/V2\n" + base64.b16encode(_records_text(r))),
)


@settings(max_examples=300, deadline=None)
@given(_dumps)
def test_any_dump_reads_or_fails_with_one_message(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "dump"
    path.write_bytes(data)
    try:
        _, records = read_dump(str(path))
        RegistryState.fold(records).records()
    except CliError as exc:
        assert str(exc) and "\n" not in str(exc)


_schema_records = st.lists(st.builds(
    lambda subject, version, value: DumpRecord(
        json.dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}).encode(),
        json.dumps(value).encode()),
    st.sampled_from(["a", "b"]), st.integers(1, 3),
    st.fixed_dictionaries({"id": st.integers(0, 5), "schema": st.text(max_size=5)},
                          optional={k: _json for k in ("schemaType", "references", "deleted", "metadata",
                                                       "ruleSet")})), max_size=4)


@settings(max_examples=300, deadline=None)
@given(_schema_records)
def test_any_schema_value_folds_or_fails_with_one_message(records):
    try:
        RegistryState.fold(records).records()
    except CliError as exc:
        assert str(exc) and "\n" not in str(exc)
