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
fetch waiters, the advertised endpoints); ``RequestContext`` describes one request
(header, listener, addresses). Modules:

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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.protocol import RequestHeader

if TYPE_CHECKING:  # pragma: no cover
    from broker.log.manager import LogManager
    from broker.server.handlers.fetch import PartitionWatchers
    from broker.server.handlers.producer_id import ProducerIdManager
    from broker.server.metadata import TopicManager


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_RESPONSE = _Marker("NO_RESPONSE")
CLOSE_CONNECTION = _Marker("CLOSE_CONNECTION")


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
    group_coordinator: Any = None
    # broker.server.security.credentials.CredentialStore (None: the SCRAM credential APIs fail)
    credentials: Any = None
    # broker.server.quota.client_quotas.QuotaManagers / ClientQuotaStore (None: no quotas)
    quotas: Any = None
    client_quotas: Any = None
    # broker.server.telemetry.client_metrics.ClientMetricsManager / SubscriptionStore (None: no telemetry)
    telemetry: Any = None
    client_metrics: Any = None
    # broker.server.telemetry.prometheus.BrokerStats (None: not counted)
    stats: Any = None
    # broker.server.txn.TransactionCoordinator (None: transaction APIs answer COORDINATOR_NOT_AVAILABLE)
    txn_coordinator: Any = None
    # broker.server.dynamic_config.DynamicBrokerConfig (None: broker configs are static)
    dynamic_config: Any = None
    # broker.server.security.authorizer.StandardAuthorizer (None: no authorizer, all allowed; handlers/authz.py)
    authorizer: Any = None

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


def leader_epoch_of(lg: Any) -> int:
    """The partition's leader epoch: the latest in its epoch cache, 0 for a new log (a
    single node never changes leader, so the epoch only differs from 0 for logs written
    by another broker)."""
    epoch = lg.latest_epoch() if lg is not None else None
    return epoch if epoch is not None and epoch >= 0 else 0
