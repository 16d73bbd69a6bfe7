"""``StorageNode``: the broker's storage and topic layers (``LogManager`` and
``TopicManager`` over a log directory), in process, for tests of the coordinators and the
internal topics they write without a broker subprocess.

Thread-safety: as the layers it holds; ``close`` once, after the coordinators built on it.
"""

from __future__ import annotations

from pathlib import Path

from broker.log.manager import LogManager
from broker.server.config import server_config
from broker.server.metadata import TopicManager


class StorageNode:
    """``config`` (the broker's, parsed from ``log.dirs`` and ``props``), ``manager``,
    ``topics``; started, loaded."""

    def __init__(self, log_dir: Path, **props: object) -> None:
        self.log_dir = log_dir
        self.config = server_config({"log.dirs": str(log_dir), **props})
        self.topics: TopicManager | None = None
        self.manager = LogManager.from_server_config(self.config, topic_configs=lambda t: self.topics.log_config(t))
        self.topics = TopicManager(self.manager, self.config)
        self.topics.load()
        self.manager.startup()
        self.topics.startup()

    def close(self) -> None:
        self.manager.shutdown()
