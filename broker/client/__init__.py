"""broker.client: the client core against the Kafka wire protocol (Kafka's ``clients``).

* ``network.py``: ``NetworkClient`` (connections, ApiVersions, in-flight requests);
  ``metadata.py``: the cluster view (``Metadata``) the others route with.
* ``producer/``: ``KafkaProducer`` (accumulator, partitioner, sender, idempotence) and its
  columnar ``send_arrow``.
* ``consumer/``: range fetches and offset lookups for the Spark reader, the partition
  poller of ``kafkalog consume``, and a group's committed offsets.
* ``consumer/share.py``: ``KafkaShareConsumer`` (KIP-932 share groups), exported here.
* ``admin.py``: ``AdminClient`` (topics, partitions, configs, groups), Kafka's ``Admin``;
  ``admin_types.py``: its typed errors, argument and result types (re-exported by ``admin``).

Imports ``broker.protocol`` and ``broker.record`` only: never the storage engine or the
server. Thread-safety: each module says; a client object belongs to one thread unless its
docstring says otherwise (the producer's ``send`` is thread-safe).
"""

__all__ = ["AcknowledgeType", "KafkaShareConsumer"]


def __getattr__(name: str):
    if name in __all__:  # imported on first use (pyarrow, numpy)
        from broker.client.consumer import share
        return getattr(share, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
