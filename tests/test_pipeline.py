"""The main job (spark_kafkalog/jobs/pipeline.py): what `make run` runs.

Covers: two runs on one data directory (the second finds the first one's records, the
batch job aggregates both, the streaming query processes exactly the new events through
its checkpoint, in several micro-batches with maxOffsetsPerTrigger); every figure of the
summary checked against the generated events; spark-submit against an external broker
(--bootstrap-servers, network mode); Ctrl-C stopping Spark and the embedded broker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from broker.client.consumer import fetch_arrow, latest_offsets, partitions_for
from broker.log.files import CLEAN_SHUTDOWN_FILE
from spark_kafkalog.jobs import pipeline
from tests.support.spark import get_spark

ROOT = Path(__file__).resolve().parents[1]


def _expected(events: int, seed: int) -> tuple[Counter, int]:
    pairs: Counter = Counter()
    purchases = 0
    for _key, value, _headers, _ts in pipeline.generate_events(events, seed, 0):
        e = json.loads(value)
        pairs[(e["page"], e["action"])] += 1
        purchases += e["action"] == "purchase"
    return pairs, purchases


def _topic_values(bootstrap: str, topic: str) -> list[bytes]:
    cfg = {"bootstrap.servers": bootstrap}
    out: list[bytes] = []
    tps = [(topic, info.partition) for info in partitions_for(cfg, [topic])[topic]]
    for (t, p), end in latest_offsets(cfg, tps).items():
        for batch in fetch_arrow(cfg, t, p, 0, end):
            out.extend(batch.column("value").to_pylist())
    return out


def test_two_runs_share_history_and_the_stream_is_exactly_once(tmp_path: Path) -> None:
    spark = get_spark()
    data = tmp_path / "data"
    argv = ["--data-dir", str(data), "--partitions", "4", "--max-offsets-per-trigger", "1500"]
    out1 = tmp_path / "run1.txt"
    with open(out1, "w") as f:
        s1 = pipeline.run(pipeline.parse_args(argv + ["--events", "4000", "--seed", "7"]), out=f)
    assert spark.sparkContext._jsc is not None  # a session it did not create is left running
    pairs1, purchases1 = _expected(4000, 7)
    assert s1.embedded and s1.read_mode.startswith("direct")
    assert s1.produced.records == 4000
    assert len(s1.partitions) == 4 and sum(e - b for b, e in s1.partitions.values()) == 4000
    assert all(e - b > 0 for b, e in s1.partitions.values())
    assert s1.batch_read.records == 4000
    assert s1.stats_written == len(pairs1)
    assert s1.stream_rows == 4000 and s1.stream_batches >= 3  # 4000 / 1500 per trigger
    assert s1.stream_written == purchases1
    assert s1.output_ends == {"clickstream-page-stats": len(pairs1), "clickstream-purchases": purchases1}
    text = out1.read_text()
    assert "4,000 events to 'clickstream'" in text and str(data / "kafka-logs") in text

    s2 = pipeline.run(pipeline.parse_args(argv + ["--events", "2500", "--seed", "8"]),
                      out=open(tmp_path / "run2.txt", "w"))
    pairs2, purchases2 = _expected(2500, 8)
    assert sum(e - b for b, e in s2.partitions.values()) == 6500
    assert s2.batch_read.records == 6500  # history included
    assert s2.stream_rows == 2500  # only the new events: the checkpoint resumed exactly
    assert s2.stream_written == purchases2
    assert s2.output_ends["clickstream-purchases"] == purchases1 + purchases2
    assert s2.output_ends["clickstream-page-stats"] == len(pairs1) + len(pairs1 + pairs2)
    # the stats of the second run aggregate both runs' events
    assert (data / "kafka-logs" / CLEAN_SHUTDOWN_FILE).exists()


def test_spark_submit_against_an_external_broker(kafka_broker, tmp_path: Path) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    topic = "pipeline-submit"
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
           "--properties-file", str(ROOT / "conf" / "spark-defaults.conf"),
           str(ROOT / "spark_kafkalog" / "jobs" / "pipeline.py"),
           "--bootstrap-servers", kafka_broker.bootstrap, "--events", "3000", "--seed", "3",
           "--input-topic", topic, "--stats-topic", topic + "-stats",
           "--purchases-topic", topic + "-purchases", "--checkpoint-dir", str(tmp_path / "chk")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"cluster {kafka_broker.bootstrap}" in proc.stdout
    assert "network (Fetch)" in proc.stdout
    pairs, purchases = _expected(3000, 3)
    purchase_values = [json.loads(v) for v in _topic_values(kafka_broker.bootstrap, topic + "-purchases")]
    assert len(purchase_values) == purchases
    assert len(_topic_values(kafka_broker.bootstrap, topic + "-stats")) == len(pairs)
    assert not (tmp_path / "data").exists()  # no embedded broker was started


def test_ctrl_c_stops_spark_and_the_broker(tmp_path: Path) -> None:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    proc = subprocess.Popen([sys.executable, "-m", "spark_kafkalog.jobs.pipeline", "--data-dir",
                             str(tmp_path / "data"), "--events", "2000"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        for line in proc.stdout:
            if line.startswith("batch job"):
                break
        time.sleep(0.5)  # scenario: Ctrl-C comes in the middle of the batch job
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted" in err and "Traceback" not in err
    assert (tmp_path / "data" / "kafka-logs" / CLEAN_SHUTDOWN_FILE).exists()
    log = (tmp_path / "data" / "broker.log").read_text()
    assert "started (kafkalog)" in log
