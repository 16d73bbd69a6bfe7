"""Bounds of Kafka's fixed-width integer types (Java's int and long).

Owns: ``INT32_MIN``/``INT32_MAX`` (Java ``Integer.MIN_VALUE``/``MAX_VALUE``) and
``INT64_MIN``/``INT64_MAX`` (``Long.MIN_VALUE``/``MAX_VALUE``), defined once for every
layer: varint range checks, relative offsets and positions of the log's indexes, "no
limit" defaults of configs (``broker.config.LONG_MAX`` is ``INT64_MAX``), open-ended
offset ranges.

Thread-safety: constants.
"""

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

__all__ = ["INT32_MAX", "INT32_MIN", "INT64_MAX", "INT64_MIN"]
