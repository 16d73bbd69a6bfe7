"""The log cleaner (Kafka's ``LogCleaner``): compaction of ``cleanup.policy=compact`` logs.

Modules, one concept each: ``offset_map`` (key digest -> latest offset, bounded by
log.cleaner.dedupe.buffer.size), ``checkpoint`` (the ``cleaner-offset-checkpoint`` file of a
log directory), ``cleaner`` (``Cleaner``: build the map over the dirty section, then copy
each group of segments into a ``.cleaned`` segment and swap it in), ``manager``
(``LogCleanerManager``: which log to clean next; ``LogCleaner``: the cleaner threads),
``throttler`` (log.cleaner.io.max.bytes.per.second).
"""
