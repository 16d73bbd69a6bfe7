"""broker.server.quota: quotas and throttling (Kafka's client and connection quotas, KIP-13 and KIP-124).

* ``metrics.py``: Kafka's metric primitives (Sensor, Rate over a SampledStat, TokenBucket,
  Quota, MetricConfig, the injectable clock) and the throttle-time arithmetic.
* ``client_quota_manager.py``: ``ClientQuotaManager`` (PRODUCE / FETCH byte rates, the
  REQUEST percentage): entity precedence, recording, throttle times, the delay queue and
  its reaper.
* ``client_quotas.py``: the quota limits as cluster metadata (AlterClientQuotas /
  DescribeClientQuotas) and ``QuotaManagers``.
* ``connection_quotas.py``: the acceptor's connection counts and creation rates.
* ``controller_mutation.py``: the KIP-599 token-bucket quota of CreateTopics /
  CreatePartitions / DeleteTopics (strict and permissive).

Thread-safety: see each module.
"""
