"""The coordinators' state-machine idiom: each state machine (a transaction's,
``broker.server.txn.state``; a classic group's, ``broker.server.group.group``; later a share
group's) is an enum of its states and a table of the states each one may be entered from
(Kafka's ``validPreviousStates``), and its object moves only through
``transition_to(new)``, which calls ``check_transition`` here. Loading is not a transition:
a replayed record sets the state it implies directly (each machine names that setter).

Owns ``IllegalStateTransition`` (a coordinator bug, never bad input: requests are checked
before a transition is attempted) and ``check_transition``.

Thread-safety: pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Set
from typing import TypeVar

S = TypeVar("S", bound=Hashable)  # a state machine's state (an enum member)


class IllegalStateTransition(RuntimeError):
    """A transition the state machine does not allow (a coordinator bug)."""


def check_transition(subject: str, current: S, new: S, valid_previous: Mapping[S, Set[S]],
                     name: Callable[[S], str] = str) -> None:
    """Raise ``IllegalStateTransition`` unless ``current`` is one of the states ``new`` may
    be entered from; ``subject`` and ``name`` (a state's display name) word the message."""
    if current not in valid_previous[new]:
        raise IllegalStateTransition(f"{subject}: {name(current)} -> {name(new)} is not a valid transition")


__all__ = ["IllegalStateTransition", "check_transition"]
