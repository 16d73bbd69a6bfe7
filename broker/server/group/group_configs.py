"""Per-group configuration overrides: Kafka's GROUP config resource (``ConfigResource.Type.GROUP``,
resource type 32 in DescribeConfigs / IncrementalAlterConfigs / AlterConfigs), kept in the
cluster metadata.

Owns ``GROUP_CONFIG_KEYS`` (the keys of Kafka's ``GroupConfig``, with their types, defaults
and broker synonyms) and ``GroupConfigStore``: ``get(group_id, key)``, the group's override of
``key`` typed (int for the ``*.ms`` and count keys, str for the string keys, bool for the
boolean ones; None when the group has none), ``overrides``, ``defaults`` and ``alter``.

The keys (Kafka 4.4's ``GroupConfig``; a value is validated only when the group sets it, as
Kafka's ``GroupConfig.validate``, with the bounds of the broker's config, read once from the
parsed server config given to the store; Kafka's defaults for the bound keys this broker does
not define):

* ``consumer.session.timeout.ms``: default ``group.consumer.session.timeout.ms`` (45000),
  bounds ``group.consumer.min/max.session.timeout.ms`` (45000..60000);
* ``consumer.heartbeat.interval.ms``: default ``group.consumer.heartbeat.interval.ms``
  (5000), bounds ``group.consumer.min/max.heartbeat.interval.ms`` (5000..15000);
* ``share.session.timeout.ms``: default ``group.share.session.timeout.ms`` (45000), bounds
  ``group.share.min/max.session.timeout.ms``;
* ``share.heartbeat.interval.ms``: default ``group.share.heartbeat.interval.ms`` (5000),
  bounds ``group.share.min/max.heartbeat.interval.ms``;
* ``share.record.lock.duration.ms``: default ``group.share.record.lock.duration.ms``
  (30000), bounds ``group.share.min/max.record.lock.duration.ms``, at least 1000;
* ``share.delivery.count.limit``: default ``group.share.delivery.count.limit`` (5), bounds
  ``group.share.min/max.delivery.count.limit`` (2..10);
* ``share.auto.offset.reset``: ``latest`` (default), ``earliest`` or
  ``by_duration:<ISO-8601 duration>`` (Kafka's ``ShareGroupAutoOffsetResetStrategy``: the
  type case-insensitive, the duration not negative, e.g. ``by_duration:PT1H``);
* ``share.isolation.level``: ``read_uncommitted`` (default) or ``read_committed``;
* ``errors.deadletterqueue.topic.name`` (KIP-1191): "" (default: no dead-letter topic) or a
  legal topic name not starting with ``__``;
* ``errors.deadletterqueue.copy.record.enable`` (KIP-1191): boolean, default false.

A session timeout must stay greater than the heartbeat interval of the same kind (the other
one taken from the broker's default when the group does not set it). Kafka's ``streams.*``
keys (streams groups, KIP-1071), ``share.partition.max.record.locks``,
``share.renew.acknowledge.enable`` and the assignor keys are not served: they are unknown
keys here. Every failure is a ``ValueError`` whose message names the key ("Unknown group
config name: x" for an unknown key, as Kafka): the handlers answer INVALID_CONFIG.

Storage: the ``group_configs`` section of the cluster metadata
(``broker.server.cluster_metadata.ClusterMetadataStore``) as ``{group_id: {key:
value-as-text}}``, the way ``SubscriptionStore`` keeps client-metrics resources; a change is
written (durably) before it is visible; a group without overrides is removed; ``load()``
reads it back at startup (a stored value that no longer parses is logged and dropped, an int
outside the broker's current bounds is capped to them with a warning, as Kafka's
``GroupConfig.evaluate``).

Thread-safety: ``get`` reads an immutable snapshot (replaced whole under the store's lock);
changes are serialised by the store's lock, and the cluster metadata store's own.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import BOOLEAN, INT, STRING, ConfigDef, ConfigError, parse_duration_ms
from broker.server.group.config import GROUP_CONFIG_DEF
from broker.server.share.config import SHARE_CONFIG_DEF

log = logging.getLogger(__name__)

SECTION = "group_configs"

SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
DLQ_TOPIC_NAME = "errors.deadletterqueue.topic.name"
DLQ_COPY_RECORD_ENABLE = "errors.deadletterqueue.copy.record.enable"
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
AUTO_OFFSET_RESET_TYPES = ("latest", "earliest", "by_duration")
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


@dataclass(frozen=True)
class GroupKey:
    """One key of the GROUP resource: its type, Kafka's default, the broker key that gives
    the default (None: the constant default) and the broker keys (with Kafka's defaults)
    bounding it (None: no bound from the broker)."""

    name: str
    type: str
    default: Any
    doc: str
    broker_key: str | None = None
    min_key: tuple[str, int] | None = None
    max_key: tuple[str, int] | None = None
    at_least: int | None = None


GROUP_CONFIG_KEYS: dict[str, GroupKey] = {k.name: k for k in (
    GroupKey("consumer.heartbeat.interval.ms", INT, 5000,
             "The heartbeat interval given to the members of this consumer group.",
             "group.consumer.heartbeat.interval.ms", ("group.consumer.min.heartbeat.interval.ms", 5000),
             ("group.consumer.max.heartbeat.interval.ms", 15000), 1),
    GroupKey("consumer.session.timeout.ms", INT, 45000,
             "The timeout to detect client failures when using the consumer group protocol.",
             "group.consumer.session.timeout.ms", ("group.consumer.min.session.timeout.ms", 45000),
             ("group.consumer.max.session.timeout.ms", 60000), 1),
    GroupKey(DLQ_COPY_RECORD_ENABLE, BOOLEAN, False,
             "When writing onto the dead-letter queue topic, whether to copy the original record onto the "
             "DLQ topic, or just write a record containing the context information headers."),
    GroupKey(DLQ_TOPIC_NAME, STRING, "",
             "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. "
             "If blank (the default), the group does not have a DLQ topic."),
    GroupKey(SHARE_AUTO_OFFSET_RESET, STRING, "latest",
             "The strategy to initialize the share-partition start offset: latest, earliest or "
             "by_duration:<ISO-8601 duration> (the first offset at or after now minus the duration)."),
    GroupKey("share.delivery.count.limit", INT, 5,
             "The maximum number of delivery attempts for a record delivered to this share group.",
             "group.share.delivery.count.limit", ("group.share.min.delivery.count.limit", 2),
             ("group.share.max.delivery.count.limit", 10), 2),
    GroupKey("share.heartbeat.interval.ms", INT, 5000,
             "The heartbeat interval given to the members of this share group.",
             "group.share.heartbeat.interval.ms", ("group.share.min.heartbeat.interval.ms", 5000),
             ("group.share.max.heartbeat.interval.ms", 15000), 1),
    GroupKey(SHARE_ISOLATION_LEVEL, STRING, "read_uncommitted",
             "How to read records written transactionally: read_committed returns only committed "
             "transactional records, read_uncommitted all records."),
    GroupKey("share.record.lock.duration.ms", INT, 30000,
             "The record acquisition lock duration in milliseconds for this share group.",
             "group.share.record.lock.duration.ms", ("group.share.min.record.lock.duration.ms", 15000),
             ("group.share.max.record.lock.duration.ms", 60000), 1000),
    GroupKey("share.session.timeout.ms", INT, 45000,
             "The timeout to detect client failures when using the share group protocol.",
             "group.share.session.timeout.ms", ("group.share.min.session.timeout.ms", 45000),
             ("group.share.max.session.timeout.ms", 60000), 1),
)}
# the keys' types (parsing only: the checks are GroupConfigStore's)
_TYPES = ConfigDef()
for _key in GROUP_CONFIG_KEYS.values():
    _TYPES.define(_key.name, _key.type, _key.default, _key.doc)
# (session timeout key, heartbeat interval key): the session must exceed the interval
SESSION_HEARTBEAT_PAIRS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                           ("share.session.timeout.ms", "share.heartbeat.interval.ms"))


def _check_auto_offset_reset(value: str) -> None:
    """Kafka's ``ShareGroupAutoOffsetResetStrategy.Validator``."""
    kind, sep, duration = value.partition(":")
    kind = kind.strip().lower()
    if kind not in AUTO_OFFSET_RESET_TYPES or (kind == "by_duration") != bool(sep):
        raise ValueError(f"Invalid value {value} for configuration {SHARE_AUTO_OFFSET_RESET}: the strategy is "
                         "latest, earliest or by_duration:<ISO-8601 duration> (e.g. by_duration:PT1H)")
    if kind == "by_duration":
        if not duration.strip():
            raise ValueError(f"Invalid value {value} for configuration {SHARE_AUTO_OFFSET_RESET}: "
                             "by_duration needs a duration, e.g. by_duration:PT1H")
        try:
            ms = parse_duration_ms(duration)
        except ValueError:
            raise ValueError(f"Invalid value {value} for configuration {SHARE_AUTO_OFFSET_RESET}: "
                             f"{duration.strip()!r} is not an ISO-8601 duration (e.g. PT1H)") from None
        if ms < 0:
            raise ValueError(f"Invalid value {value} for configuration {SHARE_AUTO_OFFSET_RESET}: "
                             f"Invalid negative duration: {duration.strip()}")


def _int_setting(config: Mapping[str, Any], key: str, default: int) -> int:
    value = config.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        log.error("ignoring %s=%r (not an integer): using %d", key, value, default)
        return default


class GroupConfigStore:
    """The GROUP resource's overrides (module docstring). ``cluster_metadata``: a
    ``ClusterMetadataStore`` (None: in memory only); ``config``: the parsed (or raw) server
    config giving the defaults and bounds (None: Kafka's defaults)."""

    def __init__(self, cluster_metadata: Any = None, config: Mapping[str, Any] | None = None) -> None:
        self.cluster_metadata = cluster_metadata
        server: Mapping[str, Any] = config or {}
        broker_values = {**GROUP_CONFIG_DEF.parse_from(server), **SHARE_CONFIG_DEF.parse_from(server)}
        self._defaults: dict[str, Any] = {}
        self._bounds: dict[str, tuple[int | None, int | None]] = {}
        for key in GROUP_CONFIG_KEYS.values():
            default = key.default
            if key.broker_key is not None:
                default = broker_values.get(key.broker_key, server.get(key.broker_key, key.default))
            self._defaults[key.name] = _TYPES.validate_value(key.name, default)
            if key.min_key is not None and key.max_key is not None:
                low = broker_values.get(key.min_key[0], _int_setting(server, *key.min_key))
                high = broker_values.get(key.max_key[0], _int_setting(server, *key.max_key))
                self._bounds[key.name] = (int(low), int(high))
        self._text: dict[str, dict[str, str]] = {}
        self._typed: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    # --- reading ---

    def load(self) -> None:
        """The stored overrides (module docstring: invalid ones dropped, ints capped)."""
        stored = (self.cluster_metadata.get(SECTION, {}) if self.cluster_metadata is not None else {}) or {}
        text: dict[str, dict[str, str]] = {}
        typed: dict[str, dict[str, Any]] = {}
        for group_id, configs in stored.items():
            if not isinstance(configs, dict):
                log.error("ignoring the stored configs of group %s: not an object", group_id)
                continue
            for key, value in configs.items():
                try:
                    parsed = self._parse_value(key, value)
                except ValueError as exc:
                    log.error("ignoring the stored config %s of group %s: %s", key, group_id, exc)
                    continue
                low, high = self._bounds.get(key, (None, None))
                if low is not None and parsed < low or high is not None and parsed > high:
                    capped = min(max(parsed, low if low is not None else parsed), high if high is not None else parsed)
                    log.warning("group %s: %s=%s is outside the broker's bounds [%s, %s]: using %s",
                                group_id, key, parsed, low, high, capped)
                    parsed = capped
                text.setdefault(group_id, {})[key] = str(value)
                typed.setdefault(group_id, {})[key] = parsed
        with self._lock:
            self._text, self._typed = text, typed

    def get(self, group_id: str, key: str) -> Any:
        """The group's override of ``key``, typed; None when the group does not set it."""
        return self._typed.get(group_id, {}).get(key)

    def overrides(self, group_id: str) -> dict[str, str]:
        """The group's overrides as stored (text)."""
        return dict(self._text.get(group_id, {}))

    def groups(self) -> list[str]:
        """The groups that have overrides."""
        return sorted(self._text)

    def defaults(self) -> dict[str, Any]:
        """Each key's value for a group without override (the broker's, else Kafka's), typed."""
        return dict(self._defaults)

    def bounds(self, key: str) -> tuple[int | None, int | None]:
        return self._bounds.get(key, (None, None))

    # --- validation ---

    def _parse_value(self, key: str, value: Any) -> Any:
        """``value`` of ``key`` typed, after Kafka's per-key checks (bounds aside)."""
        group_key = GROUP_CONFIG_KEYS.get(key)
        if group_key is None:
            raise ValueError(f"Unknown group config name: {key}")
        if value is None:
            raise ValueError(f"Invalid value null for configuration {key}: a value is required")
        try:
            parsed = _TYPES.validate_value(key, value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        if group_key.at_least is not None and parsed < group_key.at_least:
            raise ValueError(f"Invalid value {parsed} for configuration {key}: Value must be at least "
                             f"{group_key.at_least}")
        if key == SHARE_AUTO_OFFSET_RESET:
            _check_auto_offset_reset(parsed)
        elif key == SHARE_ISOLATION_LEVEL and parsed not in ISOLATION_LEVELS:
            raise ValueError(f"Invalid value {parsed} for configuration {key}: String must be one of: "
                             f"{', '.join(ISOLATION_LEVELS)}")
        elif key == DLQ_TOPIC_NAME and parsed:
            if parsed.startswith("__"):
                raise ValueError(f"{key}: DLQ topic name must not start with '__'")
            if not _TOPIC_NAME.match(parsed) or parsed in (".", ".."):
                raise ValueError(f"Invalid value {parsed} for configuration {key}: not a legal topic name "
                                 "(at most 249 of [a-zA-Z0-9._-], not '.' or '..')")
        return parsed

    def validate(self, configs: Mapping[str, Any]) -> dict[str, Any]:
        """A group's whole set of overrides (text) checked as Kafka's ``GroupConfig.validate``;
        returns them typed; ValueError naming the key."""
        typed = {key: self._parse_value(key, value) for key, value in configs.items()}
        for key, value in typed.items():
            low, high = self._bounds.get(key, (None, None))
            if low is not None and high is not None and not low <= value <= high:
                raise ValueError(f"{key} must be in the range {low} to {high} inclusive.")
        for session_key, heartbeat_key in SESSION_HEARTBEAT_PAIRS:
            if session_key in typed or heartbeat_key in typed:
                session = typed.get(session_key, self._defaults[session_key])
                heartbeat = typed.get(heartbeat_key, self._defaults[heartbeat_key])
                if session <= heartbeat:
                    raise ValueError(f"{session_key} must be greater than {heartbeat_key}")
        return typed

    # --- changing ---

    def alter(self, group_id: str, update: Callable[[Mapping[str, str]], Mapping[str, str | None]],
              validate_only: bool = False) -> dict[str, str]:
        """``update(current overrides) -> new overrides`` (None values removed), validated
        as a whole, then stored (durably first) unless ``validate_only``; returns the new
        overrides. ValueError (INVALID_CONFIG) for an invalid result or an empty group id."""
        if not group_id:
            raise ValueError("Group name can't be empty")
        with self._lock:
            current = dict(self._text.get(group_id, {}))
            new = {k: str(v) for k, v in update(current).items() if v is not None}
            typed = self.validate(new)
            if validate_only:
                return new

            def change(section: dict | None) -> dict:
                section = dict(section or {})
                if new:
                    section[group_id] = new
                else:
                    section.pop(group_id, None)
                return section

            if self.cluster_metadata is not None:
                self.cluster_metadata.update(SECTION, change, {})
            texts, typeds = dict(self._text), dict(self._typed)
            if new:
                texts[group_id], typeds[group_id] = new, typed
            else:
                texts.pop(group_id, None)
                typeds.pop(group_id, None)
            self._text, self._typed = texts, typeds
            return dict(new)


__all__ = ["GROUP_CONFIG_KEYS", "SECTION", "GroupConfigStore", "GroupKey"]
