"""The typed-read options (``spark_kafkalog.formats.options``, through the source's
``parse_options``): defaults, every value each option takes, the refusals (each naming the
option), unknown names with "did you mean", the ``schema.registry.*`` pass-through checked
against the registry client's keys, and, with hypothesis, that no value of any of these
options raises anything but ``KafkaLogOptionError``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafkalog.formats.options import FORMAT_OPTIONS, FormatOptions
from spark_kafkalog.options import OPTION_NAMES, KafkaLogOptionError, parse_options

NET = {"kafka.bootstrap.servers": "localhost:9092", "subscribe": "t"}
URL = {"schema.registry.url": "http://localhost:8081"}


def _formats(**options) -> FormatOptions:
    return parse_options({**NET, **URL, **options}).formats


def test_defaults_leave_the_read_binary():
    formats = parse_options(NET).formats
    assert formats == FormatOptions() and not formats.typed and formats.extra_columns() == []
    assert all(name.lower() in OPTION_NAMES for name in FORMAT_OPTIONS)


def test_each_option_parses():
    assert _formats(valueFormat="avro", valueSchema=" Version : 3").value.schema.number == 3
    f = _formats(valueFormat="AVRO", keyformat="string", valueSchema="LATEST", mode="dropmalformed",
                 **{"subject.name.strategy": "io.confluent.kafka.serializers.subject.RecordNameStrategy",
                    "valueSubject": "a.B, c.D,a.B", "recursive.fields.max.depth": "3",
                    "schema.registry.basic.auth.user.info": "u:p"})
    assert (f.value.format, f.key.format, f.value.schema.kind) == ("avro", "string", "latest")
    assert f.value.subjects == ("a.B", "c.D") and f.strategy == "RecordNameStrategy" and f.mode == "DROPMALFORMED"
    assert f.recursive_depth == 3 and f.registry == {"url": "http://localhost:8081", "basic.auth.user.info": "u:p"}
    assert "u:p" not in repr(f)  # credentials are never printed
    assert f.extra_columns() == ["valueSchemaId"]  # no corrupt columns outside PERMISSIVE
    f = _formats(valueFormat="protobuf", valueMessageName="p.M", valueSchema="id:0", keyFormat="json",
                 columnNameOfCorruptRecord="bad", **{"subject.name.strategy": "TopicRecordName"})
    assert f.value.message_name == "p.M" and f.value.schema.kind == "id" and f.strategy == "TopicRecordNameStrategy"
    assert f.extra_columns() == ["keySchemaId", "valueSchemaId", "_corrupt_key", "bad"]
    inline = '{"type": "string"}'
    f = parse_options({**NET, "valueFormat": "json", "valueFraming": "none", "valueSchema": inline}).formats
    assert f.value.schema.kind == "inline" and f.value.schema.text == inline and not f.needs_headers
    # direct mode reads _schemas from its log directory: no URL needed
    assert parse_options({"path": "/tmp/logs", "subscribe": "t", "valueFormat": "avro"}).formats.typed


@pytest.mark.parametrize("options, message", [
    ({"valueFormat": "xml"}, "valueFormat: 'xml' is not valid; use binary, string, avro, protobuf, json"),
    ({"valueFormat": "avro", "valueFraming": "magic"}, "valueFraming: 'magic' is not valid"),
    ({"valueFraming": "none"}, "Option 'valueFraming' needs valueFormat avro, protobuf or json"),
    ({"keyFormat": "string", "keySchema": "latest"}, "Option 'keySchema' needs keyFormat avro"),
    ({"valueFormat": "avro", "valueMessageName": "x"}, "'valueMessageName' is for valueFormat protobuf"),
    ({"valueFormat": "avro", "valueSchema": "version:0"}, "use version:N with N >= 1"),
    ({"valueFormat": "avro", "valueSchema": "id:-1"}, "use id:N"),
    ({"valueFormat": "avro", "valueSchema": "  "}, "valueSchema is empty"),
    ({"valueFormat": "avro", "valueSubject": " , "}, "valueSubject is empty"),
    ({"valueFormat": "avro", "mode": "lenient"}, "mode: 'lenient' is not valid; use PERMISSIVE, FAILFAST"),
    ({"valueFormat": "avro", "subject.name.strategy": "Whatever"}, "subject.name.strategy: 'Whatever'"),
    ({"valueFormat": "avro", "subject.name.strategy": "RecordNameStrategy"}, "set valueSubject to the record"),
    ({"valueFormat": "avro", "recursive.fields.max.depth": "11"}, "recursive.fields.max.depth: '11'"),
    ({"valueFormat": "avro", "recursive.fields.max.depth": "x"}, "recursive.fields.max.depth: 'x'"),
    ({"valueFormat": "avro", "columnNameOfCorruptRecord": "offset"}, "'offset' is already a column"),
    ({"valueFormat": "avro", "keyFormat": "string", "columnNameOfCorruptRecord": "_corrupt_key"},
     "'_corrupt_key' is already a column"),
    ({"valueFormat": "avro", "valueFraming": "none", "valueSubject": "a,b"}, "records carry no schema id"),
    ({"valueFormat": "avro", "valueSchema": "id:3", "valueSubject": "a,b"}, "leave valueSchema at latest"),
    ({"mode": "FAILFAST"}, "Option 'mode' is for typed reads"),
    ({"valueFormat": "avro", "schema.registry.urll": "x"}, "Unrecognized Schema Registry client properties: urll"),
    ({"valueFormat": "avro", "schema.registry.url": "ftp://x"}, "a URL is http://HOST"),
])
def test_bad_values_name_the_option(options, message):
    with pytest.raises(KafkaLogOptionError, match=message.replace("(", r"\(").replace(".", r"\.").replace("*", r"\*")
                       .replace("?", r"\?")):
        parse_options({**NET, **({} if any(k.startswith("schema.registry.") for k in options) else URL), **options})


def test_a_registry_format_needs_a_registry_outside_direct_mode():
    with pytest.raises(KafkaLogOptionError, match="valueFormat=avro needs the Schema Registry: set schema.registry"):
        parse_options({**NET, "valueFormat": "avro"})
    with pytest.raises(KafkaLogOptionError, match="Options 'schema.registry.\\*' are for typed reads"):
        parse_options({**NET, **URL})
    # stitched mode (a path and brokers) asks the registry too
    with pytest.raises(KafkaLogOptionError, match="needs the Schema Registry"):
        parse_options({**NET, "path": "/tmp/x", "valueFormat": "json"})


def test_unknown_names_get_a_suggestion():
    with pytest.raises(KafkaLogOptionError, match="'valueformt' for the kafkalog source; did you mean 'valueFormat'"):
        parse_options({**NET, "valueformt": "avro"})
    with pytest.raises(KafkaLogOptionError, match="did you mean 'schema.registry.url'"):
        parse_options({**NET, "schema.registri.url": "http://x"})
    with pytest.raises(KafkaLogOptionError, match="schema.registry.<registry client config>"):
        parse_options({**NET, "zzzzzzzzz": "1"})


_KEYS = st.sampled_from([k.lower() for k in FORMAT_OPTIONS] + ["schema.registry.url", "schema.registry.x"])


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_KEYS, st.text(max_size=30) | st.sampled_from(
    ["avro", "protobuf", "json", "string", "binary", "none", "confluent", "latest", "id:1", "version:2",
     "PERMISSIVE", "FAILFAST", "RecordNameStrategy", "http://h:1", "-1", "10"]), max_size=8))
def test_any_value_is_parsed_or_refused_with_the_option_error(options):
    try:
        parse_options({**NET, **options})
    except KafkaLogOptionError as exc:
        assert str(exc)
