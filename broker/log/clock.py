"""Clocks for the storage engine: the wall clock and a mock one for tests.

Owns: the tiny ``Time`` interface (Kafka's ``org.apache.kafka.common.utils.Time``) that
every time-dependent part of ``broker.log`` takes as an argument instead of calling
``time.time()`` itself (segment.ms rolling, segment creation time, retention), so that
tests are deterministic.

- ``milliseconds()``: wall-clock epoch milliseconds (may jump; used for timestamps that are
  compared with record timestamps and file mtimes).
- ``nanoseconds()``: a monotonic clock in nanoseconds (never jumps; for durations).
- ``sleep(ms)``: blocks (``SystemTime``) or advances the clock (``MockTime``).

No on-disk format.

Thread-safety: ``SystemTime`` is stateless. ``MockTime`` guards its two counters with a
lock, so tests may advance it from one thread while the code under test reads it from
another.
"""

from __future__ import annotations

import threading
import time as _time
from typing import Protocol

__all__ = ["Time", "SystemTime", "MockTime", "SYSTEM_TIME"]


class Time(Protocol):
    def milliseconds(self) -> int: ...

    def nanoseconds(self) -> int: ...

    def sleep(self, ms: int) -> None: ...


class SystemTime:
    """The real clocks."""

    def milliseconds(self) -> int:
        return _time.time_ns() // 1_000_000

    def nanoseconds(self) -> int:
        return _time.monotonic_ns()

    def hi_res_milliseconds(self) -> int:
        return _time.monotonic_ns() // 1_000_000

    def sleep(self, ms: int) -> None:
        if ms > 0:
            _time.sleep(ms / 1000.0)


SYSTEM_TIME = SystemTime()

# A fixed default start (2023-11-14T22:13:20Z) keeps tests reproducible.
_DEFAULT_START_MS = 1_700_000_000_000


class MockTime:
    """A clock that only moves when told to (``sleep``) or by ``auto_tick_ms`` per read,
    as Kafka's ``MockTime``."""

    def __init__(self, auto_tick_ms: int = 0, current_time_ms: int = _DEFAULT_START_MS,
                 current_hi_res_time_ns: int = 0) -> None:
        self._lock = threading.Lock()
        self._auto_tick_ms = auto_tick_ms
        self._time_ms = current_time_ms
        self._hi_res_ns = current_hi_res_time_ns

    def _maybe_tick(self) -> None:
        if self._auto_tick_ms > 0:
            self._time_ms += self._auto_tick_ms
            self._hi_res_ns += self._auto_tick_ms * 1_000_000

    def milliseconds(self) -> int:
        with self._lock:
            self._maybe_tick()
            return self._time_ms

    def nanoseconds(self) -> int:
        with self._lock:
            self._maybe_tick()
            return self._hi_res_ns

    def hi_res_milliseconds(self) -> int:
        return self.nanoseconds() // 1_000_000

    def sleep(self, ms: int) -> None:
        with self._lock:
            self._time_ms += ms
            self._hi_res_ns += ms * 1_000_000

    def set_current_time_ms(self, ms: int) -> None:
        """Move the wall clock (only forward, as Kafka's MockTime)."""
        with self._lock:
            if ms < self._time_ms:
                raise ValueError(f"setting the time back from {self._time_ms} to {ms}")
            self._hi_res_ns += (ms - self._time_ms) * 1_000_000
            self._time_ms = ms
