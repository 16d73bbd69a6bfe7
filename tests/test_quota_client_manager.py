"""ClientQuotaManager (broker/server/quota/client_quota_manager.py) on a hand-driven clock:
Q1 through the manager and its delay queue (the channel is released only after 2100 ms,
exactly once), Q4's eight-level precedence (ClientQuotaManagerTest.testQuotaConfigPrecedence),
the quotaTypesEnabled fast path, limits changed without resetting usage, the fetch
unrecord and maxValueInQuotaWindow clamp, the request quota capped at one window, and
sensors expiring after an hour idle."""

from __future__ import annotations

import threading

import pytest

from broker.server.quota.client_quota_manager import (
    CLIENT_ID_QUOTA_ENABLED,
    DEFAULT,
    NO_QUOTAS,
    USER_CLIENT_ID_QUOTA_ENABLED,
    USER_QUOTA_ENABLED,
    ClientQuotaManager,
    ClientQuotaManagerConfig,
    QuotaEntity,
    QuotaType,
    ThrottleCallback,
)
from broker.server.quota.metrics import Metrics, MockTime

CONFIG = ClientQuotaManagerConfig(num_quota_samples=11, quota_window_size_seconds=1)


def manager(quota_type: QuotaType = QuotaType.PRODUCE) -> tuple[ClientQuotaManager, MockTime]:
    clock = MockTime()
    return ClientQuotaManager(CONFIG, Metrics(time=clock), quota_type, clock), clock


class Channel(ThrottleCallback):
    def __init__(self) -> None:
        self.muted = False
        self.starts = 0
        self.ends = 0

    def start_throttling(self) -> None:
        self.muted = True
        self.starts += 1

    def end_throttling(self) -> None:
        self.muted = False
        self.ends += 1


def test_q1_through_the_manager_and_the_delay_queue():
    m, clock = manager()
    m.update_quota(QuotaEntity(None, DEFAULT), 500)
    for _ in range(10):
        assert m.maybe_record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400) == 0
        clock.sleep(1000)
    clock.sleep(500)
    throttle = m.maybe_record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 2300)
    assert throttle == 2100
    channel = Channel()
    m.throttle("ANONYMOUS", "unknown", channel, throttle)
    sensors = m.get_or_create_quota_sensors("ANONYMOUS", "unknown")
    assert sensors.throttle_time_sensor.metrics[1].measure(clock.milliseconds()) == 2100  # throttle-time-max
    assert channel.muted and m.queue_size() == 1
    assert m.reaper.do_work() == 0 and channel.muted  # not before the delay
    clock.sleep(2099)
    assert m.reaper.do_work() == 0 and channel.muted
    clock.sleep(1)
    assert m.reaper.do_work() == 1 and not channel.muted
    assert m.reaper.do_work() == 0 and (channel.starts, channel.ends) == (1, 1)  # exactly once
    for _ in range(10):
        m.maybe_record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400)
        clock.sleep(1000)
    assert m.maybe_record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 0) == 0


def check_quota(m: ClientQuotaManager, user: str, client: str, bound: float, value: float, throttled: bool) -> None:
    tags = m.quota_metric_tags(user, client)
    assert m.quota_limit(tags) == bound
    assert m.max_value_in_quota_window(user, client) == bound * 10 * 1
    t = m.maybe_record_and_get_throttle_time_ms(user, client, value * CONFIG.num_quota_samples)
    assert (t > 0) == throttled, (user, client, t)


def test_q4_precedence_of_the_eight_levels():
    m, _ = manager()
    m.update_quota(QuotaEntity(DEFAULT, DEFAULT), 1000)
    m.update_quota(QuotaEntity(DEFAULT, None), 2000)
    m.update_quota(QuotaEntity(None, DEFAULT), 3000)
    m.update_quota(QuotaEntity("userA", None), 4000)
    m.update_quota(QuotaEntity("userA", "client1"), 5000)
    m.update_quota(QuotaEntity("userB", None), 6000)
    m.update_quota(QuotaEntity("userB", DEFAULT), 7000)
    m.update_quota(QuotaEntity(DEFAULT, "client1"), 8000)
    m.update_quota(QuotaEntity(None, "client1"), 9000)
    assert m.quota_types_enabled == CLIENT_ID_QUOTA_ENABLED | USER_QUOTA_ENABLED | USER_CLIENT_ID_QUOTA_ENABLED
    check_quota(m, "userA", "client1", 5000, 4500, False)  # user+client beats user
    check_quota(m, "userA", "client2", 4000, 4500, True)  # user beats <default> user+client
    check_quota(m, "userB", "client1", 7000, 8000, True)  # user+<default> client beats <default> user+client
    check_quota(m, "userB", "client2", 7000, 8000, True)
    check_quota(m, "userC", "client1", 8000, 0, False)  # <default> user+client beats client
    check_quota(m, "userC", "client2", 1000, 0, False)
    # removing the <default>/<default> quota falls back to the <default> user's
    m.update_quota(QuotaEntity(DEFAULT, DEFAULT), None)
    check_quota(m, "userD", "client1", 8000, 0, False)
    check_quota(m, "userE", "client4", 2000, 0, False)
    m.update_quota(QuotaEntity(DEFAULT, None), None)
    check_quota(m, "userF", "client4", 3000, 0, False)  # then the <default> client's
    m.update_quota(QuotaEntity(None, "client1"), None)
    check_quota(m, "userA", "client1", 5000, 0, False)


def test_fast_path_and_single_level_tags():
    m, _ = manager()
    assert m.quota_types_enabled == NO_QUOTAS
    assert m.maybe_record_and_get_throttle_time_ms("u", "c", 10**12) == 0
    assert m.metrics.sensors() == []  # nothing recorded, nothing created
    assert m.max_value_in_quota_window("u", "c") == float("inf")
    m.update_quota(QuotaEntity("alice", None), 100)
    assert m.quota_types_enabled == USER_QUOTA_ENABLED
    assert m.quota_metric_tags("alice", "c1") == {"user": "alice", "client-id": ""}
    m.update_quota(QuotaEntity("alice", None), None)
    assert m.quota_types_enabled == NO_QUOTAS
    m.update_quota(QuotaEntity(None, "c1"), 100)
    assert m.quota_metric_tags("alice", "c1") == {"user": "", "client-id": "c1"}
    assert m.quota_limit(m.quota_metric_tags("bob", "c2")) is None  # unlimited


def test_changing_the_limit_keeps_usage():
    m, clock = manager()
    m.update_quota(QuotaEntity(None, "c"), 1000)
    assert m.maybe_record_and_get_throttle_time_ms("u", "c", 9000) == 0  # 900 B/s over 10 s
    m.update_quota(QuotaEntity(None, "c"), 450)  # the recorded 9000 bytes still count
    assert m.maybe_record_and_get_throttle_time_ms("u", "c", 0) == round((900 - 450) / 450 * 10_000)


def test_fetch_unrecord_and_max_value_clamp():
    m, clock = manager(QuotaType.FETCH)
    m.update_quota(QuotaEntity(None, DEFAULT), 1000)
    assert m.max_value_in_quota_window("u", "c") == 10_000
    t = m.maybe_record_and_get_throttle_time_ms("u", "c", 50_000)
    assert t > 0
    m.unrecord_quota_sensor("u", "c", 50_000)  # the throttled response carried no records
    assert m.maybe_record_and_get_throttle_time_ms("u", "c", 5000) == 0


def test_request_quota_is_capped_at_one_window():
    m, clock = manager(QuotaType.REQUEST)
    m.update_quota(QuotaEntity(None, DEFAULT), 1.0)  # 1 % of a thread
    busy_percent = 5e9 * 100 / 1e9  # five seconds of handler time, as a percentage
    assert m.maybe_record_and_get_throttle_time_ms("u", "c", busy_percent) == 1000


def test_sensors_expire_after_an_hour_idle():
    m, clock = manager()
    m.update_quota(QuotaEntity(None, DEFAULT), 100)
    m.maybe_record_and_get_throttle_time_ms("u", "c", 5000)
    clock.sleep(3600 * 1000 + 1)
    gone = m.expire_sensors()
    assert "Produce-:c" in gone and "ProduceThrottleTime-:c" in gone
    # a fresh sensor: the old burst is forgotten
    assert m.maybe_record_and_get_throttle_time_ms("u", "c", 500) == 0


def test_reaper_thread_releases_every_channel_once_and_shutdown_releases_the_rest():
    clock = MockTime()
    m = ClientQuotaManager(CONFIG, Metrics(time=clock), QuotaType.PRODUCE, clock)
    m.start()
    try:
        done = threading.Event()

        class Once(Channel):
            def end_throttling(self) -> None:
                super().end_throttling()
                done.set()

        ch = Once()
        m.throttle("u", "c", ch, 10)
        clock.sleep(10)
        assert done.wait(10) and ch.ends == 1
        late = Channel()
        m.throttle("u", "c", late, 10**9)
    finally:
        m.shutdown()
    assert late.ends == 1 and not late.muted


def test_an_entity_needs_a_side():
    m, _ = manager()
    with pytest.raises(ValueError):
        m.update_quota(QuotaEntity(None, None), 1)
