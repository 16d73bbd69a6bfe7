"""BufferPool: buffer.memory bound, recycling, FIFO waiters, no leak on timeout."""

import threading
import time

import pytest

from broker.client.errors import BufferExhaustedError, IllegalStateError
from broker.client.producer.buffer_pool import BufferPool
from tests.support.waits import wait_until


def test_poolable_buffers_are_recycled():
    pool = BufferPool(1000, 100)
    a = pool.allocate(100, 0)
    assert len(a) == 100 and pool.available_memory() == 900
    pool.deallocate(a)
    assert pool.free_size() == 1 and pool.available_memory() == 1000
    assert pool.allocate(100, 0) is a


def test_non_poolable_sizes_are_counted():
    pool = BufferPool(1000, 100)
    b = pool.allocate(300, 0)
    assert pool.unallocated_memory() == 700
    pool.deallocate(b)
    assert pool.unallocated_memory() == 1000 and pool.free_size() == 0


def test_free_list_is_released_for_large_requests():
    pool = BufferPool(300, 100)
    bufs = [pool.allocate(100, 0) for _ in range(3)]
    for b in bufs:
        pool.deallocate(b)
    big = pool.allocate(250, 0)
    assert len(big) == 250 and pool.available_memory() == 50


def test_too_large_request_is_refused():
    with pytest.raises(IllegalStateError):
        BufferPool(100, 10).allocate(101, 0)


def test_timeout_raises_and_leaks_nothing():
    pool = BufferPool(200, 100)
    held = pool.allocate(150, 0)
    t0 = time.monotonic()
    with pytest.raises(BufferExhaustedError):
        pool.allocate(100, 50)
    assert time.monotonic() - t0 >= 0.04
    assert pool.available_memory() == 50 and pool.queued() == 0
    assert pool.exhausted_count == 1
    pool.deallocate(held)
    assert pool.available_memory() == 200


def test_partial_accumulation_is_returned_on_timeout():
    pool = BufferPool(300, 100)
    a = pool.allocate(100, 0)
    b = pool.allocate(200, 0)

    def give_back():
        wait_until(lambda: pool.queued() == 1, 5, "the allocation never waited", interval=0.001)
        pool.deallocate(a)  # 100 bytes reach the waiter, not enough for 250

    threading.Thread(target=give_back).start()
    with pytest.raises(BufferExhaustedError):
        pool.allocate(250, 300)
    assert pool.available_memory() == 100  # the 100 gathered by the waiter came back
    pool.deallocate(b)
    assert pool.available_memory() == 300


def test_waiters_are_served_fifo():
    pool = BufferPool(100, 100)
    held = pool.allocate(100, 0)
    order = []

    def waiter(name, size):
        buf = pool.allocate(size, 5000)
        order.append(name)
        time.sleep(0.02)  # scenario: the buffer is in use a moment, as while its batch is sent
        pool.deallocate(buf)

    big = threading.Thread(target=waiter, args=("big", 100))
    big.start()
    wait_until(lambda: pool.queued() == 1, 5, "the big request never waited", interval=0.001)
    small = threading.Thread(target=waiter, args=("small", 10))
    small.start()
    wait_until(lambda: pool.queued() == 2, 5, "the small request never waited", interval=0.001)
    pool.deallocate(held)
    big.join(5)
    small.join(5)
    assert order == ["big", "small"]  # the large request is not starved by the small one
    assert pool.available_memory() == 100


def test_close_wakes_waiters():
    pool = BufferPool(100, 100)
    pool.allocate(100, 0)
    errors = []

    def waiter():
        try:
            pool.allocate(50, 5000)
        except Exception as e:
            errors.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    wait_until(lambda: pool.queued() == 1, 5, "the request never waited", interval=0.001)
    pool.close()
    t.join(5)
    assert isinstance(errors[0], IllegalStateError)


def test_reserve_takes_budget_without_a_buffer():
    pool = BufferPool(1000, 100)
    pool.reserve(400, 0)
    assert pool.available_memory() == 600
    pool.deallocate(None, 400)
    assert pool.available_memory() == 1000
