"""broker.server.telemetry: what the broker tells about itself and its clients.

* ``client_metrics.py``: KIP-714 client telemetry (subscriptions from ``client-metrics``
  config resources, client instances, push gating, OTLP decoding).
* ``prometheus.py``: the operators' ``/metrics`` endpoint (broker counters, log sizes,
  quota sensors, clients' pushed metrics) in Prometheus' text format.
"""
