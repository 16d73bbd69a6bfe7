"""The suite's Spark Python processes import the installed pyspark (tests/support/sitehook).

What is checked: ``spark_zip_entries`` drops exactly the zips and jars of a pyspark
installed in a site directory, and nothing of another Spark; and a Spark Python worker of
the suite's session really imports pyspark from the installed package, from bytecode,
with Spark's zip gone from its path (the suite's CPU depends on it: from the zip, each
worker compiled pyspark again). ``daemon_worker_module`` recognises exactly Spark's daemon
command lines, and a worker of the suite's session was forked by a daemon that had
imported pyarrow, pandas and the connector and frozen them for the collector, with no
other thread alive.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

SITEHOOK = Path(__file__).parent / "support" / "sitehook" / "sitecustomize.py"


def _hook():
    spec = importlib.util.spec_from_file_location("suite_sitehook", SITEHOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _site(tmp_path: Path, *, py4j: bool = True) -> Path:
    site = tmp_path / "lib" / "site-packages"
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "jars").mkdir()
    (site / "pyspark" / "__init__.py").write_text("")
    if py4j:
        (site / "py4j").mkdir()
        (site / "py4j" / "__init__.py").write_text("")
    return site


def test_only_the_installed_pysparks_zips_and_jars_are_dropped(tmp_path):
    site = _site(tmp_path)
    pkg = site / "pyspark"
    ours = [str(pkg / "python" / "lib" / "pyspark.zip"), str(pkg / "python" / "lib" / "py4j-0.10.9.9-src.zip"),
            str(pkg / "jars" / "spark-core_2.13-4.3.0.jar")]
    other = ["/opt/spark/python/lib/pyspark.zip", "/opt/spark/jars/spark-core_2.13-4.3.0.jar",
             str(pkg / "python"), str(site), "/srv/app/app.zip"]
    assert _hook().spark_zip_entries(other[:2] + ours + other[2:], [str(site)]) == ours


def test_nothing_is_dropped_without_an_installed_pyspark_and_py4j(tmp_path):
    site = _site(tmp_path, py4j=False)
    entry = str(site / "pyspark" / "python" / "lib" / "pyspark.zip")
    assert _hook().spark_zip_entries([entry], [str(site)]) == []
    assert _hook().spark_zip_entries([entry], [str(tmp_path / "elsewhere" / "site-packages")]) == []


@pytest.mark.skipif(os.environ.get("KAFKALOG_TEST_SPARK_ZIPS") == "1", reason="Spark's zips kept on request")
def test_a_spark_worker_of_the_suite_imports_the_installed_pyspark(spark):
    def where(_):
        import sys

        import pyspark
        import pyspark.sql
        return [pyspark.__file__, pyspark.sql.__spec__.cached or "",
                [p for p in sys.path if p.endswith((".zip", ".jar")) and "pyspark" in p]]

    (file, cached, zips), = spark.sparkContext.parallelize([0], 1).map(where).collect()
    import pyspark
    assert file == pyspark.__file__ and ".zip" not in file
    assert cached.endswith(".pyc")  # imported from bytecode
    assert zips == []


def test_only_a_spark_daemons_command_line_names_a_worker_module():
    module = _hook().daemon_worker_module
    assert module(["/venv/bin/python", "-m", "pyspark.daemon", "pyspark.worker"]) == "pyspark.worker"
    assert module(["python3", "-u", "-m", "pyspark.daemon", "pyspark.sql.worker.plan_data_source_read"]) \
        == "pyspark.sql.worker.plan_data_source_read"
    assert module(["python", "-m", "pyspark.daemon"]) == "pyspark.worker"
    for other in (["python", "-m", "pyspark.worker"], ["python", "-m", "broker"], ["python", "script.py"],
                  ["python", "-m", "pytest", "pyspark.daemon"], []):
        assert module(other) is None


@pytest.mark.skipif(os.environ.get("KAFKALOG_TEST_SPARK_PRELOAD") == "0", reason="preloading turned off on request")
def test_a_spark_worker_of_the_suite_was_forked_with_the_connector_imported(spark):
    def state(_):
        import gc
        import os
        import sys
        return [gc.get_freeze_count(), sorted(m for m in ("pyarrow", "pandas", "spark_kafkalog.source",
                                                          "broker.client.producer") if m in sys.modules),
                os.environ.get("JE_ARROW_MALLOC_CONF"), os.environ.get("OPENBLAS_NUM_THREADS")]

    (frozen, modules, jemalloc, openblas), = spark.sparkContext.parallelize([0], 1).map(state).collect()
    assert frozen > 10_000  # the daemon's modules, frozen before the fork
    assert modules == ["broker.client.producer", "pandas", "pyarrow", "spark_kafkalog.source"]
    assert jemalloc == "background_thread:false" and openblas == "1"
