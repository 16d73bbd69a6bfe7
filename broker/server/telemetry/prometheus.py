"""The broker's metrics for operators: an HTTP endpoint in Prometheus' text format
(``prometheus-client``'s exposition and server), at ``/metrics`` on
``kafkalog.metrics.host`` (default 127.0.0.1) : ``kafkalog.metrics.port`` (off unless set;
0 picks a free port, reported by ``MetricsEndpoint.port``).

Owns ``BrokerStats`` (the counters the request path bumps: bytes in and out per topic,
request counts and handler time per API) and ``BrokerCollector``, which reads every
figure when scraped (nothing is computed between scrapes):

* ``kafka_server_requests_total{api}`` and ``kafka_server_request_seconds_total{api}``:
  requests served and the time spent handling them (their ratio is the mean latency);
* ``kafka_server_bytes_in_total{topic}`` / ``kafka_server_bytes_out_total{topic}``:
  record bytes produced and fetched;
* ``kafka_server_connections``: open client connections;
* ``kafka_log_size_bytes{topic, partition}``: each partition's log size;
* tiered storage (Kafka's remote storage metrics, KIP-405 and KIP-963), when the broker
  has it: ``kafka_server_remote_<copy|fetch>_<bytes|requests|errors>_total{topic}`` and
  ``kafka_server_remote_delete_<requests|errors>_total{topic}`` (Kafka's
  ``RemoteCopyBytesPerSec`` ... as totals), and per partition
  ``kafka_log_remote_log_size_bytes``, ``kafka_log_remote_log_metadata_count`` (remote
  segments), ``kafka_log_remote_copy_lag_bytes`` / ``kafka_log_remote_copy_lag_segments``
  (closed segments waiting for their copy);
* ``kafka_server_quota_<metric>{quota_type, user, client_id}``: the quota sensors'
  figures (byte-rate, request-time, throttle-time, throttle-time-max, tokens,
  mutation-rate) of every live entity;
* ``kafka_client_<name>{client_instance_id, client_id, ...}``: the latest value of each
  metric data point clients pushed (KIP-714 telemetry), dots in OTLP names made
  underscores.

Thread-safety: the counters are bumped under ``BrokerStats``' lock (a few per request);
the collector runs on the HTTP server's thread and only reads.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"[^a-zA-Z0-9_:]")


def metric_name(text: str) -> str:
    name = _NAME_RE.sub("_", text)
    return name if not name[:1].isdigit() else "_" + name


class BrokerStats:
    """Counters of the request path (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.bytes_in: Counter[str] = Counter()
        self.bytes_out: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.request_seconds: defaultdict[str, float] = defaultdict(float)

    def record_request(self, api: str, seconds: float) -> None:
        with self._lock:
            self.requests[api] += 1
            self.request_seconds[api] += seconds

    def record_bytes_in(self, topic: str, n: int) -> None:
        with self._lock:
            self.bytes_in[topic] += n

    def record_bytes_out(self, topic: str, n: int) -> None:
        with self._lock:
            self.bytes_out[topic] += n

    def snapshot(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {"bytes_in": dict(self.bytes_in), "bytes_out": dict(self.bytes_out),
                    "requests": dict(self.requests), "request_seconds": dict(self.request_seconds)}


class BrokerCollector:
    """A prometheus_client collector over the broker's parts (read at scrape time)."""

    def __init__(self, stats: BrokerStats, *, connections: Callable[[], int] = lambda: 0,
                 logs: Callable[[], Iterable[Any]] = lambda: (), quotas: Any = None,
                 telemetry: Any = None, remote: Callable[[], Any] = lambda: None) -> None:
        self.stats = stats
        self.remote = remote  # the RemoteLogManager, or None (tiered storage off)
        self.connections = connections
        self.logs = logs
        self.quotas = quotas
        self.telemetry = telemetry

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snap = self.stats.snapshot()
        requests = CounterMetricFamily("kafka_server_requests", "Requests served, per API.", labels=["api"])
        seconds = CounterMetricFamily("kafka_server_request_seconds", "Time spent handling requests, per API.",
                                      labels=["api"])
        for api, n in sorted(snap["requests"].items()):
            requests.add_metric([api], n)
            seconds.add_metric([api], snap["request_seconds"].get(api, 0.0))
        yield requests
        yield seconds
        for key, name, doc in (("bytes_in", "kafka_server_bytes_in", "Record bytes produced, per topic."),
                               ("bytes_out", "kafka_server_bytes_out", "Record bytes fetched, per topic.")):
            fam = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, n in sorted(snap[key].items()):
                fam.add_metric([topic], n)
            yield fam
        yield GaugeMetricFamily("kafka_server_connections", "Open client connections.", value=self.connections())
        sizes = GaugeMetricFamily("kafka_log_size_bytes", "Size of each partition's log.",
                                  labels=["topic", "partition"])
        for lg in self.logs():
            try:
                topic, partition = lg.topic_partition
                sizes.add_metric([topic, str(partition)], lg.size)
            except Exception:  # noqa: BLE001 - a log deleted or offline meanwhile
                continue
        yield sizes
        yield from self._remote_metrics(CounterMetricFamily, GaugeMetricFamily)
        yield from self._quota_metrics(GaugeMetricFamily)
        yield from self._client_metrics(GaugeMetricFamily)

    def _remote_metrics(self, counter: Any, gauge: Any) -> Iterable[Any]:
        rlm = self.remote()
        if rlm is None:
            return
        partitions = rlm.partition_gauges()
        counts = rlm.stats.snapshot()
        # every topic with remote storage has every counter, at 0 until something happens
        topics = sorted({p[0] for p in partitions}.union(*counts.values()))
        for name, by_topic in counts.items():
            what, unit = name.split("_")
            fam = counter(f"kafka_server_remote_{name}", f"Tiered storage: remote {what} {unit}, per topic.",
                          labels=["topic"])
            for topic in topics:
                fam.add_metric([topic], by_topic.get(topic, 0))
            yield fam
        gauges = [gauge(f"kafka_log_{name}", doc, labels=["topic", "partition"]) for name, doc in (
            ("remote_log_size_bytes", "Tiered storage: bytes of each partition's remote segments."),
            ("remote_log_metadata_count", "Tiered storage: each partition's remote segments."),
            ("remote_copy_lag_bytes", "Tiered storage: bytes of closed segments waiting for their copy."),
            ("remote_copy_lag_segments", "Tiered storage: closed segments waiting for their copy."))]
        for topic, partition, *values in partitions:
            for fam, value in zip(gauges, values):
                fam.add_metric([topic, str(partition)], value)
        yield from gauges

    def _quota_metrics(self, gauge: Any) -> Iterable[Any]:
        if self.quotas is None:
            return
        import math
        now = self.quotas.metrics.time.milliseconds()
        families: dict[str, Any] = {}
        for name, metric in self.quotas.metrics.metrics().items():
            tags = dict(name.tags)
            if "client-id" not in tags:
                continue
            try:
                value = metric.measure(now)
            except Exception:  # noqa: BLE001
                continue
            if math.isnan(value) or math.isinf(value):
                continue
            fam_name = "kafka_server_quota_" + metric_name(name.name)
            fam = families.get(fam_name)
            if fam is None:
                fam = families[fam_name] = gauge(fam_name, f"Client quota {name.name}, per entity.",
                                                 labels=["quota_type", "user", "client_id"])
            fam.add_metric([name.group, tags.get("user", ""), tags.get("client-id", "")], value)
        yield from families.values()

    def _client_metrics(self, gauge: Any) -> Iterable[Any]:
        if self.telemetry is None:
            return
        families: dict[tuple[str, tuple[str, ...]], Any] = {}
        for name, labels, value in self.telemetry.snapshot():
            keys = tuple(sorted(metric_name(k) for k in labels))
            fam_name = "kafka_client_" + metric_name(name)
            key = (fam_name, keys)
            fam = families.get(key)
            if fam is None:
                if any(k[0] == fam_name for k in families):
                    continue  # one label set per family: a client with other attributes is skipped
                fam = families[key] = gauge(fam_name, f"Client metric {name} (KIP-714 telemetry).",
                                            labels=list(keys))
            by_key = {metric_name(k): str(v) for k, v in labels.items()}
            fam.add_metric([by_key[k] for k in keys], value)
        yield from families.values()


class MetricsEndpoint:
    """The HTTP server of ``/metrics`` (prometheus-client's, on its own daemon thread)."""

    def __init__(self, collector: BrokerCollector, host: str, port: int) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self.server, self.thread = start_http_server(port, addr=host, registry=self.registry)
        self.host = host
        self.port = self.server.server_address[1]
        log.info("broker metrics served at http://%s:%d/metrics", host, self.port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


__all__ = ["BrokerCollector", "BrokerStats", "MetricsEndpoint", "metric_name"]
