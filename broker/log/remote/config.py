"""Tiered storage's broker keys (KIP-405 and KIP-956: Kafka's names, defaults and
documentation) and ``RemoteLogManagerConfig``, their typed, frozen view.

Owns the definitions of ``remote.log.storage.system.enable``, the remote log manager's
task interval, the storage and metadata managers (class names, Kafka's class paths and key
prefixes, accepted as Kafka spells them), ``rsm.config.storage.uri`` (the built-in storage
manager's location under the default prefix), and KIP-956's quotas on the bytes copied to
and fetched from remote storage (``remote.log.manager.{copy,fetch}.*``: broker-wide; the
max.bytes.per.second ones are also dynamic, ``broker/server/dynamic_config.py``).
``define_remote_storage_keys`` adds them to the broker's table
(``broker.server.config.SERVER_CONFIG_DEF``); ``RemoteLogManagerConfig.from_config`` reads
them once from a server config, for ``RemoteLogManager.from_server_config``
(``log_manager.py``), ``LogManager`` and the quota managers of the server layer
(``broker/server/quota/remote_log_quota.py``). The storage manager's own keys are the
config's keys under the prefix (``storage_manager_options``).

Invariants: the dataclass defaults equal the definitions' defaults. Imports only
``broker.config``. Thread-safety: the table is immutable after import; a
``RemoteLogManagerConfig`` is frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import BOOLEAN, INT, LONG, LONG_MAX, STRING, ConfigDef, at_least, one_of

# The built-in remote storage manager (storage_manager.py), and Kafka's own
# local-directory one (its tiered-storage quick start: rsm.config.dir), taken as the
# same manager so that configuration works unchanged (the layout written is ours).
REMOTE_STORAGE_MANAGER_CLASS = "kafkalog.remote.FileSystemRemoteStorageManager"
LOCAL_TIERED_STORAGE_CLASS = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
# Kafka's default metadata manager: its role is played by the manifests (a segment exists
# remotely iff its manifest does), so it is the only value accepted.
REMOTE_LOG_METADATA_MANAGER_CLASS = ("org.apache.kafka.server.log.remote.metadata.storage."
                                     "TopicBasedRemoteLogMetadataManager")
DEFAULT_STORAGE_MANAGER_PREFIX = "rsm.config."
QUOTA_KINDS = ("copy", "fetch")


def define_remote_storage_keys(config_def: ConfigDef) -> ConfigDef:
    """Add tiered storage's keys (KIP-956's quotas included) to ``config_def``."""
    return (
        config_def
        .define("remote.log.storage.system.enable", BOOLEAN, False,
                "Enable tiered storage: copy closed segments of remote.storage.enable topics to "
                "remote storage and serve them from there.")
        .define("remote.log.manager.task.interval.ms", LONG, 30000,
                "How often the remote log manager copies segments and applies retention.", at_least(1))
        .define("remote.log.storage.manager.class.name", STRING, REMOTE_STORAGE_MANAGER_CLASS,
                "The remote storage manager; the built-in one is "
                f"{REMOTE_STORAGE_MANAGER_CLASS} (pyarrow file systems: local paths, file:, s3://, gs://, "
                f"abfs://, hdfs://); {LOCAL_TIERED_STORAGE_CLASS} (Kafka's, with rsm.config.dir) is taken as it.",
                one_of(REMOTE_STORAGE_MANAGER_CLASS, LOCAL_TIERED_STORAGE_CLASS))
        .define("remote.log.storage.manager.impl.prefix", STRING, DEFAULT_STORAGE_MANAGER_PREFIX,
                "The prefix of the keys passed to the remote storage manager (without it).")
        .define("rsm.config.storage.uri", STRING, None,
                "Where the remote storage manager writes (with the default prefix): a local path, "
                "file:, s3://bucket/prefix, gs://bucket/prefix... (rsm.config.dir, Kafka's "
                "LocalTieredStorage key, is read when this is not set).")
        .define("remote.log.storage.manager.class.path", STRING, None,
                "Kafka's class path of the storage manager's jars: accepted and unused (no JVM).")
        .define("remote.log.metadata.manager.class.name", STRING, REMOTE_LOG_METADATA_MANAGER_CLASS,
                "The remote log metadata manager: Kafka's default is the only value; the manifests "
                "next to the remote segments are the metadata store.", one_of(REMOTE_LOG_METADATA_MANAGER_CLASS))
        .define("remote.log.metadata.manager.class.path", STRING, None,
                "Kafka's class path of the metadata manager's jars: accepted and unused (no JVM).")
        .define("remote.log.metadata.manager.impl.prefix", STRING, "rlmm.config.",
                "The prefix of the metadata manager's keys: accepted; their keys are unused.")
        .define("remote.log.metadata.manager.listener.name", STRING, None,
                "The listener the metadata manager's clients use: accepted and unused (no metadata topic).")
        # KIP-956's quotas on the bytes copied to and fetched from remote storage
        .define("remote.log.manager.copy.max.bytes.per.second", LONG, LONG_MAX,
                "The most bytes per second the remote log manager copies to remote storage; a copy "
                "waits while the rate is above it.", at_least(1))
        .define("remote.log.manager.copy.quota.window.num", INT, 11,
                "Samples kept for the copy quota's rate.", at_least(1))
        .define("remote.log.manager.copy.quota.window.size.seconds", INT, 1,
                "The time span of each sample of the copy quota's rate.", at_least(1))
        .define("remote.log.manager.fetch.max.bytes.per.second", LONG, LONG_MAX,
                "The most bytes per second Fetch reads from remote storage; past it, a fetch of "
                "remote offsets returns no records for the partition (no error) until the rate drops.",
                at_least(1))
        .define("remote.log.manager.fetch.quota.window.num", INT, 11,
                "Samples kept for the fetch quota's rate.", at_least(1))
        .define("remote.log.manager.fetch.quota.window.size.seconds", INT, 1,
                "The time span of each sample of the fetch quota's rate.", at_least(1))
    )


REMOTE_STORAGE_CONFIG_DEF = define_remote_storage_keys(ConfigDef())


@dataclass(frozen=True)
class RemoteLogQuotaConfig:
    """One of KIP-956's quotas (copy or fetch): its bound and its rate's sampling."""

    max_bytes_per_second: int = LONG_MAX
    window_num: int = 11
    window_size_seconds: int = 1


@dataclass(frozen=True)
class RemoteLogManagerConfig:
    """Tiered storage's settings, read once from a server config."""

    enabled: bool = False
    task_interval_ms: int = 30000
    storage_manager_class_name: str = REMOTE_STORAGE_MANAGER_CLASS
    storage_manager_prefix: str = DEFAULT_STORAGE_MANAGER_PREFIX
    metadata_manager_class_name: str = REMOTE_LOG_METADATA_MANAGER_CLASS
    metadata_manager_prefix: str = "rlmm.config."
    copy_quota: RemoteLogQuotaConfig = RemoteLogQuotaConfig()
    fetch_quota: RemoteLogQuotaConfig = RemoteLogQuotaConfig()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RemoteLogManagerConfig:
        """From a server config (raw or parsed: each key parsed and validated by its
        definition; a missing key takes its default)."""
        v = REMOTE_STORAGE_CONFIG_DEF.parse_from(config)

        def quota(kind: str) -> RemoteLogQuotaConfig:
            prefix = f"remote.log.manager.{kind}"
            return RemoteLogQuotaConfig(v[f"{prefix}.max.bytes.per.second"], v[f"{prefix}.quota.window.num"],
                                        v[f"{prefix}.quota.window.size.seconds"])

        return cls(
            enabled=v["remote.log.storage.system.enable"],
            task_interval_ms=v["remote.log.manager.task.interval.ms"],
            storage_manager_class_name=v["remote.log.storage.manager.class.name"],
            storage_manager_prefix=v["remote.log.storage.manager.impl.prefix"] or DEFAULT_STORAGE_MANAGER_PREFIX,
            metadata_manager_class_name=v["remote.log.metadata.manager.class.name"],
            metadata_manager_prefix=v["remote.log.metadata.manager.impl.prefix"],
            copy_quota=quota("copy"),
            fetch_quota=quota("fetch"),
        )

    def quota(self, kind: str) -> RemoteLogQuotaConfig:
        """The copy or the fetch quota (``QUOTA_KINDS``)."""
        if kind not in QUOTA_KINDS:
            raise ValueError(f"unknown remote log quota {kind!r} (one of {', '.join(QUOTA_KINDS)})")
        return self.copy_quota if kind == "copy" else self.fetch_quota

    def storage_manager_options(self, config: Mapping[str, Any]) -> dict[str, str]:
        """The storage manager's own keys: ``config``'s keys under the prefix, without it."""
        prefix = self.storage_manager_prefix
        return {k[len(prefix):]: str(v) for k, v in config.items() if k.startswith(prefix) and v is not None}
