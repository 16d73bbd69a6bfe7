"""Completing, aborting or fencing a transaction from a process that did not start it.

Owns the two calls the exactly-once Spark sink's driver makes for its tasks'
transactions (the task opens the transaction, writes, flushes and leaves it open; the
driver decides), in the way Flink's ``KafkaSink`` resumes a transaction from its
(transactional id, producer id, epoch)::

    complete_transactions(client_or_config, [ResumedTransaction], commit, timeout_ms=None,
                          timeout_config=None) -> {transactional_id: None | KafkaError}
    fence_transactional_ids(client_or_config, transactional_ids, transaction_timeout_ms,
                            timeout_ms=None, timeout_config=None)
        -> {transactional_id: (producer_id, epoch) | KafkaError}

``timeout_ms`` bounds the whole call (default.api.timeout.ms when None); ``timeout_config``
names the setting it comes from in the errors (a ``BrokerUnreachableError`` as the last
error of a transaction not done: ``... waited 3000 ms (kafka.max.block.ms)``).

``complete_transactions`` sends, per transaction, FindCoordinator (key_type 1,
TRANSACTION; v1-3, v4+ batches keys) to the least loaded broker, then EndTxn (v0-3) with
the transactional id, producer id, epoch and ``committed`` to that coordinator, on a
connection of its own (node id ``COORDINATOR_ID_BASE - node_id``, as group_offsets.py).
No InitProducerId is sent: a coordinator accepts EndTxn from any
connection whose request names the transaction's current producer id and epoch (Kafka's
``TransactionCoordinator.handleEndTransaction`` checks only those; so does this broker's).
``fence_transactional_ids`` sends InitProducerId (v0-4, no producer id: the epoch is
bumped) for each id: whatever transaction a previous holder of the id left open is
aborted by the coordinator and that holder is fenced; an id the coordinator did not know
is registered (it then expires after ``transactional.id.expiration.ms``).

Outcomes, per transaction (never raised: the caller sees every result):

* None: committed / aborted. A retried EndTxn of a transaction already completed the
  same way answers NONE (Kafka's and this broker's coordinator), so calling twice is safe.
* ``ProducerFencedError`` (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH): a newer producer
  initialised the id (a retried or speculative attempt, or the coordinator's timeout
  abort, which bumps the epoch): the transaction was aborted; nothing of it is visible.
* ``KafkaError`` INVALID_TXN_STATE (commit after abort or the reverse, or no transaction
  open), INVALID_PRODUCER_ID_MAPPING (unknown or expired id), an authorization code...
* Retried until the deadline: NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE (found again),
  COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, lost connections, timeouts;
  the deadline gives ``KafkaTimeoutError`` naming the last error.

Against other brokers (what this relies on): Apache Kafka 2.5-3.x serves it as is (KIP-98
EndTxn from any connection, KIP-360 epochs). With Kafka 4's transaction version 2
(KIP-890 part 2, EndTxn v5+) the coordinator bumps the epoch at every commit and answers
the new one; the call here negotiates EndTxn v3 at most, so a TV2 coordinator treats it as
a TV1 client's request; a commit whose answer was lost and is retried may then be refused
(the epoch moved on) although it committed: check with DescribeTransactions before
treating such a failure as an abort. KIP-939 (two-phase commit, ``transaction.two.phase.
commit.enable`` and InitProducerId ``keepPreparedTxn``) is the supported route on Kafka
4.x for a transaction prepared by one process and completed by another.

Thread-safety: as the ``ConsumerNetworkClient`` used: one thread at a time; a config
mapping gets a client of its own, closed at the end of the call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from broker.client.consumer.client import ConsumerNetworkClient
from broker.client.consumer.config import CONSUMER_CONFIG_DEF
from broker.client.consumer.group_offsets import COORDINATOR_ID_BASE
from broker.client.consumer.offsets import consumer_client
from broker.client.errors import KafkaError, KafkaTimeoutError, NetworkError, ProducerFencedError
from broker.client.network import now_ms
from broker.client.producer.transactional import COORDINATOR_TRANSACTION
from broker.protocol import ApiKey, ErrorCode, request_schema

__all__ = ["ResumedTransaction", "complete_transactions", "fence_transactional_ids", "client_config"]

FIND_COORDINATOR_VERSIONS = (1, 3)  # key_type from v1; v4+ batches keys
END_TXN_VERSIONS = (0, 3)  # v4 adds TRANSACTION_ABORTABLE, v5 is transaction version 2
INIT_PRODUCER_ID_VERSIONS = (0, 4)

_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
_FIND_AGAIN = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                         ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION})
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})


class ResumedTransaction(NamedTuple):
    """A transaction left open by its producer: what EndTxn must name."""
    transactional_id: str
    producer_id: int
    producer_epoch: int


def client_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of a producer (or any client) config that a ``ConsumerNetworkClient``
    reads: bootstrap, security, timeouts; the rest is dropped."""
    known = set(CONSUMER_CONFIG_DEF.names())
    return {k: v for k, v in config.items() if k in known}


class _TryAgain(Exception):
    def __init__(self, error: BaseException, find_again: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.find_again = find_again


def _request(client: ConsumerNetworkClient, node: int, api_key: ApiKey, versions: tuple[int, int],
             build: Any, deadline: float) -> Any:
    try:
        if not client.await_ready(node, deadline):
            raise NetworkError(f"cannot connect to node {node}")
        resp = client.wait(client.send(node, api_key, build, our_min=versions[0], our_max=versions[1]),
                           deadline)
    except NetworkError as exc:
        raise _TryAgain(exc, find_again=True) from None
    if resp.error is not None:
        if resp.error.retriable:
            raise _TryAgain(resp.error, find_again=True)
        raise resp.error
    return resp.body


def _error(code: int, what: str, transactional_id: str, message: str | None = None) -> None:
    """Raise ``_TryAgain`` or the typed error for a non-NONE code."""
    if code == ErrorCode.NONE:
        return
    text = f"{what} of transactional id {transactional_id}" + (f": {message}" if message else "")
    if code in _FENCED:
        raise ProducerFencedError(text + " (a newer producer initialised this transactional id: "
                                  "the transaction was aborted)", code)
    error = KafkaError.from_code(code, text)
    if code in _FIND_AGAIN:
        raise _TryAgain(error, find_again=True)
    if code in _RETRY:
        raise _TryAgain(error, find_again=False)
    raise error


def _find_coordinator(client: ConsumerNetworkClient, transactional_id: str, deadline: float) -> int:
    node = client.least_loaded_node(deadline)

    def build(version: int) -> Any:
        return request_schema(ApiKey.FIND_COORDINATOR, version).cls(key=transactional_id,
                                                                     key_type=COORDINATOR_TRANSACTION)

    body = _request(client, node, ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSIONS, build, deadline)
    _error(body.error_code, "FindCoordinator", transactional_id, getattr(body, "error_message", None))
    coordinator = COORDINATOR_ID_BASE - body.node_id
    client.client.add_node(coordinator, body.host, body.port)
    return coordinator


def _each(client: ConsumerNetworkClient, keys: list[str], deadline: float, what: str, attempt_fn: Any
          ) -> dict[str, Any]:
    """``attempt_fn(coordinator, key)`` for each key, retrying ``_TryAgain`` with a backoff
    until ``deadline``; the result, or the error, per key. Coordinators are cached by the
    broker they resolve to."""
    coordinators: dict[str, int] = {}
    out: dict[str, Any] = {}
    for key in keys:
        attempt, last = 0, None
        while True:
            if now_ms() >= deadline:
                if last is None:  # never tried (an earlier key used the time): why no broker answers
                    last = client.deadline_error("not attempted")
                out[key] = KafkaTimeoutError(f"{what} of transactional id {key} not done before the "
                                             f"deadline (last error: {last})")
                break
            try:
                if key not in coordinators:
                    coordinators[key] = _find_coordinator(client, key, deadline)
                out[key] = attempt_fn(coordinators[key], key)
                break
            except _TryAgain as retry:
                last = retry.error
                if retry.find_again:
                    coordinators.pop(key, None)
            except KafkaTimeoutError as exc:
                out[key] = KafkaTimeoutError(f"{what} of transactional id {key} not done before the "
                                             f"deadline (last error: {last or exc})")
                break
            except KafkaError as exc:
                out[key] = exc
                break
            client.sleep(client.backoff_ms(attempt), deadline)
            attempt += 1
    return out


def complete_transactions(client_or_config: Any, transactions: Iterable[ResumedTransaction], commit: bool,
                          *, timeout_ms: float | None = None, timeout_config: str | None = None
                          ) -> dict[str, KafkaError | None]:
    """EndTxn(``commit``) for each open transaction (module docstring); None = done."""
    txns = {t.transactional_id: ResumedTransaction(*t) for t in transactions}
    if not txns:
        return {}
    what = "EndTxn(commit)" if commit else "EndTxn(abort)"
    with consumer_client(_as_config(client_or_config)) as client:
        deadline = client.deadline(timeout_ms, timeout_config)

        def attempt(coordinator: int, key: str) -> None:
            t = txns[key]

            def build(version: int) -> Any:
                return request_schema(ApiKey.END_TXN, version).cls(
                    transactional_id=t.transactional_id, producer_id=t.producer_id,
                    producer_epoch=t.producer_epoch, committed=commit)

            body = _request(client, coordinator, ApiKey.END_TXN, END_TXN_VERSIONS, build, deadline)
            _error(body.error_code, what, key,
                   f"producer id {t.producer_id} epoch {t.producer_epoch}" if body.error_code else None)
            return None

        return _each(client, list(txns), deadline, what, attempt)


def fence_transactional_ids(client_or_config: Any, transactional_ids: Iterable[str],
                            transaction_timeout_ms: int, *, timeout_ms: float | None = None,
                            timeout_config: str | None = None) -> dict[str, tuple[int, int] | KafkaError]:
    """InitProducerId for each id: its open transaction is aborted, its holder fenced;
    the new (producer id, epoch) per id (module docstring)."""
    ids = list(dict.fromkeys(transactional_ids))
    if not ids:
        return {}
    with consumer_client(_as_config(client_or_config)) as client:
        deadline = client.deadline(timeout_ms, timeout_config)

        def attempt(coordinator: int, key: str) -> tuple[int, int]:
            def build(version: int) -> Any:
                return request_schema(ApiKey.INIT_PRODUCER_ID, version).cls(
                    transactional_id=key, transaction_timeout_ms=transaction_timeout_ms,
                    producer_id=-1, producer_epoch=-1)

            body = _request(client, coordinator, ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_VERSIONS, build,
                            deadline)
            _error(body.error_code, "InitProducerId", key)
            return body.producer_id, body.producer_epoch

        return _each(client, ids, deadline, "InitProducerId", attempt)


def _as_config(client_or_config: Any) -> Any:
    if isinstance(client_or_config, ConsumerNetworkClient):
        return client_or_config
    return client_config(client_or_config)
