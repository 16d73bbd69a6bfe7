"""broker.client.producer: the Kafka producer, in Python (Kafka's Java producer's design).

``KafkaProducer`` (producer.py) is the entry point; the subsystems follow Kafka's split:
``config.py`` (ProducerConfig), ``accumulator.py`` (RecordAccumulator), ``batch.py``
(ProducerBatch and futures), ``buffer_pool.py`` (BufferPool), ``partitioner.py``
(BuiltInPartitioner), ``murmur2.py`` (keyed partitioning), ``sender.py`` (the I/O thread),
``transaction_manager.py`` (idempotence) and ``columnar.py`` (the Arrow bulk path).
"""

from broker.client.producer.batch import FutureRecordMetadata, RecordMetadata
from broker.client.producer.columnar import ArrowSendResult, PartitionRange
from broker.client.producer.config import ProducerConfig
from broker.client.producer.producer import KafkaProducer

__all__ = ["ArrowSendResult", "FutureRecordMetadata", "KafkaProducer", "PartitionRange",
           "ProducerConfig", "RecordMetadata"]
