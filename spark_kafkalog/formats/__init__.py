"""Typed reads: ``valueFormat`` / ``keyFormat`` turn Spark's binary ``key`` and ``value``
into text or into structs of Schema Registry schemas (Avro, Protobuf, JSON Schema).

Modules, in the order a read meets them:

* ``options``: the option names and their parsing into ``FormatOptions`` (part of the
  source's ``ReadOptions``);
* ``sources``: where schemas come from (the Schema Registry, or the ``_schemas`` topic of
  a direct-mode log directory);
* ``registry``: driver side: the reader schemas resolved when the DataFrame is loaded
  (``TypedRead``: they fix the Spark schema), and the catalog of every version of the
  subjects, loaded when each batch or micro-batch is planned and carried by its input
  partitions (and the executors' one-time fetch of an id they were not sent);
* ``decode``: executor side: ``TypedBatchBuilder`` turns the readers' binary batches into
  the typed rows (framing, decoding grouped by writer schema, corrupt-record handling);
* ``avro``: the Avro type mapping and decoder the other two call.

The Protobuf and JSON mappings are format code, sans-IO, in ``broker.schema``
(``protobuf_arrow``, ``json_arrow``). The user's manual is ``docs/spark/formats.md`` and
the data source's docstring.

Thread-safety: see each module; nothing here is shared between tasks but process caches
under locks. Importing this package imports nothing heavy (``spark_kafkalog.options``
imports ``formats.options`` at load).
"""
