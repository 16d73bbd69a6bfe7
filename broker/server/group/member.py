"""A member of a classic consumer group (Kafka's ``MemberMetadata``) and the ``Waiter`` a
JoinGroup or SyncGroup request blocks on until the group answers it.

A member is identified by its ``member_id`` (``client_id + "-" + uuid4``, given by the
coordinator) and, when static (KIP-345), also by its ``group_instance_id``. It holds what
its last JoinGroup said (client id and host, session and rebalance timeouts, protocol
type, the (name, metadata) protocols in preference order), the assignment the leader gave
it, and the two pending answers: ``join_waiter`` (a JoinGroup waiting for the rebalance
to complete) and ``sync_waiter`` (a SyncGroup waiting for the leader's assignment).
``heartbeat_deadline_ms`` is when its session expires unless it heartbeats, joins or syncs.

Thread-safety: members are changed only under the coordinator's membership lock; a
``Waiter`` is completed by any thread, once, and waited on by the request's thread.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any


class Waiter:
    """A one-shot answer: ``complete(result)`` once (later calls are ignored);
    ``wait(timeout)`` returns the result, or None on timeout."""

    __slots__ = ("_event", "_result")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._result: Any = None

    def complete(self, result: Any) -> bool:
        if self._event.is_set():
            return False
        self._result = result
        self._event.set()
        return True

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> Any:
        return self._result if self._event.wait(timeout) else None


def new_member_id(client_id: str) -> str:
    """Kafka's ``clientId + "-" + UUID``."""
    return f"{client_id}-{uuid.uuid4()}"


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's preference order
    assignment: bytes = b""
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    is_new: bool = True
    heartbeat_deadline_ms: int = 0
    heartbeat_task: Any = field(default=None, repr=False)
    group_id: str = ""  # set when added to a group

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same metadata, same order: a rejoin that changes nothing."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates`` (Kafka's ``vote``)."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("the member supports none of the candidate protocols")


__all__ = ["Member", "Waiter", "new_member_id"]
