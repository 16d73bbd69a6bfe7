"""Test doubles for the producer's Sender: a scripted NetworkClient and a static Metadata.

``MockClient`` implements the part of ``NetworkClient`` the Sender uses. Requests are
recorded (``requests``) with a copy of every batch's bytes taken when they were "written",
and tests answer them explicitly: ``respond(req, {tp: error_code})``, ``disconnect(req)``,
``time_out(req)``; ``poll`` then runs the callbacks like the real client. ``StaticMetadata``
serves a fixed ``Cluster``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from broker.client.errors import NetworkError, RequestTimedOutError
from broker.client.metadata import Cluster, Node, PartitionInfo
from broker.client.network import ClientRequest, ClientResponse
from broker.protocol import ApiKey, response_schema


class _Request(ClientRequest):
    __slots__ = ("body",)


class StaticMetadata:
    def __init__(self, topics: dict[str, int], nodes: tuple[int, ...] = (1,)) -> None:
        parts = [PartitionInfo(t, p, nodes[p % len(nodes)]) for t, n in topics.items()
                 for p in range(n)]
        self.cluster = Cluster([Node(n, "127.0.0.1", 9000 + n) for n in nodes], parts)
        self.updates = 0

    def fetch(self) -> Cluster:
        return self.cluster

    def add_topic(self, topic: str) -> None:
        pass

    def request_update(self) -> int:
        self.updates += 1
        return 0

    def close(self) -> None:
        pass


class MockClient:
    request_timeout_ms = 30000
    reconnect_backoff_ms = 50

    def __init__(self, produce_version: int = 8) -> None:
        self.requests: list[ClientRequest] = []
        self.in_flight: list[ClientRequest] = []
        self.snapshots: dict[int, list[tuple[str, int, bytes, Any]]] = {}
        self._done: list[ClientResponse] = []
        self.produce_version = produce_version
        self.max_in_flight = 5
        self.not_ready: set[int] = set()
        self.next_pid = (1000, 0)
        self._corr = 0

    # -- what the Sender calls -----------------------------------------------------------

    def ready(self, node: Any, now: float) -> bool:
        node_id = node if isinstance(node, int) else node.id
        return node_id not in self.not_ready and sum(
            1 for r in self.in_flight if r.node_id == node_id) < self.max_in_flight

    def poll_delay_ms(self, node_id: int, now: float) -> float:
        return float("inf")

    def least_loaded_node(self, now: float, md: Any = None) -> Any:
        return Node(1, "127.0.0.1", 9001)

    def api_version(self, node_id: int, api_key: int, our_max: int, our_min: int = 0) -> int | None:
        if api_key == ApiKey.PRODUCE:
            v = min(our_max, self.produce_version)
            return v if v >= our_min else None
        return min(our_max, 1)

    def send(self, node_id: int, api_key: int, body: Any, *, version: int | None = None,
             callback: Any = None, expect_response: bool = True, now_ms: float = 0.0,
             context: Any = None, **_: Any) -> ClientRequest:
        self._corr += 1
        req = _Request(node_id, api_key, version or 0, self._corr, callback,
                            expect_response, now_ms, self.request_timeout_ms, [], context)
        req.body = body
        if api_key == ApiKey.INIT_PRODUCER_ID:
            resp = SimpleNamespace(throttle_time_ms=0, error_code=0, producer_id=self.next_pid[0],
                                   producer_epoch=self.next_pid[1])
            self._done.append(ClientResponse(req, resp, None, now_ms))
            return req
        snaps = []
        for t in body.topic_data:
            for p in t.partition_data:
                snaps.append((t.name, p.index, bytes(p.records), p.records))
        self.snapshots[req.correlation_id] = snaps
        self.requests.append(req)
        if expect_response:
            self.in_flight.append(req)
        else:
            self._done.append(ClientResponse(req, None, None, now_ms))
        return req

    def poll(self, timeout_ms: float, now: float | None = None) -> list[ClientResponse]:
        done, self._done = self._done, []
        for r in done:
            if r.request.callback is not None:
                r.request.callback(r)
        return done

    def wakeup(self) -> None:
        pass

    def take_authentication_error(self) -> None:
        return None  # the scripted broker never fails SASL

    def has_in_flight_requests(self) -> bool:
        return bool(self.in_flight)

    def close(self) -> None:
        for req in list(self.in_flight):
            self.disconnect(req)
        self.poll(0)

    # -- what tests call -----------------------------------------------------------------

    def partitions(self, req: ClientRequest) -> list[tuple[str, int]]:
        return [(t.name, p.index) for t in req.body.topic_data for p in t.partition_data]

    def respond(self, req: ClientRequest, errors: dict[tuple[str, int], int] | None = None,
                offsets: dict[tuple[str, int], int] | None = None, now: float = 0.0,
                throttle_ms: int = 0) -> None:
        self.in_flight.remove(req)
        schema = response_schema(ApiKey.PRODUCE, req.api_version)
        tcls = schema.structs["TopicProduceResponse"]
        pcls = schema.structs["PartitionProduceResponse"]
        by_topic: dict[str, list[Any]] = {}
        for t, p in self.partitions(req):
            code = (errors or {}).get((t, p), 0)
            base = (offsets or {}).get((t, p), 0 if code == 0 else -1)
            by_topic.setdefault(t, []).append(pcls(index=p, error_code=code, base_offset=base,
                                                   log_start_offset=0))
        body = schema.cls(responses=[tcls(name=t, partition_responses=ps)
                                     for t, ps in by_topic.items()], throttle_time_ms=throttle_ms)
        self._done.append(ClientResponse(req, body, None, now))

    def disconnect(self, req: ClientRequest, now: float = 0.0) -> None:
        self.in_flight.remove(req)
        self._done.append(ClientResponse(req, None, NetworkError("dropped"), now))

    def time_out(self, req: ClientRequest, now: float = 0.0) -> None:
        self.in_flight.remove(req)
        self._done.append(ClientResponse(req, None, RequestTimedOutError("slow"), now, True))
