"""Topics as tables: exactly-once incremental exports of Kafka topics to Iceberg (pyiceberg)
and Delta (deltalake) tables, with the offsets the table holds stored in the table's own
commits (``base.py``), so that the table is its own checkpoint.

``export(spark, topic=..., table=..., format="iceberg"|"delta", ...)`` runs one export
(``job.export_table``, whose docstring is the manual; the ``kafkalog export --format
iceberg|delta`` command runs the same). ``export_stream(...)`` starts its structured
streaming form (``stream.export_stream``: one commit per micro-batch; ``kafkalog export
--streaming``).

Modules: ``base`` (offsets, written files, table states, the target interface),
``layout`` (a table's columns and partitioning), ``files`` (the executors' Parquet files),
``iceberg`` / ``iceberg_arrow`` and ``delta`` / ``delta_schema`` (the targets),
``targets`` (opening a target of either format), ``job`` (the exactly-once batch export),
``stream`` (the exactly-once streaming export). Importing this package imports neither
pyiceberg nor deltalake, nor pyspark; each is imported when it is used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["export", "export_stream"]


def export(spark, *, topic: str, table: str, format: str = "iceberg", **kwargs: Any):  # noqa: A002 - Spark's word
    """Export what ``topic`` holds after the offsets ``table`` stores, exactly once (see
    ``job.export_table`` for the other arguments: ``bootstrap_servers`` or ``path``,
    ``value_format``, ``catalog_uri``, ``storage_options``, ``partition_by``, ...).
    Returns a ``job.TableExportResult``; raises ``base.TableError``."""
    from .job import export_table

    return export_table(spark, topic=topic, table=table, fmt=format, **kwargs)


def export_stream(spark, *, topic: str, table: str, format: str = "iceberg", **kwargs: Any):  # noqa: A002
    """Start the streaming export of ``topic`` to ``table``, exactly once, one commit per
    micro-batch, resuming from the offsets the table stores (see ``stream.export_stream``
    for the other arguments: those of ``export`` plus ``trigger`` ("availableNow" or an
    interval such as "10 seconds"), ``max_offsets_per_trigger``, ``checkpoint_location``,
    ``query_name``, ``on_commit``). Returns the started ``StreamingQuery``; raises
    ``base.TableError``."""
    from .stream import export_stream as start

    return start(spark, topic=topic, table=table, fmt=format, **kwargs)
