"""Client telemetry (KIP-714): the broker as the sink of its clients' metrics, as Kafka's
``ClientMetricsManager``.

Owns:

* **Subscriptions**: ``client-metrics`` config resources (IncrementalAlterConfigs /
  DescribeConfigs, resource type 16), kept in the ``client_metrics`` section of the
  cluster metadata as ``{name: {"metrics": "a.b,c", "interval.ms": "60000", "match":
  "client_id=etl-.*,client_software_name=..."}}``. ``metrics`` is a comma list of metric
  name prefixes (``*`` every metric, empty: none); ``interval.ms`` is the push interval
  (100 ms to 1 hour, default 5 minutes); ``match`` is a comma list of
  ``selector=regex`` (selectors ``client_instance_id``, ``client_id``,
  ``client_software_name``, ``client_software_version``, ``client_source_address``,
  ``client_source_port``; each regex must match the whole value; no selector: every
  client).
* **Client instances** (an LRU of at most 16384, keyed by instance id; an instance idle
  for max(60 s, 3 push intervals) is dropped): created on the first
  GetTelemetrySubscriptions (a zero id gets a fresh random one) or push. Its subscription
  is the union of the metric prefixes of every matching subscription (``*`` when any has
  it) and the smallest of their intervals; it is re-computed when subscriptions changed.
* **The subscription id**: ``CRC32C(str(metrics) + str(interval)) XOR hash(instance id)``
  (Java's ``List.toString`` of the sorted prefixes, and ``Uuid.hashCode``), so it changes
  exactly when the effective subscription does.
* **Gating**: a Get earlier than one push interval after the instance's last request is
  THROTTLING_QUOTA_EXCEEDED (unless its last error was UNKNOWN_SUBSCRIPTION_ID or
  UNSUPPORTED_COMPRESSION_TYPE); a push is accepted right after a Get, else only once an
  interval has passed, except a terminating push, after which every push is
  INVALID_REQUEST. Checks in Kafka's order: terminating, subscription id
  (UNKNOWN_SUBSCRIPTION_ID), timing (THROTTLING_QUOTA_EXCEEDED), compression type
  (UNSUPPORTED_COMPRESSION_TYPE; accepted: zstd, lz4, gzip, snappy), size
  (``telemetry.max.bytes``: TELEMETRY_TOO_LARGE).
* **Payloads**: decompressed (budget ``telemetry.max.bytes`` x 10) and decoded as OTLP
  ``MetricsData`` (the ``opentelemetry-proto`` package); a payload that does not decode is
  INVALID_RECORD. The latest value of each data point (gauges, sums, and the count/sum
  of histograms) is kept per instance for ``/metrics`` (``snapshot``), with the client
  id and instance id.

Thread-safety: one lock guards the instance cache and each instance's timestamps; the
subscriptions are an immutable snapshot replaced on change.
"""

from __future__ import annotations

import logging
import re
import threading
import time as _time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import crc32c

from broker.protocol import ErrorCode

log = logging.getLogger(__name__)

SECTION = "client_metrics"
CACHE_MAX_SIZE = 16384
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
DEFAULT_TELEMETRY_MAX_BYTES = 1024 * 1024
ZERO_UUID = uuid.UUID(int=0)
# CompressionType ids, in Kafka's order of preference
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy
NONE_COMPRESSION = 0
SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port")
CONFIG_KEYS = ("metrics", "interval.ms", "match")


class TelemetryError(Exception):
    """A refused request: its Kafka error code and, for THROTTLING_QUOTA_EXCEEDED, the ms
    until the client may ask again."""

    def __init__(self, code: int, message: str, throttle_ms: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.throttle_ms = throttle_ms


@dataclass(frozen=True)
class Subscription:
    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: dict[str, str]) -> bool:
        return all(p.fullmatch(client.get(sel, "")) is not None for sel, p in self.match)


def parse_subscription(name: str, configs: dict[str, str]) -> Subscription:
    """A subscription from its config values; ValueError naming the key when invalid."""
    for key in configs:
        if key not in CONFIG_KEYS:
            raise ValueError(f"Unknown client-metrics config: {key}")
    metrics = tuple(m.strip() for m in (configs.get("metrics") or "").split(",") if m.strip())
    try:
        interval = int(configs.get("interval.ms") or DEFAULT_INTERVAL_MS)
    except ValueError:
        raise ValueError(f"Invalid value {configs.get('interval.ms')!r} for interval.ms") from None
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise ValueError(f"Invalid value {interval} for interval.ms, interval must be between "
                         f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS}")
    match = []
    for item in (configs.get("match") or "").split(","):
        if not item.strip():
            continue
        sel, sep, pattern = item.partition("=")
        sel = sel.strip()
        if not sep or sel not in SELECTORS:
            raise ValueError(f"Illegal client matching pattern: {item.strip()}")
        try:
            match.append((sel, re.compile(pattern.strip())))
        except re.error as exc:
            raise ValueError(f"Illegal regex pattern {pattern.strip()!r} for {sel}: {exc}") from None
    return Subscription(name, metrics, interval, tuple(match))


def java_uuid_hash(u: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode``: the xor of the two halves, folded to a signed int."""
    msb, lsb = u.int >> 64, u.int & (2**64 - 1)
    h = msb ^ lsb
    folded = ((h >> 32) ^ h) & 0xFFFFFFFF
    return folded - (1 << 32) if folded >= 1 << 31 else folded


def subscription_id(metrics: list[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    text = "[" + ", ".join(metrics) + "]" + str(interval_ms)
    crc = crc32c.crc32c(text.encode("utf-8"))
    crc_int = crc - (1 << 32) if crc >= 1 << 31 else crc
    out = (crc_int ^ java_uuid_hash(instance_id)) & 0xFFFFFFFF
    return out - (1 << 32) if out >= 1 << 31 else out


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    client: dict[str, str]
    metrics: list[str]
    interval_ms: int
    subscription_id: int
    version: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_seen_ms: int = 0
    terminating: bool = False
    last_error: int = ErrorCode.NONE
    points: dict[tuple, float] = field(default_factory=dict)  # (name, labels) -> value


class ClientMetricsManager:
    """See the module docstring. ``time_ms`` is the clock (tests pass their own)."""

    def __init__(self, subscriptions: dict[str, dict[str, str]] | None = None,
                 telemetry_max_bytes: int = DEFAULT_TELEMETRY_MAX_BYTES, time_ms: Any = None) -> None:
        self.telemetry_max_bytes = telemetry_max_bytes
        self.time_ms = time_ms or (lambda: int(_time.time() * 1000))
        self._lock = threading.Lock()
        self._instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self._subscriptions: tuple[Subscription, ...] = ()
        self._version = 0
        self.pushes = 0
        # on_push(instance id, OTLP MetricsData bytes, client): an exporter (the broker's
        # kafkalog.telemetry.export.topic), called after an accepted push, outside the lock
        self.on_push: Any = None
        self.update_subscriptions(subscriptions or {})

    # -- subscriptions -----------------------------------------------------------------------

    def update_subscriptions(self, configs: dict[str, dict[str, str]]) -> None:
        subs = tuple(parse_subscription(name, c) for name, c in sorted(configs.items()))
        with self._lock:
            self._subscriptions = subs
            self._version += 1

    def _resolve(self, client: dict[str, str]) -> tuple[list[str], int]:
        metrics: set[str] = set()
        interval = None
        for s in self._subscriptions:
            if s.matches(client):
                metrics.update(s.metrics)
                interval = s.interval_ms if interval is None else min(interval, s.interval_ms)
        if "*" in metrics:
            metrics = {"*"}
        return sorted(metrics), interval if interval is not None else DEFAULT_INTERVAL_MS

    def _instance(self, instance_id: uuid.UUID, client: dict[str, str], now: int) -> ClientInstance:
        """The cached instance (subscription re-computed if stale), else a new one."""
        self._expire(now)
        inst = self._instances.get(instance_id)
        if inst is not None and inst.version != self._version:
            metrics, interval = self._resolve(inst.client)
            inst.metrics, inst.interval_ms, inst.version = metrics, interval, self._version
            inst.subscription_id = subscription_id(metrics, interval, instance_id)
        if inst is None:
            full = {**client, "client_instance_id": str(instance_id)}
            metrics, interval = self._resolve(full)
            inst = ClientInstance(instance_id, full, metrics, interval,
                                  subscription_id(metrics, interval, instance_id), self._version)
            self._instances[instance_id] = inst
            while len(self._instances) > CACHE_MAX_SIZE:
                self._instances.popitem(last=False)
        self._instances.move_to_end(instance_id)
        inst.last_seen_ms = now
        return inst

    def _expire(self, now: int) -> None:
        for iid in [i for i, inst in self._instances.items()
                    if now - inst.last_seen_ms > max(60_000, 3 * inst.interval_ms)]:
            del self._instances[iid]

    # -- requests ----------------------------------------------------------------------------

    def get_subscriptions(self, instance_id: uuid.UUID, client: dict[str, str]) -> dict[str, Any]:
        """GetTelemetrySubscriptions: the response's fields, or TelemetryError."""
        now = self.time_ms()
        with self._lock:
            iid = uuid.uuid4() if instance_id == ZERO_UUID else instance_id
            inst = self._instance(iid, client, now)
            last = max(inst.last_get_ms, inst.last_push_ms)
            if last and now - last < inst.interval_ms and inst.last_error not in (
                    ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
                inst.last_error = ErrorCode.THROTTLING_QUOTA_EXCEEDED
                raise TelemetryError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                     f"The request from the client instance {iid} was too early",
                                     inst.interval_ms - (now - last))
            inst.last_get_ms = now
            inst.last_error = ErrorCode.NONE
            return {"client_instance_id": iid, "subscription_id": inst.subscription_id,
                    "accepted_compression_types": list(ACCEPTED_COMPRESSION_TYPES),
                    "push_interval_ms": inst.interval_ms, "telemetry_max_bytes": self.telemetry_max_bytes,
                    "delta_temporality": True, "requested_metrics": list(inst.metrics)}

    def push(self, instance_id: uuid.UUID, sub_id: int, terminating: bool, compression_type: int,
             payload: bytes, client: dict[str, str]) -> None:
        """PushTelemetry: validate (Kafka's order), decode and keep; TelemetryError."""
        if instance_id == ZERO_UUID:
            raise TelemetryError(ErrorCode.INVALID_REQUEST, "Invalid request from the client: client instance id "
                                                            "is a reserved value")
        now = self.time_ms()
        with self._lock:
            inst = self._instance(instance_id, client, now)
            try:
                self._validate(inst, sub_id, terminating, compression_type, payload, now)
            except TelemetryError as exc:
                inst.last_error = exc.code
                raise
            inst.last_error = ErrorCode.NONE
        raw = decompress_metrics(payload, compression_type, self.telemetry_max_bytes * 10) if payload else b""
        points = decode_metrics(raw, NONE_COMPRESSION, 0) if raw else {}
        with self._lock:
            inst.points.update(points)
            self.pushes += 1
        if raw and self.on_push is not None:
            try:
                self.on_push(instance_id, raw, client)
            except Exception:  # noqa: BLE001 - an export failure never fails the client's push
                log.exception("exporting the telemetry of client %s failed", instance_id)

    def _validate(self, inst: ClientInstance, sub_id: int, terminating: bool, compression_type: int,
                  payload: bytes, now: int) -> None:
        if inst.terminating:
            raise TelemetryError(ErrorCode.INVALID_REQUEST, f"Client {inst.instance_id} sent the previous request "
                                                            "with state terminated, ignoring the request")
        if sub_id != inst.subscription_id:
            raise TelemetryError(ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                 f"Unknown client subscription id for the client: {inst.instance_id}")
        can = inst.last_get_ms > inst.last_push_ms or now - max(inst.last_get_ms, inst.last_push_ms) >= \
            inst.interval_ms
        if can:
            inst.last_push_ms = now
        elif not terminating:
            raise TelemetryError(ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                 f"Request from the client {inst.instance_id} arrived before the next push interval "
                                 f"time", inst.interval_ms - (now - max(inst.last_get_ms, inst.last_push_ms)))
        if compression_type != NONE_COMPRESSION and compression_type not in ACCEPTED_COMPRESSION_TYPES:
            raise TelemetryError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                 f"Unknown compression type {compression_type} received")
        if payload is not None and len(payload) > self.telemetry_max_bytes:
            raise TelemetryError(ErrorCode.TELEMETRY_TOO_LARGE,
                                 f"Telemetry request from {inst.instance_id} is larger than the maximum allowed size "
                                 f"{self.telemetry_max_bytes}")
        if terminating:
            inst.terminating = True

    # -- export ------------------------------------------------------------------------------

    def snapshot(self) -> list[tuple[str, dict[str, str], float]]:
        """(metric name, labels, value) of every instance's latest data points."""
        out = []
        with self._lock:
            for inst in self._instances.values():
                base = {"client_instance_id": str(inst.instance_id), "client_id": inst.client.get("client_id", "")}
                for (name, labels), value in inst.points.items():
                    out.append((name, {**base, **dict(labels)}, value))
        return out

    def instances(self) -> list[ClientInstance]:
        with self._lock:
            return list(self._instances.values())


def decompress_metrics(payload: bytes, compression_type: int, max_bytes: int) -> bytes:
    """The OTLP ``MetricsData`` bytes of a push; TelemetryError INVALID_RECORD when they do
    not decompress."""
    from broker.record.codecs import decompress
    from broker.record.errors import DecodeError as RecordDecodeError
    from broker.record.errors import RecordTooLargeError

    if compression_type == NONE_COMPRESSION:
        return bytes(payload)
    try:
        return bytes(decompress(compression_type, payload, max_bytes))
    except (RecordDecodeError, RecordTooLargeError, ValueError) as exc:
        raise TelemetryError(ErrorCode.INVALID_RECORD, f"Error exporting client metrics: {exc}") from None


def decode_metrics(payload: bytes, compression_type: int, max_bytes: int) -> dict[tuple, float]:
    """OTLP ``MetricsData`` -> {(name, ((label, value), ...)): latest value}; TelemetryError
    INVALID_RECORD when it does not decompress or decode."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    from broker.record.codecs import decompress
    from broker.record.errors import DecodeError as RecordDecodeError
    from broker.record.errors import RecordTooLargeError

    try:
        raw = payload if compression_type == NONE_COMPRESSION else decompress(compression_type, payload, max_bytes)
        data = metrics_pb2.MetricsData()
        data.ParseFromString(bytes(raw))
    except (DecodeError, RecordDecodeError, RecordTooLargeError, ValueError) as exc:
        raise TelemetryError(ErrorCode.INVALID_RECORD, f"Error exporting client metrics: {exc}") from None
    out: dict[tuple, float] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                if kind in ("gauge", "sum"):
                    for dp in getattr(m, kind).data_points:
                        value = dp.as_double if dp.WhichOneof("value") == "as_double" else float(dp.as_int)
                        out[(m.name, _labels(dp.attributes))] = value
                elif kind == "histogram":
                    for dp in m.histogram.data_points:
                        labels = _labels(dp.attributes)
                        out[(m.name + ".count", labels)] = float(dp.count)
                        out[(m.name + ".sum", labels)] = float(dp.sum)
    return out


def _labels(attributes: Any) -> tuple[tuple[str, str], ...]:
    out = []
    for kv in attributes:
        v = kv.value
        kind = v.WhichOneof("value")
        out.append((kv.key, str(getattr(v, kind)) if kind else ""))
    return tuple(sorted(out))


__all__ = ["ClientMetricsManager", "SECTION", "Subscription", "TelemetryError", "decode_metrics",
           "parse_subscription", "subscription_id"]


# --- the client-metrics config resources (IncrementalAlterConfigs / DescribeConfigs) -------

class SubscriptionStore:
    """The subscriptions in the cluster metadata (``SECTION``), given to the manager."""

    def __init__(self, store: Any, manager: ClientMetricsManager) -> None:
        self.store = store
        self.manager = manager

    def load(self) -> None:
        configs = self.store.get(SECTION, {}) or {}
        valid = {}
        for name, c in configs.items():
            try:
                parse_subscription(name, c)
                valid[name] = c
            except ValueError as exc:
                log.error("ignoring the stored client-metrics subscription %s: %s", name, exc)
        self.manager.update_subscriptions(valid)

    def get(self, name: str) -> dict[str, str]:
        return dict((self.store.get(SECTION, {}) or {}).get(name, {}))

    def names(self) -> list[str]:
        return sorted((self.store.get(SECTION, {}) or {}).keys())

    def alter(self, name: str, update: Any, validate_only: bool) -> None:
        """``update(current configs) -> new configs`` (None values deleted); ValueError
        for an invalid result (INVALID_CONFIG)."""
        if not name:
            raise ValueError("Subscription name can't be empty")
        current = self.get(name)
        new = {k: v for k, v in update(current).items() if v is not None}
        parse_subscription(name, new)
        if validate_only:
            return

        def change(section: dict | None) -> dict:
            section = dict(section or {})
            if new:
                section[name] = new
            else:
                section.pop(name, None)
            return section

        stored = self.store.update(SECTION, change, {})
        self.manager.update_subscriptions(stored)
