"""BufferPool: the ``buffer.memory``-bounded allocator behind the RecordAccumulator.

Owns the memory of unsent batches, as Kafka's ``BufferPool``:

* Buffers of exactly ``poolable_size`` (``batch.size``) are ``bytearray``s recycled on a
  free list; other sizes are fresh ``bytearray``s whose bytes are counted in
  ``non_pooled_available``.
* ``allocate(size, max_time_to_block_ms)`` returns a buffer at once when memory is on
  hand, otherwise it queues the caller on a strictly FIFO list of waiters, each with its
  own ``Condition``; memory returned by ``deallocate`` goes to the longest waiter first
  (accumulated piece by piece for a large request), so a large request is never starved
  by small ones. When ``max_time_to_block_ms`` passes it raises ``BufferExhaustedError``.
* ``deallocate(buffer, size)`` returns a buffer: poolable ones to the free list, others
  to ``non_pooled_available``; then the head waiter is signalled.

Invariants: ``available_memory() == non_pooled_available + len(free) * poolable_size
<= total_memory`` at all times; memory reserved by a caller that then times out (or is
interrupted by ``close``) is given back in a ``finally`` block, so a failed allocation
never leaks. A buffer handed out is owned by exactly one batch until ``deallocate``; the
caller must not deallocate a buffer still referenced by a request in flight (I13).

Thread-safety: every method takes the pool's lock; user threads allocate, the Sender
thread deallocates.
"""

from __future__ import annotations

import threading
import time
from collections import deque

from broker.client.errors import BufferExhaustedError, IllegalStateError


class BufferPool:
    """A pool of ``total_memory`` bytes with recycled buffers of ``poolable_size``."""

    def __init__(self, total_memory: int, poolable_size: int) -> None:
        self.total_memory = total_memory
        self.poolable_size = poolable_size
        self._lock = threading.Lock()
        self._free: deque[bytearray] = deque()
        self._waiters: deque[threading.Condition] = deque()
        self.non_pooled_available = total_memory
        self._closed = False
        self.exhausted_count = 0  # allocations that timed out (buffer-exhausted-records)
        self.wait_time_ns = 0  # time callers spent blocked (bufferpool-wait-time-ns-total)

    # -- allocation ----------------------------------------------------------------------

    def allocate(self, size: int, max_time_to_block_ms: float) -> bytearray:
        """A buffer of ``size`` bytes; blocks up to ``max_time_to_block_ms`` for memory."""
        buf = self._take(size, max_time_to_block_ms)
        return bytearray(size) if buf is None else buf

    def reserve(self, size: int, max_time_to_block_ms: float) -> None:
        """Reserve ``size`` bytes of budget without a buffer (columnar batches, whose bytes
        are built outside the pool); give them back with ``deallocate(None, size)``."""
        self._take(size, max_time_to_block_ms)  # a recycled buffer is dropped, budget kept

    def _take(self, size: int, max_time_to_block_ms: float) -> bytearray | None:
        """A recycled buffer, or None once ``size`` bytes of budget are reserved."""
        if size > self.total_memory:
            raise IllegalStateError(
                f"attempt to allocate {size} bytes, but there is a hard limit of "
                f"{self.total_memory} on memory allocations")
        with self._lock:
            if self._closed:
                raise IllegalStateError("producer closed while allocating memory")
            if size == self.poolable_size and self._free:
                return self._free.popleft()
            if self.non_pooled_available + len(self._free) * self.poolable_size >= size:
                self._free_up(size)
                self.non_pooled_available -= size
                self._signal_head()
                return None
            return self._wait_for(size, max_time_to_block_ms)

    def _wait_for(self, size: int, max_time_to_block_ms: float) -> bytearray | None:
        """Queue for memory (lock held); FIFO, accumulating returned memory."""
        cond = threading.Condition(self._lock)
        remaining_ns = int(max_time_to_block_ms * 1e6)
        accumulated = 0
        self._waiters.append(cond)
        try:
            while accumulated < size:
                start = time.monotonic_ns()
                signalled = cond.wait(remaining_ns / 1e9) if remaining_ns > 0 else False
                waited = time.monotonic_ns() - start
                self.wait_time_ns += waited
                remaining_ns -= waited
                if self._closed:
                    raise IllegalStateError("producer closed while allocating memory")
                if not signalled and remaining_ns <= 0:
                    self.exhausted_count += 1
                    raise BufferExhaustedError(
                        f"failed to allocate {size} bytes within the configured max blocking "
                        f"time {max_time_to_block_ms:g} ms; total memory {self.total_memory} "
                        f"bytes, available "
                        f"{self.non_pooled_available + len(self._free) * self.poolable_size}")
                # A recycled buffer satisfies a poolable request that has gathered nothing.
                if accumulated == 0 and size == self.poolable_size and self._free:
                    return self._free.popleft()
                self._free_up(size - accumulated)
                got = min(size - accumulated, self.non_pooled_available)
                self.non_pooled_available -= got
                accumulated += got
            accumulated = 0  # the reserved memory now belongs to the caller
            return None
        finally:
            # Memory gathered by a wait that failed goes back (never leaked).
            self.non_pooled_available += accumulated
            self._waiters.remove(cond)
            self._signal_head()

    def _free_up(self, size: int) -> None:
        """Release pooled buffers until ``non_pooled_available`` covers ``size``."""
        while self._free and self.non_pooled_available < size:
            self._free.pop()
            self.non_pooled_available += self.poolable_size

    def _signal_head(self) -> None:
        if self._waiters and (self.non_pooled_available > 0 or self._free):
            self._waiters[0].notify()

    # -- release -------------------------------------------------------------------------

    def deallocate(self, buffer: bytearray | None, size: int | None = None) -> None:
        """Return ``buffer`` (or, with ``buffer=None``, ``size`` bytes of budget)."""
        if size is None:
            size = len(buffer) if buffer is not None else 0
        with self._lock:
            if buffer is not None and size == self.poolable_size and len(buffer) == size:
                self._free.append(buffer)
            else:
                self.non_pooled_available += size
            if self._waiters:
                self._waiters[0].notify()

    # -- inspection ----------------------------------------------------------------------

    def available_memory(self) -> int:
        with self._lock:
            return self.non_pooled_available + len(self._free) * self.poolable_size

    def unallocated_memory(self) -> int:
        with self._lock:
            return self.non_pooled_available

    def queued(self) -> int:
        """Threads blocked waiting for memory (the accumulator sends everything then)."""
        return len(self._waiters)

    def free_size(self) -> int:
        return len(self._free)

    def close(self) -> None:
        """Wake every waiter with an error; later allocations fail."""
        with self._lock:
            self._closed = True
            for cond in self._waiters:
                cond.notify()
