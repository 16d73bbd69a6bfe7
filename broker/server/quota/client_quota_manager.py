"""ClientQuotaManager: PRODUCE / FETCH byte-rate and REQUEST-percentage quotas per
(user, client-id), as Kafka's ``ClientQuotaManager`` / ``ClientRequestQuotaManager`` and
``DefaultQuotaCallback`` (entity resolution, recording and the throttle-time
formula, the fetch "unrecord", holding the channel).

Owns the configured limits (``update_quota``; the durable copy is the caller's: cluster
metadata), one quota sensor and one throttle-time sensor per (quota type, resolved
entity), the ``quotaTypesEnabled`` bit mask and the delay queue of throttled channels with
its reaper.

* **Entities:** ``QuotaEntity(user, client_id)``; each side is a name, ``DEFAULT``
  (``<default>``) or ``None`` (not part of the entity). The most specific configured quota
  wins, in Kafka's order: users/u/clients/c, users/u/clients/<default>, users/u,
  users/<default>/clients/c, users/<default>/clients/<default>, users/<default>,
  clients/c, clients/<default>.
* **Metric tags** (``{"user": ..., "client-id": ...}``) name the level that matched, so
  that every client sharing a quota shares one sensor: with one kind of level configured
  (the ``quotaTypesEnabled`` fast path: CLIENT_ID=1, USER=2, USER_CLIENT_ID=4) they are
  derived without a lookup; with several, the eight-level probe decides. With no quota at
  all (``NO_QUOTAS``), ``maybe_record_and_get_throttle_time_ms`` does nothing.
* **Recording:** ``record_and_get_throttle_time_ms`` records the value into the entity's
  Rate (one dict lookup of (user, client id) to the sensor's ``record_rate``, cached until
  the limits change or sensors expire) and returns 0, or the throttle ``X = (O - T) / T *
  W`` (metrics.throttle_time); the
  REQUEST quota caps it at one window. ``unrecord_quota_sensor`` subtracts a value (a
  throttled fetch answered empty). ``max_value_in_quota_window`` is ``limit * (samples - 1)
  * window_seconds``: the fetch size to clamp to.
* **Changing a limit** re-configures the live sensors; nothing recorded is reset.
* **Throttling:** ``throttle(callback, ms)`` records the throttle time, calls
  ``callback.start_throttling()`` at once and queues the channel; the reaper (a daemon
  thread, or ``reaper.do_work`` driven by a test's clock) calls ``end_throttling()``
  exactly once when the delay has passed.
* **Expiry:** quota sensors expire after an hour without a record
  (``expire_sensors``).

Thread-safety: request threads record concurrently (each sensor has its own lock); the
limits and the enabled mask are replaced under ``_lock`` and read without it (a dict
lookup of an immutable snapshot); the delay queue has its own condition.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from time import time_ns as _time_ns
from typing import Any, NamedTuple

from .config import QuotaConfig
from .metrics import (
    DEFAULT_INACTIVE_SENSOR_EXPIRATION_MS,
    Avg,
    Max,
    MetricConfig,
    MetricName,
    Metrics,
    Quota,
    QuotaViolationError,
    Rate,
    Sensor,
    SystemTime,
    Time,
    bounded_throttle_time,
    throttle_time,
)

log = logging.getLogger(__name__)


DEFAULT = "<default>"
USER_TAG = "user"
CLIENT_ID_TAG = "client-id"
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9

NO_QUOTAS = 0
CLIENT_ID_QUOTA_ENABLED = 1
USER_QUOTA_ENABLED = 2
USER_CLIENT_ID_QUOTA_ENABLED = 4


class QuotaType(Enum):
    PRODUCE = "Produce"
    FETCH = "Fetch"
    REQUEST = "Request"
    CONTROLLER_MUTATION = "ControllerMutation"


# the entity-config keys of each type (AlterClientQuotas / kafka-configs)
QUOTA_CONFIG_KEYS = {QuotaType.PRODUCE: "producer_byte_rate", QuotaType.FETCH: "consumer_byte_rate",
                     QuotaType.REQUEST: "request_percentage", QuotaType.CONTROLLER_MUTATION: "controller_mutation_rate"}


class QuotaEntity(NamedTuple):
    """users/<user>/clients/<client_id>; a side is a name, DEFAULT, or None (absent)."""

    user: str | None
    client_id: str | None


@dataclass(frozen=True)
class ClientQuotaManagerConfig:
    num_quota_samples: int = 11  # quota.window.num
    quota_window_size_seconds: int = 1  # quota.window.size.seconds

    @staticmethod
    def from_broker(config: Any) -> ClientQuotaManagerConfig:
        quotas = QuotaConfig.from_config(config or {})
        return ClientQuotaManagerConfig(quotas.quota_window_num, quotas.quota_window_size_seconds)


class ClientSensors(NamedTuple):
    metric_tags: tuple[tuple[str, str], ...]
    quota_sensor: Sensor
    throttle_time_sensor: Sensor


def _level(entity: QuotaEntity) -> int:
    if entity.user is not None and entity.client_id is not None:
        return USER_CLIENT_ID_QUOTA_ENABLED
    if entity.user is not None:
        return USER_QUOTA_ENABLED
    return CLIENT_ID_QUOTA_ENABLED


class ClientQuotaManager:
    """See the module docstring."""

    def __init__(self, config: ClientQuotaManagerConfig, metrics: Metrics, quota_type: QuotaType,
                 time: Time | None = None, thread_name_prefix: str = "") -> None:
        self.config = config
        self.metrics = metrics
        self.quota_type = quota_type
        self.time = time or metrics.time
        # the hot path reads the system clock itself (SystemTime.milliseconds, without the call)
        self._system_clock = type(self.time) is SystemTime
        self._lock = threading.Lock()
        self._quotas: dict[QuotaEntity, float] = {}
        self._active: dict[int, int] = {}
        self.quota_types_enabled = NO_QUOTAS
        self.max_throttle_time_ms = (config.quota_window_size_seconds * 1000
                                     if quota_type is QuotaType.REQUEST else None)
        self.reaper = ThrottledChannelReaper(self.time, f"{thread_name_prefix}ThrottledChannelReaper-"
                                                        f"{quota_type.value}")
        self._sensor_tags: dict[str, dict[str, str]] = {}  # quota sensor name -> its tags
        # (user, client id) -> its sensors: the hot path's lookup; cleared whenever the limits
        # change (the tags, so the sensors, of a client may change) or sensors expire
        self._cache: dict[tuple[str, str], ClientSensors] = {}
        # (user, client id) -> how to record into its quota sensor with the check
        # (Sensor.record_rate when the sensor is rate_only): the produce / request hot path's
        # one lookup, cleared with _cache
        self._recorders: dict[tuple[str, str], Callable[[float, int], object]] = {}
        self._type_name = quota_type.value

    # -- limits ------------------------------------------------------------------------------

    def quotas_enabled(self) -> bool:
        return self.quota_types_enabled != NO_QUOTAS

    def update_quota(self, entity: QuotaEntity, quota: float | None) -> None:
        """Set (``quota`` a number) or remove (None) the limit of ``entity``, then
        re-configure every live sensor of this type: usage is never reset."""
        if entity.user is None and entity.client_id is None:
            raise ValueError("a quota entity names a user, a client id, or both")
        with self._lock:
            quotas = dict(self._quotas)
            level = _level(entity)
            had = entity in quotas
            if quota is None:
                quotas.pop(entity, None)
                if had:
                    self._active[level] -= 1
            else:
                quotas[entity] = float(quota)
                if not had:
                    self._active[level] = self._active.get(level, 0) + 1
            self._quotas = quotas
            self._cache = {}
            self._recorders = {}
            enabled = NO_QUOTAS
            for lvl, count in self._active.items():
                if count > 0:
                    enabled |= lvl
            self.quota_types_enabled = enabled
        self._update_quota_metric_configs()

    def quota(self, entity: QuotaEntity) -> float | None:
        return self._quotas.get(entity)

    def quotas(self) -> dict[QuotaEntity, float]:
        return dict(self._quotas)

    def _update_quota_metric_configs(self) -> None:
        for name, tags in list(self._sensor_tags.items()):
            sensor = self.metrics.get_sensor(name)
            if sensor is None:  # expired
                self._sensor_tags.pop(name, None)
                continue
            sensor.reconfigure(self._metric_config(self.quota_limit(tags)))

    def quota_metric_tags(self, user: str, client_id: str) -> dict[str, str]:
        """The tags (so the sensor) of (user, client_id): the level that matched."""
        enabled = self.quota_types_enabled
        if enabled in (NO_QUOTAS, CLIENT_ID_QUOTA_ENABLED):
            return {USER_TAG: "", CLIENT_ID_TAG: client_id}
        if enabled == USER_QUOTA_ENABLED:
            return {USER_TAG: user, CLIENT_ID_TAG: ""}
        if enabled == USER_CLIENT_ID_QUOTA_ENABLED:
            return {USER_TAG: user, CLIENT_ID_TAG: client_id}
        q = self._quotas
        probes = (
            (QuotaEntity(user, client_id), (user, client_id)),
            (QuotaEntity(user, DEFAULT), (user, client_id)),
            (QuotaEntity(user, None), (user, "")),
            (QuotaEntity(DEFAULT, client_id), (user, client_id)),
            (QuotaEntity(DEFAULT, DEFAULT), (user, client_id)),
            (QuotaEntity(DEFAULT, None), (user, "")),
            (QuotaEntity(None, client_id), ("", client_id)),
            (QuotaEntity(None, DEFAULT), ("", client_id)),
        )
        for entity, (u, c) in probes:
            if entity in q:
                return {USER_TAG: u, CLIENT_ID_TAG: c}
        return {USER_TAG: "", CLIENT_ID_TAG: ""}

    def quota_limit(self, tags: dict[str, str]) -> float | None:
        """The limit that applies to a sensor's tags (None: unlimited)."""
        user, client = tags.get(USER_TAG, ""), tags.get(CLIENT_ID_TAG, "")
        q = self._quotas
        if user and client:
            order = [QuotaEntity(user, client), QuotaEntity(user, DEFAULT), QuotaEntity(DEFAULT, client),
                     QuotaEntity(DEFAULT, DEFAULT)]
        elif user:
            order = [QuotaEntity(user, None), QuotaEntity(DEFAULT, None)]
        elif client:
            order = [QuotaEntity(None, client), QuotaEntity(None, DEFAULT)]
        else:
            return None
        for entity in order:
            if entity in q:
                return q[entity]
        return None

    def _metric_config(self, limit: float | None) -> MetricConfig:
        return MetricConfig(samples=self.config.num_quota_samples,
                            time_window_ms=self.config.quota_window_size_seconds * 1000,
                            quota=Quota.upper_bound(limit if limit is not None else float(2**63 - 1)))

    # -- sensors -----------------------------------------------------------------------------

    def get_or_create_quota_sensors(self, user: str, client_id: str) -> ClientSensors:
        tags = self.quota_metric_tags(user, client_id)
        suffix = f"{tags[USER_TAG]}:{tags[CLIENT_ID_TAG]}"
        name = f"{self.quota_type.value}-{suffix}"
        sensor = self.metrics.get_sensor(name)
        if sensor is None:
            sensor = self.metrics.sensor(name, self._metric_config(self.quota_limit(tags)),
                                         inactive_sensor_expiration_ms=DEFAULT_INACTIVE_SENSOR_EXPIRATION_MS)
            with sensor.lock:
                if not sensor.metrics:
                    self._sensor_tags[name] = tags
                    rate_name = "request-time" if self.quota_type is QuotaType.REQUEST else "byte-rate"
                    sensor.add(MetricName.of(rate_name, self.quota_type.value, tags), Rate())
        throttle_name = f"{self.quota_type.value}ThrottleTime-{suffix}"
        throttle_sensor = self.metrics.get_sensor(throttle_name)
        if throttle_sensor is None:
            throttle_sensor = self.metrics.sensor(
                throttle_name, MetricConfig(samples=self.config.num_quota_samples,
                                            time_window_ms=self.config.quota_window_size_seconds * 1000),
                inactive_sensor_expiration_ms=DEFAULT_INACTIVE_SENSOR_EXPIRATION_MS)
            with throttle_sensor.lock:
                if not throttle_sensor.metrics:
                    throttle_sensor.add(MetricName.of("throttle-time", self.quota_type.value, tags), Avg())
                    throttle_sensor.add(MetricName.of("throttle-time-max", self.quota_type.value, tags), Max())
        return ClientSensors(tuple(sorted(tags.items())), sensor, throttle_sensor)

    # -- recording ---------------------------------------------------------------------------

    def maybe_record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float,
                                              time_ms: int | None = None) -> int:
        """The fast path: 0 without recording when no quota of this type exists."""
        if self.quota_types_enabled == NO_QUOTAS:
            return 0
        return self.record_and_get_throttle_time_ms(user, client_id, value, time_ms)

    def _sensors(self, user: str, client_id: str) -> ClientSensors:
        sensors = self._cache.get((user, client_id))
        if sensors is None or sensors.quota_sensor.registry.get_sensor(sensors.quota_sensor.name) is None:
            sensors = self.get_or_create_quota_sensors(user, client_id)
            self._cache[(user, client_id)] = sensors
        return sensors

    def _recorder(self, user: str, client_id: str) -> Callable[[float, int], object]:
        sensor = self._sensors(user, client_id).quota_sensor
        if sensor.rate_only:
            record = sensor.record_rate
        else:
            def record(value: float, now: int) -> None:
                sensor.record(value, now, True)
        self._recorders[(user, client_id)] = record
        return record

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float,
                                        time_ms: int | None = None) -> int:
        if time_ms is not None:
            now = time_ms
        elif self._system_clock:
            now = _time_ns() // 1_000_000
        else:
            now = self.time.milliseconds()
        record = self._recorders.get((user, client_id)) or self._recorder(user, client_id)
        try:
            record(value, now)
        except QuotaViolationError as e:
            if self.max_throttle_time_ms is not None:
                return max(0, bounded_throttle_time(e, now, self.max_throttle_time_ms))
            return max(0, throttle_time(e, now))
        return 0

    def record_no_throttle(self, user: str, client_id: str, value: float, time_ms: int | None = None) -> None:
        """Add to the usage without a check (the network thread's send time of a request)."""
        if self.quota_types_enabled == NO_QUOTAS:
            return
        now = self.time.milliseconds() if time_ms is None else time_ms
        self._sensors(user, client_id).quota_sensor.record(value, now, False)

    def unrecord_quota_sensor(self, user: str, client_id: str, value: float, time_ms: int | None = None) -> None:
        """Subtract ``value`` (a throttled fetch sends no records)."""
        now = self.time.milliseconds() if time_ms is None else time_ms
        self._sensors(user, client_id).quota_sensor.record(-value, now, False)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """``limit * (samples - 1) * window_seconds``: the most one answer may carry
        without a certain throttle (fetch sizes are clamped to it); inf without a quota."""
        if self.quota_types_enabled == NO_QUOTAS:
            return float("inf")
        sensors = self.get_or_create_quota_sensors(user, client_id)
        limit = self.quota_limit(dict(sensors.metric_tags))
        if limit is None:
            return float("inf")
        return limit * (self.config.num_quota_samples - 1) * self.config.quota_window_size_seconds

    # -- throttling --------------------------------------------------------------------------

    def throttle(self, user: str, client_id: str, callback: ThrottleCallback, throttle_time_ms: int) -> None:
        """Record the throttle, start it (mute) and queue its end (unmute) for the reaper."""
        if throttle_time_ms <= 0:
            return
        sensors = self.get_or_create_quota_sensors(user, client_id)
        sensors.throttle_time_sensor.record(throttle_time_ms, check_quotas=False)
        self.reaper.add(ThrottledChannel(self.time, throttle_time_ms, callback))

    def queue_size(self) -> int:
        """Channels throttled now (the delay queue's size)."""
        return self.reaper.pending()

    def expire_sensors(self, now_ms: int | None = None) -> list[str]:
        """Drop the sensors idle for an hour (the next record starts afresh)."""
        gone = self.metrics.remove_expired_sensors(now_ms)
        for name in gone:
            self._sensor_tags.pop(name, None)
        if gone:
            self._cache = {}
            self._recorders = {}
        return gone

    def start(self) -> None:
        self.reaper.start()

    def shutdown(self) -> None:
        self.reaper.shutdown()


class ThrottleCallback:
    """``start_throttling`` (mute the channel) and ``end_throttling`` (unmute it)."""

    def start_throttling(self) -> None:
        pass

    def end_throttling(self) -> None:
        pass


class ThrottledChannel:
    """One throttled channel: started on creation, ended exactly once by the reaper."""

    def __init__(self, time: Time, throttle_time_ms: int, callback: ThrottleCallback) -> None:
        self.time = time
        self.throttle_time_ms = throttle_time_ms
        self.callback = callback
        self.end_time_ms = time.milliseconds() + throttle_time_ms
        self._ended = False
        callback.start_throttling()

    def notify_throttling_done(self) -> bool:
        if self._ended:
            return False
        self._ended = True
        self.callback.end_throttling()
        return True


class ThrottledChannelReaper:
    """The delay queue of throttled channels and the thread that ends them."""

    def __init__(self, time: Time, name: str) -> None:
        self.time = time
        self.name = name
        self._heap: list[tuple[int, int, ThrottledChannel]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def add(self, channel: ThrottledChannel) -> None:
        with self._cond:
            heapq.heappush(self._heap, (channel.end_time_ms, next(self._seq), channel))
            self._cond.notify()

    def pending(self) -> int:
        with self._cond:
            return len(self._heap)

    def do_work(self, timeout_ms: float = 0.0) -> int:
        """End every channel whose delay has passed (waiting up to ``timeout_ms`` of real
        time for one when none has); returns how many were ended."""
        ended: list[ThrottledChannel] = []
        with self._cond:
            now = self.time.milliseconds()
            if timeout_ms > 0 and (not self._heap or self._heap[0][0] > now) and not self._stopping:
                wait = timeout_ms if not self._heap else min(timeout_ms, self._heap[0][0] - now)
                self._cond.wait(max(wait, 0) / 1000.0)
                now = self.time.milliseconds()
            while self._heap and self._heap[0][0] <= now:
                ended.append(heapq.heappop(self._heap)[2])
        for channel in ended:
            try:
                channel.notify_throttling_done()
            except Exception:  # noqa: BLE001 - one channel's callback must not stop the reaper
                log.exception("ending the throttle of a channel failed")
        return len(ended)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stopping:
            self.do_work(1000)

    def shutdown(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(5)
        # whatever is still queued is released, so that no channel stays muted
        with self._cond:
            rest = [c for _, _, c in self._heap]
            self._heap.clear()
        for channel in rest:
            channel.notify_throttling_done()


__all__ = [
    "CLIENT_ID_QUOTA_ENABLED", "ClientQuotaManager", "ClientQuotaManagerConfig", "ClientSensors", "DEFAULT",
    "NANOS_TO_PERCENTAGE_PER_SECOND", "NO_QUOTAS", "QUOTA_CONFIG_KEYS", "QuotaEntity", "QuotaType",
    "ThrottleCallback", "ThrottledChannel", "ThrottledChannelReaper", "USER_CLIENT_ID_QUOTA_ENABLED",
    "USER_QUOTA_ENABLED",
]
