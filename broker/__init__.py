"""spark-kafkalog's broker: a Kafka-compatible broker and client core in Python.

Its packages, and the Apache Kafka modules each follows (names, file formats, behaviour):

* ``record``: RecordBatch v2 (and legacy v0/v1 reads), varints, CRC-32C, compression
  codecs, control records, the columnar codec: Kafka's ``clients`` common record classes
  (``org.apache.kafka.common.record``).
* ``protocol``: wire primitives, request/response schemas generated from Kafka's JSON
  definitions (``tools/kafka-spec``), error codes: ``clients``' common protocol and message
  classes (``org.apache.kafka.common.protocol`` / ``.message``).
* ``log``: the storage engine (segments, indexes, producer state, recovery, retention):
  Kafka's ``storage`` module (``org.apache.kafka.storage.internals.log``).
* ``server``: the socket server, request handlers, topic metadata and the group
  coordinator: Kafka's ``core`` (``kafka.server``, ``kafka.network``) and
  ``group-coordinator``.
* ``client``: producer, consumer pieces and admin client: Kafka's ``clients``
  (``org.apache.kafka.clients``).
* ``tools``: the console tools behind the ``kafkalog`` command (produce, consume, topics,
  consumer groups, dump-log, the broker command): Kafka's ``tools``.

Imports go down only: tools -> client / server -> protocol / log -> record (see
``docs/DESIGN.md``; ``tests/test_layering.py`` enforces it). ``python -m broker CONFIG``
starts a broker (``__main__.py``); ``config.py`` reads Java-properties files with Kafka's
keys and defaults.
"""
