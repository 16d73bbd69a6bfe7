"""SCRAM credentials through the admin client (KIP-554): the request builders and response
parsers of DescribeUserScramCredentials and AlterUserScramCredentials, for
``AdminClient.describe_user_scram_credentials`` / ``alter_user_scram_credentials`` and
``kafkalog configs --entity-type users``.

Owns ``ScramCredentialUpsertion(user, mechanism, password, iterations=4096, salt=None)``
and ``ScramCredentialDeletion(user, mechanism)``: the password never leaves the client; the
request carries the salt and the salted password Hi(password, salt, iterations) (as
Kafka's ``KafkaAdminClient``), and ``repr`` hides the password.

Thread-safety: pure functions and immutable values.
"""

from __future__ import annotations

import secrets
from typing import Any, NamedTuple

from broker.protocol import ApiKey, ErrorCode, request_schema
from broker.protocol.scram import DEFAULT_ITERATIONS, MECHANISMS, MECHANISMS_BY_TYPE, mechanism, salted_password


class ScramCredentialUpsertion(NamedTuple):
    user: str
    mechanism: str  # SCRAM-SHA-256 / SCRAM-SHA-512
    password: str
    iterations: int = DEFAULT_ITERATIONS
    salt: bytes | None = None

    def __repr__(self) -> str:
        return f"ScramCredentialUpsertion({self.user!r}, {self.mechanism}, iterations={self.iterations})"


class ScramCredentialDeletion(NamedTuple):
    user: str
    mechanism: str


def _check_mechanism(name: str) -> None:
    if name not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {name!r} (one of {', '.join(MECHANISMS)})")


def build_describe(version: int, users: list[str] | None) -> Any:
    schema = request_schema(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version)
    user_cls = schema.structs["UserName"]
    return schema.cls(users=None if not users else [user_cls(name=u) for u in users])


def parse_describe(body: Any) -> dict[str, tuple[int, str | None, dict[str, int]]]:
    """user -> (error code, message, {mechanism: iterations})."""
    if body.error_code:
        return {"": (body.error_code, body.error_message, {})}
    return {r.user: (r.error_code, r.error_message,
                     {MECHANISMS_BY_TYPE[c.mechanism].name: c.iterations for c in r.credential_infos
                      if c.mechanism in MECHANISMS_BY_TYPE})
            for r in body.results}


def build_alter(version: int, upsertions: list[ScramCredentialUpsertion],
                deletions: list[ScramCredentialDeletion]) -> Any:
    schema = request_schema(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, version)
    up_cls = schema.structs["ScramCredentialUpsertion"]
    del_cls = schema.structs["ScramCredentialDeletion"]
    ups = []
    for u in upsertions:
        _check_mechanism(u.mechanism)
        mech = mechanism(u.mechanism)
        salt = u.salt if u.salt is not None else secrets.token_bytes(32)
        ups.append(up_cls(name=u.user, mechanism=mech.type, iterations=u.iterations, salt=salt,
                          salted_password=salted_password(mech, u.password, salt, u.iterations)))
    dels = []
    for d in deletions:
        _check_mechanism(d.mechanism)
        dels.append(del_cls(name=d.user, mechanism=mechanism(d.mechanism).type))
    return schema.cls(deletions=dels, upsertions=ups)


def parse_alter(body: Any) -> dict[str, tuple[int, str | None]]:
    return {r.user: (r.error_code, r.error_message) for r in body.results}


__all__ = ["ErrorCode", "ScramCredentialDeletion", "ScramCredentialUpsertion", "build_alter", "build_describe",
           "parse_alter", "parse_describe"]
