"""The admin client's values: its typed errors, the arguments it takes and the results it
returns (Kafka's ``org.apache.kafka.clients.admin`` types in Python spelling), and the
conversions of response structs into them. ``broker.client.admin.AdminClient`` is the
client; it re-exports every public name here, so callers import from either module.

Owns:

* Typed errors: ``admin_error(code, message)`` -> the ``KafkaError`` subclass for a broker
  error code (``TopicAlreadyExistsError``, ``UnknownTopicOrPartitionError``,
  ``InvalidTopicError``, ``InvalidPartitionsError``, ``InvalidReplicationFactorError``,
  ``InvalidReplicaAssignmentError``, ``InvalidConfigurationError``, ``NotControllerError``,
  ``InvalidRequestError``, ``PolicyViolationError``, ``TopicDeletionDisabledError``,
  ``TopicAuthorizationFailedError``, ``ClusterAuthorizationFailedError``,
  ``SecurityDisabledError``, ``UnknownServerError``), or a plain ``KafkaError`` for other
  codes; the message is ``"<Kafka error name>: <broker's error_message>"``.

* Arguments: ``NewTopic`` (-1 partitions / replication factor: the broker's defaults),
  ``ConfigResource(ConfigResourceType, name)`` (a BROKER resource is named by the broker
  id, "" for the cluster-wide default; a GROUP (32) one by the group id, ``"group"`` as a
  string type), ``AlterConfigOp(name, value, AlterConfigOpType)``.

* Results: ``TopicDescription`` (``topic_id`` None when the broker sends no ids, Metadata
  < v10) of ``TopicPartitionInfo`` (``leader`` None when leaderless); ``Config`` (a dict
  name -> ``ConfigEntry``, in the broker's order) whose entries carry a ``ConfigSource``
  and ``ConfigSynonym``s; ``AdminResults`` maps each resource, in the order given, to an
  ``AdminResult`` whose ``result()`` returns the value or raises the resource's error, and
  ``all()`` returns every value or raises the first error. ``Outcome`` is the
  (error code, error message, value) a response parser gives per resource.

* Response conversions (private, used by ``AdminClient``): ``_resource`` and ``_op``
  normalise the arguments (tuples, names, ints -> enums), ``_alter_parse`` reads
  (Incremental)AlterConfigs responses, ``_config`` DescribeConfigs entries (v0's
  ``is_default`` -> ``ConfigSource.DEFAULT_CONFIG``; an unknown source code ->
  ``ConfigSource.UNKNOWN``), ``_description`` a Metadata topic (a zero topic id -> None,
  partitions sorted by index), ``_key_text`` / ``_topic_error_text`` the text of an error
  the broker gave no message for (Metadata topics carry none).

Thread-safety: the values are immutable (frozen dataclass, named tuples, enums) except the
``AdminResults`` dict, built by one call and then owned by its caller; the functions keep
no state.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from broker.client.errors import KafkaError
from broker.protocol import ErrorCode

__all__ = [
    "AdminResult", "AdminResults", "AlterConfigOp", "AlterConfigOpType",
    "Config", "ConfigEntry", "ConfigResource", "ConfigResourceType", "ConfigSource", "ConfigSynonym",
    "NewTopic", "Outcome", "TopicDescription", "TopicPartitionInfo", "admin_error",
    "ClusterAuthorizationFailedError", "InvalidConfigurationError", "SecurityDisabledError",
    "InvalidPartitionsError", "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError", "InvalidRequestError", "InvalidTopicError", "NotControllerError",
    "PolicyViolationError", "TopicAlreadyExistsError", "TopicAuthorizationFailedError",
    "TopicDeletionDisabledError", "UnknownServerError", "UnknownTopicOrPartitionError",
]


# --- typed errors ---

class _AdminError(KafkaError):
    CODE: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "") -> None:
        super().__init__(message, self.CODE)


def _error_class(name: str, code: ErrorCode, doc: str) -> type[KafkaError]:
    return type(name, (_AdminError,), {"CODE": code, "__doc__": doc, "__module__": __name__})


TopicAlreadyExistsError = _error_class("TopicAlreadyExistsError", ErrorCode.TOPIC_ALREADY_EXISTS,
                                       "TOPIC_ALREADY_EXISTS (36).")
UnknownTopicOrPartitionError = _error_class("UnknownTopicOrPartitionError", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                            "UNKNOWN_TOPIC_OR_PARTITION (3).")
InvalidTopicError = _error_class("InvalidTopicError", ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 "INVALID_TOPIC_EXCEPTION (17): an illegal or colliding name.")
InvalidPartitionsError = _error_class("InvalidPartitionsError", ErrorCode.INVALID_PARTITIONS,
                                      "INVALID_PARTITIONS (37).")
InvalidReplicationFactorError = _error_class("InvalidReplicationFactorError", ErrorCode.INVALID_REPLICATION_FACTOR,
                                             "INVALID_REPLICATION_FACTOR (38).")
InvalidReplicaAssignmentError = _error_class("InvalidReplicaAssignmentError", ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                             "INVALID_REPLICA_ASSIGNMENT (39).")
InvalidConfigurationError = _error_class("InvalidConfigurationError", ErrorCode.INVALID_CONFIG,
                                         "INVALID_CONFIG (40): an unknown key or an invalid value.")
NotControllerError = _error_class("NotControllerError", ErrorCode.NOT_CONTROLLER, "NOT_CONTROLLER (41).")
InvalidRequestError = _error_class("InvalidRequestError", ErrorCode.INVALID_REQUEST, "INVALID_REQUEST (42).")
PolicyViolationError = _error_class("PolicyViolationError", ErrorCode.POLICY_VIOLATION, "POLICY_VIOLATION (44).")
TopicDeletionDisabledError = _error_class("TopicDeletionDisabledError", ErrorCode.TOPIC_DELETION_DISABLED,
                                          "TOPIC_DELETION_DISABLED (73).")
TopicAuthorizationFailedError = _error_class("TopicAuthorizationFailedError", ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                             "TOPIC_AUTHORIZATION_FAILED (29).")
ClusterAuthorizationFailedError = _error_class("ClusterAuthorizationFailedError",
                                               ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                               "CLUSTER_AUTHORIZATION_FAILED (31).")
SecurityDisabledError = _error_class("SecurityDisabledError", ErrorCode.SECURITY_DISABLED,
                                     "SECURITY_DISABLED (54): the broker has no authorizer.")
UnknownServerError = _error_class("UnknownServerError", ErrorCode.UNKNOWN_SERVER_ERROR,
                                  "UNKNOWN_SERVER_ERROR (-1): the broker failed unexpectedly.")

_ERRORS: dict[int, type[KafkaError]] = {cls.CODE: cls for cls in (  # type: ignore[attr-defined]
    TopicAlreadyExistsError, UnknownTopicOrPartitionError, InvalidTopicError, InvalidPartitionsError,
    InvalidReplicationFactorError, InvalidReplicaAssignmentError, InvalidConfigurationError, NotControllerError,
    InvalidRequestError, PolicyViolationError, TopicDeletionDisabledError, TopicAuthorizationFailedError,
    ClusterAuthorizationFailedError, SecurityDisabledError, UnknownServerError)}


def admin_error(code: int, message: str | None = None) -> KafkaError:
    """The typed error for a broker error code (a plain ``KafkaError`` for other codes),
    message ``"<NAME>: <message>"``."""
    cls = _ERRORS.get(int(ErrorCode.lookup(code)))
    if cls is not None:
        return cls(message or "")
    return KafkaError(message or "", code)


# --- arguments and results ---

@dataclass(frozen=True)
class NewTopic:
    """A topic to create; -1 means the broker's num.partitions / default.replication.factor."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


class TopicPartitionInfo(NamedTuple):
    partition: int
    leader: int | None  # node id; None when the partition has no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class TopicDescription(NamedTuple):
    name: str
    topic_id: uuid.UUID | None  # None when the broker does not send ids (Metadata < v10)
    internal: bool
    partitions: tuple[TopicPartitionInfo, ...]


class ConfigResourceType(enum.IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigResource(NamedTuple):
    """``ConfigResource(ConfigResourceType.TOPIC, "orders")``; a BROKER resource is named
    by the broker id ("" for the cluster-wide default), a GROUP one by the group id."""

    type: ConfigResourceType
    name: str


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigSynonym(NamedTuple):
    name: str
    value: str | None
    source: ConfigSource


class ConfigEntry(NamedTuple):
    name: str
    value: str | None  # None for sensitive values
    source: ConfigSource
    is_read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source == ConfigSource.DEFAULT_CONFIG


Config = dict  # config name -> ConfigEntry, in the broker's order


class AlterConfigOpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class AlterConfigOp(NamedTuple):
    """One incremental change: ``AlterConfigOp("retention.ms", "60000")`` sets,
    ``AlterConfigOp("retention.ms", op=AlterConfigOpType.DELETE)`` removes the override."""

    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET


V = TypeVar("V")


class AdminResult(Generic[V]):
    """The outcome for one resource: ``result()`` returns the value or raises the error."""

    __slots__ = ("value", "error")

    def __init__(self, value: V | None = None, error: KafkaError | None = None) -> None:
        self.value = value
        self.error = error

    def result(self) -> V:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]

    def exception(self) -> KafkaError | None:
        return self.error

    @property
    def ok(self) -> bool:
        return self.error is None

    def __repr__(self) -> str:
        return f"AdminResult(error={self.error!r})" if self.error is not None else f"AdminResult({self.value!r})"


class AdminResults(dict):
    """resource -> ``AdminResult``, in the order the resources were given."""

    def all(self) -> dict:
        """Every resource's value; raises the first error (in resource order)."""
        return {k: r.result() for k, r in self.items()}

    def errors(self) -> dict:
        return {k: r.error for k, r in self.items() if r.error is not None}


# (error code, error message, value) per resource, as parsed from a response.
Outcome = tuple[int, "str | None", Any]


# --- response helpers ---

def _resource(r: Any) -> ConfigResource:
    if isinstance(r, ConfigResource):
        return ConfigResource(ConfigResourceType(int(r.type)), r.name)
    rtype, name = r
    if isinstance(rtype, str):
        rtype = ConfigResourceType[rtype.upper()]
    return ConfigResource(ConfigResourceType(int(rtype)), name)


def _op(o: Any) -> AlterConfigOp:
    if isinstance(o, AlterConfigOp):
        return o._replace(op=AlterConfigOpType(int(o.op)))
    return AlterConfigOp(*o)


def _alter_parse(body: Any) -> dict[ConfigResource, Outcome]:
    return {_resource((r.resource_type, r.resource_name)): (r.error_code, r.error_message, None)
            for r in body.responses}


def _source(code: int) -> ConfigSource:
    try:
        return ConfigSource(code)
    except ValueError:
        return ConfigSource.UNKNOWN


def _config(result: Any) -> dict[str, ConfigEntry]:
    out = {}
    for e in result.configs:
        source = e.config_source
        if source is None or source < 0:  # v0: only is_default
            source = ConfigSource.DEFAULT_CONFIG if e.is_default else ConfigSource.UNKNOWN
        out[e.name] = ConfigEntry(e.name, e.value, _source(source), e.read_only, e.is_sensitive,
                                  tuple(ConfigSynonym(s.name, s.value, _source(s.source)) for s in e.synonyms or ()),
                                  getattr(e, "documentation", None))
    return out


def _description(t: Any) -> TopicDescription:
    tid = getattr(t, "topic_id", None)
    if tid is not None and tid.int == 0:
        tid = None
    parts = tuple(TopicPartitionInfo(p.partition_index, p.leader_id if p.leader_id >= 0 else None,
                                     tuple(p.replica_nodes), tuple(p.isr_nodes))
                  for p in sorted(t.partitions, key=lambda p: p.partition_index))
    return TopicDescription(t.name, tid, bool(getattr(t, "is_internal", False)), parts)


def _key_text(key: Any) -> str:
    if isinstance(key, ConfigResource):
        return f"{key.type.name} resource '{key.name}'"
    return f"topic '{key}'"


def _topic_error_text(code: int, name: str) -> str:
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return f"Topic '{name}' does not exist."
    return f"topic '{name}'"

