"""SubscriptionState: what a KafkaConsumer consumes and where it is, as Kafka's
``SubscriptionState``.

Owns: the subscription type (NONE, USER_ASSIGNED by ``assign``; AUTO_TOPICS /
AUTO_PATTERN by ``subscribe``), the assigned partitions in assignment order,
per partition its fetch position (None until known), a pending reset strategy
(``seek_to_beginning`` / ``seek_to_end``, resolved lazily as Kafka does), and the paused
set. AUTO_TOPICS / AUTO_PATTERN (``subscribe``): ``assign_from_subscribed`` takes the
group's assignment (``group_driver.py``). ``positions`` is the dict the fetcher reads and advances (shared, not copied).

Invariants: ``positions`` holds exactly the assigned partitions with a known position;
``paused`` and ``pending_resets`` are subsets of the assignment; ``assign`` and
``subscribe`` are mutually exclusive until ``unsubscribe``.

Thread-safety: none; owned by the consumer's thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from broker.client.errors import IllegalStateError

from .offsets import EARLIEST, LATEST, TopicPartition


class SubscriptionType(Enum):
    NONE = "NONE"
    USER_ASSIGNED = "USER_ASSIGNED"
    AUTO_TOPICS = "AUTO_TOPICS"
    AUTO_PATTERN = "AUTO_PATTERN"


class SubscriptionState:
    """See the module docstring."""

    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset  # "earliest" | "latest" | "none"
        self.type = SubscriptionType.NONE
        self.subscription: frozenset[str] = frozenset()
        self._assigned: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int] = {}
        self.pending_resets: dict[TopicPartition, int] = {}  # tp -> EARLIEST | LATEST
        self.paused: set[TopicPartition] = set()

    def _set_type(self, kind: SubscriptionType) -> None:
        if self.type not in (SubscriptionType.NONE, kind):
            raise IllegalStateError("Subscription to topics, partitions and pattern are "
                                    "mutually exclusive")
        self.type = kind

    def assign_from_user(self, partitions: Iterable[tuple[str, int]]) -> None:
        tps = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        self._set_type(SubscriptionType.USER_ASSIGNED)
        self._set_assignment(tps)

    def _set_assignment(self, tps: list[TopicPartition]) -> None:
        keep = set(tps)
        self._assigned = tps
        for d in (self.positions, self.pending_resets):
            for tp in [tp for tp in d if tp not in keep]:
                del d[tp]
        self.paused &= keep

    def subscribe(self, topics: Iterable[str], *, pattern: bool = False) -> None:
        """``subscribe(topics)`` (AUTO_TOPICS) or the topics a pattern matches now
        (AUTO_PATTERN); the group assigns the partitions."""
        self._set_type(SubscriptionType.AUTO_PATTERN if pattern else SubscriptionType.AUTO_TOPICS)
        self.subscription = frozenset(topics)

    def assign_from_subscribed(self, partitions: Iterable[tuple[str, int]]) -> None:
        """The group's assignment (positions of kept partitions stay)."""
        self._set_assignment(list(dict.fromkeys(TopicPartition(*tp) for tp in partitions)))

    def unsubscribe(self) -> None:
        self.type = SubscriptionType.NONE
        self.subscription = frozenset()
        self._set_assignment([])

    def assigned_partitions(self) -> list[TopicPartition]:
        return list(self._assigned)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self.positions or tp in self._assigned_set()

    def _assigned_set(self) -> set[TopicPartition]:
        return set(self._assigned)

    def require_assigned(self, tp: tuple[str, int]) -> TopicPartition:
        tp = TopicPartition(*tp)
        if tp not in self._assigned_set():
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return tp

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset
        self.pending_resets.pop(tp, None)

    def request_reset(self, tp: TopicPartition, spec: int) -> None:
        assert spec in (EARLIEST, LATEST)
        self.positions.pop(tp, None)
        self.pending_resets[tp] = spec

    def missing_positions(self) -> list[TopicPartition]:
        """Assigned partitions without a position (to be looked up before fetching)."""
        return [tp for tp in self._assigned if tp not in self.positions]

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp in self._assigned if tp in self.positions and tp not in self.paused]

    def all_consumed(self) -> dict[TopicPartition, int]:
        """The positions of the assigned partitions that have one (what a commit sends)."""
        return {tp: self.positions[tp] for tp in self._assigned if tp in self.positions}


__all__ = ["IllegalStateError", "SubscriptionState", "SubscriptionType"]
