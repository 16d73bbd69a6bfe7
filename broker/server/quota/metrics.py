"""Kafka's metric primitives (``org.apache.kafka.common.metrics``): the accounting that
every quota and every broker metric is built on (the sampled Rate and the quota check,
the token bucket).

Owns:

* ``Time`` (``SystemTime``, ``MockTime``): the injectable clock. Every primitive takes
  the time as an argument; ``Metrics`` and ``Sensor`` read it from their ``Time`` when the
  caller passes none, so tests drive time by hand and are deterministic.
* ``MetricConfig`` (``samples``, ``time_window_ms``, ``quota``, ``event_window``) and
  ``Quota`` (``bound``, ``upper``; ``acceptable(v)`` is ``v <= bound`` for an upper bound,
  ``v >= bound`` for a lower one).
* Stats: ``SampledStat`` (N windows; a window is complete after ``time_window_ms`` or
  ``event_window`` events; the next record after that starts the next window, reusing the
  oldest slot; a window older than ``samples * time_window_ms`` is reset before it is
  measured) with ``WindowedSum``, ``WindowedCount``, ``Avg``, ``Max``, ``Min``;
  ``Rate`` over a ``SampledStat`` (a ``WindowedSum`` by default): the sum of the live
  windows divided by the time they cover, from the start of the oldest window to now,
  **padded to at least samples-1 whole windows** (so a fresh sensor does not report an
  absurd rate after a few milliseconds) and never below 1 ms; ``TokenBucket``: refill
  ``tokens = min(burst, tokens + quota * dt)``, then spend ``tokens = min(burst, tokens -
  value)``, with ``burst = samples * window * quota`` (Kafka's
  figure); it starts full; exhausted when ``tokens < 0``; ``CumulativeSum``,
  ``CumulativeCount``, ``Value``.
* ``Sensor``: records a value into each of its stats (and its parents'), then, when asked,
  checks every metric with a quota: a ``TokenBucket`` violates when its tokens are below
  zero, any other stat when ``not quota.acceptable(value)``; a violation raises
  ``QuotaViolationError`` (the metric, the value, the bound). A sensor remembers its last
  record and expires after ``inactive_sensor_expiration_ms`` without one. A sensor whose
  one metric is a Rate over a WindowedSum, without parents (``rate_only``: every client
  quota sensor), also has ``record_rate``: the same record-then-check with the Rate's
  arithmetic inlined under one lock acquisition (the produce / request hot path), which
  skips computing the rate while the windows' total is at most ``bound x (samples - 1) x
  window`` (the padded window is never shorter, so the verdict is "within").
* ``Metrics``: the registry (sensors by name, metrics by ``MetricName``), the default
  config, expiry of inactive sensors (``remove_expired_sensors``).
* The throttle-time arithmetic of ``QuotaUtils``: ``throttle_time`` is
  ``X = (O - T) / T * W`` with ``W`` the Rate's current (padded) window, rounded to a
  millisecond; ``bounded_throttle_time`` caps it (the request quota and connection rates:
  one window); ``token_bucket_throttle_time`` is ``-tokens / quota`` seconds.

Invariants: changing a metric's config (its quota) never resets what was recorded, so a
new limit applies to the usage already measured; recording a negative value (the fetch
"unrecord") subtracts from the current window, as Kafka's windowed sums allow.

Thread-safety: a ``Sensor`` records and checks under its own lock (several request
threads record into one client's sensor); ``Metrics`` guards its registries with a lock;
a stat on its own is not thread-safe (it belongs to one sensor or one metric, whose lock
guards it).
"""

from __future__ import annotations

import math
import threading
import time as _time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

DEFAULT_INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000  # Kafka's 1 hour for client sensors


# --- time ---------------------------------------------------------------------------------

class Time:
    """The clock: milliseconds / nanoseconds since an arbitrary epoch, and sleeping."""

    def milliseconds(self) -> int:
        raise NotImplementedError

    def nanoseconds(self) -> int:
        raise NotImplementedError

    def sleep(self, ms: float) -> None:
        raise NotImplementedError


class SystemTime(Time):
    def milliseconds(self) -> int:
        return _time.time_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return _time.monotonic_ns()

    def sleep(self, ms: float) -> None:
        _time.sleep(ms / 1000.0)


class MockTime(Time):
    """A clock that moves only when told (``sleep`` advances it; ``auto_tick_ms`` on every
    read, as Kafka's MockTime)."""

    def __init__(self, start_ms: int = 1_700_000_000_000, auto_tick_ms: int = 0) -> None:
        self._ns = start_ms * 1_000_000
        self.auto_tick_ms = auto_tick_ms
        self._lock = threading.Lock()

    def milliseconds(self) -> int:
        return self.nanoseconds() // 1_000_000

    def nanoseconds(self) -> int:
        with self._lock:
            self._ns += self.auto_tick_ms * 1_000_000
            return self._ns

    def sleep(self, ms: float) -> None:
        with self._lock:
            self._ns += int(ms * 1_000_000)


SYSTEM_TIME = SystemTime()


# --- config -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Quota:
    """A bound on a metric's value (``upper``: at most, else at least)."""

    bound: float
    upper: bool = True

    @staticmethod
    def upper_bound(bound: float) -> Quota:
        return Quota(float(bound), True)

    @staticmethod
    def lower_bound(bound: float) -> Quota:
        return Quota(float(bound), False)

    def acceptable(self, value: float) -> bool:
        return value <= self.bound if self.upper else value >= self.bound


@dataclass(frozen=True)
class MetricConfig:
    """Kafka's MetricConfig: ``samples`` windows of ``time_window_ms`` each (a window also
    closes after ``event_window`` events), and an optional ``quota``."""

    samples: int = 2
    time_window_ms: int = 30_000
    quota: Quota | None = None
    event_window: int = 2**63 - 1

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError("the number of samples must be at least 1")
        if self.time_window_ms < 1:
            raise ValueError("the time window must be at least 1 ms")
        if self.event_window < 1:
            raise ValueError("the event window must be at least 1")

    def with_quota(self, quota: Quota | None) -> MetricConfig:
        return replace(self, quota=quota)


class MetricName(NamedTuple):
    name: str
    group: str
    tags: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def of(name: str, group: str, tags: Mapping[str, str] | None = None) -> MetricName:
        return MetricName(name, group, tuple(sorted((tags or {}).items())))


class QuotaViolationError(Exception):
    """A sensor's metric crossed its quota: ``value`` against ``bound``."""

    def __init__(self, metric: KafkaMetric, value: float, bound: float) -> None:
        super().__init__(f"{metric.name.name} {metric.name.tags}: {value:.6g} "
                         f"{'>' if metric.config.quota is None or metric.config.quota.upper else '<'} "
                         f"the quota {bound:.6g}")
        self.metric = metric
        self.value = value
        self.bound = bound


# --- stats --------------------------------------------------------------------------------

class MeasurableStat:
    """A stat: ``record(config, value, time_ms)`` and ``measure(config, now_ms)``."""

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        raise NotImplementedError

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        raise NotImplementedError


class _Sample:
    __slots__ = ("initial", "value", "event_count", "last_window_ms")

    def __init__(self, initial: float, now_ms: int) -> None:
        self.initial = initial
        self.value = initial
        self.event_count = 0
        self.last_window_ms = now_ms  # when this window started

    def reset(self, now_ms: int) -> None:
        self.value = self.initial
        self.event_count = 0
        self.last_window_ms = now_ms

    def is_complete(self, time_ms: int, config: MetricConfig) -> bool:
        return time_ms - self.last_window_ms >= config.time_window_ms or self.event_count >= config.event_window


class SampledStat(MeasurableStat):
    """N rolling windows (see the module docstring); subclasses say how a value updates a
    window (``update``) and how windows combine (``combine``). The start of the oldest
    window is cached (recomputed only after a window started or was reset), so that a
    measure between window changes does not walk the windows to purge them."""

    initial_value = 0.0

    def __init__(self) -> None:
        self.samples: list[_Sample] = []
        self.current = 0
        self._oldest_ms = 0
        self._dirty = True  # _oldest_ms must be recomputed

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        sample = self.current_sample(time_ms)
        if time_ms - sample.last_window_ms >= config.time_window_ms or sample.event_count >= config.event_window:
            sample = self._advance(config, time_ms)
        self.update(sample, config, value, time_ms)
        sample.event_count += 1

    def _advance(self, config: MetricConfig, time_ms: int) -> _Sample:
        self.current = (self.current + 1) % config.samples
        self._dirty = True
        if self.current >= len(self.samples):
            sample = _Sample(self.initial_value, time_ms)
            self.samples.append(sample)
            return sample
        sample = self.samples[self.current]
        self._reset(sample, time_ms)
        return sample

    def _reset(self, sample: _Sample, now_ms: int) -> None:
        sample.reset(now_ms)

    def current_sample(self, time_ms: int) -> _Sample:
        if not self.samples:
            self.samples.append(_Sample(self.initial_value, time_ms))
            self._dirty = True
        return self.samples[self.current]

    def oldest_start(self, now_ms: int) -> int:
        """When the oldest window started."""
        if self._dirty or not self.samples:
            samples = self.samples
            if not samples:
                samples.append(_Sample(self.initial_value, now_ms))
            oldest = samples[0].last_window_ms
            for s in samples:
                if s.last_window_ms < oldest:
                    oldest = s.last_window_ms
            self._oldest_ms = oldest
            self._dirty = False
        return self._oldest_ms

    def oldest(self, now_ms: int) -> _Sample:
        start = self.oldest_start(now_ms)
        for s in self.samples:
            if s.last_window_ms == start:
                return s
        raise AssertionError("no oldest sample")

    def purge_obsolete_samples(self, config: MetricConfig, now_ms: int) -> None:
        expire_age = config.samples * config.time_window_ms
        if now_ms - self.oldest_start(now_ms) < expire_age:
            return  # nothing is that old
        for sample in self.samples:
            if now_ms - sample.last_window_ms >= expire_age:
                self._reset(sample, now_ms)
                self._dirty = True

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge_obsolete_samples(config, now_ms)
        return self.combine(self.samples, config, now_ms)

    def update(self, sample: _Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        raise NotImplementedError

    def combine(self, samples: list[_Sample], config: MetricConfig, now_ms: int) -> float:
        raise NotImplementedError


class WindowedSum(SampledStat):
    """The sum of the live windows, kept as a running total (a reset window's value is
    taken out of it)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0.0

    def update(self, sample: _Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        sample.value += value
        self.total += value

    def _reset(self, sample: _Sample, now_ms: int) -> None:
        self.total -= sample.value - sample.initial
        sample.reset(now_ms)
        if not any(s.value for s in self.samples):
            self.total = 0.0  # no rounding residue once every window is empty

    def combine(self, samples: list[_Sample], config: MetricConfig, now_ms: int) -> float:
        return self.total


class WindowedCount(WindowedSum):
    def update(self, sample: _Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        sample.value += 1.0
        self.total += 1.0


class Avg(SampledStat):
    def update(self, sample: _Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        sample.value += value

    def combine(self, samples: list[_Sample], config: MetricConfig, now_ms: int) -> float:
        count = sum(s.event_count for s in samples)
        return math.fsum(s.value for s in samples) / count if count else math.nan


class Max(SampledStat):
    initial_value = -math.inf

    def update(self, sample: _Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        sample.value = max(sample.value, value)

    def combine(self, samples: list[_Sample], config: MetricConfig, now_ms: int) -> float:
        values = [s.value for s in samples if s.event_count]
        return max(values) if values else math.nan


class Min(SampledStat):
    initial_value = math.inf

    def update(self, sample: _Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        sample.value = min(sample.value, value)

    def combine(self, samples: list[_Sample], config: MetricConfig, now_ms: int) -> float:
        values = [s.value for s in samples if s.event_count]
        return min(values) if values else math.nan


class Rate(MeasurableStat):
    """A per-second rate over a sampled stat (see the module docstring)."""

    def __init__(self, stat: SampledStat | None = None, unit_ms: float = 1000.0) -> None:
        self.stat = stat if stat is not None else WindowedSum()
        self.unit_ms = unit_ms

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        self.stat.record(config, value, time_ms)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        stat = self.stat
        stat.purge_obsolete_samples(config, now_ms)
        value = stat.combine(stat.samples, config, now_ms)
        return value / (self._window(config, now_ms) / self.unit_ms)

    def record_and_measure(self, config: MetricConfig, value: float, now_ms: int) -> float:
        """``record`` then ``measure`` in one call: the quota sensors' hot path (one per
        request with a quota). For the usual ``WindowedSum`` the steps are inlined (same
        arithmetic as ``SampledStat.record`` + ``WindowedSum.update`` + ``measure``)."""
        stat = self.stat
        if type(stat) is not WindowedSum:
            stat.record(config, value, now_ms)
            return self.measure(config, now_ms)
        samples = stat.samples
        window_ms = config.time_window_ms
        if samples:
            sample = samples[stat.current]
            if now_ms - sample.last_window_ms >= window_ms or sample.event_count >= config.event_window:
                sample = stat._advance(config, now_ms)
        else:
            sample = stat.current_sample(now_ms)
        sample.value += value
        stat.total += value
        sample.event_count += 1
        oldest = stat._oldest_ms if not stat._dirty else stat.oldest_start(now_ms)
        if now_ms - oldest >= config.samples * window_ms:
            stat.purge_obsolete_samples(config, now_ms)
            oldest = stat.oldest_start(now_ms)
        elapsed = now_ms - oldest
        full_windows = elapsed // window_ms
        if full_windows < config.samples - 1:
            elapsed += (config.samples - 1 - full_windows) * window_ms
        return stat.total / (max(int(elapsed), 1) / self.unit_ms)

    def window_size(self, config: MetricConfig, now_ms: int) -> int:
        """Milliseconds the rate divides by: from the oldest window's start to now, padded
        to samples-1 whole windows, at least 1."""
        self.stat.purge_obsolete_samples(config, now_ms)
        return self._window(config, now_ms)

    def _window(self, config: MetricConfig, now_ms: int) -> int:
        """``window_size`` of samples already purged."""
        elapsed = now_ms - self.stat.oldest_start(now_ms)
        full_windows = elapsed // config.time_window_ms
        min_full_windows = config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * config.time_window_ms
        return max(int(elapsed), 1)


class TokenBucket(MeasurableStat):
    """Credits refilled at the quota's rate, spent by records (see the module docstring);
    ``measure`` is the credit left (negative: exhausted). Needs a quota in the config."""

    def __init__(self, unit_ms: float = 1000.0) -> None:
        self.unit_ms = unit_ms
        self.tokens = 0.0
        self.last_update_ms: int | None = None

    def burst(self, config: MetricConfig) -> float:
        assert config.quota is not None
        return config.samples * (config.time_window_ms / self.unit_ms) * config.quota.bound

    def _refill(self, config: MetricConfig, time_ms: int) -> None:
        assert config.quota is not None
        burst = self.burst(config)
        if self.last_update_ms is None:
            self.tokens = burst  # a new bucket starts full
        else:
            elapsed = max(0, time_ms - self.last_update_ms) / self.unit_ms
            self.tokens = min(burst, self.tokens + config.quota.bound * elapsed)
        self.last_update_ms = time_ms if self.last_update_ms is None else max(self.last_update_ms, time_ms)

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        if config.quota is None:
            return
        self._refill(config, time_ms)
        self.tokens = min(self.burst(config), self.tokens - value)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        if config.quota is None:
            return float(2**63 - 1)
        self._refill(config, now_ms)
        return self.tokens


class CumulativeSum(MeasurableStat):
    def __init__(self, initial: float = 0.0) -> None:
        self.total = initial

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        self.total += value

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self.total


class CumulativeCount(CumulativeSum):
    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        self.total += 1.0


class Value(MeasurableStat):
    """The last value recorded."""

    def __init__(self) -> None:
        self.value = 0.0

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        self.value = value

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self.value


# --- metrics and sensors ------------------------------------------------------------------

@dataclass
class KafkaMetric:
    """A named stat with its config (the config, and so the quota, may be replaced)."""

    name: MetricName
    stat: MeasurableStat
    config: MetricConfig
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def measure(self, now_ms: int) -> float:
        with self.lock:
            return self.stat.measure(self.config, now_ms)


class Sensor:
    """Records values into its stats (see the module docstring)."""

    def __init__(self, registry: Metrics, name: str, config: MetricConfig, parents: Iterable[Sensor] = (),
                 inactive_sensor_expiration_ms: int | None = None) -> None:
        self.registry = registry
        self.name = name
        self.config = config
        self.parents = tuple(parents)
        self.metrics: list[KafkaMetric] = []
        self.rate_only = False  # record_rate applies (set by add)
        # record_rate's state (rate_only sensors): the metric, its WindowedSum, and what it
        # derives from the config (recomputed when the config object is replaced)
        self._rate_metric: KafkaMetric | None = None
        self._rate_stat: WindowedSum | None = None
        self._fast_config: MetricConfig | None = None
        self._safe_total = -math.inf
        self._window_ms = 1
        self._event_window = 1
        self.lock = threading.RLock()
        self.inactive_sensor_expiration_ms = inactive_sensor_expiration_ms
        self.last_record_time_ms = registry.time.milliseconds()

    def add(self, name: MetricName, stat: MeasurableStat, config: MetricConfig | None = None) -> KafkaMetric:
        metric = KafkaMetric(name, stat, config or self.config, self.lock)
        with self.lock:
            self.metrics.append(metric)
            self.rate_only = False
            if len(self.metrics) == 1 and not self.parents and type(stat) is Rate:
                inner = stat.stat
                if type(inner) is WindowedSum:
                    self.rate_only = True
                    self._rate_metric = metric
                    self._rate_stat = inner
        self.registry._register(metric)
        return metric

    def record_rate(self, value: float, now: int) -> float | None:
        """``record(value, now, True)`` for a sensor that is ``rate_only`` (its one metric a
        Rate over a WindowedSum, no parents: a client quota sensor): the client quotas' hot
        path (two per request with quotas on), ``Rate.record_and_measure`` inlined under one
        lock. Returns the rate after the record, or None when the windows' total is at most
        ``bound x (samples - 1) x window``: the padded window is never shorter than
        samples - 1 windows, so the rate is then within an upper-bound quota whatever the
        elapsed time, and is not computed. Windows expired by ``now`` are purged first either
        way, as ``record`` does: a purge left to a later call would restart them at a later
        time, and every rate measured after would differ."""
        with self.lock:
            self.last_record_time_ms = now
            metric = self._rate_metric
            # a rate_only sensor: its one metric a Rate over the WindowedSum kept by ``add``
            assert metric is not None and self._rate_stat is not None and isinstance(metric.stat, Rate)
            config = metric.config
            if config is not self._fast_config:
                self._configure_fast(config)
            stat = self._rate_stat
            samples = stat.samples
            if samples:
                sample = samples[stat.current]
                if now - sample.last_window_ms >= self._window_ms or sample.event_count >= self._event_window:
                    sample = stat._advance(config, now)
            else:
                sample = stat.current_sample(now)
            sample.value += value
            stat.total += value
            sample.event_count += 1
            window_ms = config.time_window_ms
            oldest = stat._oldest_ms if not stat._dirty else stat.oldest_start(now)
            n = config.samples
            if now - oldest >= n * window_ms:  # purged now, as record() does: the windows
                stat.purge_obsolete_samples(config, now)  # restart at the same times
                oldest = stat.oldest_start(now)
            if stat.total <= self._safe_total:
                return None
            elapsed = now - oldest
            full_windows = elapsed // window_ms
            if full_windows < n - 1:
                elapsed += (n - 1 - full_windows) * window_ms
            measured = stat.total / (max(int(elapsed), 1) / metric.stat.unit_ms)
            quota = config.quota
            if quota is not None and not (measured <= quota.bound if quota.upper else measured >= quota.bound):
                raise QuotaViolationError(metric, measured, quota.bound)
            return measured

    def _configure_fast(self, config: MetricConfig) -> None:
        """``record_rate``'s bound for ``config`` (recomputed when the config is replaced)."""
        quota = config.quota
        rate = self.metrics[0].stat
        assert isinstance(rate, Rate)  # called for rate_only sensors
        if quota is None or not quota.upper or config.samples < 2:
            self._safe_total = -math.inf  # always measured
        else:  # a hair under, so that float rounding can never turn "at most" into "over"
            self._safe_total = quota.bound * (config.samples - 1) * config.time_window_ms / rate.unit_ms * (1 - 1e-9)
        self._window_ms = config.time_window_ms
        self._event_window = config.event_window
        self._fast_config = config

    def record(self, value: float = 1.0, time_ms: int | None = None, check_quotas: bool = True) -> None:
        """Record ``value`` into every stat (then the parents'); with ``check_quotas``,
        raise ``QuotaViolationError`` if a quota is now crossed (the value stays recorded)."""
        now = self.registry.time.milliseconds() if time_ms is None else time_ms
        with self.lock:
            self.last_record_time_ms = now
            metrics = self.metrics
            if len(metrics) == 1:  # the usual quota sensor: one Rate (inlined check below)
                metric = metrics[0]
                config = metric.config
                quota = config.quota
                stat = metric.stat
                if check_quotas and quota is not None and type(stat) is Rate:
                    measured = stat.record_and_measure(config, value, now)
                    if not (measured <= quota.bound if quota.upper else measured >= quota.bound):
                        raise QuotaViolationError(metric, measured, quota.bound)
                else:
                    stat.record(config, value, now)
                if check_quotas and quota is not None and type(stat) is not Rate:
                    measured = stat.measure(config, now)
                    if type(stat) is TokenBucket:
                        if measured < 0:
                            raise QuotaViolationError(metric, measured, quota.bound)
                    elif not (measured <= quota.bound if quota.upper else measured >= quota.bound):
                        raise QuotaViolationError(metric, measured, quota.bound)
            else:
                for metric in metrics:
                    metric.stat.record(metric.config, value, now)
                if check_quotas:
                    self.check_quotas(now)
        for parent in self.parents:
            parent.record(value, now, check_quotas)

    def check_quotas(self, time_ms: int | None = None) -> None:
        now = self.registry.time.milliseconds() if time_ms is None else time_ms
        with self.lock:
            for metric in self.metrics:
                quota = metric.config.quota
                if quota is None:
                    continue
                value = metric.stat.measure(metric.config, now)
                if isinstance(metric.stat, TokenBucket):
                    if value < 0:
                        raise QuotaViolationError(metric, value, quota.bound)
                elif not quota.acceptable(value):
                    raise QuotaViolationError(metric, value, quota.bound)

    def has_expired(self, now_ms: int) -> bool:
        limit = self.inactive_sensor_expiration_ms
        return limit is not None and now_ms - self.last_record_time_ms > limit

    def reconfigure(self, config: MetricConfig) -> None:
        """Give every metric of this sensor ``config`` (e.g. a new quota): nothing recorded
        is reset."""
        with self.lock:
            self.config = config
            for metric in self.metrics:
                metric.config = config


class Metrics:
    """The registry of sensors and metrics (see the module docstring)."""

    def __init__(self, config: MetricConfig | None = None, time: Time | None = None) -> None:
        self.config = config or MetricConfig()
        self.time = time or SYSTEM_TIME
        self._sensors: dict[str, Sensor] = {}
        self._metrics: dict[MetricName, KafkaMetric] = {}
        self._lock = threading.RLock()

    def sensor(self, name: str, config: MetricConfig | None = None, parents: Iterable[Sensor] = (),
               inactive_sensor_expiration_ms: int | None = None) -> Sensor:
        """The sensor ``name``, created with ``config`` (else the default) if new."""
        with self._lock:
            s = self._sensors.get(name)
            if s is None:
                s = Sensor(self, name, config or self.config, parents, inactive_sensor_expiration_ms)
                self._sensors[name] = s
            return s

    def get_sensor(self, name: str) -> Sensor | None:
        with self._lock:
            return self._sensors.get(name)

    def remove_sensor(self, name: str) -> None:
        with self._lock:
            s = self._sensors.pop(name, None)
            if s is not None:
                for m in s.metrics:
                    self._metrics.pop(m.name, None)

    def _register(self, metric: KafkaMetric) -> None:
        with self._lock:
            if metric.name in self._metrics:
                raise ValueError(f"a metric named {metric.name} already exists")
            self._metrics[metric.name] = metric

    def metric(self, name: MetricName) -> KafkaMetric | None:
        with self._lock:
            return self._metrics.get(name)

    def metrics(self) -> dict[MetricName, KafkaMetric]:
        with self._lock:
            return dict(self._metrics)

    def sensors(self) -> list[Sensor]:
        with self._lock:
            return list(self._sensors.values())

    def remove_expired_sensors(self, now_ms: int | None = None) -> list[str]:
        """Drop every sensor idle past its expiration; returns their names."""
        now = self.time.milliseconds() if now_ms is None else now_ms
        with self._lock:
            gone = [name for name, s in self._sensors.items() if s.has_expired(now)]
            for name in gone:
                self.remove_sensor(name)
        return gone


# --- throttle arithmetic (QuotaUtils) ------------------------------------------------------

def _window_ms(metric: KafkaMetric, now_ms: int) -> int:
    stat = metric.stat
    if not isinstance(stat, Rate):
        raise TypeError(f"metric {metric.name} is not a Rate: no window to throttle over")
    return stat.window_size(metric.config, now_ms)


def throttle_time(e: QuotaViolationError, now_ms: int) -> int:
    """``X = (O - T) / T * W`` ms: the delay that brings the observed rate ``O`` back to
    the bound ``T`` over the Rate's current window ``W``, rounded."""
    difference = e.value - e.bound
    return round(difference / e.bound * _window_ms(e.metric, now_ms))


def bounded_throttle_time(e: QuotaViolationError, now_ms: int, max_throttle_ms: int) -> int:
    return min(throttle_time(e, now_ms), max_throttle_ms)


def token_bucket_throttle_time(e: QuotaViolationError) -> int:
    """The time the bucket needs to be back at zero credits: ``-tokens / quota`` s."""
    if not isinstance(e.metric.stat, TokenBucket):
        return 0
    return round(-e.value / e.bound * 1000)


__all__ = [
    "Avg", "CumulativeCount", "CumulativeSum", "DEFAULT_INACTIVE_SENSOR_EXPIRATION_MS", "KafkaMetric", "Max",
    "MeasurableStat", "MetricConfig", "MetricName", "Metrics", "Min", "MockTime", "Quota", "QuotaViolationError",
    "Rate", "SYSTEM_TIME", "SampledStat", "Sensor", "SystemTime", "Time", "TokenBucket", "Value", "WindowedCount",
    "WindowedSum", "bounded_throttle_time", "throttle_time", "token_bucket_throttle_time",
]
