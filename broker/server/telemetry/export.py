"""Client telemetry exported to a topic (``kafkalog.telemetry.export.topic``), as Kafka's
client-telemetry reporter plugins (a ``ClientTelemetryReceiver`` forwarding OTLP) do.

Owns ``TelemetryTopicExporter.export(instance_id, metrics, client)``: one record per
accepted PushTelemetry, appended by the broker to partition 0 of the topic (created with
the broker's defaults when missing): key = the client instance id (text), value = the OTLP
``MetricsData`` bytes (uncompressed), headers ``client_id``, ``client_software_name``,
``client_software_version`` (UTF-8). A consumer of the topic decodes the value with
``opentelemetry.proto.metrics.v1.metrics_pb2.MetricsData``.

Thread-safety: stateless apart from the thread-safe topic manager; appends are serialised
by the log.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from broker.record.batch import encode_batch
from broker.server.coordinator.writer import append_as_coordinator


class TelemetryTopicExporter:
    """See the module docstring. ``notify(tp)`` wakes the fetches waiting on the topic."""

    def __init__(self, topics: Any, topic: str, notify: Callable[[tuple[str, int]], None] | None = None) -> None:
        self.topics = topics
        self.topic = topic
        self.notify = notify or (lambda tp: None)

    def export(self, instance_id: uuid.UUID, metrics: bytes, client: dict[str, str]) -> None:
        if self.topics.get(self.topic) is None:
            self.topics.auto_create(self.topic)
        lg = self.topics.get_log(self.topic, 0)
        if lg is None:
            raise RuntimeError(f"{self.topic}-0 has no log")
        headers = [(k, client.get(k, "").encode()) for k in ("client_id", "client_software_name",
                                                             "client_software_version")]
        batch = encode_batch([(str(instance_id).encode(), metrics, int(time.time() * 1000), headers)])
        append_as_coordinator(lg, batch)
        self.notify((self.topic, 0))


__all__ = ["TelemetryTopicExporter"]
