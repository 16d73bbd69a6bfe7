"""The Schema Registry served by the broker: Confluent's v1 REST API over the ``_schemas``
topic, so that Confluent's serializers (and any other registry client) register and fetch
Avro, Protobuf and JSON Schema schemas here as they do against Confluent's registry.

Modules:

    config.py    its broker keys (``schema.registry.listeners``: off unless set, ...)
    store.py     ``SchemaStore``: the state, replayed from ``_schemas`` with the coordinator
                 runtime at startup, and its only writer (ids, versions, GUIDs, deletes,
                 configs, modes, compatibility checks)
    api.py       ``RegistryApi``: the routes and Confluent's error codes, HTTP-free
    http.py      the HTTP(S) listeners and HTTP Basic authentication

``SchemaRegistry`` wires them for the broker: ``startup()`` loads ``_schemas`` and opens
the listeners, ``shutdown()`` closes them. Writes need a super user or ALTER on the
CLUSTER resource when the broker has an authorizer; any authenticated principal reads.
While the registry runs, clients' produce requests to its topic are refused
(``protected_topic``): only the registry writes there.

Schema formats and the ``_schemas`` records (``broker.schema.registry_records``, byte for
byte as Confluent and Karapace write them) live in ``broker.schema`` (sans-IO); this
package adds the HTTP and the topic. Imports go down: ``broker.schema``, ``broker.server.coordinator``,
``broker.server.security``, ``broker.protocol``, ``broker.log``.

Thread-safety: ``startup`` / ``shutdown`` on the broker's lifecycle thread; requests on
the listeners' connection threads (see each module).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from broker.log.clock import SYSTEM_TIME, Time
from broker.log.scheduler import Scheduler
from broker.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.server.coordinator.topic import TopicSource
from broker.server.registry.api import RegistryApi
from broker.server.registry.config import RegistryConfig
from broker.server.registry.http import BasicAuthenticator, RegistryListener
from broker.server.registry.store import RegistryError, SchemaStore

log = logging.getLogger(__name__)


class SchemaRegistry:
    """The registry of one broker (module docstring). ``plain_users`` / ``scram``: the
    broker's credentials for HTTP Basic (used when ``authenticate``); ``authorizer``: the
    broker's ``StandardAuthorizer`` or None (every authenticated principal may write);
    ``tls``: the server context for ``https://`` listeners."""

    def __init__(self, settings: RegistryConfig, topics: TopicSource, config: Mapping[str, Any], *,
                 authenticate: bool = False, plain_users: Mapping[str, str] | None = None, scram: Any = None,
                 authorizer: Any = None, tls: Callable[[], Any] | None = None, time: Time = SYSTEM_TIME,
                 scheduler: Scheduler | None = None,
                 on_append: Callable[[tuple[str, int]], None] | None = None) -> None:
        self.settings = settings
        self.store = SchemaStore(settings, topics, config, time=time, scheduler=scheduler, on_append=on_append)
        self.authorizer = authorizer
        self.api = RegistryApi(self.store, self.may_write)
        self.authenticator = BasicAuthenticator(plain_users or {}, scram) if authenticate else None
        self._tls = tls
        self.listeners: list[RegistryListener] = []

    @property
    def protected_topic(self) -> str:
        return self.settings.topic

    def may_write(self, principal: str | None) -> bool:
        if self.authorizer is None:
            return True
        if principal is None:
            return False
        return bool(self.authorizer.authorize(principal, "", AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME,
                                              request="SchemaRegistryWrite"))

    def startup(self) -> None:
        self.store.startup()
        try:
            for url in self.settings.listeners:
                tls = self._tls() if url.startswith("https:") and self._tls is not None else None
                if url.startswith("https:") and tls is None:
                    raise ValueError(f"schema.registry.listeners: {url} needs the broker's ssl.keystore.location")
                self.listeners.append(RegistryListener(url, self.api, authenticator=self.authenticator,
                                                       max_request_bytes=self.settings.max_request_bytes, tls=tls))
        except BaseException:
            self.shutdown()
            raise
        log.info("schema registry served at %s (%s authentication)", self.urls(),
                 "BASIC" if self.authenticator is not None else "no")

    def urls(self) -> str:
        return ",".join(li.url for li in self.listeners)

    def shutdown(self) -> None:
        for listener in self.listeners:
            listener.close()
        self.listeners = []
        self.store.shutdown()


__all__ = ["RegistryConfig", "RegistryError", "SchemaRegistry"]
