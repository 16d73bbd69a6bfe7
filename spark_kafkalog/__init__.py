"""Spark data source ``kafkalog``: Kafka topics as DataFrames, with the options and schema of
Spark's own Kafka source, read straight from Kafka log directories or fetched from brokers,
written with idempotent producers, and streamed with exact offsets.

Owns: the package's public entry points: ``register(spark)`` and ``__version__``. The
user manual is ``spark_kafkalog.source.KafkaLogDataSource``'s docstring (the sink's is
``spark_kafkalog.writers``'). Around the source: ``embedded`` (an embedded broker for
notebooks, tests and the main job), ``jobs`` (the main pipeline and the export job) and
``cli`` (the ``kafkalog`` command).

Invariants: importing the package is cheap (no pyarrow, numpy or JVM work): pyspark
imports ``pyspark_kafkalog`` in every planning worker to discover the source.

Thread-safety: ``register`` may be called from any thread, any number of times.
"""

from __future__ import annotations

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("spark-kafkalog")
except _metadata.PackageNotFoundError:  # running from a source checkout
    __version__ = "0.1.0"

__all__ = ["register", "__version__", "KafkaLogDataSource"]


def register(spark) -> None:
    """Register the ``kafkalog`` format with ``spark`` (a SparkSession). Not needed when
    the distribution is installed: pyspark then finds ``pyspark_kafkalog`` on its own."""
    from .source import KafkaLogDataSource
    spark.dataSource.register(KafkaLogDataSource)


def __getattr__(name: str):
    if name == "KafkaLogDataSource":
        from .source import KafkaLogDataSource
        return KafkaLogDataSource
    raise AttributeError(name)
