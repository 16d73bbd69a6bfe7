"""broker.client: the client core (producer, later consumer and admin) against the Kafka wire protocol."""
