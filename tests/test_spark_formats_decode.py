"""The executor side of typed reads (``spark_kafkalog.formats.decode``) and the schema source
of direct mode (``formats.registry.LogSchemaSource``), without a Spark job.

A Kafka log directory is written with the broker's own ``UnifiedLog``: a ``_schemas``
partition in the registry's record format (Avro v1 and v2 of ``t-value``, a Protobuf schema
with two messages, a soft-deleted subject, a permanently deleted version, a cleared
subject) and the resolution a direct-mode read makes from it (``resolve_typed_read``) is
checked; then batches shaped as the readers hand them over go through
``TypedBatchBuilder``: every framing (magic 0 in the column-wise fast path, magic 1 GUIDs,
ids in headers, Protobuf message indexes), unknown ids and GUIDs, bad frames and payloads,
the three modes, several record types in one column; and, with hypothesis, random mixes
of frames decode row by row as each record alone would.
"""

from __future__ import annotations

import io
import json
import uuid

import pyarrow as pa
import pytest
from fastavro import parse_schema, schemaless_writer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.record.columnar.decode import arrow_schema
from broker.schema import framing
from broker.schema import registry_records as rec
from spark_kafkalog.formats.decode import MalformedRecordError, TypedBatchBuilder
from spark_kafkalog.formats.registry import fetch_entry, resolve_typed_read
from spark_kafkalog.formats.sources import LogSchemaSource, SchemaNotFoundError, SourceConfig
from spark_kafkalog.options import KafkaLogOptionError, parse_options
from tests.support.spark import LogWriter

V1 = {"type": "record", "name": "User", "namespace": "ns", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
V2 = {"type": "record", "name": "User", "namespace": "ns", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "email", "type": ["null", "string"], "default": None}]}
CLICK = {"type": "record", "name": "Click", "namespace": "web", "fields": [{"name": "url", "type": "string"}]}
PROTO = 'syntax = "proto3"; package p; message A { string s = 1; } message B { int64 n = 1; repeated string t = 2; }'
GUIDS = {i: str(uuid.UUID(int=1000 + i)) for i in range(1, 10)}


def _schema_record(subject: str, version: int, schema_id: int, text: str, schema_type: str = "AVRO",
                   deleted: bool = False) -> tuple[bytes, bytes]:
    value = rec.SchemaValue(subject=subject, version=version, id=schema_id, schema=text, schema_type=schema_type,
                            deleted=deleted, guid=GUIDS[schema_id])
    return rec.schema_key(subject, version).encode(), value.encode()


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("typed-logdir")
    writer = LogWriter(root)
    records = [
        _schema_record("t-value", 1, 1, json.dumps(V1)),
        _schema_record("t-value", 2, 2, json.dumps(V2)),
        _schema_record("web.Click", 1, 3, json.dumps(CLICK)),
        _schema_record("p-value", 1, 4, PROTO, "PROTOBUF"),
        _schema_record("gone", 1, 5, json.dumps({"type": "record", "name": "G", "fields": []})),
        (rec.RegistryKey(rec.DELETE_SUBJECT, "gone").encode(), rec.encode_object({"subject": "gone", "version": 1})),
        _schema_record("hard", 1, 6, json.dumps({"type": "record", "name": "H", "fields": []})),
        (rec.schema_key("hard", 1).encode(), None),                        # a permanent delete
        _schema_record("cleared", 1, 7, json.dumps({"type": "record", "name": "C", "fields": []})),
        (rec.RegistryKey(rec.DELETE_SUBJECT, "cleared").encode(), rec.encode_object({"subject": "cleared"})),
        (rec.RegistryKey(rec.CLEAR_SUBJECT, "cleared").encode(), rec.encode_object({"subject": "cleared"})),
        (b"not a registry key", b"{}"),                                   # skipped, as the registry skips it
    ]
    writer.append("_schemas", 0, [(k, v, 0) for k, v in records])
    writer.append("t", 0, [(None, b"x", 0)])
    writer.append("p", 0, [(None, b"x", 0)])
    writer.close()
    return root


def _avro(schema: dict, datum: dict) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), datum)
    return out.getvalue()


def _batch(values: list, headers: list | None = None, keys: list | None = None) -> pa.RecordBatch:
    """A batch as the range readers hand it over (offsets from 0)."""
    n = len(values)
    columns = [pa.array(range(n), pa.int64()), pa.array([0] * n, pa.int64()), pa.array([0] * n, pa.int32()),
               pa.array(keys or [None] * n, pa.binary()), pa.array(values, pa.binary()),
               pa.array(headers or [None] * n, arrow_schema(True).field("headers").type)]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(True))


def _builder(log_dir, topic: str = "t", **options):
    opts = parse_options({"path": str(log_dir), "subscribe": topic, "valueFormat": "avro", **options})
    typed = resolve_typed_read(opts)
    schemas = typed.partition_schemas([topic])[topic]
    return TypedBatchBuilder(opts, typed, schemas, topic, 0)


def test_the_schemas_topic_is_replayed_as_the_registry_replays_it(log_dir):
    source = LogSchemaSource([str(log_dir)])
    assert source.subjects() == ["p-value", "t-value", "web.Click"]
    assert source.versions("t-value") == [1, 2]
    assert json.loads(source.version("t-value", None).schema) == V2
    assert source.by_guid(GUIDS[2]).id == 2
    assert source.by_id(5).id == 5                      # soft-deleted: still served by id
    for missing in (lambda: source.versions("gone"), lambda: source.by_id(6), lambda: source.by_id(7),
                    lambda: source.version("t-value", 9), lambda: source.by_guid(str(uuid.uuid4()))):
        with pytest.raises(SchemaNotFoundError):
            missing()
    with pytest.raises(SchemaNotFoundError, match="no _schemas topic"):
        LogSchemaSource([str(log_dir / "t-0")]).subjects()
    # what an executor does with an id its partition's catalog lacks: fetched once, kept
    config = SourceConfig(paths=(str(log_dir),))
    fetched = fetch_entry(config, schema_id=3)
    assert fetched is not None and json.loads(fetched.schema) == CLICK and fetch_entry(config, schema_id=3) is fetched
    assert fetch_entry(config, guid=GUIDS[4]).schema_type == "PROTOBUF"  # type: ignore[union-attr]
    assert fetch_entry(config, schema_id=99) is None and fetch_entry(None, schema_id=3) is None


def test_reader_schemas_resolve_from_the_log_directory(log_dir):
    typed = resolve_typed_read(parse_options({"path": str(log_dir), "subscribe": "t", "valueFormat": "avro"}))
    assert typed.spark_schema(False).simpleString().startswith(
        "struct<key:binary,value:struct<name:string,age:int,email:string>,")
    pinned = resolve_typed_read(parse_options({"path": str(log_dir), "subscribe": "t", "valueFormat": "avro",
                                               "valueSchema": "version:1"}))
    assert pinned.spark_types["value"].simpleString() == "struct<name:string,age:int>"
    by_id = resolve_typed_read(parse_options({"path": str(log_dir), "subscribe": "x", "valueFormat": "avro",
                                              "valueSchema": "id:3"}))
    assert by_id.spark_types["value"].simpleString() == "struct<url:string>"
    # the catalog an input partition carries: every version of the subject
    catalog = typed.partition_schemas(["t"])["t"].catalog
    assert sorted(catalog.entries) == [1, 2] and catalog.guids[GUIDS[1]] == 1
    for options, message in (
            ({"subscribe": "nosuch"}, r"subject 'nosuch-value' not found"),
            ({"subscribe": "t", "valueSchema": "version:7"}, "version 7"),
            ({"subscribe": "t", "valueFormat": "protobuf"}, "the reader schema of subject 't-value' is AVRO"),
            ({"subscribe": "t", "valueSchema": "{not json"}, "not a valid AVRO schema"),
            ({"subscribe": "t", "subject.name.strategy": "TopicRecordNameStrategy"}, "no subject t-<record name>")):
        with pytest.raises(KafkaLogOptionError, match=message):
            resolve_typed_read(parse_options({"path": str(log_dir), "valueFormat": "avro", **options}))


def test_every_framing_decodes_and_bad_records_follow_the_mode(log_dir):
    v1 = _avro(V1, {"name": "a", "age": 1})
    v2 = _avro(V2, {"name": "b", "age": 2, "email": "e"})
    header = framing.schema_id_header(framing.SchemaId(guid=uuid.UUID(GUIDS[2])), is_key=False, with_indexes=False)
    values = [
        framing.encode(framing.SchemaId(id=1), v1, with_indexes=False),           # 0 magic 0 (fast path)
        framing.encode(framing.SchemaId(guid=uuid.UUID(GUIDS[2])), v2, with_indexes=False),  # 1 magic 1
        v2,                                                                         # 2 the id in a header
        None,                                                                       # 3 a tombstone
        b"\x00\x00\x00\x00\x63" + v1,                                              # 4 unknown id 99
        b"\x01" + uuid.UUID(int=5).bytes + v1,                                     # 5 unknown guid
        b"\x02zz",                                                                  # 6 unknown magic byte
        framing.encode(framing.SchemaId(id=1), v1[:-1], with_indexes=False),      # 7 truncated payload
        framing.encode(framing.SchemaId(id=3), _avro(CLICK, {"url": "/"}), with_indexes=False),  # 8 another record
    ]
    headers = [None, None, [{"key": header[0], "value": header[1]}]] + [None] * 6
    builder = _builder(log_dir)
    out = builder.build(_batch(values, headers))
    assert out.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                                "valueSchemaId", "_corrupt_value"]
    assert out.column("value").to_pylist()[:4] == [{"name": "a", "age": 1, "email": None},
                                                   {"name": "b", "age": 2, "email": "e"},
                                                   {"name": "b", "age": 2, "email": "e"}, None]
    assert out.column("valueSchemaId").to_pylist() == [1, 2, 2, None, 99, None, None, 1, 3]
    corrupt = out.column("_corrupt_value").to_pylist()
    assert [i for i, c in enumerate(corrupt) if c is not None] == [4, 5, 6, 7, 8]
    assert corrupt[6] == b"\x02zz"

    dropped = _builder(log_dir, mode="DROPMALFORMED").build(_batch(values, headers))
    assert dropped.column("offset").to_pylist() == [0, 1, 2, 3]
    with pytest.raises(MalformedRecordError, match=r"offset 4 of topic t partition 0.*unknown schema id 99"):
        _builder(log_dir, mode="FAILFAST").build(_batch(values, headers))


def test_keys_are_decoded_with_their_own_header_and_columns(log_dir):
    v1 = _avro(V1, {"name": "k", "age": 1})
    v2 = _avro(V2, {"name": "h", "age": 2, "email": None})
    key_header = framing.schema_id_header(framing.SchemaId(guid=uuid.UUID(GUIDS[2])), is_key=True, with_indexes=False)
    value_header = framing.schema_id_header(framing.SchemaId(guid=uuid.UUID(GUIDS[1])), is_key=False,
                                            with_indexes=False)
    keys = [framing.encode(framing.SchemaId(id=1), v1, with_indexes=False), v2, b"\x00\x00"]
    values = ["caf\u00e9".encode(), b"ok", b"\xff\xfe"]
    headers = [[{"key": value_header[0], "value": value_header[1]}],  # the value's header: not the key's
               [{"key": key_header[0], "value": key_header[1]}], None]
    builder = _builder(log_dir, keyFormat="avro", keySubject="t-value", valueFormat="string", includeHeaders="true")
    out = builder.build(_batch(values, headers, keys))
    assert out.schema.names[7:] == ["headers", "keySchemaId", "_corrupt_key", "_corrupt_value"]
    assert out.column("key").to_pylist() == [{"name": "k", "age": 1, "email": None},
                                             {"name": "h", "age": 2, "email": None}, None]
    assert out.column("keySchemaId").to_pylist() == [1, 2, None]
    assert out.column("value").to_pylist() == ["caf\u00e9", "ok", None]
    assert out.column("_corrupt_key").to_pylist() == [None, None, b"\x00\x00"]
    assert out.column("_corrupt_value").to_pylist() == [None, None, b"\xff\xfe"]
    assert out.column("headers").to_pylist()[1] == [{"key": key_header[0], "value": key_header[1]}]


def test_several_record_types_and_protobuf_message_indexes(log_dir):
    union = _builder(log_dir, valueSubject="t-value,web.Click")
    values = [framing.encode(framing.SchemaId(id=3), _avro(CLICK, {"url": "/x"}), with_indexes=False),
              framing.encode(framing.SchemaId(id=1), _avro(V1, {"name": "a", "age": 1}), with_indexes=False)]
    out = union.build(_batch(values))
    assert out.column("value").to_pylist() == [
        {"ns.User": None, "web.Click": {"url": "/x"}},
        {"ns.User": {"name": "a", "age": 1, "email": None}, "web.Click": None}]

    from google.protobuf import message_factory

    from spark_kafkalog.formats.registry import CatalogEntry

    pool = CatalogEntry(4, None, "PROTOBUF", PROTO).parsed().pool()  # type: ignore[attr-defined]
    message_a = message_factory.GetMessageClass(pool.FindMessageTypeByName("p.A"))
    message_b = message_factory.GetMessageClass(pool.FindMessageTypeByName("p.B"))
    b_bytes = message_b(n=7, t=["x"]).SerializeToString()
    for name, written in (("p.B", [framing.encode(framing.SchemaId(id=4, message_indexes=(1,)), b_bytes,
                                                   with_indexes=True)]),
                          ("p.A", [framing.encode(framing.SchemaId(id=4), message_a(s="hi").SerializeToString(),
                                                  with_indexes=True)])):
        builder = _builder(log_dir, "p", valueFormat="protobuf", valueMessageName=name)
        got = builder.build(_batch(written)).column("value").to_pylist()
        assert got == ([{"n": 7, "t": ["x"]}] if name == "p.B" else [{"s": "hi"}])
    # a p.A record read as p.B: its fields matched by name, none in common
    builder = _builder(log_dir, "p", valueFormat="protobuf", valueMessageName="p.B")
    got = builder.build(_batch([framing.encode(framing.SchemaId(id=4), message_a(s="hi").SerializeToString(),
                                               with_indexes=True)]))
    assert got.column("value").to_pylist() == [{"n": None, "t": None}]


_FRAMES = st.sampled_from(["v1", "v2", "guid", "header", "null", "bad_magic", "short", "unknown"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(_FRAMES, max_size=30), names=st.lists(st.text(max_size=8), min_size=30, max_size=30))
def test_mixed_frames_decode_as_each_record_alone(log_dir, kinds, names):
    builder = _builder(log_dir)
    values, headers, want = [], [], []
    for kind, name in zip(kinds, names, strict=False):
        v1 = _avro(V1, {"name": name, "age": len(name)})
        v2 = _avro(V2, {"name": name, "age": 1, "email": name})
        header = None
        if kind == "v1":
            value, expect = framing.encode(framing.SchemaId(id=1), v1, with_indexes=False), (name, len(name), None)
        elif kind == "v2":
            value, expect = framing.encode(framing.SchemaId(id=2), v2, with_indexes=False), (name, 1, name)
        elif kind == "guid":
            value = framing.encode(framing.SchemaId(guid=uuid.UUID(GUIDS[1])), v1, with_indexes=False)
            expect = (name, len(name), None)
        elif kind == "header":
            key, raw = framing.schema_id_header(framing.SchemaId(guid=uuid.UUID(GUIDS[2])), is_key=False,
                                                with_indexes=False)
            value, header, expect = v2, [{"key": key, "value": raw}], (name, 1, name)
        elif kind == "null":
            value, expect = None, None
        else:
            value = {"bad_magic": b"\x05" + v1, "short": b"\x00\x00", "unknown": b"\x00\x00\x00\x01\x00" + v1}[kind]
            expect = "bad"
        values.append(value)
        headers.append(header)
        want.append(expect)
    out = builder.build(_batch(values, headers))
    got = []
    for value, corrupt in zip(out.column("value").to_pylist(), out.column("_corrupt_value").to_pylist(),
                              strict=True):
        if corrupt is not None:
            got.append("bad")
        else:
            got.append(None if value is None else (value["name"], value["age"], value["email"]))
    assert got == want
