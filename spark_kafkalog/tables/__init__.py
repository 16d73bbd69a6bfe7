"""Topics as tables: exactly-once incremental exports of Kafka topics to Iceberg (pyiceberg)
and Delta (deltalake) tables, with the offsets the table holds stored in the table's own
commits (``base.py``), so that the table is its own checkpoint.

Modules: ``base`` (offsets, written files, table states, the target interface),
``layout`` (a table's columns and partitioning), ``files`` (the executors' Parquet files),
``iceberg`` / ``iceberg_arrow`` and ``delta`` / ``delta_schema`` (the targets), ``export``
(the exactly-once batch export). Importing this package imports neither pyiceberg
nor deltalake; each target imports its library when it is used.
"""
