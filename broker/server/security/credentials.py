"""The broker's SCRAM credential store (Kafka keeps them as ``UserScramCredentialRecord``s
in its metadata log; a single node keeps them in a file).

Owns ``CredentialStore``: user -> mechanism -> ``ScramCredential`` (salt, stored key,
server key, iterations: never the password, nor the salted password), read by the SCRAM
authenticator, changed by AlterUserScramCredentials (KIP-554) and listed by
DescribeUserScramCredentials.

File ``kafkalog-scram-credentials.json`` in every online log directory, mode 0600, written
atomically (temp file, fsync, rename, fsync dir) on every change::

    {"version": 1, "generation": 7,
     "users": {"alice": {"SCRAM-SHA-256": {"salt": "<base64>", "stored_key": "<base64>",
                                            "server_key": "<base64>", "iterations": 4096}}}}

``generation`` grows by one per change; at startup the copy with the highest generation
wins (a directory that was offline holds an older one). An unreadable copy refuses the
start (``KafkaStorageError``) rather than silently dropping users.

Thread-safety: reads take a snapshot of an immutable dict; ``alter`` holds a lock while it
validates, writes the file and swaps the dict.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from broker.log import files
from broker.log.errors import KafkaStorageError
from broker.protocol.scram import MAX_ITERATIONS, MECHANISMS, ScramCredential

log = logging.getLogger(__name__)

CREDENTIALS_FILE = "kafkalog-scram-credentials.json"
FILE_VERSION = 1


class Upsertion(NamedTuple):
    user: str
    mechanism: str  # "SCRAM-SHA-256" / "SCRAM-SHA-512"
    credential: ScramCredential


class Deletion(NamedTuple):
    user: str
    mechanism: str


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class CredentialStore:
    """SCRAM credentials by user and mechanism (format and invariants in the module doc)."""

    def __init__(self, log_dirs: Iterable[Path], live_dirs: Callable[[], list[Path]] | None = None) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self._live_dirs = live_dirs or (lambda: self.log_dirs)
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._generation = 0

    def load(self) -> None:
        best: tuple[int, dict] | None = None
        for d in self.log_dirs:
            path = d / CREDENTIALS_FILE
            if not path.exists():
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if data.get("version") != FILE_VERSION:
                    raise ValueError(f"unknown version {data.get('version')!r}")
                generation = int(data["generation"])
                users = {
                    user: {mech: ScramCredential(base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                                                 base64.b64decode(c["server_key"]), int(c["iterations"]))
                           for mech, c in mechs.items() if mech in MECHANISMS}
                    for user, mechs in data["users"].items()}
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                log.error("unreadable SCRAM credential file %s: %s", path, exc)
                raise KafkaStorageError(f"unreadable SCRAM credential file {path}: {exc}") from exc
            if best is None or generation > best[0]:
                best = (generation, users)
        if best is not None:
            self._generation, self._users = best[0], {u: m for u, m in best[1].items() if m}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def describe(self, users: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """user -> mechanism -> iterations (all users when ``users`` is None; users without
        credentials are left out)."""
        snapshot = self._users
        names = sorted(snapshot) if users is None else users
        return {u: {m: c.iterations for m, c in snapshot[u].items()} for u in names if u in snapshot}

    def alter(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]) -> None:
        """Apply already-validated changes atomically (one file write); KafkaStorageError
        when no log directory could record them."""
        with self._lock:
            users = {u: dict(m) for u, m in self._users.items()}
            for d in deletions:
                users.get(d.user, {}).pop(d.mechanism, None)
            for u in upsertions:
                if not 4096 <= u.credential.iterations <= MAX_ITERATIONS:
                    raise ValueError(f"iterations {u.credential.iterations} out of range")
                users.setdefault(u.user, {})[u.mechanism] = u.credential
            users = {u: m for u, m in users.items() if m}
            self._write(self._generation + 1, users)
            self._generation += 1
            self._users = users

    def _write(self, generation: int, users: dict[str, dict[str, ScramCredential]]) -> None:
        data = json.dumps({
            "version": FILE_VERSION, "generation": generation,
            "users": {u: {m: {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                              "server_key": _b64(c.server_key), "iterations": c.iterations}
                          for m, c in sorted(mechs.items())}
                      for u, mechs in sorted(users.items())},
        }, indent=1).encode("ascii")
        written = 0
        for d in self._live_dirs():
            path = Path(d) / CREDENTIALS_FILE
            try:
                files.atomic_write(path, data)
                os.chmod(path, 0o600)
                written += 1
            except OSError as exc:
                log.error("could not write %s in %s: %s", CREDENTIALS_FILE, d, exc)
        if not written:
            raise KafkaStorageError("no log directory could record the SCRAM credentials")
