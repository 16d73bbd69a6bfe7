"""Security's broker keys (Kafka's names, defaults and documentation): SASL and
authorization, with ``SaslConfig`` and ``AuthorizerConfig``, their typed, frozen views.

Owns the definitions of the SASL keys (``sasl.enabled.mechanisms``, ``sasl.jaas.config``,
``sasl.server.max.receive.size``, ``connections.max.reauth.ms`` (KIP-368),
``connection.failed.authentication.delay.ms``, and the GSSAPI / inter-broker ones Kafka
has, accepted with no effect: GSSAPI is not implemented, and a single node has no
inter-broker traffic) and of the authorizer's (``authorizer.class.name``: empty or one of
``AUTHORIZER_CLASS_NAMES``, ``super.users``, ``allow.everyone.if.no.acl.found``).
Per-listener SASL keys (``listener.name.<l>.sasl.enabled.mechanisms``,
``listener.name.<l>.<mechanism>.sasl.jaas.config``) are read by prefix in ``jaas.py``.
``define_sasl_keys`` and ``define_authorizer_keys`` add them to the broker's table
(``broker.server.config.SERVER_CONFIG_DEF``); ``SaslConfig.from_config`` (for ``SaslGate``
and ``jaas.py``) and ``AuthorizerConfig.from_config`` (for ``StandardAuthorizer`` and the
broker's wiring) read them once from a server config.

Invariants: the dataclass defaults equal the definitions' defaults. Imports only
``broker.config``. Thread-safety: the tables are immutable after import; the config
objects are frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config import BOOLEAN, DOUBLE, INT, LIST, LONG, PASSWORD, STRING, ConfigDef, at_least, one_of

# authorizer.class.name values that select the built-in authorizer (Kafka's KRaft and ZooKeeper names)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_CLASS_NAMES = (STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer",
                          "kafka.security.auth.SimpleAclAuthorizer")


def define_sasl_keys(config_def: ConfigDef) -> ConfigDef:
    """Add the SASL keys to ``config_def``."""
    return (
        config_def
        .define("sasl.enabled.mechanisms", LIST, ["GSSAPI"],
                "The SASL mechanisms enabled on SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 "
                "and OAUTHBEARER with unsecured JWTs are implemented).")
        .define("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI",
                "Accepted for compatibility (a single node has no inter-broker traffic).")
        # GSSAPI (Kerberos) is not implemented: its keys are accepted, also as dynamic broker
        # configs (Kafka reconfigures them per listener), and have no effect.
        .define("sasl.kerberos.service.name", STRING, None, "Accepted for compatibility (GSSAPI is not implemented).")
        .define("sasl.kerberos.kinit.cmd", STRING, "/usr/bin/kinit",
                "Accepted for compatibility (GSSAPI is not implemented).")
        .define("sasl.kerberos.ticket.renew.window.factor", DOUBLE, 0.8,
                "Accepted for compatibility (GSSAPI is not implemented).")
        .define("sasl.kerberos.ticket.renew.jitter", DOUBLE, 0.05,
                "Accepted for compatibility (GSSAPI is not implemented).")
        .define("sasl.kerberos.min.time.before.relogin", LONG, 60000,
                "Accepted for compatibility (GSSAPI is not implemented).")
        .define("sasl.kerberos.principal.to.local.rules", LIST, ["DEFAULT"],
                "Accepted for compatibility (GSSAPI is not implemented).")
        .define("sasl.jaas.config", PASSWORD, None,
                "JAAS login context for SASL connections, in the format of a JAAS configuration file.")
        .define("sasl.server.max.receive.size", INT, 524288,
                "The largest request accepted before and during SASL authentication.", at_least(1))
        .define("connections.max.reauth.ms", LONG, 0,
                "When positive, the session lifetime of SASL connections (KIP-368): past it a client "
                "must re-authenticate or is disconnected.", at_least(0))
        .define("connection.failed.authentication.delay.ms", INT, 100,
                "How long the answer to a failed authentication is delayed (slows password guessing).",
                at_least(0))
    )


def define_authorizer_keys(config_def: ConfigDef) -> ConfigDef:
    """Add the authorizer's keys to ``config_def``."""
    return (
        config_def
        .define("authorizer.class.name", STRING, "",
                "The authorizer: empty for none (every request allowed), or Kafka's "
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer for the built-in ACL authorizer.",
                one_of("", *AUTHORIZER_CLASS_NAMES))
        .define("super.users", STRING, "",
                "Principals allowed every operation, separated by ';' (e.g. User:admin;User:CN=ops).")
        .define("allow.everyone.if.no.acl.found", BOOLEAN, False,
                "When no ACL applies to a resource, allow every principal (true) or only super users.")
    )


SASL_CONFIG_DEF = define_sasl_keys(ConfigDef())
AUTHORIZER_CONFIG_DEF = define_authorizer_keys(ConfigDef())


@dataclass(frozen=True)
class SaslConfig:
    """The broker-wide SASL settings (a listener's own mechanisms and JAAS lines are read
    by prefix, ``jaas.py``). ``repr`` hides the JAAS text (it holds passwords)."""

    enabled_mechanisms: tuple[str, ...] = ("GSSAPI",)
    jaas_config: str | None = None
    server_max_receive_size: int = 524288
    connections_max_reauth_ms: int = 0
    failed_authentication_delay_ms: int = 100

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SaslConfig:
        """From a server config (raw or parsed: each key parsed and validated by its
        definition; a missing key takes its default)."""
        v = SASL_CONFIG_DEF.parse_from(config)
        return cls(
            enabled_mechanisms=tuple(v["sasl.enabled.mechanisms"] or ()),
            jaas_config=v["sasl.jaas.config"],
            server_max_receive_size=v["sasl.server.max.receive.size"],
            connections_max_reauth_ms=v["connections.max.reauth.ms"],
            failed_authentication_delay_ms=v["connection.failed.authentication.delay.ms"],
        )

    def __repr__(self) -> str:
        jaas = None if self.jaas_config is None else "[hidden]"
        return (f"SaslConfig(enabled_mechanisms={self.enabled_mechanisms!r}, jaas_config={jaas}, "
                f"server_max_receive_size={self.server_max_receive_size}, "
                f"connections_max_reauth_ms={self.connections_max_reauth_ms}, "
                f"failed_authentication_delay_ms={self.failed_authentication_delay_ms})")


@dataclass(frozen=True)
class AuthorizerConfig:
    """The authorizer's settings (``class_name`` empty: no authorizer, every request
    allowed); ``super_users`` as written, ';'-separated (``authorizer.parse_super_users``)."""

    class_name: str = ""
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AuthorizerConfig:
        """From a server config (raw or parsed: each key parsed and validated by its
        definition; a missing key takes its default)."""
        v = AUTHORIZER_CONFIG_DEF.parse_from(config)
        return cls(class_name=v["authorizer.class.name"] or "", super_users=v["super.users"] or "",
                   allow_everyone_if_no_acl_found=v["allow.everyone.if.no.acl.found"])

    @property
    def enabled(self) -> bool:
        return bool(self.class_name)
