"""broker.client.producer: the Kafka producer (seed 000), in Python."""
