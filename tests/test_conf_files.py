"""The files in conf/: complete, with Kafka's names and the real defaults.

* conf/server.properties lists every key the broker reads (SERVER_CONFIG_DEF and the
  log.* server forms of the topic-level keys), each commented default equal to the
  broker's default, and nothing the broker does not know.
* conf/spark-defaults.conf parses with the main job's reader (spark-submit reads the file
  in tests/test_pipeline.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from broker.config import load_properties
from broker.log.config import LOG_CONFIG_DEF, SERVER_DEFAULT_KEYS
from broker.server.config import SERVER_CONFIG_DEF
from spark_kafkalog.jobs.pipeline import read_spark_conf

ROOT = Path(__file__).resolve().parents[1]
SERVER_PROPERTIES = ROOT / "conf" / "server.properties"
# Server keys with no topic-level twin of the same unit (the broker converts them).
_CONVERTED = {"log.retention.minutes": "retention.ms", "log.retention.hours": "retention.ms",
              "log.roll.hours": "segment.ms"}
# Commented lines that show an example, not the default (the default is "same as listeners").
_EXAMPLES = {"advertised.listeners"}
# Left empty on purpose: unset, so the hours form below them decides (as in Kafka's file).
_UNSET_FORMS = {"log.retention.ms", "log.roll.ms", "log.retention.minutes"}
_LINE = re.compile(r"^(#?)\s*([a-z][a-z0-9._-]*)\s*=(.*)$", re.M)


def _entries() -> dict[str, tuple[bool, str]]:
    """key -> (commented, value) for every ``key=value`` / ``#key=value`` line."""
    return {m.group(2): (m.group(1) == "#", m.group(3).strip())
            for m in _LINE.finditer(SERVER_PROPERTIES.read_text())}


def _text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


def test_server_properties_lists_every_key_the_broker_reads() -> None:
    entries = _entries()
    known = set(SERVER_CONFIG_DEF.keys) | set(SERVER_DEFAULT_KEYS) | set(_CONVERTED)
    assert sorted(known - set(entries)) == []
    assert sorted(set(entries) - known) == []


def test_commented_defaults_are_the_real_defaults() -> None:
    wrong = {}
    for key, (commented, value) in _entries().items():
        if not commented or key in _EXAMPLES or (key in _UNSET_FORMS and value == ""):
            continue
        if key in SERVER_CONFIG_DEF.keys:
            default = SERVER_CONFIG_DEF.keys[key].default
        elif key in SERVER_DEFAULT_KEYS:
            default = LOG_CONFIG_DEF.keys[SERVER_DEFAULT_KEYS[key]].default
        else:
            continue  # hours / minutes forms: Kafka's defaults are written in their units
        if value != _text(default) and not (value == "" and default in (None, "", [])):
            wrong[key] = (value, _text(default))
    assert wrong == {}


def test_server_properties_parses_with_every_value_valid() -> None:
    props = load_properties(SERVER_PROPERTIES)
    SERVER_CONFIG_DEF.parse({k: v for k, v in props.items() if k in SERVER_CONFIG_DEF.keys})


def test_spark_defaults_conf(tmp_path, monkeypatch) -> None:
    conf = read_spark_conf(ROOT / "conf" / "spark-defaults.conf")
    assert conf["spark.sql.execution.arrow.pyspark.enabled"] == "true"
    assert conf["spark.sql.python.filterPushdown.enabled"] == "true"
    assert all(k.startswith("spark.") for k in conf)
    # the main job's reader: "key value" or "key=value", ${VAR} from the environment,
    # a line with an unset variable left to Spark's default
    own = tmp_path / "spark-defaults.conf"
    own.write_text("# comment\nspark.a  1\nspark.b=two words\nspark.c ${KL_SET}\nspark.d ${KL_UNSET}\n")
    monkeypatch.setenv("KL_SET", "/opt/py")
    monkeypatch.delenv("KL_UNSET", raising=False)
    assert read_spark_conf(own) == {"spark.a": "1", "spark.b": "two words", "spark.c": "/opt/py"}
