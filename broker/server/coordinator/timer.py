"""A coordinator's timers (Kafka's ``CoordinatorTimer`` and the coordinators' periodic
tasks).

Owns two kinds of timer:

* one-shot timers (``schedule_once``): a classic member's session and its pending join,
  a rebalance's join and sync deadlines, a KIP-848 member's session and revocation, and
  later share-group acquisition locks. They run on the coordinator's own
  ``KafkaScheduler`` thread (``thread_name``), so that a long task of the storage engine
  (retention, a flush) never delays a rebalance; a coordinator without one-shot timers
  has no thread and schedules them, if ever, on the broker's scheduler.
* periodic tasks (``schedule_periodic``): offset expiration, transaction timeouts, marker
  retries, transactional id expiration. They run on the broker's scheduler (the log
  manager's), at a fixed rate, the first one an interval after startup; without a
  scheduler (some tests) or with an interval <= 0 nothing is scheduled.

``shutdown()`` cancels the periodic tasks and stops the own thread (its pending timers are
dropped, as Kafka drops them when a coordinator unloads); idempotent.

Invariants: a task that raises is logged by the scheduler and never stops it (a periodic
task keeps its schedule); a task runs on one thread at a time per scheduler, so the
callbacks take the coordinator's locks themselves.

Thread-safety: every method may be called from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from broker.log.clock import SYSTEM_TIME, Time
from broker.log.scheduler import KafkaScheduler, ScheduledTask, Scheduler


class CoordinatorTimer:
    """One coordinator's timers (module docstring). ``scheduler``: the broker's shared one."""

    def __init__(self, time: Time = SYSTEM_TIME, scheduler: Scheduler | None = None, *,
                 thread_name: str | None = None) -> None:
        self.time = time
        self.scheduler = scheduler
        self._own = KafkaScheduler(time, thread_name=thread_name) if thread_name is not None else None
        self._periodic: list[ScheduledTask] = []
        self._lock = threading.Lock()

    def startup(self) -> None:
        if self._own is not None:
            self._own.startup()

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: int) -> ScheduledTask:
        target = self._own if self._own is not None else self.scheduler
        if target is None:
            raise RuntimeError(f"{name}: this coordinator has no scheduler for one-shot timers")
        return target.schedule_once(name, fn, delay_ms)

    def schedule_periodic(self, name: str, fn: Callable[[], object], interval_ms: int) -> ScheduledTask | None:
        if self.scheduler is None or interval_ms <= 0:
            return None
        task = self.scheduler.schedule(name, fn, interval_ms, interval_ms)
        with self._lock:
            self._periodic.append(task)
        return task

    def shutdown(self) -> None:
        with self._lock:
            tasks, self._periodic = self._periodic, []
        for task in tasks:
            task.cancel()
        if self._own is not None:
            self._own.shutdown()


__all__ = ["CoordinatorTimer"]
