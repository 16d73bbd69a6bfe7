"""spark-kafkalog broker: a Kafka-compatible broker and client core, and Kafka's console tools
(``broker.tools``, the ``kafkalog`` subcommands that need no Spark); see ../DESIGN.md layers."""
