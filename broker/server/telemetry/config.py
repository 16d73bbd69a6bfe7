"""Telemetry's broker keys (Kafka's names, defaults and documentation, and the project's
own for the metrics endpoint) and ``TelemetryConfig``, their typed, frozen view.

Owns the definitions of ``telemetry.max.bytes`` (the largest KIP-714 PushTelemetry payload
accepted, ``client_metrics.py``) and of the operators' Prometheus /metrics endpoint
(``kafkalog.metrics.port``: off unless set, 0 for any free port; ``kafkalog.metrics.host``;
``prometheus.py``). ``define_telemetry_keys`` adds them to the broker's table
(``broker.server.config.SERVER_CONFIG_DEF``); ``TelemetryConfig.from_config`` reads them
once from a server config for the broker's wiring (``broker/server/broker.py``).

Invariants: the dataclass defaults equal the definitions' defaults. Imports only
``broker.config``. Thread-safety: the table is immutable after import; a
``TelemetryConfig`` is frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import INT, STRING, ConfigDef, at_least, between


def define_telemetry_keys(config_def: ConfigDef) -> ConfigDef:
    """Add client telemetry's and the metrics endpoint's keys to ``config_def``."""
    return (
        config_def
        .define("telemetry.max.bytes", INT, 1048576, "Largest PushTelemetry payload accepted.", at_least(1))
        .define("kafkalog.metrics.port", INT, None, "Port of the Prometheus /metrics endpoint (0: any free one).",
                between(0, 65535))
        .define("kafkalog.metrics.host", STRING, "127.0.0.1", "Address of the Prometheus /metrics endpoint.")
        .define("kafkalog.telemetry.export.topic", STRING, None,
                "A topic every accepted PushTelemetry payload is appended to, as Kafka's client telemetry "
                "reporter plugins export them: the OTLP MetricsData bytes (uncompressed), keyed by the client "
                "instance id, with the client id and software in headers. Unset: not exported.")
    )


TELEMETRY_CONFIG_DEF = define_telemetry_keys(ConfigDef())


@dataclass(frozen=True)
class TelemetryConfig:
    """Client telemetry's and the metrics endpoint's settings (``metrics_port`` None: no
    endpoint)."""

    max_bytes: int = 1048576
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    export_topic: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TelemetryConfig:
        """From a server config (raw or parsed: each key parsed and validated by its
        definition; a missing key takes its default)."""
        v = TELEMETRY_CONFIG_DEF.parse_from(config)
        return cls(max_bytes=v["telemetry.max.bytes"], metrics_port=v["kafkalog.metrics.port"],
                   metrics_host=v["kafkalog.metrics.host"], export_topic=v["kafkalog.telemetry.export.topic"] or None)
