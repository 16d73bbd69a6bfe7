"""kafkalog configs: SCRAM credentials of users, like Kafka's kafka-configs.sh
``--entity-type users`` (topic configs: ``kafkalog topics --alter --config``).

Owns the command line and the output; the work is ``AdminClient``'s
(DescribeUserScramCredentials / AlterUserScramCredentials, KIP-554):

  --alter --entity-type users --entity-name U
          --add-config 'SCRAM-SHA-256=[iterations=8192,password=S],SCRAM-SHA-512=[password=S]'
          --delete-config 'SCRAM-SHA-512'           prints "Completed updating config for user U."
  --describe --entity-type users [--entity-name U]  prints, per user,
          "SCRAM credential configs for user-principal 'U' are SCRAM-SHA-256=iterations=8192"

``--add-config`` is Kafka's syntax: comma-separated ``KEY=VALUE``, a value in brackets may
hold commas; a SCRAM value is ``[password=...]`` with an optional ``iterations=N``
(default 4096). The password is salted here and never sent, printed or logged. The broker
comes from --bootstrap-server, else bootstrap.servers of --command-config (a properties
file of admin client settings, e.g. security.protocol and sasl.* to reach a SASL listener),
else localhost:9092. Errors are one line, ``kafkalog configs: error: <Kafka error name>:
<message>``, exit status 1.

Thread-safety: a command runs on the main thread.
"""

from __future__ import annotations

import argparse
import re

from .common import CliError

NAME = "configs"
SUMMARY = "add, delete and describe users' SCRAM credentials (like kafka-configs.sh)"

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_API_TIMEOUT_MS = 30000
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--alter", action="store_true", help="add or delete credentials")
    actions.add_argument("--describe", action="store_true", help="list the users' SCRAM mechanisms")
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", metavar="HOST:PORT",
                        help="the broker to connect to (default: bootstrap.servers of --command-config, "
                             "else localhost:9092)")
    parser.add_argument("--entity-type", required=True, metavar="TYPE", help="users (the only type here)")
    parser.add_argument("--entity-name", metavar="NAME", help="the user")
    parser.add_argument("--add-config", metavar="K=V,...",
                        help="e.g. 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'")
    parser.add_argument("--delete-config", metavar="K,...", help="e.g. 'SCRAM-SHA-512'")
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of admin client settings (security.protocol, sasl.* ...)")


def split_config_list(text: str) -> list[tuple[str, str]]:
    """Kafka's ``--add-config`` list: ``k=v`` items split on commas outside brackets."""
    items, depth, current = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise CliError(f"unbalanced ']' in {'--add-config'}")
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    if depth:
        raise CliError("unbalanced '[' in --add-config")
    items.append(current)
    out = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise CliError(f"--add-config entries are KEY=VALUE, not {key.strip()!r}")
        out.append((key.strip(), value.strip()))
    return out


def scram_upsertion(user: str, mechanism: str, value: str):
    from broker.client.admin_scram import ScramCredentialUpsertion

    if mechanism not in SCRAM_MECHANISMS:
        raise CliError(f"unknown config {mechanism!r} for users (SCRAM-SHA-256 or SCRAM-SHA-512)")
    m = re.fullmatch(r"\[(.*)\]", value, re.S)
    inner = m.group(1) if m else value
    fields = {}
    for part in inner.split(","):
        k, eq, v = part.partition("=")
        if not eq:
            raise CliError(f"{mechanism} needs [password=...] (optionally iterations=N)")
        fields[k.strip()] = v
    if "password" not in fields:
        raise CliError(f"{mechanism} needs a password: {mechanism}=[password=...]")
    unknown = set(fields) - {"password", "iterations"}
    if unknown:
        raise CliError(f"unknown {mechanism} field(s) {sorted(unknown)} (password, iterations)")
    try:
        iterations = int(fields.get("iterations", 4096))
    except ValueError:
        raise CliError(f"{mechanism} iterations must be a number") from None
    return ScramCredentialUpsertion(user, mechanism, fields["password"], iterations)


def _admin_config(args) -> dict:
    from broker.config import load_properties

    config: dict = dict(load_properties(args.command_config)) if args.command_config else {}
    if args.bootstrap_server:
        config["bootstrap.servers"] = args.bootstrap_server
    config.setdefault("bootstrap.servers", DEFAULT_BOOTSTRAP)
    config.setdefault("default.api.timeout.ms", DEFAULT_API_TIMEOUT_MS)
    config.setdefault("client.id", "kafkalog-configs")
    return config


def run(args) -> int:
    from broker.client.admin import AdminClient
    from broker.client.admin_scram import ScramCredentialDeletion
    from broker.client.errors import KafkaError

    if args.entity_type not in ("users", "user"):
        raise CliError(f"--entity-type {args.entity_type} is not supported here: users (SCRAM credentials); "
                       "topic configs: kafkalog topics --alter --config")
    if args.alter:
        if not args.entity_name:
            raise CliError("--alter needs --entity-name")
        if not args.add_config and not args.delete_config:
            raise CliError("--alter needs --add-config or --delete-config")
        ups = [scram_upsertion(args.entity_name, k, v) for k, v in split_config_list(args.add_config or "")]
        dels = []
        for name in (n.strip() for n in (args.delete_config or "").split(",")):
            if not name:
                continue
            if name not in SCRAM_MECHANISMS:
                raise CliError(f"unknown config {name!r} for users (SCRAM-SHA-256 or SCRAM-SHA-512)")
            dels.append(ScramCredentialDeletion(args.entity_name, name))
    elif args.add_config or args.delete_config:
        raise CliError("--add-config and --delete-config need --alter")
    try:
        with AdminClient(_admin_config(args)) as admin:
            if args.alter:
                admin.alter_user_scram_credentials(ups, dels).all()
                print(f"Completed updating config for user {args.entity_name}.")
                return 0
            users = [args.entity_name] if args.entity_name else None
            for user, result in admin.describe_user_scram_credentials(users).items():
                if result.error is not None:
                    raise result.error
                mechs = ", ".join(f"{m}=iterations={i}" for m, i in sorted(result.value.items()))
                print(f"SCRAM credential configs for user-principal '{user}' are {mechs}")
    except KafkaError as exc:
        raise CliError(str(exc)) from None
    return 0
