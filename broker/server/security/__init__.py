"""Authentication on the broker: SASL. TLS lives in ``broker/server/ssl_context.py``.

Modules:

    sasl.py         SaslGate (the request-path hook in front of KafkaApis.handle) and the
                    per-connection ServerAuthenticator state machine (SaslHandshake v0-1,
                    SaslAuthenticate v0-2, legacy raw tokens, KIP-368 re-authentication)
    plain.py        PLAIN (RFC 4616) server mechanism
    scram.py        SCRAM-SHA-256/512 (RFC 5802/7677) server mechanism
    oauthbearer.py  OAUTHBEARER (RFC 7628) with Kafka's unsecured JWT validator
    jwks.py         OAUTHBEARER's signed-JWT validator against a JWKS (KIP-768)
    credentials.py  the durable SCRAM credential store (kafkalog-scram-credentials.json)
    jaas.py         listener security protocols, enabled mechanisms and JAAS lookups
    errors.py       SaslAuthenticationFailed

The SCRAM message formats and key derivation shared with the client are in
``broker.protocol.scram``; the JAAS grammar in ``broker.config.parse_jaas_config``.

Thread-safety: see each module.
"""
