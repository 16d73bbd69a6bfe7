"""Request handlers, one module per API family, and what they share.

Owns the handler contract used by ``broker.server.apis``:

* a handler is ``handle(state, ctx, body) -> response body`` where ``body`` is the decoded
  request struct (``broker.protocol`` generated classes) and the result a response
  struct of the same API (encoded at the request's version by the caller), or
  ``NO_RESPONSE`` (Produce with acks=0), or ``CLOSE_CONNECTION`` (acks=0 with an error:
  Kafka closes the connection so that the producer notices);
* ``error_response(state, ctx, body, code) -> response body``: the same API's response
  with ``code`` everywhere it can go (Kafka's ``AbstractRequest.getErrorResponse``), used
  when ``handle`` raised something unexpected.

``ServerState`` is the broker-wide state handlers read (topics, logs, producer ids, the
fetch waiters, the advertised endpoints, the coordinators, quotas, telemetry, the
authorizer), each member typed; ``RequestContext`` describes one request (header,
listener, addresses). The two coordinators are typed by what the handlers call of them,
``GroupCoordinatorApi`` and ``TxnCoordinatorApi`` (two ``typing.Protocol`` classes): their
packages are written on the coordinator runtime, which imports this package, so naming
their classes here would close a cycle. Modules:

    api_versions.py     ApiVersions (18)
    metadata.py         Metadata (3)
    produce.py          Produce (0)
    fetch.py            Fetch (1) and the waiters long polls sleep on
    list_offsets.py     ListOffsets (2), DeleteRecords (21)
    topics.py           CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
                        DescribeConfigs (32)
    producer_id.py      InitProducerId (22) and the persistent producer-id allocator
    txn.py              AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
                        TxnOffsetCommit (28), DescribeTransactions (65), ListTransactions
                        (66), and InitProducerId with a transactional id
    leader_epoch.py     OffsetForLeaderEpoch (23)
    configs.py          AlterConfigs (33), IncrementalAlterConfigs (44)
    acls.py             DescribeAcls (29), CreateAcls (30), DeleteAcls (31)
    authz.py            the authorization checks every handler makes
    scram_credentials.py DescribeUserScramCredentials (50), AlterUserScramCredentials (51)
    share.py            ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78),
                        ShareAcknowledge (79): share groups (KIP-932)
    share_admin.py      DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91),
                        DeleteShareGroupOffsets (92) and the share coordinator's state RPCs
                        (83-87, CLUSTER_ACTION only)
    group.py            FindCoordinator (10), OffsetCommit (8), OffsetFetch (9), ListGroups
                        (16), DescribeGroups (15), DeleteGroups (42)
    consumer_group.py   ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69): the KIP-848
                        consumer group protocol
    group_membership.py JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13),
                        OffsetDelete (47): the classic group protocol (JoinGroup and
                        SyncGroup block their connection's thread until answered)

Thread-safety: handlers run on connection threads concurrently; ``ServerState`` members
are thread-safe (each documents how); ``RequestContext`` belongs to one request.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from broker.protocol import RequestHeader

if TYPE_CHECKING:  # pragma: no cover
    from broker.log.clock import Time
    from broker.log.manager import LogManager
    from broker.log.unified_log import UnifiedLog
    from broker.server.dynamic_config import DynamicBrokerConfig
    from broker.server.handlers.fetch import PartitionWatchers
    from broker.server.handlers.producer_id import ProducerIdManager
    from broker.server.metadata import TopicManager
    from broker.server.quota.client_quotas import ClientQuotaStore, QuotaManagers
    from broker.server.security.authorizer import StandardAuthorizer
    from broker.server.security.credentials import CredentialStore
    from broker.server.telemetry.client_metrics import ClientMetricsManager, SubscriptionStore
    from broker.server.telemetry.prometheus import BrokerStats
    from broker.server.txn.state import TransactionMetadata


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_RESPONSE = _Marker("NO_RESPONSE")
CLOSE_CONNECTION = _Marker("CLOSE_CONNECTION")


# (topic, partition, offset, leader epoch, metadata) of an offset commit
OffsetCommitEntry = tuple[str, int, int, int, str | None]


class TxnOffsetsApi(Protocol):
    """The group coordinator's transactional offsets, as TxnOffsetCommit uses them."""

    def commit(self, group_id: str, producer_id: int, producer_epoch: int, generation_id: int, member_id: str,
               group_instance_id: str | None, offsets: Iterable[OffsetCommitEntry]) -> list[int]: ...


class GroupCoordinatorApi(Protocol):
    """What the group handlers call of ``broker.server.group.GroupCoordinator`` (module
    docstring). Results that are the group package's own records (join, sync and heartbeat
    results, group summaries, committed offsets, a consumer group's view) are ``Any`` here:
    their classes live in that package."""

    @property
    def time(self) -> Time: ...

    @property
    def mlock(self) -> threading.RLock: ...

    @property
    def consumer_assignors(self) -> list[str]: ...

    @property
    def txn_offsets(self) -> TxnOffsetsApi: ...

    def ensure_offsets_topic(self) -> Any: ...

    def commit_offsets(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: Iterable[OffsetCommitEntry], retention_time_ms: int = -1) -> list[int]: ...

    def fetch_offsets(self, group_id: str, tps: Iterable[tuple[str, int]] | None, member_id: str | None = None,
                      member_epoch: int = -1) -> dict[tuple[str, int], Any]: ...

    def list_groups(self) -> list[Any]: ...

    def describe_group(self, group_id: str) -> Any: ...

    def delete_group(self, group_id: str) -> None: ...

    def delete_offsets(self, group_id: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]: ...

    def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                   require_known_member_id: bool, client_id: str, client_host: str,
                   rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]]) -> Any: ...

    def sync_group(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol: str | None,
                   assignments: list[tuple[str, bytes]]) -> Any: ...

    def heartbeat(self, group_id: str, generation: int, member_id: str, group_instance_id: str | None) -> int: ...

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> list[int]: ...

    def consumer_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
                                 rack_id: str | None, rebalance_timeout_ms: int,
                                 subscribed_topic_names: list[str] | None, subscribed_topic_regex: str | None,
                                 server_assignor: str | None, owned: dict[Any, frozenset[int]] | None,
                                 client_id: str = "", client_host: str = "") -> Any: ...

    def describe_consumer_group(self, group_id: str) -> tuple[int, str | None, Any]: ...

    def share_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                              subscribed_topic_names: list[str] | None, client_id: str = "",
                              client_host: str = "") -> Any: ...

    def describe_share_group(self, group_id: str) -> tuple[int, str | None, Any]: ...

    def is_share_member(self, group_id: str, member_id: str) -> bool: ...

    def ensure_share_group(self, group_id: str) -> Any: ...


class TxnCoordinatorApi(Protocol):
    """What the handlers call of ``broker.server.txn.TransactionCoordinator`` (module docstring)."""

    @property
    def time(self) -> Time: ...

    @property
    def transaction_version(self) -> int: ...

    @property
    def features_epoch(self) -> int: ...

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = ...,
                         producer_epoch: int = ...) -> tuple[int, int]: ...

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: set[tuple[str, int]], client_transaction_version: int = 0) -> None: ...

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: set[tuple[str, int]]) -> set[tuple[str, int]]: ...

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None: ...

    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                        client_transaction_version: int = 0) -> tuple[int, int]: ...

    def txn_offset_commit_guard(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                group_id: str, implicit_add: bool = False) -> AbstractContextManager[None]: ...

    def produce_guard(self, producer_id: int, producer_epoch: int, topic: str, partition: int,
                      implicit_add: bool = False) -> AbstractContextManager[None]: ...

    def describe(self, transactional_id: str) -> TransactionMetadata | None: ...

    def list_transactions(self) -> list[TransactionMetadata]: ...


@dataclass
class ServerState:
    node_id: int
    config: dict[str, Any]
    topics: TopicManager
    log_manager: LogManager
    producer_ids: ProducerIdManager
    watchers: PartitionWatchers
    # (listener name, local (host, port) of the connection) -> advertised (host, port)
    advertised_endpoint: Callable[[str, tuple], tuple[str, int]]
    # ((api_key, min_version, max_version), ...) as put in ApiVersions responses
    api_versions: tuple[tuple[int, int, int], ...] = ()
    cluster_id: str | None = None
    # the keys server.properties and --override set (DescribeConfigs' STATIC_BROKER_CONFIG)
    static_keys: frozenset = frozenset()
    # broker.server.group.GroupCoordinator (None: group APIs answer COORDINATOR_NOT_AVAILABLE)
    group_coordinator: GroupCoordinatorApi | None = None
    # None: the SCRAM credential APIs fail
    credentials: CredentialStore | None = None
    # None: no quotas
    quotas: QuotaManagers | None = None
    client_quotas: ClientQuotaStore | None = None
    # None: no telemetry
    telemetry: ClientMetricsManager | None = None
    client_metrics: SubscriptionStore | None = None
    # None: not counted
    stats: BrokerStats | None = None
    # broker.server.txn.TransactionCoordinator (None: transaction APIs answer COORDINATOR_NOT_AVAILABLE)
    txn_coordinator: TxnCoordinatorApi | None = None
    # None: broker configs are static
    dynamic_config: DynamicBrokerConfig | None = None
    # None: no authorizer, all allowed (handlers/authz.py)
    authorizer: StandardAuthorizer | None = None
    # topics only the broker writes while a feature runs (the Schema Registry's _schemas)
    protected_topics: frozenset[str] = frozenset()
    # broker.server.share.manager.SharePartitionManager (None: share APIs answer COORDINATOR_NOT_AVAILABLE)
    share_manager: Any = None
    # broker.server.group.group_configs.GroupConfigStore (None: the GROUP config resource is refused)
    group_configs: Any = None

    @property
    def auto_create_topics(self) -> bool:
        return self.topics.auto_create_enabled


@dataclass
class RequestContext:
    header: RequestHeader
    listener: str = "PLAINTEXT"
    local_address: tuple = ("127.0.0.1", 0)
    peer_address: tuple = ("", 0)
    connection_id: str = ""
    extra: dict = field(default_factory=dict)
    # who sent the request: User:<name> after SASL, User:ANONYMOUS otherwise (for the authorizer)
    principal: str = "User:ANONYMOUS"

    @property
    def api_version(self) -> int:
        return self.header.api_version


def leader_epoch_of(lg: UnifiedLog | None) -> int:
    """The partition's leader epoch: the latest in its epoch cache, 0 for a new log (a
    single node never changes leader, so the epoch only differs from 0 for logs written
    by another broker)."""
    epoch = lg.latest_epoch() if lg is not None else None
    return epoch if epoch is not None and epoch >= 0 else 0
