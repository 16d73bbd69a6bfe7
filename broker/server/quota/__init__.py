"""broker.server.quota: quotas and throttling (seed 002).

* ``metrics.py``: Kafka's metric primitives (Sensor, Rate over a SampledStat, TokenBucket,
  Quota, MetricConfig, the injectable clock) and the throttle-time arithmetic.

Thread-safety: see each module.
"""
