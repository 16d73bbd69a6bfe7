"""The log cleaner (Kafka's ``LogCleaner``): compaction of ``cleanup.policy=compact`` logs.

Modules, one concept each: ``offset_map`` (key hash -> latest offset, bounded by
log.cleaner.dedupe.buffer.size, filled a window of records at a time with numpy),
``checkpoint`` (the ``cleaner-offset-checkpoint`` file of a log directory), ``cleaner``
(``Cleaner``: build the map over the dirty section, then copy each group of segments into a
``.cleaned`` segment and swap it in; KIP-534 delete horizons), ``scan`` (the record walks
of both passes, a window of batches at a time, with numpy), ``rewrite`` (pass 2's output
for a run of plain data batches, built at once), ``manager`` (``LogCleanerManager``: which
log to clean next; ``LogCleaner``: the cleaner threads, their summary lines and gauges),
``throttler`` (log.cleaner.io.max.bytes.per.second).
"""
