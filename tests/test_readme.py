"""The README's five-minute tour, run as written, and run again.

The blocks after ``<!-- tour:shell -->`` and ``<!-- tour:python -->`` are taken from
README.md. The shell block's first line starts the broker with conf/server.properties; the
test starts that same command (on a free port, with ./data under a temporary directory)
and runs the rest of the block with bash (``set -euo pipefail``), with ``localhost:9092``
replaced by the broker's address and ``/tmp/`` by the test's directory. Then it restarts the
broker on the same data directory and runs the block a second time, as a user who runs the
tour again would: every step must pass again (the topic is created only if missing, the
group resumes where it stopped, the export replaces its output). The Python block then
runs against the same broker in the suite's Spark session. What each step printed or
wrote is checked, so a README that drifts from the code fails here. The tour shows that any
Kafka client works by producing one record with kcat, so both tests need it (``kcat``
marker: skipped where it is not installed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from broker.client.consumer import fetch_arrow, latest_offsets, partitions_for
from spark_kafkalog.embedded import EmbeddedBroker
from tests.support.spark import get_spark

pytestmark = pytest.mark.kcat

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BROKER_LINE = "kafkalog broker conf/server.properties &"


def tour_block(tag: str) -> str:
    m = re.search(rf"<!-- tour:{tag} -->\n```\w+\n(.*?)```", README, re.S)
    assert m, f"README.md has no <!-- tour:{tag} --> block"
    return m.group(1)


def _records(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    cfg = {"bootstrap.servers": bootstrap}
    out = []
    tps = [(topic, i.partition) for i in partitions_for(cfg, [topic])[topic]]
    for (t, p), end in latest_offsets(cfg, tps).items():
        for batch in fetch_arrow(cfg, t, p, 0, end):
            out.extend(zip(batch.column("key").to_pylist(), batch.column("value").to_pylist()))
    return out


RUNS = 2  # the tour, then the tour again on the same data


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    work = tmp_path_factory.mktemp("tour")
    script = tour_block("shell")
    first, rest = script.split("\n", 1)
    assert first.split("#")[0].strip() == BROKER_LINE
    broker = EmbeddedBroker(work / "data" / "kafka-logs", config_file=ROOT / "conf" / "server.properties",
                            overrides={"log.retention.ms": -1}).start()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYSPARK_PYTHON=sys.executable)
    runs: list[tuple[subprocess.CompletedProcess, list[dict]]] = []
    try:
        for n in range(RUNS):
            if n:
                broker.restart()  # the user stopped the broker; its first line starts it again
            script = rest.replace("localhost:9092", broker.bootstrap_servers).replace("/tmp/", f"{work}/")
            proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=300)
            exported = [json.loads(line) for f in sorted((work / "clicks-json").glob("*.json"))
                        for line in f.read_text().splitlines()]  # what this run's export wrote
            runs.append((proc, exported))
            if proc.returncode != 0:
                break
        yield broker, work, runs
    finally:
        broker.stop()


def _check_run(n: int, proc: subprocess.CompletedProcess, exported: list[dict]) -> None:
    """What run ``n`` (0: the first) printed and exported; after it the topic holds n + 1
    copies of the three records."""
    assert proc.returncode == 0, f"run {n + 1}: " + proc.stdout[-3000:] + proc.stderr[-3000:]
    out, copies = proc.stdout, n + 1
    # created the first time; the second time --if-not-exists says nothing
    assert ("Created topic clicks." in out) == (n == 0), out
    assert "PartitionCount: 3" in out
    # the consumer printed three records with keys and headers, and committed: the second
    # time the group resumes after the first run's records and prints the new ones
    assert re.search(r'source:tour\talice\t\{"page":"/"\}', out), out
    assert re.search(r'source:tour\tbob\t\{"page":"/cart"\}', out), out
    assert re.search(r'NO_HEADERS\tcarol\t\{"page":"/help"\}', out), out
    assert "Processed a total of 3 messages" in proc.stderr
    describe = [line.split() for line in out.splitlines() if line.startswith("tour ")]
    assert sum(int(cols[3]) for cols in describe) == 3 * copies and all(cols[5] == "0" for cols in describe)
    assert "Completed updating config for topic clicks." in out
    latest = [line.split(":") for line in out.splitlines() if re.fullmatch(r"clicks:\d+:\d+", line)]
    assert [int(p) for _, p, _ in latest] == [0, 1, 2] and sum(int(o) for _, _, o in latest) == 3 * copies
    assert "baseOffset" in out  # dump-log of clicks-0
    assert sorted(r["value"] for r in exported) == sorted(
        ['{"page":"/"}', '{"page":"/cart"}', '{"page":"/help"}'] * copies)


def test_shell_tour(tour) -> None:
    broker, work, runs = tour
    _check_run(0, *runs[0])


def test_shell_tour_runs_again(tour) -> None:
    broker, work, runs = tour
    assert len(runs) == RUNS, "the first run failed (see test_shell_tour)"
    _check_run(1, *runs[1])
    assert sorted(_records(broker.bootstrap_servers, "clicks")) == sorted(
        [(b"alice", b'{"page":"/"}'), (b"bob", b'{"page":"/cart"}'), (b"carol", b'{"page":"/help"}')] * RUNS)


def test_python_tour(tour, capsys) -> None:
    broker, work, runs = tour
    assert all(proc.returncode == 0 for proc, _ in runs)
    get_spark()  # the suite's session: the block's getOrCreate() returns it
    code = (tour_block("python").replace("localhost:9092", broker.bootstrap_servers)
            .replace('"data/kafka-logs"', repr(str(broker.log_dir))).replace("/tmp/", f"{work}/"))
    namespace: dict = {}
    exec(compile(code, "README.md:tour:python", "exec"), namespace)
    shown = capsys.readouterr().out
    assert '{"page":"/cart"}' in shown and "carol" in shown
    # the tour says what it wrote and copied: every record of clicks, once per shell run
    assert f"{3 * len(runs)} records written to clicks-upper" in shown, shown
    assert f"{3 * len(runs)} records copied to clicks-copy" in shown, shown
    upper = _records(broker.bootstrap_servers, "clicks-upper")
    values = [b'{"PAGE":"/"}', b'{"PAGE":"/CART"}', b'{"PAGE":"/HELP"}']
    assert sorted(v for _, v in upper) == sorted(values * len(runs))
    copy = _records(broker.bootstrap_servers, "clicks-copy")
    assert sorted(copy) == sorted(_records(broker.bootstrap_servers, "clicks"))
    assert namespace["query"].lastProgress is not None
