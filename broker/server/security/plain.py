"""The PLAIN mechanism's server side (RFC 4616, Kafka's ``PlainSaslServer``).

One token from the client: ``[authzid] NUL authcid NUL passwd`` (UTF-8). The user must be
one of the ``user_<name>="<password>"`` options of the listener's PlainLoginModule
(``broker.server.security.jaas.plain_users``); the password is compared in constant time;
an authorization id other than empty or the user name is refused, as Kafka refuses it.
Failures raise ``SaslAuthenticationFailed`` with Kafka's messages, which never contain the
password.

Thread-safety: one instance per authentication, used by its connection's thread.
"""

from __future__ import annotations

import hmac

from broker.server.security.errors import SaslAuthenticationFailed

MAX_TOKEN = 64 * 1024  # far above any real user name and password


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailed("PLAIN authentication already complete")
        if len(token) > MAX_TOKEN:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: token too large")
        parts = bytes(token).split(b"\x00")
        if len(parts) != 3:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got "
                                           f"{len(parts)}")
        try:
            authzid, username, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare even for unknown users, so that timing does not tell which users exist
        ok = hmac.compare_digest((expected or "\x00" + password).encode("utf-8"), password.encode("utf-8"))
        if expected is None or not ok:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an authorization id "
                                           "that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""
