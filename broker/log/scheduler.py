"""Background tasks of the storage engine: a small ``KafkaScheduler`` and its deterministic core.

Owns: ``Scheduler`` (a heap of one-shot and periodic tasks keyed by due time, run by
``run_pending(now_ms)``: the deterministic core that tests drive with a ``MockTime``, as
Kafka's ``MockScheduler``) and ``KafkaScheduler`` (the same heap driven by one daemon
thread, as Kafka's ``KafkaScheduler`` with one thread). The storage engine schedules
through it: delayed deletion of ``.deleted`` segment files (file.delete.delay.ms), the
asynchronous flush of a rolled segment, retention, flush.ms checks, checkpoints, producer
expiration, deletion of ``-delete`` partition directories.

No on-disk format.

Invariants: a task never runs before its due time (by the scheduler's clock); tasks due at
the same time run in the order they were scheduled; a periodic task is rescheduled
``period_ms`` after its due time (fixed rate, as ``scheduleAtFixedRate``, without catching
up: a late run is followed by the next one a full period later); an exception in a task
is logged and never stops the scheduler (a periodic task keeps its schedule). After
``shutdown()`` nothing runs and new tasks are dropped (Kafka drops delayed tasks on
shutdown: leftover ``.deleted`` files are removed by the next start).

Thread-safety: ``schedule``/``cancel``/``run_pending`` may be called from any thread. The
heap is guarded by a lock; tasks run outside it, one at a time (``run_pending`` holds a
separate run lock), so two tasks never run concurrently. A task may schedule others.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable

from .clock import SYSTEM_TIME, Time

__all__ = ["Scheduler", "MockScheduler", "KafkaScheduler", "ScheduledTask"]

log = logging.getLogger(__name__)


class ScheduledTask:
    """A handle on a scheduled task; ``cancel()`` prevents further runs."""

    __slots__ = ("name", "fn", "due_ms", "period_ms", "cancelled", "runs")

    def __init__(self, name: str, fn: Callable[[], object], due_ms: int, period_ms: int) -> None:
        self.name = name
        self.fn = fn
        self.due_ms = due_ms
        self.period_ms = period_ms
        self.cancelled = False
        self.runs = 0

    def cancel(self) -> None:
        self.cancelled = True

    def __repr__(self) -> str:
        return f"ScheduledTask({self.name!r}, due_ms={self.due_ms}, period_ms={self.period_ms})"


class Scheduler:
    """Tasks run only when ``run_pending`` is called (deterministic; no thread).

    Thread-safety: any thread may schedule, cancel or run; tasks never run concurrently."""

    def __init__(self, time: Time = SYSTEM_TIME) -> None:
        self.time = time
        self._lock = threading.Condition(threading.Lock())
        self._run_lock = threading.RLock()
        self._heap: list[tuple[int, int, ScheduledTask]] = []
        self._seq = itertools.count()
        self._shutdown = False

    # --- scheduling ---

    def schedule(self, name: str, fn: Callable[[], object], delay_ms: int = 0,
                 period_ms: int = -1) -> ScheduledTask:
        """Run ``fn`` after ``delay_ms``, then every ``period_ms`` if positive."""
        due = self.time.milliseconds() + max(delay_ms, 0)
        task = ScheduledTask(name, fn, due, period_ms)
        with self._lock:
            if self._shutdown:
                log.debug("scheduler is shut down; dropping task %s", name)
                task.cancelled = True
                return task
            heapq.heappush(self._heap, (due, next(self._seq), task))
            self._lock.notify_all()
        return task

    def schedule_once(self, name: str, fn: Callable[[], object], delay_ms: int = 0) -> ScheduledTask:
        return self.schedule(name, fn, delay_ms, -1)

    @property
    def is_shutdown(self) -> bool:
        return self._shutdown

    def pending(self) -> list[ScheduledTask]:
        """Tasks not yet run or cancelled, by due time."""
        with self._lock:
            return [t for _, _, t in sorted(self._heap) if not t.cancelled]

    def next_due_ms(self) -> int | None:
        with self._lock:
            while self._heap and self._heap[0][2].cancelled:
                heapq.heappop(self._heap)
            return self._heap[0][0] if self._heap else None

    # --- running ---

    def _pop_due(self, now_ms: int) -> ScheduledTask | None:
        with self._lock:
            while self._heap:
                due, _, task = self._heap[0]
                if task.cancelled:
                    heapq.heappop(self._heap)
                    continue
                if due > now_ms or self._shutdown:
                    return None
                heapq.heappop(self._heap)
                return task
            return None

    def run_pending(self, now_ms: int | None = None) -> int:
        """Run every task due at ``now_ms`` (default: the clock's now), including periodic
        reruns that fall due by then; returns how many ran."""
        with self._run_lock:
            now_ms = self.time.milliseconds() if now_ms is None else now_ms
            ran = 0
            while True:
                task = self._pop_due(now_ms)
                if task is None:
                    return ran
                try:
                    task.fn()
                except Exception:  # a task's failure must not stop the others
                    log.exception("uncaught exception in scheduled task %s", task.name)
                task.runs += 1
                ran += 1
                if task.period_ms > 0 and not task.cancelled:
                    task.due_ms += task.period_ms
                    with self._lock:
                        if not self._shutdown:
                            heapq.heappush(self._heap, (task.due_ms, next(self._seq), task))

    tick = run_pending

    def startup(self) -> None:
        """Nothing to start (see ``KafkaScheduler``)."""

    def shutdown(self) -> None:
        """Drop every pending task; nothing runs afterwards."""
        with self._lock:
            self._shutdown = True
            self._heap.clear()
            self._lock.notify_all()


MockScheduler = Scheduler


class KafkaScheduler(Scheduler):
    """A ``Scheduler`` run by one daemon thread that sleeps until the next due task (or a
    new task is scheduled). Uses the wall clock unless given another ``time``; with a
    ``MockTime`` the thread polls every ``poll_ms``.

    Thread-safety: as ``Scheduler``; tasks run on the scheduler's thread (or on a thread
    that calls ``run_pending``), one at a time."""

    def __init__(self, time: Time = SYSTEM_TIME, thread_name: str = "kafka-scheduler",
                 poll_ms: int = 1000) -> None:
        super().__init__(time)
        self._thread_name = thread_name
        self._poll_ms = poll_ms
        self._thread: threading.Thread | None = None

    def startup(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name=self._thread_name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._shutdown:
                    return
                due = self._heap[0][0] if self._heap else None
                now = self.time.milliseconds()
                wait_ms = self._poll_ms if due is None else min(max(due - now, 0), self._poll_ms)
                if wait_ms > 0:
                    self._lock.wait(wait_ms / 1000.0)
                    continue
            self.run_pending()

    def shutdown(self) -> None:
        super().shutdown()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)
