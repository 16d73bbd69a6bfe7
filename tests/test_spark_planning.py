"""Tests of the driver's planning (spark_kafkalog/planning.py) and of the two modules it
shares with the executors: spark_kafkalog/errors.py (data loss) and
spark_kafkalog/pushdown.py (pushed filters). Offset resolution against a real log
directory (written by the broker's own UnifiedLog), data loss, range splitting as Spark's
KafkaOffsetRangeCalculator does it, narrowing by pushed filters, the streaming offsets
(KafkaSourceOffset JSON, rateLimit) and the rule that executor code never imports the
planner. Pure Python: no SparkSession (pyspark is imported only for its Filter classes)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import pickle
import random
import subprocess
import sys

import pyarrow as pa
import pytest
from pyspark.sql.datasource import (  # noqa: E402
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from broker.record.limits import INT64_MAX  # noqa: E402
from spark_kafkalog.errors import (  # noqa: E402
    DATA_LOSS_INSTRUCTION,
    KafkaDataLossError,
    format_partition,
    format_partitions,
    report_data_loss,
    report_data_loss_message,
)
from spark_kafkalog.options import KafkaLogOptionError, parse_options  # noqa: E402
from spark_kafkalog.planning import (  # noqa: E402
    OffsetRange,
    check_range,
    offsets_from_json,
    offsets_json,
    pending_records,
    plan_ranges,
    rate_limit,
    split_ranges,
    stream_ranges,
)
from spark_kafkalog.pushdown import PushedFilters  # noqa: E402
from spark_kafkalog.readers.direct import DirectOffsetReader  # noqa: E402
from tests.support.spark import REPO, LogWriter

UTC = dt.UTC


def at_ms(ms: int) -> dt.datetime:
    """The aware datetime of a record timestamp in milliseconds."""
    return dt.datetime.fromtimestamp(ms / 1000, UTC)


# --- a log to plan against ---

@pytest.fixture(scope="module")
def two_topics(tmp_path_factory):
    w = LogWriter(tmp_path_factory.mktemp("plan"))
    for p in range(3):
        for i in range(10):
            w.append("t", p, [(None, b"v", 1_000_000 + i * 100 + j) for j in range(p + 1)])
    w.append("u", 0, [(None, b"x", 5)])
    w.append("__consumer_offsets", 0, [(None, b"x", 5)])
    w.close()
    return w.root


def parse(root, **kw):
    opts = {"subscribe": "t", "path": str(root)}
    opts.update({k: v for k, v in kw.items() if v is not None})
    for k in [k for k, v in kw.items() if v is None]:
        opts.pop(k, None)
    return parse_options(opts)


def plan(root, filters=None, **kw):
    return plan_ranges(parse(root, **kw), DirectOffsetReader(root), filters)


def test_plan_offsets_and_strategies(two_topics):
    assert plan(two_topics) == [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 0, 20), OffsetRange("t", 2, 0, 30)]
    assert [r.topic for r in plan(two_topics, subscribe=None, subscribePattern=".*")] == ["t", "t", "t", "u"]
    assert [r.topic for r in plan(two_topics, subscribe=None, subscribePattern="_.*",
                                  **{"kafka.exclude.internal.topics": "false"})] == ["__consumer_offsets"]
    assert plan(two_topics, subscribe=None, subscribePattern="t|u|x") == plan(two_topics, subscribe="x,u,t")
    assert plan(two_topics, subscribe=None, assign='{"t":[1]}') == [OffsetRange("t", 1, 0, 20)]
    with pytest.raises(KafkaLogOptionError, match=r"Partitions \{t-7\} given in option 'assign'"):
        plan(two_topics, subscribe=None, assign='{"t":[1,7]}')
    assert plan(two_topics, subscribe="nothing") == []
    ranges = plan(two_topics, startingOffsets='{"t":{"0":-2,"1":5,"2":7}}', endingOffsets='{"t":{"0":3,"1":-1,"2":7}}')
    assert ranges == [OffsetRange("t", 0, 0, 3), OffsetRange("t", 1, 5, 20)]  # the empty range is dropped
    with pytest.raises(KafkaLogOptionError, match="don't match what are assigned"):
        plan(two_topics, startingOffsets='{"t":{"0":1}}')


def test_plan_timestamps(two_topics):
    # partition p holds timestamps 1_000_000 + i*100 + j for j < p+1, 10 batches
    ranges = plan(two_topics, startingTimestamp="1000500", endingTimestamp="1000701")
    assert ranges == [OffsetRange("t", 0, 5, 8), OffsetRange("t", 1, 10, 15), OffsetRange("t", 2, 15, 22)]
    with pytest.raises(KafkaLogOptionError,
                       match="No offset matched from request of topic-partition t-0 and timestamp 9999999"):
        plan(two_topics, startingTimestamp="9999999")
    assert plan(two_topics, startingTimestamp="9999999", startingOffsetsByTimestampStrategy="latest") == []
    ranges = plan(two_topics, subscribe=None, assign='{"t":[0,1]}',
                  startingOffsetsByTimestamp='{"t":{"0":1000100,"1":-2}}',
                  endingOffsetsByTimestamp='{"t":{"0":9999999,"1":1000200}}')
    assert ranges == [OffsetRange("t", 0, 1, 10), OffsetRange("t", 1, 0, 4)]
    with pytest.raises(KafkaLogOptionError, match="timestamp based start offsets don't match"):
        plan(two_topics, startingOffsetsByTimestamp='{"t":{"0":1}}')
    with pytest.raises(KafkaLogOptionError, match="resolved start offset 9 is greater than the resolved end offset 5"):
        plan(two_topics, subscribe=None, assign='{"t":[0]}', startingOffsets='{"t":{"0":9}}',
             endingTimestamp="1000500")


# --- data loss (errors.py, and planning's checks) ---

def test_data_loss_rules():
    tp = ("t", 0)
    assert check_range(tp, 10, 20, 0, 30, True) == (10, 20)
    with pytest.raises(KafkaDataLossError, match=r"Could not read records in offset \[3, 5\) for topic partition t-0"):
        check_range(tp, 3, 20, 5, 30, True)
    with pytest.raises(KafkaDataLossError, match=r"\[30, 40\) for topic partition t-0: the log ends at offset 30"):
        check_range(tp, 10, 40, 5, 30, True)
    assert check_range(tp, 3, 40, 5, 30, False) == (5, 30)
    assert check_range(tp, 1, 4, 5, 30, False) == (4, 4)  # all lost: nothing to read
    with pytest.raises(KafkaLogOptionError, match="resolved start offset 7 is greater"):
        check_range(tp, 7, 6, 0, 30, False)


def test_report_data_loss_raises_or_warns(caplog):
    with pytest.raises(KafkaDataLossError) as info:
        report_data_loss(("orders", 3), 10, 25, "the log now starts at offset 25", True)
    message = str(info.value)
    assert message.startswith(DATA_LOSS_INSTRUCTION + " Reason: ")
    assert message.endswith("Could not read records in offset [10, 25) for topic partition orders-3: "
                            "the log now starts at offset 25.")
    assert "failOnDataLoss to false" in message  # the way out, as Spark words it
    with caplog.at_level(logging.WARNING, logger="spark_kafkalog"):
        report_data_loss(("orders", 3), 10, 25, "the log now starts at offset 25", False)
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "[10, 25) for topic partition orders-3" in record.getMessage()
    assert "failOnDataLoss=false" in record.getMessage()
    caplog.clear()
    # an empty range is no loss: nothing raised, nothing logged
    with caplog.at_level(logging.WARNING, logger="spark_kafkalog"):
        report_data_loss(("orders", 3), 25, 25, "nothing", True)
        report_data_loss(("orders", 3), 30, 25, "nothing", True)
    assert caplog.records == []


def test_report_data_loss_message_and_partition_names(caplog):
    assert format_partition(("a.b-c", 12)) == "a.b-c-12"
    assert format_partitions([("b", 0), ("a", 10), ("a", 2)]) == "{a-2, a-10, b-0}"
    assert format_partitions([]) == "{}"
    with pytest.raises(KafkaDataLossError, match=r"Reason: \{t-1\} are gone\.$"):
        report_data_loss_message("{t-1} are gone.", True)
    with caplog.at_level(logging.WARNING, logger="spark_kafkalog"):
        report_data_loss_message("{t-1} are gone.", False)
    assert [r.getMessage() for r in caplog.records] == [
        "{t-1} are gone. failOnDataLoss=false: the query goes on."]


# --- splitting (KafkaOffsetRangeCalculatorSuite's cases) ---

def r(tp: int, start: int, end: int) -> OffsetRange:
    return OffsetRange(f"t{tp}", 0, start, end)


def test_split_like_spark():
    assert split_ranges([r(1, 1, 2)]) == [r(1, 1, 2)]
    assert split_ranges([r(1, 1, 2), r(2, 1, 2), r(3, 1, 2)], 3) == [r(1, 1, 2), r(2, 1, 2), r(3, 1, 2)]
    assert split_ranges([r(1, 1, 5)], 4) == [r(1, 1, 2), r(1, 2, 3), r(1, 3, 4), r(1, 4, 5)]
    # a small range stays whole and is left out of the proportions (SPARK-36576)
    assert split_ranges([r(1, 1, 5), r(2, 1, 21)], 3) == [r(1, 1, 5), r(2, 1, 11), r(2, 11, 21)]
    assert split_ranges([r(1, 1, 11)], 4) == [r(1, 1, 3), r(1, 3, 5), r(1, 5, 8), r(1, 8, 11)]
    assert split_ranges([r(1, 1, 5), r(2, 1, 21), r(3, 1, 1)], 3) == [r(1, 1, 5), r(2, 1, 11), r(2, 11, 21)]
    assert split_ranges([r(1, 0, 10000), r(2, 0, 15000), r(3, 0, 20000)], 9) == [
        r(1, 0, 5000), r(1, 5000, 10000), r(2, 0, 5000), r(2, 5000, 10000), r(2, 10000, 15000),
        r(3, 0, 5000), r(3, 5000, 10000), r(3, 10000, 15000), r(3, 15000, 20000)]
    assert split_ranges([r(1, 1, 1), r(2, 1, 21)], 3) == [r(2, 1, 7), r(2, 7, 14), r(2, 14, 21)]
    # maxRecordsPerPartition first, then minPartitions over the pieces
    assert split_ranges([r(1, 0, 10)], None, 3) == [r(1, 0, 2), r(1, 2, 4), r(1, 4, 7), r(1, 7, 10)]
    assert split_ranges([r(1, 0, 10), r(2, 0, 2)], None, 5) == [r(1, 0, 5), r(1, 5, 10), r(2, 0, 2)]
    assert split_ranges([r(1, 0, 4)], 4, 2) == [r(1, 0, 1), r(1, 1, 2), r(1, 2, 3), r(1, 3, 4)]


def test_splitting_covers_exactly_and_is_deterministic():
    rng = random.Random(5)
    for _ in range(200):
        ranges = [OffsetRange(f"t{i}", i % 3, s, s + rng.randint(0, 5000))
                  for i, s in enumerate(rng.randint(0, 100) for _ in range(rng.randint(1, 6)))]
        mp = rng.choice([None, 1, 2, 5, 17, 64])
        mr = rng.choice([None, 1, 7, 333, 10_000])
        out = split_ranges(ranges, mp, mr)
        assert out == split_ranges(list(ranges), mp, mr)
        for src in ranges:
            pieces = [p for p in out if p.topic_partition == src.topic_partition]
            covered = [o for p in pieces for o in range(p.start, p.end)]
            assert covered == list(range(src.start, src.end))
            if mr:
                assert all(p.size <= mr for p in pieces)


# --- pushed filters (pushdown.py) ---

def pushed(*filters) -> PushedFilters:
    f = PushedFilters()
    for flt in filters:
        assert f.accept(flt), flt
    return f


def test_accept_takes_only_what_it_applies_exactly():
    f = PushedFilters()
    refused = [
        GreaterThan(("topic",), "a"),                  # string order: the column's collation
        LessThanOrEqual(("topic",), "z"),
        StringStartsWith(("topic",), "t"),
        Not(EqualTo(("offset",), 3)),                  # a hole in the range: left to Spark
        Not(In(("timestamp",), (at_ms(5),))),
        Not(GreaterThan(("partition",), 1)),
        Not(IsNull(("offset",))),
        EqualTo(("offset",), True),                    # a bool is no offset
        EqualTo(("offset",), "3"),
        In(("partition",), (1, "2")),
        In(("topic",), ("t", 1)),
        EqualTo(("timestamp",), dt.date(2024, 1, 1)),  # only datetimes are timestamps
        GreaterThan(("timestamp",), 1_000),
        EqualTo(("value",), b"x"),                     # not one of the four columns
        IsNotNull(("key",)),
        EqualTo(("headers", "key"), "h"),              # a nested field
    ]
    for flt in refused:
        assert not f.accept(flt), flt
    assert f == PushedFilters() and f.accepted == []
    taken = [IsNotNull(("offset",)), EqualNullSafe(("partition",), 1), Not(EqualTo(("topic",), "u")),
             In(("offset",), (3, 4)), GreaterThanOrEqual(("timestamp",), at_ms(1000))]
    for flt in taken:
        assert f.accept(flt), flt
    assert f.accepted == taken


def test_accept_tightens_whatever_the_order():
    filters = [GreaterThan(("partition",), 0), LessThan(("partition",), 5), In(("partition",), (1, 2, 7)),
               Not(In(("partition",), (2,))), GreaterThanOrEqual(("offset",), 10),
               LessThanOrEqual(("offset",), 50), LessThan(("offset",), 60), In(("topic",), ("a", "b")),
               EqualTo(("topic",), "b"), Not(EqualTo(("topic",), "c")),
               GreaterThan(("timestamp",), at_ms(2000)), LessThan(("timestamp",), at_ms(9000)),
               GreaterThanOrEqual(("timestamp",), at_ms(1000))]
    expected = pushed(*filters)
    assert (expected.partition_lo, expected.partition_hi) == (1, 5)
    assert expected.partitions == {1, 2, 7} and expected.excluded_partitions == {2}
    assert (expected.offset_lo, expected.offset_hi) == (10, 51)
    assert expected.topics == {"b"} and expected.excluded_topics == {"c"}
    assert (expected.ts_lo, expected.ts_hi) == (2_000_001, 9_000_000)  # microseconds
    rng = random.Random(7)
    for _ in range(20):
        shuffled = filters[:]
        rng.shuffle(shuffled)
        got = pushed(*shuffled)
        got.accepted = expected.accepted
        assert got == expected


def test_allows_offset_bounds_and_timestamp_floor():
    f = pushed(In(("partition",), (0, 1, 2)), Not(EqualTo(("partition",), 1)),
               Not(EqualTo(("topic",), "skip")))
    assert [f.allows(tp) for tp in [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("skip", 0)]] == \
        [True, False, True, False, False]
    assert pushed(IsNull(("partition",))).allows(("t", 0)) is False  # never null: no rows
    assert PushedFilters().offset_bounds() == (0, INT64_MAX)
    assert pushed(GreaterThan(("offset",), 4), In(("offset",), (2, 9, 30))).offset_bounds() == (5, 31)
    assert pushed(In(("offset",), (1, 2)), In(("offset",), (3,))).offset_bounds() == (0, 0)
    assert PushedFilters().timestamp_floor_ms() is None
    assert pushed(LessThan(("timestamp",), at_ms(5))).timestamp_floor_ms() is None
    # microseconds round up to the first millisecond a record may have
    assert pushed(GreaterThanOrEqual(("timestamp",), at_ms(1500))).timestamp_floor_ms() == 1500
    assert pushed(GreaterThan(("timestamp",), at_ms(1500))).timestamp_floor_ms() == 1501
    assert pushed(In(("timestamp",), (at_ms(1700), at_ms(1600)))).timestamp_floor_ms() == 1600
    # a naive datetime is UTC, as pyspark hands TimestampType literals over
    naive = dt.datetime(2023, 11, 14, 22, 13, 20)
    assert pushed(GreaterThanOrEqual(("timestamp",), naive)).timestamp_floor_ms() == 1_700_000_000_000


def test_row_mask_keeps_exactly_the_wanted_rows():
    offsets = list(range(10))
    timestamps = [1000 + 10 * o for o in offsets]  # ms
    decoded = pa.RecordBatch.from_arrays(
        [pa.array(offsets, pa.int64()), pa.array(timestamps, pa.int64())], ["offset", "timestamp"])
    assert not PushedFilters().needs_row_filter
    assert not pushed(GreaterThan(("offset",), 3), EqualTo(("partition",), 0)).needs_row_filter
    f = pushed(In(("offset",), (1, 2, 5, 8, 77)))
    assert f.needs_row_filter
    assert [o for o, keep in zip(offsets, f.row_mask(decoded)) if keep] == [1, 2, 5, 8]
    f = pushed(GreaterThanOrEqual(("timestamp",), at_ms(1020)), LessThan(("timestamp",), at_ms(1070)))
    assert [o for o, keep in zip(offsets, f.row_mask(decoded)) if keep] == [2, 3, 4, 5, 6]
    # a timestamp between two milliseconds matches no record
    f = pushed(In(("timestamp",), (at_ms(1030), dt.datetime.fromtimestamp(1.0405, UTC))))
    assert [o for o, keep in zip(offsets, f.row_mask(decoded)) if keep] == [3]


def test_plan_narrowed_by_pushed_filters(two_topics):
    full = plan(two_topics)
    assert plan(two_topics, PushedFilters()) == full
    assert plan(two_topics, pushed(EqualTo(("partition",), 1))) == [OffsetRange("t", 1, 0, 20)]
    assert plan(two_topics, pushed(GreaterThanOrEqual(("offset",), 5), LessThan(("offset",), 8))) == [
        OffsetRange("t", p, 5, 8) for p in range(3)]
    assert plan(two_topics, pushed(GreaterThan(("offset",), 25))) == [OffsetRange("t", 2, 26, 30)]
    # a timestamp lower bound moves each start to the first offset at or above it
    assert plan(two_topics, pushed(GreaterThanOrEqual(("timestamp",), at_ms(1_000_500)))) == [
        OffsetRange("t", 0, 5, 10), OffsetRange("t", 1, 10, 20), OffsetRange("t", 2, 15, 30)]
    assert plan(two_topics, pushed(GreaterThan(("timestamp",), at_ms(9_000_000)))) == []
    assert plan(two_topics, pushed(IsNull(("offset",)))) == []
    assert plan(two_topics, pushed(In(("topic",), ("u", "x"))), subscribe=None,
                subscribePattern=".*") == [OffsetRange("u", 0, 0, 1)]
    # narrowing comes before splitting: the pieces split what the filters left
    assert plan(two_topics, pushed(EqualTo(("partition",), 2), LessThan(("offset",), 12)),
                maxRecordsPerPartition="5") == [
        OffsetRange("t", 2, 0, 4), OffsetRange("t", 2, 4, 8), OffsetRange("t", 2, 8, 12)]


def test_data_loss_is_checked_before_the_filters_narrow(two_topics):
    """A query fails (or warns) on lost offsets exactly as it would without pushdown, even
    when the filters exclude the lost part."""
    opts = dict(subscribe=None, assign='{"t":[0]}', endingOffsets='{"t":{"0":15}}')  # the log ends at 10
    with pytest.raises(KafkaDataLossError, match=r"\[10, 15\) for topic partition t-0"):
        plan(two_topics, pushed(LessThan(("offset",), 5)), **opts)
    assert plan(two_topics, pushed(LessThan(("offset",), 5)), failOnDataLoss="false", **opts) == [
        OffsetRange("t", 0, 0, 5)]


# --- streaming offsets ---

def test_offsets_json_and_rate_limit_like_spark():
    offsets = {("b", 10): 1, ("a", 2): 5, ("b", 9): 0}
    assert json.dumps(offsets_json(offsets)) == '{"a": {"2": 5}, "b": {"9": 0, "10": 1}}'
    assert offsets_from_json(json.dumps(offsets_json(offsets))) == offsets
    for bad in [{"a": {"x": 1}}, {"a": {"0": -1}}, {"a": {"0": True}}, {"a": [1]}, "[1]"]:
        with pytest.raises(KafkaLogOptionError, match="Invalid kafkalog source offset"):
            offsets_from_json(bad)
    # KafkaMicroBatchStream.rateLimit: proportional, floor, at least one for a small lag
    start = {("t", 0): 0, ("t", 1): 0}
    assert rate_limit(10, start, {("t", 0): 100, ("t", 1): 1}, {}) == {("t", 0): 9, ("t", 1): 1}
    assert rate_limit(50, start, {("t", 0): 60, ("t", 1): 60}, {}) == {("t", 0): 25, ("t", 1): 25}
    assert rate_limit(50, start, {("t", 0): 10, ("t", 1): 5}, {}) == {("t", 0): 10, ("t", 1): 5}
    # a new partition starts at its earliest offset
    got = rate_limit(10, {("t", 0): 0}, {("t", 0): 10, ("t", 1): 30}, {("t", 1): 20})
    assert got == {("t", 0): 5, ("t", 1): 25}
    assert pending_records({("t", 0): 4}, {("t", 0): 10, ("t", 1): 30}, {("t", 1): 20}) == 16
    assert pending_records({("t", 0): 12}, {("t", 0): 10}, {}) == 0


def test_stream_ranges_of_a_micro_batch(two_topics):
    reader = DirectOffsetReader(two_topics)
    opts = parse_options({"subscribe": "t", "path": str(two_topics)}, streaming=True)
    start = {("t", 0): 2, ("t", 1): 0}
    end = {("t", 0): 7, ("t", 1): 20, ("t", 2): 30}  # t-2 appeared: read from its log start (0)
    assert stream_ranges(opts, reader, start, end) == [
        OffsetRange("t", 0, 2, 7), OffsetRange("t", 1, 0, 20), OffsetRange("t", 2, 0, 30)]
    with pytest.raises(KafkaDataLossError, match=r"\{t-9\} no longer exist in the log directory"):
        stream_ranges(opts, reader, {("t", 0): 0}, {("t", 0): 5, ("t", 9): 3})
    lenient = parse_options({"subscribe": "t", "path": str(two_topics), "failOnDataLoss": "false"},
                            streaming=True)
    assert stream_ranges(lenient, reader, {("t", 0): 0}, {("t", 0): 5, ("t", 9): 3}) == [
        OffsetRange("t", 0, 0, 5)]
    assert stream_ranges(lenient, reader, {("t", 0): 6}, {("t", 0): 4}) == []  # moved backwards


# --- the executors never import the planner ---

EXECUTOR_SIDE = ["spark_kafkalog.readers", "spark_kafkalog.readers.batch", "spark_kafkalog.readers.stream",
                 "spark_kafkalog.readers.direct", "spark_kafkalog.readers.network",
                 "spark_kafkalog.schema", "spark_kafkalog.errors", "spark_kafkalog.pushdown"]

_TASK = """
import pickle, sys
for name in sys.argv[1:]:
    __import__(name)
assert "spark_kafkalog.planning" not in sys.modules, "imported with the modules"
reader, partition = pickle.loads(sys.stdin.buffer.read())
rows = [o for batch in reader.read(partition) for o in batch.column("offset").to_pylist()]
assert "spark_kafkalog.planning" not in sys.modules, "imported by read()"
print(type(reader).__name__, rows)
"""


def _run_task(payload: bytes, *modules: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", _TASK, *modules], input=payload, env=env,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().strip()


def test_executor_code_never_imports_the_planner(two_topics):
    """What a task runs (the readers' modules, then ``read`` of a pickled reader, with the
    pushed filters' row mask and the data-loss reporting) loads neither planning.py nor the
    planner's imports: a fresh interpreter stands for the Python worker."""
    from spark_kafkalog.readers.batch import KafkaLogInputPartition, KafkaLogPushdownReader
    from spark_kafkalog.readers.stream import KafkaLogStreamReader

    # a batch read with filters, planned here (the driver), read there (a task)
    reader = KafkaLogPushdownReader(parse(two_topics))
    left = list(reader.pushFilters([EqualTo(("partition",), 1), In(("offset",), (3, 4, 11)),
                                    StringStartsWith(("topic",), "t")]))
    assert left == [StringStartsWith(("topic",), "t")]
    [part] = reader.partitions()
    assert (part.partition, part.start, part.end) == (1, 3, 12)
    out = _run_task(pickle.dumps((reader, part)), *EXECUTOR_SIDE)
    assert out == "KafkaLogPushdownReader [3, 4, 11]"

    # a micro-batch of a stream, with offsets the log no longer holds (failOnDataLoss=false)
    stream = KafkaLogStreamReader(parse_options(
        {"subscribe": "t", "path": str(two_topics), "failOnDataLoss": "false"}, streaming=True))
    out = _run_task(pickle.dumps((stream, KafkaLogInputPartition("t", 0, 7, 14))))
    assert out == "KafkaLogStreamReader [7, 8, 9]"
