"""Tiered storage's quotas (KIP-956): the broker-wide byte rates at which the remote log
manager copies segments to remote storage and Fetch reads from it (Kafka's
``RLMQuotaManager``).

Owns ``RLMQuotaManager``: one sensor with a ``Rate`` over ``window.num`` windows of
``window.size.seconds``, bounded by ``max.bytes.per.second`` (Kafka's keys, per kind:
``remote.log.manager.copy.max.bytes.per.second`` / ``.copy.quota.window.num`` /
``.copy.quota.window.size.seconds`` and the same with ``fetch``; the byte rate's default,
Long.MAX_VALUE, means no quota). ``throttle_time_ms()`` is 0 within the quota, else the
time that brings the rate back to it (``QuotaUtils``' ``X = (O - T) / T * W``);
``record(bytes)`` adds bytes; ``update_quota`` takes a new bound (the dynamic config,
``broker.server.dynamic_config``) without losing what was recorded.

How the remote log manager (``broker.log.remote.log_manager``) uses them, as Kafka does:
a copy waits while the copy quota is exceeded, then records the segment's size and copies
it; a Fetch of remote offsets while the fetch quota is exceeded gets no records for that
partition (no error: the consumer fetches again), otherwise the bytes read are recorded.
The log layer sees only ``throttle_time_ms`` and ``record`` (it cannot import this layer).

Thread-safety: the sensor's lock; the Fetch request threads record concurrently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.log.remote.config import RemoteLogManagerConfig
from broker.record.limits import INT64_MAX

from .metrics import MetricConfig, MetricName, Metrics, Quota, QuotaViolationError, Rate, Time, throttle_time

KINDS = ("copy", "fetch")


class RLMQuotaManager:
    """One kind's quota (module docstring)."""

    def __init__(self, kind: str, max_bytes_per_second: int, window_num: int = 11, window_size_seconds: int = 1,
                 time: Time | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown remote log quota {kind!r}")
        self.kind = kind
        self.metrics = Metrics(MetricConfig(samples=window_num, time_window_ms=window_size_seconds * 1000),
                               time=time)
        self.sensor = self.metrics.sensor(f"remote-{kind}-bytes")
        self.sensor.add(MetricName.of(f"remote-{kind}-bytes-rate", "RLMQuotaManager"), Rate())
        self.max_bytes_per_second = INT64_MAX
        self.update_quota(max_bytes_per_second)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | RemoteLogManagerConfig, kind: str,
                    time: Time | None = None) -> RLMQuotaManager:
        """The ``kind`` quota of tiered storage's settings (or of a server config)."""
        settings = config if isinstance(config, RemoteLogManagerConfig) else RemoteLogManagerConfig.from_config(config)
        quota = settings.quota(kind)
        return cls(kind, quota.max_bytes_per_second, quota.window_num, quota.window_size_seconds, time)

    @property
    def bounded(self) -> bool:
        return self.max_bytes_per_second < INT64_MAX

    def update_quota(self, max_bytes_per_second: int | None) -> None:
        """A new bound (None or Long.MAX_VALUE: none); what was recorded stays."""
        bound = INT64_MAX if max_bytes_per_second is None else int(max_bytes_per_second)
        self.max_bytes_per_second = bound
        config = self.metrics.config
        self.sensor.reconfigure(config.with_quota(Quota.upper_bound(bound) if bound < INT64_MAX else None))

    def throttle_time_ms(self) -> int:
        """0 while the rate is within the quota, else how long until it is back to it."""
        if not self.bounded:
            return 0
        now = self.metrics.time.milliseconds()
        try:
            self.sensor.check_quotas(now)
        except QuotaViolationError as exc:
            return max(throttle_time(exc, now), 1)
        return 0

    def record(self, n_bytes: int) -> None:
        self.sensor.record(float(n_bytes), check_quotas=False)


__all__ = ["KINDS", "RLMQuotaManager"]
