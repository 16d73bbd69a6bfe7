"""broker.record: RecordBatch v2, legacy message sets, varints, CRC-32C and compression codecs."""
