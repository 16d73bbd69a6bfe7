"""The Kafka-compatible broker's network side: sockets, request dispatch, handlers, topics.

Modules (each docstring states its wire behaviour, invariants and thread-safety):

    socket_server.py   listeners, a reader and a worker thread per connection, framing,
                       read-ahead bounded by queued.max.requests, ordered responses,
                       sendmsg / sendfile
    apis.py            KafkaApis: header checks, ApiVersions fallback, dispatch table,
                       what is advertised, error containment
    handlers/          one module per API family (Produce, Fetch, Metadata, ...)
    metadata.py        topic registry (kafkalog-topics.json) and TopicManager
    group/             GroupCoordinator: committed offsets in __consumer_offsets
    errors.py          exceptions -> Kafka error codes
    broker.py          KafkaBroker: wiring, start, bound ports, shutdown

Imports go down only: ``broker.protocol``, ``broker.log``, ``broker.record`` and
``broker.config``; never ``broker.client``.

Typical embedded use::

    from broker.server import KafkaBroker
    with KafkaBroker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": "/tmp/kl"}) as b:
        print(b.bootstrap_servers)
"""

from broker.server.broker import KafkaBroker, validate_config

__all__ = ["KafkaBroker", "validate_config"]
