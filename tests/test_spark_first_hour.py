"""What a new Spark user meets first: a script run with the venv's interpreter without
activating the venv, a misspelled option or a bad value, a write without ``.mode("append")``.

* A script run as ``.venv/bin/python script.py`` (venv not activated, ``PYSPARK_PYTHON``
  unset, a ``python3`` without pyarrow first on ``PATH``, the session created before the
  project is imported) works: the venv make builds sets ``PYSPARK_PYTHON`` at every
  interpreter start, and importing ``spark_kafkalog`` does the same elsewhere. A session already started on
  an interpreter that cannot import pyarrow gets ``KafkaLogSetupError`` from ``register()``
  whose first line says what to do.
* Option errors through Spark: the project's message right after pyspark's one-line prefix
  and a single frame (none of the parser's), the user's key with "did you mean", a bad value
  named with its valid values; with Spark's hideTraceback setting the message is the first
  line.
* pyspark refuses the default save mode (ErrorIfExists) of every Python data source before
  the source is called: the docs say to write ``.mode("append")``; if a pyspark accepts it
  one day, ``test_pyspark_refuses_the_default_save_mode`` says what to change.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import spark_kafkalog
from spark_kafkalog.options import KafkaLogOptionError, parse_options

VENV_PYTHON = sys.executable

SCRIPT = textwrap.dedent("""\
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()  # before the project is imported: the venv's start
                                                # hook alone points the workers at this interpreter
    import spark_kafkalog
    from spark_kafkalog.embedded import EmbeddedBroker

    spark_kafkalog.register(spark)
    with EmbeddedBroker() as broker:
        rows = spark.createDataFrame([("a", "1"), ("b", "2"), ("c", "3")], "key STRING, value STRING")
        (rows.write.format("kafkalog").mode("append")
         .option("kafka.bootstrap.servers", broker.bootstrap_servers).option("topic", "first").save())
        count = (spark.read.format("kafkalog").option("kafka.bootstrap.servers", broker.bootstrap_servers)
                 .option("subscribe", "first").load().count())
        print(f"read {count} records")
    spark.stop()
    """)


def _python_without_pyarrow(directory: Path) -> Path:
    """A directory holding ``python3`` and ``python``: the system's interpreter, isolated from
    every site-packages (so no pyarrow, no pyspark), as a fresh machine's ``python3``."""
    directory.mkdir()
    base = getattr(sys, "_base_executable", None) or "/usr/bin/python3"
    for name in ("python3", "python"):
        path = directory / name
        path.write_text(f'#!/bin/sh\nexec {base} -I -S "$@"\n')
        path.chmod(0o755)
    probe = subprocess.run([str(directory / "python3"), "-c", "import pyarrow"], capture_output=True)
    assert probe.returncode != 0, "the stand-in python3 can import pyarrow"
    return directory


def _bare_env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH",
                        "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_a_script_run_with_the_venv_python_works_without_activating_it(tmp_path: Path) -> None:
    bin_dir = _python_without_pyarrow(tmp_path / "bin")
    script = tmp_path / "first.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([VENV_PYTHON, str(script)], cwd=tmp_path, env=_bare_env(bin_dir),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "read 3 records" in proc.stdout
    # register() next to pyspark's own discovery of the source: no warning about replacing it
    assert "replaced a statically registered data source" not in proc.stderr, proc.stderr[-3000:]


def test_every_interpreter_of_the_venv_starts_with_the_worker_python_set(tmp_path: Path) -> None:
    """The venv make builds sets PYSPARK_PYTHON / PYSPARK_DRIVER_PYTHON at interpreter start,
    without any import of the project; never over a set value, never under spark-submit."""
    code = "import os; print(os.environ.get('PYSPARK_PYTHON'), os.environ.get('PYSPARK_DRIVER_PYTHON'))"
    env = _bare_env(tmp_path)
    out = subprocess.run([VENV_PYTHON, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [VENV_PYTHON, VENV_PYTHON], "kafkalog-worker-python.pth missing from the venv"
    out = subprocess.run([VENV_PYTHON, "-c", code], env=dict(env, PYSPARK_PYTHON="/opt/py3"),
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["/opt/py3", VENV_PYTHON]
    out = subprocess.run([VENV_PYTHON, "-c", code], env=dict(env, PYSPARK_GATEWAY_PORT="1"),
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "None"]


def test_importing_the_package_sets_the_worker_python_only_when_unset(tmp_path: Path) -> None:
    """Outside a venv built by make (here: -S, no site hook), the import does it."""
    code = ("import os, spark_kafkalog; print(os.environ.get('PYSPARK_PYTHON')); "
            "print(os.environ.get('PYSPARK_DRIVER_PYTHON'))")
    env = dict(_bare_env(tmp_path), PYTHONPATH=str(Path(spark_kafkalog.__file__).resolve().parents[1]))
    bare = subprocess.run([VENV_PYTHON, "-S", "-c", "import os; print(os.environ.get('PYSPARK_PYTHON'))"],
                          env=env, capture_output=True, text=True, check=True)
    assert bare.stdout.split() == ["None"]
    out = subprocess.run([VENV_PYTHON, "-S", "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [VENV_PYTHON, VENV_PYTHON]
    mine = dict(env, PYSPARK_PYTHON="/opt/python/bin/python3")
    out = subprocess.run([VENV_PYTHON, "-S", "-c", code], env=mine, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["/opt/python/bin/python3", VENV_PYTHON]


class _Context:
    def __init__(self, python: str) -> None:
        self.pythonExec = python


class _Session:
    def __init__(self, python: str) -> None:
        self.sparkContext = _Context(python)


def test_register_refuses_a_session_whose_workers_lack_pyarrow(tmp_path: Path) -> None:
    bin_dir = _python_without_pyarrow(tmp_path / "bin")
    with pytest.raises(spark_kafkalog.KafkaLogSetupError) as info:
        spark_kafkalog.register(_Session(str(bin_dir / "python3")))
    first, rest = str(info.value).split("\n", 1)
    assert first.startswith("Run Spark's Python workers on this interpreter: "
                            f"export PYSPARK_PYTHON={VENV_PYTHON} ")
    assert "cannot import pyarrow" in rest and "No module named 'pyarrow'" in rest
    with pytest.raises(spark_kafkalog.KafkaLogSetupError, match="which is not found"):
        spark_kafkalog.register(_Session(str(tmp_path / "no-such-python")))


def test_register_accepts_this_interpreter(spark) -> None:
    assert spark.sparkContext.pythonExec == VENV_PYTHON
    spark_kafkalog.register(spark)  # no error, and idempotent
    spark_kafkalog.register(spark)


# --- option errors ---

def _load_error(spark, **options) -> str:
    reader = spark.read.format("kafkalog").option("kafka.bootstrap.servers", "127.0.0.1:1")
    for key, value in options.items():
        reader = reader.option(key, value)
    with pytest.raises(Exception) as info:
        reader.load()
    return str(info.value)


def test_a_misspelled_option_gets_a_suggestion_not_a_list(spark) -> None:
    text = _load_error(spark, subscribe="t", startingOffset="earliest")
    lines = text.splitlines()
    # pyspark's prefix and the one frame that raised, then the project's message
    assert lines[0].startswith("[PYTHON_DATA_SOURCE_ERROR]"), text
    assert lines[3] == ("spark_kafkalog.options.KafkaLogOptionError: Unknown option 'startingoffset' for "
                        "the kafkalog source; did you mean 'startingOffsets'?"), text
    assert "options.py" not in text and "Valid options" not in text and "maxBytesPerBatch" not in text
    # the user's spelling where it is known (Spark passes the keys lower-cased)
    with pytest.raises(KafkaLogOptionError) as info:
        parse_options({"subscribe": "t", "path": "/l", "startingOffset": "earliest"})
    assert str(info.value) == ("Unknown option 'startingOffset' for the kafkalog source; did you mean "
                               "'startingOffsets'?")
    # nothing close: the valid names
    assert "Valid options: assign, " in _load_error(spark, subscribe="t", colour="blue")


@pytest.mark.parametrize("options, message", [
    ({"startingOffsets": "begin"},
     "startingOffsets: 'begin' is not valid; use earliest, latest, or a JSON object of offsets per "
     'partition such as {"topicA":{"0":23,"1":-1}} (-2: earliest, -1: latest)'),
    ({"endingOffsets": "end"}, "endingOffsets: 'end' is not valid; use latest or a JSON object of offsets"),
    ({"kafka.isolation.level": "committed"},
     "kafka.isolation.level: 'committed' is not valid; use read_committed or read_uncommitted"),
    ({"failOnDataLoss": "no"}, "failOnDataLoss: 'no' is not valid; use true or false"),
    ({"includeHeaders": "1"}, "includeHeaders: '1' is not valid; use true or false"),
    ({"minPartitions": "two"}, "minPartitions: 'two' is not valid; use a positive integer"),
    ({"maxOffsetsPerTrigger": "-5"}, "maxOffsetsPerTrigger: '-5' is not valid; use a positive integer"),
    ({"startingOffsetsByTimestampStrategy": "skip"},
     "startingOffsetsByTimestampStrategy: 'skip' is not valid; use error or latest"),
])
def test_a_bad_value_names_the_option_and_its_values(spark, options, message) -> None:
    text = _load_error(spark, subscribe="t", **options)
    assert text.splitlines()[3].startswith(f"spark_kafkalog.options.KafkaLogOptionError: {message}"), text
    with pytest.raises(KafkaLogOptionError) as info:
        parse_options({"subscribe": "t", "path": "/l", **options})
    assert str(info.value).splitlines()[0].startswith(message)


def test_with_hidden_tracebacks_the_message_is_the_first_line(spark) -> None:
    key = "spark.sql.execution.pyspark.udf.hideTraceback.enabled"
    before = spark.conf.get(key, "false")
    spark.conf.set(key, "true")
    try:
        text = _load_error(spark, subscribe="t", startingOffsets="begin")
    finally:
        spark.conf.set(key, before)
    assert text.splitlines()[0] == (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: "
        "spark_kafkalog.options.KafkaLogOptionError: startingOffsets: 'begin' is not valid; use earliest, "
        'latest, or a JSON object of offsets per partition such as {"topicA":{"0":23,"1":-1}} '
        "(-2: earliest, -1: latest)"), text


def test_a_misspelled_sink_option_gets_a_suggestion(spark) -> None:
    df = spark.createDataFrame([("v",)], "value STRING")
    with pytest.raises(Exception) as info:
        (df.write.format("kafkalog").mode("append").option("kafka.bootstrap.servers", "127.0.0.1:1")
         .option("topic", "t").option("kafkalog.exactlyOnc", "true").save())
    lines = str(info.value).splitlines()
    assert lines[3] == ("spark_kafkalog.writers.common.KafkaLogWriteError: unknown option 'kafkalog.exactlyonc' "
                        "for the kafkalog sink; did you mean 'kafkalog.exactlyOnce'?"), lines


# --- save modes ---

def test_pyspark_refuses_the_default_save_mode(spark) -> None:
    """Spark's Kafka docs write without a mode; pyspark refuses ErrorIfExists (and Ignore) for
    every Python data source in the JVM, before the source is called. If this fails because
    the write got further, pyspark now lets a Python source take the default mode: accept it
    as append in ``KafkaLogDataSource.writer`` and update the "Modes" section of
    docs/spark/writing.md and the comparison tables (README.md, docs/spark/index.md)."""
    df = spark.createDataFrame([("v",)], "value STRING")
    for mode in (None, "ignore"):
        w = df.write.format("kafkalog").option("kafka.bootstrap.servers", "127.0.0.1:1").option("topic", "t")
        if mode:
            w = w.mode(mode)
        with pytest.raises(Exception) as info:
            w.save()
        assert "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" in str(info.value), str(info.value)[:2000]


def test_overwrite_says_to_append(spark) -> None:
    df = spark.createDataFrame([("v",)], "value STRING")
    with pytest.raises(Exception) as info:
        (df.write.format("kafkalog").mode("overwrite").option("kafka.bootstrap.servers", "127.0.0.1:1")
         .option("topic", "t").save())
    assert "use .mode(\"append\")" in str(info.value).splitlines()[3]
