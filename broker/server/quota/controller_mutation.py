"""The controller-mutation quota (KIP-599): partitions created, added or deleted per
second per (user, client-id), on CreateTopics, CreatePartitions and DeleteTopics (seed
002: "the token bucket", "strict vs permissive controller-mutation quotas").

Owns ``ControllerMutationQuotaManager`` (a ``ClientQuotaManager`` whose sensors carry a
``TokenBucket`` with the quota, plus a ``Rate`` for operators) and the per-request quota
objects it hands out:

* ``StrictControllerMutationQuota`` (request versions at or above ``STRICT_SINCE``:
  CreateTopics v6, DeleteTopics v5, CreatePartitions v3): ``record(permits)`` first checks
  the bucket; an exhausted bucket (credits below zero) refuses the mutation with
  ``ThrottlingQuotaExceededError`` (the topic gets THROTTLING_QUOTA_EXCEEDED) and nothing is
  recorded; a bucket with credit accepts the mutation even if it takes the bucket below
  zero (the next one is refused until the bucket refilled).
* ``PermissiveControllerMutationQuota`` (older versions): always records; once the bucket
  is exhausted the response is throttled instead.
* Both remember the throttle time of their last refusal/exhaustion (``-tokens / quota``
  seconds) and ``throttle_time()`` decays it by the time elapsed since.
* ``UNBOUNDED``: when no controller-mutation quota is configured at all.

Thread-safety: a request's quota object belongs to its request thread; the check-then-
record of the strict quota happens under the entity sensor's lock, so that two requests
of one client cannot both pass on the same credit.
"""

from __future__ import annotations

from broker.protocol import ErrorCode
from broker.server.errors import ApiError

from .client_quota_manager import (
    ClientQuotaManager,
    ClientQuotaManagerConfig,
    ClientSensors,
    QuotaType,
)
from .metrics import (
    DEFAULT_INACTIVE_SENSOR_EXPIRATION_MS,
    MetricConfig,
    MetricName,
    Metrics,
    QuotaViolationError,
    Rate,
    Time,
    TokenBucket,
    token_bucket_throttle_time,
)

STRICT_SINCE = {"CreateTopics": 6, "DeleteTopics": 5, "CreatePartitions": 3}


class ThrottlingQuotaExceededError(ApiError):
    """A strict quota refused a mutation: THROTTLING_QUOTA_EXCEEDED, retry after
    ``throttle_time_ms``."""

    def __init__(self, throttle_time_ms: int) -> None:
        super().__init__(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                         f"The throttling quota has been exceeded (retry in {throttle_time_ms} ms)")
        self.throttle_time_ms = throttle_time_ms


class ControllerMutationQuota:
    """What a mutation request records its partitions against."""

    def record(self, permits: float) -> None:
        raise NotImplementedError

    def is_exceeded(self) -> bool:
        raise NotImplementedError

    def throttle_time(self) -> int:
        raise NotImplementedError


class _Unbounded(ControllerMutationQuota):
    def record(self, permits: float) -> None:
        pass

    def is_exceeded(self) -> bool:
        return False

    def throttle_time(self) -> int:
        return 0


UNBOUNDED: ControllerMutationQuota = _Unbounded()


class _BoundedQuota(ControllerMutationQuota):
    def __init__(self, time: Time, sensors: ClientSensors) -> None:
        self.time = time
        self.sensors = sensors
        self.last_throttle_time_ms = 0
        self.last_recorded_time_ms = 0

    def throttle_time(self) -> int:
        elapsed = self.time.milliseconds() - self.last_recorded_time_ms
        return max(0, self.last_throttle_time_ms - elapsed)

    def is_exceeded(self) -> bool:
        return self.last_throttle_time_ms > 0


class StrictControllerMutationQuota(_BoundedQuota):
    def record(self, permits: float) -> None:
        sensor = self.sensors.quota_sensor
        now = self.time.milliseconds()
        with sensor.lock:  # the check and the record are one step (two requests, one credit)
            try:
                sensor.check_quotas(now)
            except QuotaViolationError as e:
                self.last_throttle_time_ms = token_bucket_throttle_time(e)
                self.last_recorded_time_ms = now
                raise ThrottlingQuotaExceededError(self.last_throttle_time_ms) from None
            sensor.record(permits, now, check_quotas=False)


class PermissiveControllerMutationQuota(_BoundedQuota):
    def record(self, permits: float) -> None:
        now = self.time.milliseconds()
        try:
            self.sensors.quota_sensor.record(permits, now, check_quotas=True)
        except QuotaViolationError as e:
            self.last_throttle_time_ms = token_bucket_throttle_time(e)
            self.last_recorded_time_ms = now


class ControllerMutationQuotaManager(ClientQuotaManager):
    """See the module docstring. Its window keys are controller.quota.window.num /
    controller.quota.window.size.seconds (burst = samples x window x rate)."""

    def __init__(self, config: ClientQuotaManagerConfig, metrics: Metrics, time: Time | None = None) -> None:
        super().__init__(config, metrics, QuotaType.CONTROLLER_MUTATION, time)

    def get_or_create_quota_sensors(self, user: str, client_id: str) -> ClientSensors:
        tags = self.quota_metric_tags(user, client_id)
        suffix = f"{tags['user']}:{tags['client-id']}"
        name = f"{self.quota_type.value}-{suffix}"
        sensor = self.metrics.get_sensor(name)
        if sensor is None:
            sensor = self.metrics.sensor(name, self._metric_config(self.quota_limit(tags)),
                                         inactive_sensor_expiration_ms=DEFAULT_INACTIVE_SENSOR_EXPIRATION_MS)
            with sensor.lock:
                if not sensor.metrics:
                    self._sensor_tags[name] = tags
                    sensor.add(MetricName.of("tokens", self.quota_type.value, tags), TokenBucket())
                    # the rate is for operators: it carries no quota
                    sensor.add(MetricName.of("mutation-rate", self.quota_type.value, tags), Rate(),
                               MetricConfig(samples=self.config.num_quota_samples,
                                            time_window_ms=self.config.quota_window_size_seconds * 1000))
        base = super().get_or_create_quota_sensors(user, client_id)  # the throttle-time sensor
        return ClientSensors(base.metric_tags, sensor, base.throttle_time_sensor)

    def _update_quota_metric_configs(self) -> None:
        for name, tags in list(self._sensor_tags.items()):
            sensor = self.metrics.get_sensor(name)
            if sensor is None:
                self._sensor_tags.pop(name, None)
                continue
            config = self._metric_config(self.quota_limit(tags))
            with sensor.lock:
                sensor.config = config
                sensor.metrics[0].config = config  # the bucket's quota; the rate keeps its own

    def new_quota_for(self, user: str, client_id: str, api: str, version: int) -> ControllerMutationQuota:
        """The quota object of one request: strict from ``STRICT_SINCE[api]`` on."""
        if not self.quotas_enabled():
            return UNBOUNDED
        sensors = self.get_or_create_quota_sensors(user, client_id)
        if version >= STRICT_SINCE[api]:
            return StrictControllerMutationQuota(self.time, sensors)
        return PermissiveControllerMutationQuota(self.time, sensors)


__all__ = ["ControllerMutationQuota", "ControllerMutationQuotaManager", "PermissiveControllerMutationQuota",
           "STRICT_SINCE", "StrictControllerMutationQuota", "ThrottlingQuotaExceededError", "UNBOUNDED"]
