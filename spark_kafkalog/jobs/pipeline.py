"""The main job: clickstream events through the broker and Spark, end to end (``make run``).

Owns the pipeline that shows the whole project in one command:

1. a broker: this project's, embedded (``spark_kafkalog.embedded.EmbeddedBroker``) with its
   log directory under ``--data-dir`` (``./data/kafka-logs``, kept between runs, so a
   second run finds the first one's records), or any Kafka-compatible cluster given with
   ``--bootstrap-servers``;
2. topics ``clickstream`` (``--partitions``), ``clickstream-page-stats`` and
   ``clickstream-purchases``, created with the admin client when missing;
3. ``--events`` clickstream events produced with the project's idempotent producer: JSON
   values, the user id as key (so a user's events stay in order in one partition) and
   two headers (``source``, ``schema``);
4. a Spark batch job: ``spark.read.format("kafkalog")`` of the whole topic (direct mode,
   straight from the segment files, when the log directory is local; network mode
   otherwise) -> ``from_json`` -> per page and action: events, distinct users, revenue ->
   ``df.write.format("kafkalog")`` to ``clickstream-page-stats``;
5. a streaming query, ``spark.readStream.format("kafkalog")`` with
   ``Trigger.AvailableNow``: purchases -> ``clickstream-purchases``, its checkpoint under
   ``--data-dir`` so that each run processes exactly the events that arrived since the
   last one;
6. a summary: records in and out, per-partition counts, throughput, where the files are.

Run it with ``make run``, ``python -m spark_kafkalog.jobs.pipeline`` or, against a
cluster, ``spark-submit spark_kafkalog/jobs/pipeline.py --bootstrap-servers host:9092
--checkpoint-dir hdfs:///chk``: under spark-submit the session comes from spark-submit
(``getOrCreate``) and the master and configuration from its options; run locally, the
session is built from ``conf/spark-defaults.conf`` (``--spark-conf``) and ``--master``.

Ctrl-C stops the streaming query, Spark and the embedded broker, in that order (the broker
runs in its own session; pyspark's JVM ignores SIGINT), and exits 130 (``Interrupter``:
while Spark runs, the first Ctrl-C cancels its jobs from another thread instead of
pyspark's handler, which calls into the JVM from inside a JVM call and prints py4j
tracebacks; a second Ctrl-C interrupts at once).

Thread-safety: a script; everything runs on the main thread (plus the clients' threads).
``run(args)`` without an ``Interrupter`` may also run on another thread: its session is
made that thread's active one (``jobs/session.py``), which Spark's writes to the
``kafkalog`` sink need.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

INPUT_TOPIC = "clickstream"
STATS_TOPIC = "clickstream-page-stats"
PURCHASES_TOPIC = "clickstream-purchases"

PAGES = ("/", "/search", "/product", "/cart", "/checkout", "/account", "/help", "/deals")
ACTIONS = (("view", 0.62), ("click", 0.25), ("add_to_cart", 0.08), ("purchase", 0.05))
DEVICES = ("desktop", "mobile", "tablet")
COUNTRIES = ("US", "DE", "FR", "GB", "IN", "BR", "JP", "NL")
SOURCES = (b"web", b"ios", b"android")

EVENT_SCHEMA = ("event_id STRING, user_id STRING, session_id STRING, ts BIGINT, page STRING, "
                "action STRING, device STRING, country STRING, price DOUBLE")


@dataclass
class Stage:
    records: int = 0
    bytes: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mib_rate(self) -> float:
        return self.bytes / self.seconds / (1 << 20) if self.seconds > 0 else 0.0


@dataclass
class Summary:
    bootstrap_servers: str = ""
    embedded: bool = False
    read_mode: str = ""
    produced: Stage = field(default_factory=Stage)
    batch_read: Stage = field(default_factory=Stage)
    stats_written: int = 0
    stream_rows: int = 0
    stream_batches: int = 0
    stream_written: int = 0
    stream_seconds: float = 0.0
    partitions: dict[int, tuple[int, int]] = field(default_factory=dict)
    output_ends: dict[str, int] = field(default_factory=dict)
    top_pages: list[tuple[str, int]] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)
    total_seconds: float = 0.0


# --- arguments ---

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="pipeline", description="Clickstream events through the broker and Spark, end to end.")
    p.add_argument("--bootstrap-servers", help="use this Kafka-compatible cluster instead of "
                   "starting the embedded broker")
    p.add_argument("--data-dir", default="data", help="embedded broker's log directory parent and "
                   "the streaming checkpoints (default ./data, kept between runs)")
    p.add_argument("--checkpoint-dir", help="streaming checkpoints (default DATA_DIR/checkpoints)")
    p.add_argument("--events", type=int, default=300_000, help="events to produce (default 300000)")
    p.add_argument("--partitions", type=int, default=6, help="partitions of a new input topic")
    p.add_argument("--input-topic", default=INPUT_TOPIC)
    p.add_argument("--stats-topic", default=STATS_TOPIC)
    p.add_argument("--purchases-topic", default=PURCHASES_TOPIC)
    p.add_argument("--read-mode", choices=("auto", "direct", "network"), default="auto",
                   help="batch read from the segment files (direct) or over the wire; auto: "
                   "direct when the embedded broker's log directory is local")
    p.add_argument("--max-offsets-per-trigger", type=int, default=100_000,
                   help="the streaming query's admission limit (several micro-batches)")
    p.add_argument("--master", default="local[*]", help="Spark master when run outside spark-submit")
    p.add_argument("--spark-conf", help="spark-defaults.conf to apply when run outside spark-submit "
                   "(default conf/spark-defaults.conf of the project when present)")
    p.add_argument("--seed", type=int, help="random seed of the generated events (default: time)")
    args = p.parse_args(argv)
    if args.events < 0:
        p.error("--events must be >= 0")
    if args.partitions < 1:
        p.error("--partitions must be >= 1")
    return args


# --- events ---

_EVENT_JSON = ('{{"event_id":"{:x}-{}","user_id":"{}","session_id":"{}-s{}","ts":{},"page":"{}",'
               '"action":"{}","device":"{}","country":"{}","price":{}}}')


def generate_events(n: int, seed: int, start_ms: int, users: int = 20_000):
    """Yield ``(key, value, headers, timestamp_ms)`` of ``n`` clickstream events: JSON
    values (``EVENT_SCHEMA``), the user id as key, headers ``source`` and ``schema``;
    deterministic for a seed, timestamps spread over the hour after ``start_ms``."""
    rng = random.Random(seed)
    rand = rng.random
    actions = [a for a, _ in ACTIONS]
    weights = [w for _, w in ACTIONS]
    picks = rng.choices(actions, weights, k=n)
    span_ms = 3_600_000  # one hour of traffic
    schema = ("schema", b"clickstream.v1")
    n_pages, n_countries = len(PAGES), len(COUNTRIES)
    for i in range(n):
        user = f"user-{int(rand() * users):05d}"
        action = picks[i]
        ts = start_ms + (i * span_ms) // n
        page = "/checkout" if action == "purchase" else PAGES[int(rand() * n_pages)]
        price = f"{5 + rand() * 245:.2f}" if action in ("add_to_cart", "purchase") else "null"
        value = _EVENT_JSON.format(seed, i, user, user, int(rand() * 8), ts, page, action,
                                   DEVICES[int(rand() * 3)], COUNTRIES[int(rand() * n_countries)], price)
        yield user.encode(), value.encode(), [("source", SOURCES[int(rand() * 3)]), schema], ts


def produce_events(bootstrap: str, topic: str, n: int, seed: int) -> Stage:
    from broker.client.producer import KafkaProducer

    stage = Stage()
    start_ms = int(time.time() * 1000) - 3_600_000
    begin = time.perf_counter()
    with KafkaProducer({"bootstrap.servers": bootstrap, "client.id": "pipeline-producer",
                        "linger.ms": 20, "batch.size": 262144, "compression.type": "lz4"}) as producer:
        send = producer.send
        for key, value, headers, ts in generate_events(n, seed, start_ms):
            send(topic, value=value, key=key, headers=headers, timestamp_ms=ts)
            stage.bytes += len(key) + len(value)
        producer.flush()
    stage.records = n
    stage.seconds = time.perf_counter() - begin
    return stage


# --- topics and offsets ---

def ensure_topics(bootstrap: str, specs: dict[str, int]) -> None:
    """Create the missing topics (name -> partition count); existing ones are kept."""
    from broker.client.admin import AdminClient, NewTopic, TopicAlreadyExistsError

    with AdminClient({"bootstrap.servers": bootstrap, "client.id": "pipeline-admin"}) as admin:
        existing = set(admin.list_topics())
        missing = [NewTopic(name, num_partitions=n) for name, n in specs.items() if name not in existing]
        if missing:
            for result in admin.create_topics(missing).values():
                if not isinstance(result.exception(), TopicAlreadyExistsError):  # a race: fine
                    result.result()


def partition_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (log start offset, log end offset)."""
    from broker.client.consumer import earliest_offsets, latest_offsets, partitions_for

    config = {"bootstrap.servers": bootstrap, "client.id": "pipeline-offsets"}
    tps = [(topic, info.partition) for info in partitions_for(config, [topic]).get(topic, [])]
    start = earliest_offsets(config, tps)
    end = latest_offsets(config, tps)
    return {tp[1]: (start[tp], end[tp]) for tp in sorted(end)}


# --- Spark ---

def read_spark_conf(path: Path) -> dict[str, str]:
    """spark-defaults.conf: ``key value`` (or ``key=value``) per line, ``#`` comments."""
    conf: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1) if "=" not in line.split(None, 1)[0] else line.split("=", 1)
        if len(parts) == 2:
            value = os.path.expandvars(parts[1].strip())
            if "$" not in value:  # an unset variable: leave Spark's own default
                conf[parts[0].strip()] = value
    return conf


def spark_session(args: argparse.Namespace):
    """The job's ``JobSession`` (``session.py``): an active or spark-submit's session as
    they are, else a quiet local one on ``--master`` with ``--spark-conf`` applied."""
    from spark_kafkalog.jobs.session import job_session, under_spark_submit

    conf: dict[str, str] = {}
    if not under_spark_submit():
        conf_path = Path(args.spark_conf) if args.spark_conf else (
            Path(__file__).resolve().parents[2] / "conf" / "spark-defaults.conf")
        if conf_path.exists():
            conf = read_spark_conf(conf_path)
        elif args.spark_conf:
            raise FileNotFoundError(f"--spark-conf {args.spark_conf}: no such file")
    master = args.master if not under_spark_submit() else None
    return job_session("kafkalog-pipeline", master=master, conf=conf)


def source_reader(spark, args: argparse.Namespace, summary: Summary, log_dir: Path | None, stream: bool):
    reader = (spark.readStream if stream else spark.read).format("kafkalog")
    reader = reader.option("subscribe", args.input_topic).option("startingOffsets", "earliest")
    direct = log_dir is not None and args.read_mode in ("auto", "direct")
    if args.read_mode == "direct" and log_dir is None:
        raise ValueError("--read-mode direct needs the embedded broker's local log directory")
    if not stream:
        summary.read_mode = "direct (segment files)" if direct else "network (Fetch)"
    if direct:
        return reader.option("path", str(log_dir))
    return reader.option("kafka.bootstrap.servers", summary.bootstrap_servers)


def batch_job(spark, args: argparse.Namespace, summary: Summary, log_dir: Path | None,
              interrupter: Interrupter | None = None) -> None:
    from pyspark.sql import functions as F

    check = interrupter.check if interrupter is not None else (lambda: None)
    begin = time.perf_counter()
    raw = source_reader(spark, args, summary, log_dir, stream=False).load()
    check()  # planning a Python data source runs no Spark job that a cancel could stop
    events = raw.select(F.length("value").alias("size"),
                        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e")).select("size", "e.*")
    stats = (events.groupBy("page", "action")
             .agg(F.count("*").alias("events"),
                  F.approx_count_distinct("user_id").alias("users"),
                  F.round(F.sum(F.coalesce("price", F.lit(0.0))), 2).alias("revenue"),
                  F.sum("size").alias("bytes"))
             .orderBy(F.desc("events")))
    check()
    rows = stats.collect()  # one pass over the topic
    summary.batch_read = Stage(sum(r["events"] for r in rows), sum(r["bytes"] for r in rows),
                               time.perf_counter() - begin)
    by_page: dict[str, int] = {}
    for r in rows:
        by_page[r["page"]] = by_page.get(r["page"], 0) + r["events"]
    summary.top_pages = sorted(by_page.items(), key=lambda kv: -kv[1])[:5]
    out = spark.createDataFrame(rows, stats.schema).select(
        F.concat_ws(":", "page", "action").alias("key"),
        F.to_json(F.struct("page", "action", "events", "users", "revenue")).alias("value"))
    (out.write.format("kafkalog").mode("append")
        .option("kafka.bootstrap.servers", summary.bootstrap_servers)
        .option("topic", args.stats_topic).save())
    summary.stats_written = len(rows)


def stream_job(spark, args: argparse.Namespace, summary: Summary, log_dir: Path | None,
               checkpoint: str, interrupter: Interrupter | None = None) -> None:
    from pyspark.sql import functions as F

    begin = time.perf_counter()
    source = source_reader(spark, args, summary, log_dir, stream=True)
    if args.max_offsets_per_trigger > 0:
        source = source.option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
    events = source.load().select(
        F.col("key"), F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
    purchases = events.where(F.col("e.action") == "purchase").select(
        F.col("key"),
        F.to_json(F.struct("e.event_id", "e.user_id", "e.ts", "e.country", "e.price")).alias("value"))
    query = (purchases.writeStream.format("kafkalog")
             .option("kafka.bootstrap.servers", summary.bootstrap_servers)
             .option("topic", args.purchases_topic)
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True)
             .queryName("purchases")
             .start())
    if interrupter is not None:
        interrupter.query = query
    try:
        query.awaitTermination()
    finally:
        if query.isActive:
            query.stop()
    progress = [p for p in query.recentProgress if p]
    summary.stream_rows = sum(int(p.get("numInputRows", 0)) for p in progress)
    summary.stream_batches = sum(1 for p in progress if int(p.get("numInputRows", 0)) > 0)
    summary.stream_written = sum(int((p.get("sink") or {}).get("numOutputRows", 0) or 0) for p in progress)
    summary.stream_seconds = time.perf_counter() - begin


# --- summary ---

def _fmt(n: float) -> str:
    return f"{n:,.0f}"


def format_summary(s: Summary, args: argparse.Namespace) -> str:
    lines = ["", f"kafkalog pipeline: done in {s.total_seconds:.1f} s", ""]
    where = f"embedded broker on {s.bootstrap_servers}" if s.embedded else f"cluster {s.bootstrap_servers}"
    lines.append(f"  broker        {where}")
    p = s.produced
    lines.append(f"  produced      {_fmt(p.records)} events to '{args.input_topic}' in {p.seconds:.1f} s "
                 f"({_fmt(p.rate)} records/s, {p.mib_rate:.1f} MiB/s; idempotent producer, lz4)")
    total = sum(end - start for start, end in s.partitions.values())
    lines.append(f"  in the topic  {_fmt(total)} records in {len(s.partitions)} partitions "
                 f"(this run's and earlier runs')")
    for part, (start, end) in s.partitions.items():
        lines.append(f"      partition {part:<3} {_fmt(end - start):>10} records   offsets {start}..{end}")
    b = s.batch_read
    lines.append(f"  batch read    {_fmt(b.records)} records, {b.bytes / (1 << 20):.1f} MiB in {b.seconds:.1f} s "
                 f"({_fmt(b.rate)} records/s, read + parse + aggregate; {s.read_mode})")
    if s.top_pages:
        pages = ", ".join(f"{page} {_fmt(n)}" for page, n in s.top_pages)
        lines.append(f"      top pages: {pages}")
    lines.append(f"  batch write   {_fmt(s.stats_written)} page/action rows to '{args.stats_topic}'")
    lines.append(f"  stream        {_fmt(s.stream_rows)} new records in {s.stream_batches} micro-batches "
                 f"(Trigger.AvailableNow, maxOffsetsPerTrigger={args.max_offsets_per_trigger}) "
                 f"in {s.stream_seconds:.1f} s -> {_fmt(s.stream_written)} purchases to '{args.purchases_topic}'")
    for topic, n in s.output_ends.items():
        lines.append(f"      '{topic}' holds {_fmt(n)} records")
    lines.append("  files")
    for name, path in s.paths.items():
        lines.append(f"      {name:<12} {path}")
    lines.append("")
    return "\n".join(lines)


# --- the job ---

class Interrupter:
    """SIGINT for the script: before Spark runs, a plain KeyboardInterrupt; while it
    runs, stop the streaming query and cancel Spark's jobs from a helper thread, so that the
    main thread's JVM call returns, and raise KeyboardInterrupt at the next ``check()``.

    The helper keeps cancelling every ``CANCEL_EVERY_S`` until ``finish()``: a Ctrl-C that
    comes while the driver plans (no job running yet) cancels the next job the moment it
    starts instead of letting the rest of the batch job run."""

    CANCEL_EVERY_S = 0.2

    def __init__(self) -> None:
        self.requested = False
        self.spark: SparkSession | None = None
        self.query: StreamingQuery | None = None
        self._finished = threading.Event()

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._handle)

    def attach(self, spark: SparkSession) -> None:
        self.spark = spark
        self.install()  # SparkContext() installed pyspark's handler: replace it again

    def _handle(self, signum, frame) -> None:
        if self.requested or self.spark is None:
            raise KeyboardInterrupt
        self.requested = True
        threading.Thread(target=self._cancel, name="pipeline-interrupt", daemon=True).start()

    def _cancel(self) -> None:
        try:
            if self.query is not None:
                self.query.stop()
            while self.spark is not None and not self._finished.is_set():
                self.spark.sparkContext.cancelAllJobs()
                self._finished.wait(self.CANCEL_EVERY_S)
        except Exception:  # noqa: BLE001 - best effort; the main thread stops Spark anyway
            pass

    def finish(self) -> None:
        """Spark is about to stop: no more cancelling from the helper thread."""
        self._finished.set()

    def check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt


def run(args: argparse.Namespace, out=sys.stdout, interrupter: Interrupter | None = None) -> Summary:
    from spark_kafkalog.embedded import EmbeddedBroker

    began = time.perf_counter()
    summary = Summary()
    data_dir = Path(args.data_dir).resolve()
    checkpoint = args.checkpoint_dir or str(data_dir / "checkpoints" / "purchases")
    broker = None
    spark = session = None
    log_dir: Path | None = None
    try:
        if args.bootstrap_servers:
            summary.bootstrap_servers = args.bootstrap_servers
        else:
            broker = EmbeddedBroker(data_dir / "kafka-logs",
                                    overrides={"num.partitions": args.partitions, "log.retention.ms": -1})
            print(f"starting the embedded broker (log directory {broker.log_dir}) ...", file=out, flush=True)
            broker.start()
            summary.embedded = True
            summary.bootstrap_servers = broker.bootstrap_servers
            log_dir = broker.log_path
            summary.paths["log dir"] = str(log_dir)
            summary.paths["broker log"] = str(broker.log_file)
            if broker.schema_registry_url:
                summary.paths["schema registry"] = broker.schema_registry_url
        summary.paths["checkpoint"] = checkpoint
        ensure_topics(summary.bootstrap_servers, {args.input_topic: args.partitions,
                                                  args.stats_topic: 1, args.purchases_topic: 3})
        seed = args.seed if args.seed is not None else int(time.time())
        print(f"producing {_fmt(args.events)} clickstream events to '{args.input_topic}' ...", file=out, flush=True)
        summary.produced = produce_events(summary.bootstrap_servers, args.input_topic, args.events, seed)
        summary.partitions = partition_offsets(summary.bootstrap_servers, args.input_topic)
        print("starting Spark ...", file=out, flush=True)
        session = spark_session(args)
        spark = session.spark
        if interrupter is not None:
            interrupter.attach(spark)
        try:
            print("batch job: read -> parse -> aggregate -> write ...", file=out, flush=True)
            batch_job(spark, args, summary, log_dir, interrupter)
            if interrupter is not None:
                interrupter.check()
            print("streaming query (Trigger.AvailableNow) ...", file=out, flush=True)
            stream_job(spark, args, summary, log_dir, checkpoint, interrupter)
            if interrupter is not None:
                interrupter.check()
        except Exception:
            if interrupter is not None and interrupter.requested:
                raise KeyboardInterrupt from None  # the cancelled job's error is the interrupt
            raise
        for topic in (args.stats_topic, args.purchases_topic):
            offsets = partition_offsets(summary.bootstrap_servers, topic)
            summary.output_ends[topic] = sum(end - start for start, end in offsets.values())
        summary.total_seconds = time.perf_counter() - began
        print(format_summary(summary, args), file=out, flush=True)
        return summary
    finally:
        if interrupter is not None:
            interrupter.finish()
        if session is not None:
            session.stop()
        if broker is not None:
            broker.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    interrupter = Interrupter()
    interrupter.install()
    try:
        run(args, interrupter=interrupter)
    except KeyboardInterrupt:
        print("\ninterrupted: the streaming query, Spark and the broker were stopped", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
