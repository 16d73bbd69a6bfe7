"""The suite's waits: every wait in a test waits for an outcome with a deadline, never
for a fixed time.

* ``wait_until(predicate, timeout, message)``: checks ``predicate`` until it returns a
  truthy value (which it returns) or ``timeout`` seconds passed (then AssertionError
  "<message> (not within <timeout> s)"; ``message`` may be a callable, evaluated only
  then, to show the state that was last seen). Between checks it calls ``step`` (when
  given: e.g. poll a consumer, check the other members' health) and sleeps ``interval``
  seconds (0 when the step itself takes its time).

(``tests/support/workload.py``'s ``wait_for`` / ``wait_for_outcome`` are the reliability
scenarios' variants: a bool to assert on, and a bounded number of checks.)

A bare ``time.sleep(...)`` / ``asyncio.sleep(...)`` outside a loop is allowed only when
the time passing IS the scenario (a session that must time out, a token that must
expire, a broker kept down or paused, a random moment for a kill, a negative check
"nothing happens within T"). Such a sleep carries the marker ``# scenario: <why>``,
either as a trailing comment on its line or as the comment line right above it;
``tests/test_test_waits.py`` fails on any other. Where the component has a MockTime,
advance that instead of sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, message: str | Callable[[], str], *,
               interval: float = 0.05, step: Callable[[], object] | None = None) -> T:
    """Wait for an outcome: ``predicate``'s first truthy value, checked until ``timeout``
    seconds passed (checked once more at the deadline); AssertionError with ``message``
    (a str or a callable giving one) when it never held."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"{text} (not within {timeout} s)")
        if step is not None:
            step()
        if interval > 0:
            time.sleep(interval)
