"""Connection quotas in the acceptor, as Kafka's ``ConnectionQuotas`` (the
acceptor's connection quotas).

Owns the connection counts (per IP, per listener, in total) and the connection-creation
rate sensors (broker, per listener, per IP), and ``inc`` / ``dec`` around every accepted
socket:

1. **Wait for a slot** (the acceptor thread blocks on a condition, no busy loop): while
   the listener's count reaches ``listener.name.<l>.max.connections`` or the broker's
   reaches ``max.connections`` (the broker-wide limit does not apply to the protected
   listener, ``inter.broker.listener.name``, when there are several), or the broker /
   listener creation rate (``max.connection.creation.rate``,
   ``listener.name.<l>.max.connection.creation.rate``, Rate sensors over
   ``quota.window.num`` windows of ``quota.window.size.seconds``) asks for a delay
   (bounded to one window); a closed connection or a raised limit wakes it.
2. **The IP's creation rate** (``connection_creation_rate`` of the IP's entity, else of
   the default IP entity; AlterClientQuotas): over its quota, the connection is
   un-recorded from every rate (so a refused connection does not inflate them) and
   ``ConnectionThrottledError`` says how long to hold it before closing it.
3. **Count it**; then, if the IP already had ``max.connections.per.ip`` (or its
   ``max.connections.per.ip.overrides`` entry: ``host:count,...``) connections,
   ``TooManyConnectionsError``: the caller closes it (``dec`` un-counts it).

Thread-safety: everything under one condition (``_cond``), as Kafka's ``counts`` monitor;
acceptor threads (one per listener) call ``inc``, connection threads ``dec``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .config import QuotaConfig
from .metrics import (
    DEFAULT_INACTIVE_SENSOR_EXPIRATION_MS,
    MetricConfig,
    MetricName,
    Metrics,
    Quota,
    QuotaViolationError,
    Rate,
    Sensor,
    bounded_throttle_time,
)

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1


class TooManyConnectionsError(Exception):
    def __init__(self, ip: str, limit: int) -> None:
        super().__init__(f"Too many connections from {ip} (maximum = {limit})")
        self.ip = ip
        self.limit = limit


class ConnectionThrottledError(Exception):
    def __init__(self, ip: str, start_ms: int, throttle_ms: int) -> None:
        super().__init__(f"{ip} throttled for {throttle_ms} ms (connection creation rate)")
        self.ip = ip
        self.start_ms = start_ms
        self.throttle_ms = throttle_ms


def parse_overrides(text: str | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma-separated."""
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"invalid max.connections.per.ip.overrides entry {item!r} (host:count)")
        out[host.strip()] = int(count)
    return out


class ConnectionQuotas:
    """See the module docstring. ``ip_rate`` gives an IP's connection_creation_rate (None:
    unlimited), from the client quota store."""

    def __init__(self, config: Any, metrics: Metrics, listeners: list[str], *,
                 protected_listener: str | None = None,
                 ip_rate: Callable[[str], float | None] = lambda ip: None) -> None:
        get = config.get if hasattr(config, "get") else (lambda k, d=None: d)
        quotas = QuotaConfig.from_config(config if isinstance(config, Mapping) else {})
        self.metrics = metrics
        self.time = metrics.time
        self.max_connections = quotas.max_connections or UNLIMITED
        self.max_per_ip = quotas.max_connections_per_ip or UNLIMITED
        self.per_ip_overrides = parse_overrides(quotas.max_connections_per_ip_overrides)
        self.broker_rate = quotas.max_connection_creation_rate or UNLIMITED
        self.window = MetricConfig(samples=quotas.quota_window_num,
                                   time_window_ms=quotas.quota_window_size_seconds * 1000)
        self.max_throttle_ms = self.window.time_window_ms
        self.listener_max: dict[str, int] = {}
        self.listener_rate: dict[str, int] = {}
        for name in listeners:
            prefix = f"listener.name.{name.lower()}."
            self.listener_max[name] = int(get(prefix + "max.connections", UNLIMITED) or UNLIMITED)
            self.listener_rate[name] = int(get(prefix + "max.connection.creation.rate", UNLIMITED) or UNLIMITED)
        self.protected = protected_listener if protected_listener in listeners and len(listeners) > 1 else None
        self.ip_rate = ip_rate
        self._cond = threading.Condition()
        self.counts: dict[str, int] = {}
        self.listener_counts: dict[str, int] = dict.fromkeys(listeners, 0)
        self.total = 0
        self.blocked_ms = 0.0  # time acceptors spent waiting for a slot (Kafka's blocked percent meter)
        self.waiting = 0  # acceptors waiting for a slot now
        self._broker_sensor = self._rate_sensor("broker-connection-accept-rate", {}, self.broker_rate, None)
        self._listener_sensors = {name: self._rate_sensor("connection-accept-rate", {"listener": name},
                                                          self.listener_rate[name], None)
                                  for name in listeners}

    def _rate_sensor(self, name: str, tags: dict[str, str], limit: float, expire_ms: int | None) -> Sensor:
        key = f"{name}-{':'.join(f'{k}={v}' for k, v in sorted(tags.items()))}"
        sensor = self.metrics.get_sensor(key)
        if sensor is None:
            sensor = self.metrics.sensor(key, self.window.with_quota(Quota.upper_bound(limit)),
                                         inactive_sensor_expiration_ms=expire_ms)
            if not sensor.metrics:
                sensor.add(MetricName.of(name, "socket-server-metrics", tags), Rate())
        return sensor

    # -- accepting ---------------------------------------------------------------------------

    def inc(self, listener: str, ip: str) -> None:
        """Admit a connection from ``ip`` on ``listener`` (the steps of the module
        docstring); raises ``ConnectionThrottledError`` or ``TooManyConnectionsError``."""
        with self._cond:
            self._wait_for_slot(listener)
            self._record_ip(listener, ip)
            count = self.counts.get(ip, 0)
            self.counts[ip] = count + 1
            self.total += 1
            self.listener_counts[listener] = self.listener_counts.get(listener, 0) + 1
            limit = self.per_ip_overrides.get(ip, self.max_per_ip)
            if count >= limit:
                raise TooManyConnectionsError(ip, limit)

    def dec(self, listener: str, ip: str) -> None:
        """A counted connection closed: frees its slot (wakes a blocked acceptor)."""
        with self._cond:
            count = self.counts.get(ip, 0)
            if count <= 1:
                self.counts.pop(ip, None)
            else:
                self.counts[ip] = count - 1
            self.total = max(0, self.total - 1)
            self.listener_counts[listener] = max(0, self.listener_counts.get(listener, 0) - 1)
            self._cond.notify_all()

    def update_limits(self, **changes: Any) -> None:
        """Change ``max_connections`` / ``max_per_ip`` / ``per_ip_overrides`` (dynamic
        broker configs): a raised limit wakes the blocked acceptors."""
        with self._cond:
            for key, value in changes.items():
                setattr(self, key, value)
            self._cond.notify_all()

    def _slot_available(self, listener: str) -> bool:
        if self.listener_counts.get(listener, 0) >= self.listener_max.get(listener, UNLIMITED):
            return False
        return listener == self.protected or self.total < self.max_connections

    def _record_connection(self, listener: str, now: int) -> int:
        """Record the connection in the listener (and broker) rate sensors; the throttle."""
        throttle = 0
        sensors = [self._listener_sensors[listener]] if listener in self._listener_sensors else []
        if listener != self.protected:
            sensors.append(self._broker_sensor)
        for sensor in sensors:
            try:
                sensor.record(1.0, now, True)
            except QuotaViolationError as e:
                throttle = max(throttle, bounded_throttle_time(e, now, self.max_throttle_ms))
        return throttle

    def _wait_for_slot(self, listener: str) -> None:
        start = self.time.milliseconds()
        throttle = max(self._record_connection(listener, start), 0)
        if throttle <= 0 and self._slot_available(listener):
            return
        end = start + throttle
        remaining = throttle
        started_ns = self.time.nanoseconds()  # the blocked time, finer than the ms clock
        self.waiting += 1
        try:
            while True:
                self._cond.wait(remaining / 1000.0 if remaining > 0 else 1.0)
                remaining = max(end - self.time.milliseconds(), 0)
                if remaining <= 0 and self._slot_available(listener):
                    break
        finally:
            self.waiting -= 1
        self.blocked_ms += (self.time.nanoseconds() - started_ns) / 1e6

    def _record_ip(self, listener: str, ip: str) -> None:
        rate = self.ip_rate(ip)
        if rate is None or rate >= UNLIMITED:
            return
        sensor = self._rate_sensor("connection-accept-rate", {"ip": ip}, rate, DEFAULT_INACTIVE_SENSOR_EXPIRATION_MS)
        if sensor.config.quota is None or sensor.config.quota.bound != rate:
            sensor.reconfigure(self.window.with_quota(Quota.upper_bound(rate)))
        now = self.time.milliseconds()
        try:
            sensor.record(1.0, now, True)
        except QuotaViolationError as e:
            throttle = bounded_throttle_time(e, now, self.max_throttle_ms)
            # un-record: a refused connection must not count in any rate
            sensor.record(-1.0, now, False)
            if listener in self._listener_sensors:
                self._listener_sensors[listener].record(-1.0, now, False)
            if listener != self.protected:
                self._broker_sensor.record(-1.0, now, False)
            raise ConnectionThrottledError(ip, now, throttle) from None

    def connection_count(self, ip: str | None = None) -> int:
        with self._cond:
            return self.total if ip is None else self.counts.get(ip, 0)


__all__ = ["ConnectionQuotas", "ConnectionThrottledError", "TooManyConnectionsError", "parse_overrides"]
