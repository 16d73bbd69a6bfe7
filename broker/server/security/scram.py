"""The SCRAM-SHA-256 / SCRAM-SHA-512 server side (RFC 5802, RFC 7677; Kafka's
``ScramSaslServer``), against the ``CredentialStore``.

Two rounds:

1. client-first-message -> server-first-message (``r`` = client nonce + server nonce,
   the user's salt and iterations). Channel binding must be ``n`` or ``y`` (no ``p``:
   Kafka does not bind channels); an authorization id other than empty or the user name
   is refused; the ``tokenauth`` extension (delegation tokens, KIP-48) is refused since
   this broker has none; other extensions are ignored, as Kafka ignores them.
2. client-final-message -> server-final-message (``v`` = ServerSignature) after checking
   the channel binding echo (base64 of the gs2 header), the combined nonce (it must END
   with it, Kafka's check, which old librdkafka relies on) and the proof:
   H(ClientProof XOR ClientSignature) must equal the stored key (constant-time compare).

An unknown user fails like a wrong password, but only at the second round: the first
answer uses a fake salt derived from the user name (so the exchange does not reveal which
users exist); both get Kafka's "Authentication failed during authentication due to invalid
credentials with SASL mechanism M". Every failure raises ``SaslAuthenticationFailed``.

Thread-safety: one instance per authentication, used by its connection's thread.
"""

from __future__ import annotations

import hashlib
import hmac

from broker.protocol.scram import (
    DEFAULT_ITERATIONS,
    ClientFinalMessage,
    ClientFirstMessage,
    ScramCredential,
    ScramError,
    ServerFinalMessage,
    ServerFirstMessage,
    auth_message,
    mechanism,
    nonce,
    recover_client_key,
    server_signature,
    stored_key,
)
from broker.server.security.credentials import CredentialStore
from broker.server.security.errors import SaslAuthenticationFailed

MAX_TOKEN = 64 * 1024
TOKEN_AUTH = "tokenauth"
_FAKE_SALT_SECRET = hashlib.sha256(nonce().encode()).digest()  # per process


class _InvalidCredentials(ScramError):
    """Unknown user or wrong proof: one message for both (Kafka's)."""


class ScramServer:
    def __init__(self, mechanism_name: str, store: CredentialStore) -> None:
        self.mechanism = mechanism_name
        self._mech = mechanism(mechanism_name)
        self._store = store
        self._state = "first"
        self._first: ClientFirstMessage | None = None
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if len(token) > MAX_TOKEN:
            raise SaslAuthenticationFailed("Invalid SCRAM message: token too large")
        try:
            if self._state == "first":
                return self._client_first(token)
            if self._state == "final":
                return self._client_final(token)
        except _InvalidCredentials:
            self._state = "failed"
            raise SaslAuthenticationFailed("Authentication failed during authentication due to invalid credentials "
                                           f"with SASL mechanism {self.mechanism}") from None
        except ScramError as exc:
            self._state = "failed"
            raise SaslAuthenticationFailed(f"Authentication failed: {exc}") from None
        raise SaslAuthenticationFailed("Authentication failed: unexpected SCRAM message")

    def _client_first(self, token: bytes) -> bytes:
        first = ClientFirstMessage.parse(token)
        if first.authzid and first.authzid != first.username:
            raise ScramError("Authorization id does not match user name")
        if first.extensions.get(TOKEN_AUTH, "").lower() == "true":
            raise ScramError("Token authentication (delegation tokens) is not enabled")
        self._first = first
        self._credential = self._store.get(first.username, self.mechanism)
        if self._credential is not None:
            salt, iterations = self._credential.salt, self._credential.iterations
        else:  # an unknown user: answer as if it existed, fail at the proof
            salt = hmac.new(_FAKE_SALT_SECRET, first.username.encode(), "sha256").digest()
            iterations = DEFAULT_ITERATIONS
        self._nonce = first.nonce + nonce()
        self._server_first = ServerFirstMessage.build(self._nonce, salt, iterations)
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        final = ClientFinalMessage.parse(token)
        self._state = "failed"
        assert self._first is not None
        if final.channel_binding != self._first.gs2_header.encode():
            raise ScramError("Invalid channel binding")
        # Kafka checks endsWith, not equality: librdkafka <= 2.0 sends the client nonce twice
        # (client nonce + the whole combined nonce); the proof covers what was sent.
        if not final.nonce.endswith(self._nonce):
            raise ScramError("Invalid client nonce in the final client message")
        cred = self._credential
        if cred is None:
            raise _InvalidCredentials("unknown user")
        message = auth_message(self._first.bare, self._server_first, final.without_proof)
        try:
            client_key = recover_client_key(self._mech, cred.stored_key, message, final.proof)
        except ScramError:
            raise _InvalidCredentials("bad proof length") from None
        if not hmac.compare_digest(stored_key(self._mech, client_key), cred.stored_key):
            raise _InvalidCredentials("wrong proof")
        self._state = "done"
        self.authorization_id = self._first.username
        self.complete = True
        return ServerFinalMessage.build(None, server_signature(self._mech, cred.server_key, message)).encode()
