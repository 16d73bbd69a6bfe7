"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), v0 (KIP-554).

Wire behaviour (Kafka's ``ControllerApis`` / ``ScramControlManager``):

* Describe: ``users`` null or empty lists every user with credentials; a named user
  without any gets RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE; each result
  lists (mechanism byte, iterations), never a salt or key.
* Alter: deletions and upsertions grouped by user; per user one result. A mechanism byte
  that is not SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) gets UNSUPPORTED_SASL_MECHANISM; an
  empty user name, iterations outside 4096..16384 or an empty salt / salted password
  UNACCEPTABLE_CREDENTIAL; the same (user, mechanism) twice in one request
  DUPLICATE_RESOURCE; deleting a credential that does not exist RESOURCE_NOT_FOUND. A user
  with any error changes nothing; the others are applied in one durable write
  (``broker.server.security.credentials``). The client sends the salted password
  (Hi(password, salt, i)); the store keeps only the stored key and server key derived
  from it.

Thread-safety: the store serialises changes.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from broker.protocol import ErrorCode
from broker.protocol.messages.alter_user_scram_credentials import ALTER_USER_SCRAM_CREDENTIALS_RESPONSE
from broker.protocol.messages.describe_user_scram_credentials import DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE
from broker.protocol.scram import MAX_ITERATIONS, MECHANISMS, MECHANISMS_BY_TYPE, ScramCredential
from broker.server.errors import ApiError, error_code_for
from broker.server.handlers import RequestContext, ServerState
from broker.server.security.credentials import Deletion, Upsertion

DescribeResponse = DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE.cls
DescribeResult = DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE.structs["DescribeUserScramCredentialsResult"]
CredentialInfo = DESCRIBE_USER_SCRAM_CREDENTIALS_RESPONSE.structs["CredentialInfo"]
AlterResponse = ALTER_USER_SCRAM_CREDENTIALS_RESPONSE.cls
AlterResult = ALTER_USER_SCRAM_CREDENTIALS_RESPONSE.structs["AlterUserScramCredentialsResult"]


def _store(state: ServerState):
    if state.credentials is None:
        raise ApiError(ErrorCode.UNSUPPORTED_VERSION, "SCRAM credentials are not available on this broker")
    return state.credentials


def handle_describe(state: ServerState, ctx: RequestContext, body) -> object:
    store = _store(state)
    names = [u.name for u in body.users or []]
    if not names:
        found = store.describe()
        results = [_describe_result(user, mechs) for user, mechs in found.items()]
        return DescribeResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)
    counts = Counter(names)
    found = store.describe(set(names))
    results = []
    for user in dict.fromkeys(names):
        if counts[user] > 1:
            results.append(DescribeResult(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                          error_message=f"Cannot describe SCRAM credentials for the same user "
                                                        f"twice in a single request: {user}",
                                          credential_infos=[]))
        elif user not in found:
            results.append(DescribeResult(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                          error_message=f"Attempt to describe a user credential that does not "
                                                        f"exist: {user}", credential_infos=[]))
        else:
            results.append(_describe_result(user, found[user]))
    return DescribeResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)


def _describe_result(user: str, mechs: dict[str, int]) -> object:
    return DescribeResult(user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=[
        CredentialInfo(mechanism=MECHANISMS[m].type, iterations=i) for m, i in sorted(mechs.items())])


def describe_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    return DescribeResponse(throttle_time_ms=0, error_code=code, error_message=None, results=[])


def handle_alter(state: ServerState, ctx: RequestContext, body) -> object:
    store = _store(state)
    errors: dict[str, tuple[int, str]] = {}
    users: list[str] = []
    seen: Counter[tuple[str, int]] = Counter()
    for item in list(body.deletions) + list(body.upsertions):
        users.append(item.name)
        seen[(item.name, item.mechanism)] += 1
    deletions: dict[str, list] = defaultdict(list)
    upsertions: dict[str, list] = defaultdict(list)

    def fail(user: str, code: int, message: str) -> None:
        errors.setdefault(user, (code, message))

    existing = store.describe()
    for d in body.deletions:
        mech = MECHANISMS_BY_TYPE.get(d.mechanism)
        if not d.name:
            fail(d.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            fail(d.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {d.mechanism}")
        elif seen[(d.name, d.mechanism)] > 1:
            fail(d.name, ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
        elif mech.name not in existing.get(d.name, {}):
            fail(d.name, ErrorCode.RESOURCE_NOT_FOUND,
                 "Attempt to delete a user credential that does not exist")
        else:
            deletions[d.name].append(Deletion(d.name, mech.name))
    for u in body.upsertions:
        mech = MECHANISMS_BY_TYPE.get(u.mechanism)
        if not u.name:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mech is None:
            fail(u.name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {u.mechanism}")
        elif seen[(u.name, u.mechanism)] > 1:
            fail(u.name, ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
        elif u.iterations < mech.min_iterations:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif u.iterations > MAX_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not u.salt or not u.salted_password:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        else:
            cred = ScramCredential.from_salted_password(mech, bytes(u.salt), bytes(u.salted_password), u.iterations)
            upsertions[u.name].append(Upsertion(u.name, mech.name, cred))
    ok_users = [u for u in dict.fromkeys(users) if u not in errors]
    try:
        store.alter([d for u in ok_users for d in deletions[u]], [x for u in ok_users for x in upsertions[u]])
    except Exception as exc:  # noqa: BLE001 - a storage failure is every user's answer
        code = error_code_for(exc)
        for u in ok_users:
            fail(u, code, str(exc))
    results = [AlterResult(user=u, error_code=errors.get(u, (ErrorCode.NONE, None))[0],
                           error_message=errors.get(u, (ErrorCode.NONE, None))[1])
               for u in dict.fromkeys(users)]
    return AlterResponse(throttle_time_ms=0, results=results)


def alter_error_response(state: ServerState, ctx: RequestContext, body, code: int) -> object:
    users = dict.fromkeys([x.name for x in list(body.deletions) + list(body.upsertions)])
    return AlterResponse(throttle_time_ms=0, results=[AlterResult(user=u, error_code=code, error_message=None)
                                                      for u in users])
