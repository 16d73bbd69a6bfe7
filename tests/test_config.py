"""Tests of broker/config.py and broker/log/config.py: properties files, typed parsing,
errors that name the key, and the log.* -> topic-level default mapping."""

import pytest

from broker.config import ConfigError, load_properties, parse_duration_ms
from broker.log.config import MIN_SEGMENT_BYTES, LogConfig, topic_defaults_from_server, validate_topic_config
from broker.server.config import server_config


def test_properties_file_syntax(tmp_path):
    p = tmp_path / "server.properties"
    p.write_text("# comment\n! also a comment\n\nlog.dirs=/a,/b\nlisteners : PLAINTEXT://:9092\n"
                 "num.partitions 3\nlong.value=a,\\\n    b\nescaped\\=key=v\n")
    assert load_properties(p) == {"log.dirs": "/a,/b", "listeners": "PLAINTEXT://:9092",
                                  "num.partitions": "3", "long.value": "a,b", "escaped=key": "v"}


def test_server_config_types_aliases_and_defaults():
    cfg = server_config({"broker.id": "3", "listeners": "PLAINTEXT://127.0.0.1:0",
                         "log.segment.bytes": "1048576"})
    assert cfg["node.id"] == 3
    assert cfg["listeners"] == ["PLAINTEXT://127.0.0.1:0"]
    assert cfg["log.dirs"] == ["/tmp/kafka-logs"]
    assert cfg["auto.create.topics.enable"] is True
    assert cfg["log.segment.bytes"] == "1048576"  # kept for the topic defaults


@pytest.mark.parametrize("key,value", [("num.partitions", "zero"), ("num.partitions", "0"),
                                       ("listeners", "localhost:9092"),
                                       ("auto.create.topics.enable", "yes")])
def test_bad_server_values_name_the_key(key, value):
    with pytest.raises(ConfigError) as info:
        server_config({key: value})
    assert key in str(info.value)


def test_log_config_precedence():
    defaults = topic_defaults_from_server({"log.segment.bytes": "2048", "log.retention.hours": "2",
                                           "message.max.bytes": "5000"})
    cfg = LogConfig.from_props({"segment.bytes": "4096"}, defaults)
    assert cfg.segment_bytes == 4096  # the topic override wins
    assert cfg.retention_ms == 2 * 3600000  # hours converted
    assert cfg.max_message_size == 5000
    assert cfg.overrides == {"segment.bytes": 4096}
    assert not cfg.compact and cfg.delete


@pytest.mark.parametrize("key,value", [("segment.bytes", "x"), ("cleanup.policy", "shred"),
                                       ("message.timestamp.type", "Now"), ("nope", "1")])
def test_bad_topic_config_names_the_key(key, value):
    with pytest.raises(ConfigError) as info:
        LogConfig.from_props({key: value})
    assert key in str(info.value)


def test_kafka_constraints_apply_at_the_boundary_only():
    # LogConfig itself keeps the storage engine's minimum (tests build small-segment logs) ...
    small = LogConfig.from_props({"segment.bytes": 4096})
    assert small.segment_bytes == 4096
    # ... validate_topic_config adds Kafka 4's, for the keys the caller set
    with pytest.raises(ConfigError, match="segment.bytes.*at least 1048576"):
        validate_topic_config(small, {"segment.bytes"})
    validate_topic_config(small, {"retention.ms"})  # not set by this caller: not checked
    validate_topic_config(LogConfig.from_props({"segment.bytes": MIN_SEGMENT_BYTES}))
    lags = LogConfig.from_props({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5})
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"):
        validate_topic_config(lags, {"max.compaction.lag.ms"})


def test_internal_segment_bytes_replaces_segment_bytes():
    cfg = LogConfig.from_props({"internal.segment.bytes": "600", "segment.bytes": "2097152"})
    assert cfg.segment_bytes == 600
    validate_topic_config(cfg, cfg.overrides)  # no 1 MiB minimum on the internal key
    assert LogConfig.from_props({}).segment_bytes == 1073741824
    with pytest.raises(ConfigError, match="internal.segment.bytes"):
        LogConfig.from_props({"internal.segment.bytes": "10"})


@pytest.mark.parametrize("key,good,bad", [("compression.gzip.level", ["-1", "1", "9"], ["0", "10", "-2"]),
                                          ("compression.lz4.level", ["1", "17"], ["0", "18"]),
                                          ("compression.zstd.level", ["-131072", "22"], ["-131073", "23"])])
def test_compression_levels_are_kafkas(key, good, bad):
    for value in good:
        assert LogConfig.from_props({key: value})[key] == int(value)
    for value in bad:
        with pytest.raises(ConfigError, match=key):
            LogConfig.from_props({key: value})


@pytest.mark.parametrize("text, ms", [
    ("PT1H", 3_600_000), ("P1DT2H30M", 95_400_000), ("PT0.5S", 500), ("PT0,25S", 250), ("pt90s", 90_000),
    ("P2D", 172_800_000), ("-PT10M", -600_000), ("PT-0.5S", -500), ("P-1DT25H", 3_600_000), (" PT1M ", 60_000),
])
def test_parse_duration_ms_reads_as_java_duration_parse(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "P1DT", "1H", "PT1X", "PTXS", "P1H", "PT1.S5"])
def test_parse_duration_ms_refuses_what_java_refuses(text):
    with pytest.raises(ValueError, match="PnDTnHnMnS"):
        parse_duration_ms(text)
