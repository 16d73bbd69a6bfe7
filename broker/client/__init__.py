"""broker.client: the client core against the Kafka wire protocol: producer, consumer
(range fetches and offset lookups), later admin."""
