"""Tests of spark_kafkalog/options.py: Spark's Kafka source option names, defaults,
precedence and error messages, unknown options. Pure Python, plus a few queries through
Spark to check where the errors surface (load() for options, the first action for
offsets). What the options mean against a log (planning) is tests/test_spark_planning.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_kafkalog.options import (  # noqa: E402
    DEFAULT_MAX_BYTES_PER_BATCH,
    KafkaLogOptionError,
    parse_options,
)
from tests.support.spark import LogWriter

BASE = {"subscribe": "t", "path": "/logs"}


def parse(**kw):
    opts = dict(BASE)
    opts.update({k: v for k, v in kw.items() if v is not None})
    for k in [k for k, v in kw.items() if v is None]:
        opts.pop(k, None)
    return parse_options(opts)


def error(match: str, **kw):
    with pytest.raises(KafkaLogOptionError, match=match):
        parse(**kw)


# --- options ---

def test_defaults():
    o = parse()
    assert (o.strategy.kind, o.strategy.topics) == ("subscribe", ("t",))
    assert o.starting.kind == "earliest" and o.ending.kind == "latest"
    assert o.fail_on_data_loss is True and o.include_headers is False
    assert o.min_partitions is None and o.max_records_per_partition is None
    assert o.mode == "direct" and o.paths == ("/logs",)
    assert o.max_bytes_per_batch == DEFAULT_MAX_BYTES_PER_BATCH


def test_keys_are_case_insensitive_and_values_parsed():
    o = parse_options({"SUBSCRIBE": " a, b ,,a", "Path": "/x", "STARTINGOFFSETS": "EARLIEST",
                       "failondataloss": "FALSE", "includeHeaders": "True", "minPartitions": "7",
                       "maxRecordsPerPartition": "1000", "maxBytesPerBatch": "1048576"})
    assert o.strategy.topics == ("a", "b")
    assert (o.fail_on_data_loss, o.include_headers, o.min_partitions) == (False, True, 7)
    assert (o.max_records_per_partition, o.max_bytes_per_batch) == (1000, 1 << 20)


def test_unknown_option_is_named_with_the_closest_name_or_the_valid_ones_listed():
    with pytest.raises(KafkaLogOptionError) as exc:
        parse(startingOffset="earliest")
    assert str(exc.value) == ("Unknown option 'startingOffset' for the kafkalog source; did you mean "
                              "'startingOffsets'?")
    error("Unknown option 'kafka_bootstrap_servers' for the kafkalog source; did you mean "
          "'kafka.bootstrap.servers'", kafka_bootstrap_servers="h:9092")
    with pytest.raises(KafkaLogOptionError) as exc:
        parse(colour="blue")
    message = str(exc.value)
    assert message.startswith("Unknown option 'colour' for the kafkalog source. Valid options: ")
    for name in ("startingOffsets", "endingOffsets", "subscribePattern", "failOnDataLoss",
                 "includeHeaders", "minPartitions", "maxRecordsPerPartition", "path", "kafka."):
        assert name in message


def test_strategy_rules():
    error("One of the following options must be specified", subscribe=None)
    error("Only one of the following options can be specified", assign='{"t":[0]}')
    error("No topics to subscribe to", subscribe=" , ")
    error("Pattern to subscribe is empty", subscribe=None, subscribePattern="  ")
    error("No topicpartitions to assign", subscribe=None, assign="t-0")
    error(r'assign: \'\{"t": 0\}\' is not valid; use a JSON object of partitions per topic such as '
          r'\{"topicA":\[0,1\]', subscribe=None, assign='{"t": 0}')
    error("subscribePattern", subscribe=None, subscribePattern="(")
    o = parse(subscribe=None, assign='{"b":[1,0],"a":[2]}')
    assert o.strategy.partitions == (("a", 2), ("b", 0), ("b", 1))


def test_batch_bound_rules_as_spark():
    error("starting offset can't be latest for batch queries", startingOffsets="latest")
    error("ending offset can't be earliest for batch queries", endingOffsets="earliest")
    error("startingOffsets for t-1 can't be latest", startingOffsets='{"t":{"0":-2,"1":-1}}')
    error("ending offset for t-0 can't be earliest", endingOffsets='{"t":{"0":-2}}')
    error(r'startingOffsets: \'\{"t":\[0\]\}\' is not valid; use earliest, latest, or a JSON object of '
          r'offsets per partition such as \{"topicA":\{"0":23', startingOffsets='{"t":[0]}')
    error(r'startingOffsets: .* is not valid; use earliest, latest, or a JSON', startingOffsets='{"t":{"x":1}}')
    error(r"startingOffsets: 'begin' is not valid; use earliest, latest, or a JSON object", startingOffsets="begin")
    error(r"endingOffsets: 'end' is not valid; use latest or a JSON object", endingOffsets="end")
    error("Invalid offset -3 for t-0", startingOffsets='{"t":{"0":-3}}')
    error("startingTimestamp: 'soon' is not valid; use a timestamp in milliseconds", startingTimestamp="soon")
    error("should have the same topic-partitions",
          startingOffsets='{"t":{"0":1}}', endingOffsets='{"t":{"0":5,"1":5}}')
    error("The specified start offset 9 is greater than the end offset 5 for topic t partition 0",
          startingOffsets='{"t":{"0":9}}', endingOffsets='{"t":{"0":5}}')
    error("The specified start timestamp 9 is greater than the end timestamp 5",
          startingOffsetsByTimestamp='{"t":{"0":9}}', endingOffsetsByTimestamp='{"t":{"0":5}}')
    error("startingOffsetsByTimestampStrategy", startingOffsetsByTimestampStrategy="sometimes")
    # -1 in endingOffsets and -2 in startingOffsets are fine, as is start > end with -1
    o = parse(startingOffsets='{"t":{"0":-2,"1":5}}', endingOffsets='{"t":{"0":3,"1":-1}}')
    assert o.starting.offsets == {("t", 0): -2, ("t", 1): 5}


def test_bound_precedence_timestamp_then_by_timestamp_then_offsets():
    o = parse(startingTimestamp="1000", startingOffsetsByTimestamp='{"t":{"0":5}}',
              startingOffsets="latest", endingOffsetsByTimestamp='{"t":{"0":7}}',
              endingOffsets="earliest")
    assert (o.starting.kind, o.starting.timestamp) == ("timestamp", 1000)
    assert (o.ending.kind, o.ending.timestamps) == ("timestamps", {("t", 0): 7})
    o = parse(startingOffsetsByTimestamp='{"t":{"0":5}}', startingOffsets="latest",
              startingOffsetsByTimestampStrategy="LATEST")
    assert (o.starting.kind, o.starting.strategy) == ("timestamps", "latest")


def test_invalid_values():
    error("minPartitions: '0' is not valid; use a positive integer", minPartitions="0")
    error(r"minPartitions: '2147483648' is not valid; use a positive integer \(at most 2147483647\)",
          minPartitions="2147483648")
    error("minPartitions: 'many' is not valid; use a positive integer", minPartitions="many")
    error("maxRecordsPerPartition: '-1' is not valid; use a positive integer", maxRecordsPerPartition="-1")
    error("failOnDataLoss: 'maybe' is not valid; use true or false", failOnDataLoss="maybe")
    error("includeHeaders: 'yes' is not valid; use true or false", includeHeaders="yes")
    error("maxBytesPerBatch: '100' is not valid; use a number of bytes >= 65536", maxBytesPerBatch="100")
    error("kafkaConsumer.pollTimeoutMs: 'x' is not valid; use an integer >= 0",
          **{"kafkaConsumer.pollTimeoutMs": "x"})
    error("maxOffsetsPerTrigger: '0' is not valid; use a positive integer", maxOffsetsPerTrigger="0")
    error("startingOffsetsByTimestampStrategy: 'first' is not valid; use error or latest",
          startingOffsetsByTimestampStrategy="first")
    error(r"subscribePattern: '\[' is not valid; use a regular expression", subscribe=None, subscribePattern="[")


def test_spark_compatible_options_are_accepted():
    o = parse(**{"kafkaConsumer.pollTimeoutMs": "512", "fetchOffset.numRetries": "5",
                 "fetchOffset.retryIntervalMs": "10", "groupIdPrefix": "g", "maxOffsetsPerTrigger": "10",
                 "minOffsetsPerTrigger": "5", "maxTriggerDelay": "5m", "kafka.client.id": "c",
                 "kafka.group.id": "g1"})
    assert (o.poll_timeout_ms, o.fetch_offset_num_retries, o.group_id_prefix) == (512, 5, "g")
    assert o.kafka_params == {"client.id": "c", "group.id": "g1"}


def test_kafka_params_refused_as_spark_does():
    for key, match in [("auto.offset.reset", "auto.offset.reset' is not supported"),
                       ("key.deserializer", "keys are deserialized as byte arrays"),
                       ("value.deserializer", "values are deserialized as byte arrays"),
                       ("enable.auto.commit", "enable.auto.commit' is not supported"),
                       ("interceptor.classes", "interceptor.classes' is not supported")]:
        error(match, **{f"kafka.{key}": "x"})


def test_isolation_level_is_checked_and_normalised_for_every_mode():
    """A typo must not silently read uncommitted data (direct mode plans with it too)."""
    error("kafka.isolation.level: 'read-committed' is not valid; use read_committed or read_uncommitted",
          **{"kafka.isolation.level": "read-committed"})
    opts = parse_options({"subscribe": "t", "path": "/tmp/x", "kafka.isolation.level": " READ_COMMITTED "})
    assert opts.kafka_params["isolation.level"] == "read_committed"


def test_mode_selection():
    assert parse(path=None, **{"kafka.bootstrap.servers": "h:9092"}).mode == "network"
    error("must be specified for configuring Kafka consumer", path=None)
    stitched = parse(**{"kafka.bootstrap.servers": "h:9092"})  # path + brokers: stitched mode
    assert stitched.mode == "stitched" and stitched.kafka_params["isolation.level"] == "read_committed"
    own = parse(**{"kafka.bootstrap.servers": "h:9092", "kafka.isolation.level": "read_uncommitted"})
    assert own.kafka_params["isolation.level"] == "read_uncommitted"  # the user's choice wins
    assert parse().mode == "direct"
    error("Option 'path' is empty", path=" ")
    assert parse(path="file:///data/kafka%20logs").paths == ("/data/kafka logs",)
    assert parse(path="relative/dir").paths == (str(Path.cwd() / "relative/dir"),)
    error("must be a local directory, a file: URI or an object-store URI", path="ftp://nn/data")
    error("names no bucket", path="s3://")
    assert parse(path="hdfs://nn/data/").paths == ("hdfs://nn/data",)
    assert parse(path="s3a://bucket/logs").paths == ("s3a://bucket/logs",)
    secrets = {"fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK", "fs.s3a.endpoint": "http://h:9000"}
    parsed = parse(path="s3://bucket/logs", **secrets)
    assert parsed.storage_options == secrets
    assert "SK" not in repr(parsed)  # secrets never printed
    error("Unknown option 'fs.s3a.secret.kye'", path="s3://b/l", **{"fs.s3a.secret.kye": "x"})
    assert parse(path=None, paths='["/a", "/b/", "/a"]').paths == ("/a", "/b")
    error("must be a JSON list of log directories", path=None, paths="/a,/b")


# --- through Spark: where the errors surface ---

@pytest.fixture(scope="module")
def a_log(tmp_path_factory):
    w = LogWriter(tmp_path_factory.mktemp("options"))
    w.append("t", 0, [(None, b"v", 1_000_000 + i) for i in range(5)])
    w.close()
    return w.root


def test_option_errors_surface_at_load_or_the_first_action(spark, a_log):
    """Unknown options fail at load(); a rule of batch queries only (latest at the start)
    fails at the first action: pyspark asks a Python source for its schema in the same way
    for read and readStream, and a stream may start at latest."""
    with pytest.raises(Exception, match="'startingoffset'"):
        spark.read.format("kafkalog").option("subscribe", "t").option("startingOffset", "earliest") \
            .load(str(a_log))
    df = spark.read.format("kafkalog").option("subscribe", "t").option("startingOffsets", "latest") \
        .load(str(a_log))
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
        df.count()


def test_network_mode_with_an_unreachable_broker_fails_with_a_clear_error(spark):
    df = spark.read.format("kafkalog").option("subscribe", "t") \
        .option("kafka.bootstrap.servers", "127.0.0.1:1") \
        .option("kafka.default.api.timeout.ms", "2000").load()
    with pytest.raises(Exception, match="(?i)timed out|timeout"):
        df.count()


def test_a_custom_schema_is_refused(spark, a_log):
    df = spark.read.format("kafkalog").schema("value BINARY").option("subscribe", "t").load(str(a_log))
    with pytest.raises(Exception, match="fixed schema"):
        df.count()
