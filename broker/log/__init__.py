"""broker.log: the storage engine (segments, indexes, producer state, recovery, retention), Kafka-compatible on disk."""
