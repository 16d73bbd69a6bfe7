"""``Throttler``: keeps the cleaner's I/O under log.cleaner.io.max.bytes.per.second
(Kafka's ``utils.Throttler``).

Owns: a rate check every ``check_interval_ms`` (300 ms as Kafka's cleaner): when the bytes
counted since the last check exceed the desired rate, sleep (on the given ``Time``) long
enough to bring the observed rate back to it. ``float('inf')`` (the default, Kafka's
Double.MaxValue) never sleeps.

Invariants: the counted bytes are reset after each check; a sleep never exceeds the time
needed to bring the rate down to the target.

Thread-safety: ``maybe_throttle`` is serialised by a lock, so one throttler may be shared
by the cleaner threads (Kafka shares one).
"""

from __future__ import annotations

import threading

from ..clock import SYSTEM_TIME, Time

__all__ = ["Throttler"]


class Throttler:
    def __init__(self, desired_rate_per_sec: float, time: Time = SYSTEM_TIME,
                 check_interval_ms: int = 300) -> None:
        if desired_rate_per_sec <= 0:
            raise ValueError(f"the throttle rate must be positive, not {desired_rate_per_sec}")
        self.desired_rate_per_sec = desired_rate_per_sec
        self.time = time
        self.check_interval_ms = check_interval_ms
        self._lock = threading.Lock()
        self._period_start_ms = time.milliseconds()
        self._observed = 0.0
        self.slept_ms = 0  # total, for observability and tests

    @property
    def enabled(self) -> bool:
        return self.desired_rate_per_sec < float("inf") and self.desired_rate_per_sec < 1.7e308

    def maybe_throttle(self, observed: float) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._observed += observed
            now = self.time.milliseconds()
            elapsed_ms = now - self._period_start_ms
            if elapsed_ms < self.check_interval_ms or self._observed <= 0:
                return
            rate = self._observed * 1000.0 / elapsed_ms
            if rate > self.desired_rate_per_sec:
                desired_elapsed_ms = self._observed * 1000.0 / self.desired_rate_per_sec
                sleep_ms = int(desired_elapsed_ms - elapsed_ms)
                if sleep_ms > 0:
                    self.time.sleep(sleep_ms)
                    self.slept_ms += sleep_ms
            self._period_start_ms = self.time.milliseconds()
            self._observed = 0.0
