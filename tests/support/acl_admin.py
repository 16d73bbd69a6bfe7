"""Test support for the ACL admin tests (``tests/test_client_admin_acls.py``,
``tests/test_tools_acls.py``): a broker with Kafka's StandardAuthorizer on a
SASL_PLAINTEXT listener (PLAIN users ``admin``, the super user, ``alice`` and ``bob``) next to
a PLAINTEXT one, and the client settings to reach it.

``start_authz_broker(workdir)`` starts it (``allow.everyone.if.no.acl.found`` false, so a
principal without ACLs is refused); ``our_conf`` / ``ck_conf`` are the settings of our
clients and of confluent-kafka for a user; ``command_config(path, broker, user)`` writes
a ``--command-config`` properties file. Not a plugin: the test modules make their own
module-scoped fixtures from it.

Thread-safety: test-process only.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.support.broker import BrokerProcess

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" ' + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
AUTHZ_OVERRIDES = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "allow.everyone.if.no.acl.found": "false",
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def start_authz_broker(workdir: Path) -> BrokerProcess:
    return BrokerProcess(workdir, AUTHZ_OVERRIDES, name="authz").start()


def sasl_bootstrap(broker: BrokerProcess) -> str:
    return f"{broker.host}:{broker.listener_port('SASL_PLAINTEXT')}"


def our_conf(broker: BrokerProcess, user: str = "admin", **extra) -> dict:
    return {"bootstrap.servers": sasl_bootstrap(broker), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user],
            "default.api.timeout.ms": 30000, **extra}


def ck_conf(broker: BrokerProcess, user: str = "admin", **extra) -> dict:
    return {"bootstrap.servers": sasl_bootstrap(broker), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user], **extra}


def command_config(path: Path, broker: BrokerProcess, user: str = "admin") -> str:
    path.write_text(f"bootstrap.servers={sasl_bootstrap(broker)}\nsecurity.protocol=SASL_PLAINTEXT\n"
                    "sasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule"
                    f' required username="{user}" password="{PASSWORDS[user]}";\n')
    return str(path)
