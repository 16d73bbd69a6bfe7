"""The controller-mutation quota (broker/server/quota/controller_mutation.py, KIP-599) on a
hand-driven clock: strict versions refuse once the bucket is exhausted (and only then),
permissive versions record and throttle, throttle times decay, no quota is unbounded."""

from __future__ import annotations

import pytest

from broker.server.quota.client_quota_manager import DEFAULT, ClientQuotaManagerConfig, QuotaEntity
from broker.server.quota.controller_mutation import (
    UNBOUNDED,
    ControllerMutationQuotaManager,
    PermissiveControllerMutationQuota,
    StrictControllerMutationQuota,
    ThrottlingQuotaExceededError,
)
from broker.server.quota.metrics import Metrics, MockTime


def manager(rate: float = 5.0):
    clock = MockTime()
    # 10 windows of 10 s: burst = 10 x 10 x 5 = 500 credits
    m = ControllerMutationQuotaManager(ClientQuotaManagerConfig(10, 10), Metrics(time=clock), clock)
    m.update_quota(QuotaEntity(None, DEFAULT), rate)
    return m, clock


def test_no_quota_is_unbounded():
    clock = MockTime()
    m = ControllerMutationQuotaManager(ClientQuotaManagerConfig(), Metrics(time=clock), clock)
    assert m.new_quota_for("u", "c", "CreateTopics", 7) is UNBOUNDED


def test_strict_refuses_only_once_exhausted_and_the_refusal_decays():
    m, clock = manager()
    q = m.new_quota_for("u", "c", "CreateTopics", 6)
    assert isinstance(q, StrictControllerMutationQuota)
    q.record(560)  # the bucket had credit: accepted, now at -60
    assert not q.is_exceeded()
    with pytest.raises(ThrottlingQuotaExceededError) as info:
        q.record(1)
    assert info.value.throttle_time_ms == 12_000  # 60 credits at 5/s
    assert q.is_exceeded() and q.throttle_time() == 12_000
    clock.sleep(5000)
    assert q.throttle_time() == 7000  # decays with the time elapsed
    clock.sleep(7000)
    q2 = m.new_quota_for("u", "c", "CreateTopics", 6)
    q2.record(10)  # refilled to 0, so credit is not negative: accepted
    tokens = m.get_or_create_quota_sensors("u", "c").quota_sensor.metrics[0]
    assert tokens.measure(clock.milliseconds()) == pytest.approx(-10)


def test_permissive_records_and_throttles():
    m, clock = manager()
    q = m.new_quota_for("u", "c", "DeleteTopics", 4)
    assert isinstance(q, PermissiveControllerMutationQuota)
    q.record(500)
    assert q.throttle_time() == 0
    q.record(25)  # -25 credits: throttled 5 s, recorded anyway
    assert q.throttle_time() == 5000
    tokens = m.get_or_create_quota_sensors("u", "c").quota_sensor.metrics[0]
    assert tokens.measure(clock.milliseconds()) == pytest.approx(-25)


def test_strict_versions_per_api():
    m, _ = manager()
    assert isinstance(m.new_quota_for("u", "c", "CreatePartitions", 3), StrictControllerMutationQuota)
    assert isinstance(m.new_quota_for("u", "c", "CreatePartitions", 2), PermissiveControllerMutationQuota)
    assert isinstance(m.new_quota_for("u", "c", "DeleteTopics", 5), StrictControllerMutationQuota)


def test_a_new_limit_applies_to_the_bucket_without_resetting_it():
    m, clock = manager(rate=5.0)
    m.new_quota_for("u", "c", "CreateTopics", 6).record(500)  # bucket at 0
    m.update_quota(QuotaEntity(None, DEFAULT), 10.0)  # refills twice as fast now
    clock.sleep(1000)
    tokens = m.get_or_create_quota_sensors("u", "c").quota_sensor.metrics[0]
    assert tokens.measure(clock.milliseconds()) == pytest.approx(10)
