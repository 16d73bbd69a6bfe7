"""Errors of SASL authentication on the broker (Kafka's ``SaslAuthenticationException``
family), raised by the mechanisms and turned into wire answers by ``sasl.py``.

Thread-safety: immutable exception classes.
"""

from __future__ import annotations


class SaslAuthenticationFailed(Exception):
    """Wrong credentials or a malformed token: SASL_AUTHENTICATION_FAILED, then the
    connection is closed. The message goes to the client: it never holds a password."""


