"""Tiered storage's quotas (KIP-956): ``RLMQuotaManager`` (broker/server/quota/remote_log_quota.py)
driving a real ``RemoteLogManager`` over a real log and a local-directory remote store,
on a mock clock (the copy's wait sleeps on it, so every figure is exact); then on the real
broker: the keys in server.properties, dynamic changes through IncrementalAlterConfigs,
and a consumer held back by the fetch quota, then let through."""

from __future__ import annotations

import pytest

from broker.config import ConfigError
from broker.record.batch import iter_batch_headers
from broker.server.quota.remote_log_quota import RLMQuotaManager
from tests.test_log_remote import Env


def _copied_bytes(env: Env) -> int:
    return sum(m.segment_size_in_bytes for m in env.rlm.remote_segments("tiered", 0))


def test_the_copy_waits_for_its_quota_and_copies_everything_within_it(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(80)
    closed = lg.num_segments - 1
    quota = RLMQuotaManager("copy", 1000, window_num=2, window_size_seconds=1, time=env.time)
    env.rlm.copy_quota = quota
    start = env.time.milliseconds()
    stats = env.rlm.run_once()
    elapsed_s = (env.time.milliseconds() - start) / 1000
    assert stats["copied"] == closed == len(env.rlm.remote_segments("tiered", 0)) > 5
    copied = _copied_bytes(env)
    # the pass waited (on the clock) for the quota: never more than the quota's rate plus
    # its windows' worth, and never a wait once within it
    assert copied > 3 * 1000 and elapsed_s > 0
    assert copied <= 1000 * (elapsed_s + 2 * 1) + max(m.segment_size_in_bytes
                                                      for m in env.rlm.remote_segments("tiered", 0))
    assert copied >= 1000 * (elapsed_s - 2)
    # without a quota nothing waits
    env2 = Env(tmp_path / "free")
    env2.open()
    env2.produce(80)
    before = env2.time.milliseconds()
    env2.rlm.run_once()
    assert env2.time.milliseconds() == before


def test_a_fetch_over_the_quota_gets_no_records_and_no_error_until_the_rate_drops(tmp_path):
    env = Env(tmp_path)
    lg = env.open()
    env.produce(60)
    env.rlm.run_once()
    env.rlm.fetch_quota = RLMQuotaManager("fetch", 100, window_num=2, window_size_seconds=1, time=env.time)
    reads, offset = [], 0
    while True:
        data = env.rlm.read(lg, offset, 1000).records
        if not data:
            break
        reads.append(data)
        offset = [h for _, h in iter_batch_headers(data)][-1].base_offset + 1
    # within the quota's allowance (100 B/s padded to two windows: 200 bytes), then nothing
    assert reads and sum(map(len, reads)) <= 200 + len(reads[-1])
    assert env.rlm.read(lg, offset, 1000, read_committed=True).records == b""
    assert env.rlm.stats.snapshot()["fetch_errors"].get("tiered", 0) == 0
    env.time.sleep(5000)  # the rate falls back under the quota
    assert env.rlm.read(lg, offset, 1000).records
    # a new bound applies at once, without losing what was recorded
    env.rlm.fetch_quota.update_quota(None)
    assert env.rlm.read(lg, offset, 1000).records


def test_the_quota_keys_are_kafkas(tmp_path):
    from broker.server.broker import validate_config
    props = {"log.dirs": str(tmp_path / "logs")}
    config = validate_config(props)
    for kind in ("copy", "fetch"):
        quota = RLMQuotaManager.from_config(config, kind)
        assert not quota.bounded and quota.throttle_time_ms() == 0
        assert config[f"remote.log.manager.{kind}.quota.window.num"] == 11
        assert config[f"remote.log.manager.{kind}.quota.window.size.seconds"] == 1
        with pytest.raises(ConfigError, match=f"remote.log.manager.{kind}.max.bytes.per.second"):
            validate_config({**props, f"remote.log.manager.{kind}.max.bytes.per.second": "0"})
    config = validate_config({**props, "remote.log.manager.fetch.max.bytes.per.second": "1048576",
                              "remote.log.manager.fetch.quota.window.num": "5"})
    quota = RLMQuotaManager.from_config(config, "fetch")
    assert quota.bounded and quota.max_bytes_per_second == 1048576
    assert quota.metrics.config.samples == 5
    with pytest.raises(ValueError):
        RLMQuotaManager("upload", 1)


def test_a_consumer_is_held_back_by_the_fetch_quota_and_let_through_when_it_is_raised(tmp_path):
    """The real broker with remote.log.manager.fetch.max.bytes.per.second=1 (KIP-956):
    a confluent-kafka consumer from offset 0 gets the first remote read, then no records
    and no error; raising the quota as a dynamic broker config
    (IncrementalAlterConfigs, like kafka-configs --entity-name 1) lets it read every
    record, and DescribeConfigs shows where the value comes from. (The cluster-wide
    default, kafka-configs --entity-default, goes through the same code: librdkafka cannot
    name the default broker resource.)"""
    import confluent_kafka
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

    from tests.test_tiered_storage_broker import TOPIC, N, _expected, tiered_topic_broker

    key = "remote.log.manager.fetch.max.bytes.per.second"
    broker = tiered_topic_broker(tmp_path, **{key: "1", "remote.log.manager.fetch.quota.window.num": "2"})
    try:
        errors: list = []
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "held",
                                             "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                                             "max.partition.fetch.bytes": 512, "error_cb": errors.append})
        got: list[tuple[int, bytes]] = []

        def poll(times: int) -> None:
            for _ in range(times):
                for msg in consumer.consume(100, timeout=0.2):
                    assert msg.error() is None, msg.error()
                    got.append((msg.offset(), msg.value()))
        try:
            consumer.assign([TopicPartition(TOPIC, 0, 0)])
            poll(25)
            assert 0 < len(got) < N // 4 and got == _expected()[:len(got)]  # the first read, then nothing
            assert errors == []
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            raise_it = ConfigEntry(key, "104857600", incremental_operation=AlterConfigOpType.SET)
            this_broker = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[raise_it])
            admin.incremental_alter_configs([this_broker])[this_broker].result(30)
            for _ in range(100):
                if len(got) >= N:
                    break
                poll(1)
            assert got == _expected()
            assert errors == []
            described = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")])
            entry = next(iter(described.values())).result(30)[key]
            assert entry.value == "104857600" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        finally:
            consumer.close()
        assert "Traceback" not in broker.stderr_text()
    finally:
        broker.stop()
