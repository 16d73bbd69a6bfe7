"""Tests of broker/config.py and broker/log/config.py: properties files, typed parsing,
errors that name the key, and the log.* -> topic-level default mapping."""

import pytest

from broker.config import ConfigError, load_properties, server_config
from broker.log.config import LogConfig, topic_defaults_from_server


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
