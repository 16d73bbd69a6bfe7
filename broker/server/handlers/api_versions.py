"""ApiVersions (key 18): what this broker serves, and the too-new-version fallback.

Wire behaviour (PROTOCOL.md 3.2, KIP-511):

* v0-v3 answer error_code 0, the advertised table (``ServerState.api_versions``: only
  APIs this broker implements) and, from v1, throttle_time_ms 0. v3 bodies are flexible
  but the response HEADER is v0 for every ApiVersions response (``broker.protocol``
  applies that rule).
* A version above the advertised maximum is answered, like Kafka's
  ``RequestContext.parseRequest``, without parsing the body: a v0 body with
  UNSUPPORTED_VERSION (35) and the single entry {18, min, max}, so that the client can
  retry with a version it finds there (``unsupported_version_body``; the caller encodes
  it with ``version=0``).
* Features (v3+, KIP-584): ``transaction.version`` is supported 0-2 and finalized at the
  level ``kafkalog.feature.transaction.version`` sets (default 2, as a new Kafka 4 cluster;
  ``TransactionCoordinator.transaction_version``). Kafka 4 clients read the finalized
  level: at 2 they use transaction version 2 (KIP-890 part 2: Produce v12 and
  TxnOffsetCommit v5 add partitions implicitly, EndTxn v5 bumps the epoch). In v3 a
  supported range starting at 0 is sent from 1 (Java clients before KAFKA-17011 refuse a
  0 there). ``share.version`` is supported 0-1 and finalized at 1 while share groups run
  (KIP-932: Kafka 4.2's level for share groups). ``finalized_features_epoch`` is the
  broker's start time in ms, so a restart with another level is seen as newer by a client
  that talked to the broker before.
* client_software_name / version (v3+) are recorded in the request context for the
  request log, never validated (Kafka answers INVALID_REQUEST to names failing its regex;
  clients then retry v0, which only costs a round trip).

Thread-safety: stateless.
"""

from __future__ import annotations

from broker.protocol import ApiKey, ErrorCode
from broker.protocol.messages.api_versions import API_VERSIONS_RESPONSE
from broker.server.handlers import RequestContext, ServerState

ApiVersionsResponse = API_VERSIONS_RESPONSE.cls
ApiVersion = API_VERSIONS_RESPONSE.structs["ApiVersion"]


def _entries(state: ServerState) -> list:
    return [ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in state.api_versions]


SupportedFeature = API_VERSIONS_RESPONSE.structs["SupportedFeatureKey"]
FinalizedFeature = API_VERSIONS_RESPONSE.structs["FinalizedFeatureKey"]
TRANSACTION_VERSION_FEATURE = "transaction.version"
TRANSACTION_VERSION_SUPPORTED = (0, 2)
SHARE_VERSION_FEATURE = "share.version"
SHARE_VERSION_SUPPORTED = (0, 1)


def _features(state: ServerState, version: int) -> dict:
    if version < 3 or state.txn_coordinator is None:
        return {}
    lo, hi = TRANSACTION_VERSION_SUPPORTED
    level = state.txn_coordinator.transaction_version
    finalized = [FinalizedFeature(name=TRANSACTION_VERSION_FEATURE, max_version_level=level,
                                  min_version_level=level)] if level > 0 else []
    supported = [SupportedFeature(name=TRANSACTION_VERSION_FEATURE, min_version=lo if version >= 4 else max(lo, 1),
                                  max_version=hi)]
    if state.share_manager is not None:  # share groups on: share.version 1 (Kafka 4.2)
        share_lo, share_hi = SHARE_VERSION_SUPPORTED
        supported.append(SupportedFeature(name=SHARE_VERSION_FEATURE,
                                          min_version=share_lo if version >= 4 else max(share_lo, 1),
                                          max_version=share_hi))
        finalized.append(FinalizedFeature(name=SHARE_VERSION_FEATURE, max_version_level=share_hi,
                                          min_version_level=share_hi))
    return {"supported_features": supported,
            "finalized_features_epoch": state.txn_coordinator.features_epoch,
            "finalized_features": finalized}


def handle(state: ServerState, ctx: RequestContext, body) -> object:
    if ctx.api_version >= 3:
        ctx.extra["client_software"] = (body.client_software_name, body.client_software_version)
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_entries(state), throttle_time_ms=0,
                               **_features(state, ctx.api_version))


def error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return ApiVersionsResponse(error_code=code, api_keys=_entries(state), throttle_time_ms=0)


def unsupported_version_body(state: ServerState) -> object:
    """The v0 body answering an ApiVersions request of a version above what we serve."""
    lo, hi = next(((lo, hi) for k, lo, hi in state.api_versions if k == ApiKey.API_VERSIONS), (0, 0))
    return ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=lo, max_version=hi)],
    )
