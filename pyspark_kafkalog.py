"""Makes ``spark.read.format("kafkalog")`` work with no extra call.

pyspark (>= 4.0) imports every installed top-level module named ``pyspark_*`` that
exposes ``DefaultSource`` (a ``DataSource`` subclass) and registers it under its
``name()`` (``pyspark/sql/worker/lookup_data_sources.py``). This module is that hook for
``spark_kafkalog``; installed by the distribution (``py-modules`` in pyproject.toml).

Owns nothing else. Thread-safety: import only.
"""

from spark_kafkalog.source import KafkaLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
