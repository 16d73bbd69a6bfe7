"""spark-kafkalog broker: a Kafka-compatible broker and client core (see ../DESIGN.md layers)."""
