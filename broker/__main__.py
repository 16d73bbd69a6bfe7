"""``python -m broker [CONFIG] [--override KEY=VALUE ...]``: run the broker in the
foreground, like Kafka's ``kafka-server-start.sh config/server.properties --override k=v``.
Also installed as the ``kafkalog-broker`` console script.

Behaviour:

* CONFIG is a Java-properties file with Kafka's key names (``conf/server.properties`` is a
  commented default); without it every key takes its default (listeners
  PLAINTEXT://localhost:9092, log.dir /tmp/kafka-logs). ``--override`` entries win over
  the file, in order.
* Invalid configuration: exactly one line on stderr, ``error: Invalid value 'x' for
  configuration KEY: reason``, and exit code 1, before any file or socket is touched.
  Failing to start (address in use, unreadable log directory, another cluster's
  meta.properties) also prints one ``error:`` line and exits 1; a listener that cannot
  bind is named with its address: ``error: cannot listen on PLAINTEXT://127.0.0.1:9092:
  address already in use (another broker or program holds the port; set listeners= to
  another port)``.
* Once every log is loaded and every listener accepts connections, exactly one line goes
  to stdout (flushed)::

      [KafkaServer id=1] started (kafkalog) listening on PLAINTEXT://127.0.0.1:9092 log.dirs=/data/kafka-logs

  followed by `` schema.registry=http://127.0.0.1:8081`` when ``schema.registry.listeners``
  is set (the Schema Registry's bound URLs).

* SIGTERM or SIGINT: clean shutdown (connections closed, logs flushed, checkpoints and
  the clean-shutdown marker written), then exit code 0. A second signal during shutdown
  is ignored; SIGKILL is the way to crash it (the next start then recovers the logs).
* Logging goes to stderr; ``--log-level LEVEL`` sets the root level (default INFO) and
  ``--log-level LOGGER=LEVEL`` one logger's, e.g. ``kafka.request.logger=DEBUG`` logs each
  API version every connection uses.

Thread-safety: the main thread only waits for a signal; the broker runs on its own threads.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from broker.config import ConfigError, load_properties

READY_LINE = "[KafkaServer id={node_id}] started (kafkalog) listening on {listeners} log.dirs={log_dirs}"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kafkalog-broker",
                                     description="Run the kafkalog Kafka-compatible broker.")
    parser.add_argument("config", nargs="?", help="server.properties file (Kafka key names)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set a property, overriding the file (repeatable)")
    parser.add_argument("--log-level", action="append", default=[], metavar="[LOGGER=]LEVEL",
                        help="root log level (default INFO) or one logger's level (repeatable)")
    return parser.parse_args(argv)


def _configure_logging(levels: list[str]) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(message)s (%(name)s)"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for item in levels:
        name, _, level = item.rpartition("=")
        logging.getLogger(name or None).setLevel(level.upper())


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr, flush=True)
    return 1


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    props: dict[str, str] = {}
    if args.config:
        try:
            props = load_properties(args.config)
        except OSError as exc:
            return _error(f"cannot read the configuration file {args.config}: {exc.strerror or exc}")
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            return _error(f"--override {item!r} is not of the form KEY=VALUE")
        props[key.strip()] = value.strip()
    try:
        _configure_logging(args.log_level)
    except ValueError as exc:
        return _error(f"invalid --log-level: {exc}")

    from broker.server.broker import KafkaBroker
    from broker.server.socket_server import ListenerBindError

    try:
        broker = KafkaBroker(props)
    except ConfigError as exc:
        return _error(str(exc))

    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        broker.start()
    except (ConfigError, ListenerBindError) as exc:
        return _error(str(exc))
    except Exception as exc:  # noqa: BLE001 - one clear line instead of a traceback
        logging.getLogger("broker").debug("startup failed", exc_info=True)
        return _error(f"the broker failed to start: {exc}")
    ready = READY_LINE.format(node_id=broker.node_id, listeners=broker.listener_urls(),
                              log_dirs=",".join(str(d) for d in broker.log_manager.log_dirs))
    if broker.schema_registry is not None:
        ready += f" schema.registry={broker.schema_registry.urls()}"
    print(ready, flush=True)
    while not stop.wait(1.0):
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    broker.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
