"""kafkalog configs, like Kafka's kafka-configs.sh: client quotas, users' SCRAM
credentials, client-metrics subscriptions, topic configs and the brokers' configs.

Owns the command line and the output; the work is ``AdminClient``'s:

* ``--entity-type users|clients|ips`` (``--entity-name N`` or ``--entity-default``):
  quota keys (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
  ``controller_mutation_rate``; ``connection_creation_rate`` for IPs) through
  AlterClientQuotas / DescribeClientQuotas (KIP-546), and for a user also
  ``SCRAM-SHA-256=[iterations=8192,password=S]`` / ``SCRAM-SHA-512=[password=S]``
  credentials (DescribeUserScramCredentials / AlterUserScramCredentials, KIP-554; the
  password is salted here and never sent, printed or logged). ``--describe`` prints
  Kafka's lines: "Quota configs for client-id 'etl' are producer_byte_rate=1048576.0",
  "Quota configs for the default user-principal are ...", "SCRAM credential configs for
  user-principal 'U' are SCRAM-SHA-256=iterations=8192".
* ``--entity-type client-metrics --entity-name SUB``: a KIP-714 subscription (``metrics``,
  ``interval.ms``, ``match``), ``topics --entity-name T``, ``brokers --entity-name ID |
  --entity-default``, ``groups --entity-name G`` (Kafka 4's per-group configs:
  ``share.auto.offset.reset``, ``share.record.lock.duration.ms``, ...; the group need not
  exist): IncrementalAlterConfigs / DescribeConfigs; ``--describe`` prints "Dynamic configs
  for topic T are:" and one "  key=value" line per override (for a group, the keys the group
  sets).

``--alter`` takes ``--add-config`` (Kafka's syntax: comma-separated ``KEY=VALUE``, a
value in brackets may hold commas) and ``--delete-config`` (keys). The broker comes from
--bootstrap-server, else bootstrap.servers of --command-config (a properties file of
admin client settings, e.g. security.protocol and sasl.* to reach a SASL listener), else
localhost:9092. Errors are one line, ``kafkalog configs: error: <Kafka error name>:
<message>``, exit status 1.

Thread-safety: a command runs on the main thread.
"""

from __future__ import annotations

import argparse
import re

from .common import CliError, admin_config, report_unreachable

NAME = "configs"
SUMMARY = ("quotas, SCRAM credentials, client-metrics subscriptions, topic, broker and group configs "
           "(like kafka-configs.sh)")

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--alter", action="store_true", help="add or delete configs")
    actions.add_argument("--describe", action="store_true", help="list the configs")
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", metavar="HOST:PORT",
                        help="the broker to connect to (default: bootstrap.servers of --command-config, "
                             "else localhost:9092)")
    parser.add_argument("--entity-type", required=True, metavar="TYPE",
                        help="users, clients, ips (quotas; users also SCRAM credentials), topics, brokers, "
                             "client-metrics, groups")
    parser.add_argument("--entity-name", metavar="NAME", help="the user, client id, IP, topic, broker, "
                                                               "subscription or group")
    parser.add_argument("--entity-default", action="store_true",
                        help="the default entity of the type (quotas: <default>; brokers: the cluster default)")
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


QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
              "connection_creation_rate")
# --entity-type (Kafka's, plural; the singular is accepted) -> (quota entity type, what messages call it)
QUOTA_ENTITIES = {"users": ("user", "user-principal"), "clients": ("client-id", "client-id"),
                  "ips": ("ip", "ip")}
ALIASES = {"user": "users", "client": "clients", "ip": "ips", "topic": "topics", "broker": "brokers",
           "client-metric": "client-metrics", "group": "groups"}


def _deletions(args) -> list[str]:
    return [n.strip() for n in (args.delete_config or "").split(",") if n.strip()]


def run(args) -> int:
    from broker.client.admin import AdminClient
    from broker.client.errors import KafkaError

    entity_type = ALIASES.get(args.entity_type, args.entity_type)
    if entity_type not in (*QUOTA_ENTITIES, "topics", "brokers", "client-metrics", "groups"):
        raise CliError(f"--entity-type {args.entity_type}: one of users, clients, ips, topics, brokers, "
                       "client-metrics, groups")
    if not args.alter and (args.add_config or args.delete_config):
        raise CliError("--add-config and --delete-config need --alter")
    if args.alter and not args.add_config and not args.delete_config:
        raise CliError("--alter needs --add-config or --delete-config")
    if args.entity_name and args.entity_default:
        raise CliError("--entity-name and --entity-default are exclusive")
    config = admin_config(args, "kafkalog-configs")
    try:
        with report_unreachable(NAME, "default.api.timeout.ms", config["default.api.timeout.ms"]), \
                AdminClient(config) as admin:
            if entity_type in QUOTA_ENTITIES:
                return _quotas(admin, args, entity_type)
            if entity_type == "client-metrics":
                return _resource_configs(admin, args, 16, "client-metric")
            if entity_type == "topics":
                return _resource_configs(admin, args, 2, "topic")
            if entity_type == "groups":
                return _resource_configs(admin, args, 32, "group")
            return _resource_configs(admin, args, 4, "broker")
    except KafkaError as exc:
        raise CliError(str(exc)) from None


def _quotas(admin, args, entity_type: str) -> int:
    """users / clients / ips: quota keys (AlterClientQuotas), and for users the SCRAM
    credentials too, in one --add-config as kafka-configs.sh takes them."""
    from broker.client.admin_quotas import MATCH_ANY, MATCH_DEFAULT, MATCH_EXACT
    from broker.client.admin_scram import ScramCredentialDeletion

    kind, label = QUOTA_ENTITIES[entity_type]
    name = None if args.entity_default else args.entity_name
    if args.alter:
        if name is None and not args.entity_default:
            raise CliError("--alter needs --entity-name or --entity-default")
        quotas: dict[str, float | None] = {}
        ups, dels = [], []
        for key, value in split_config_list(args.add_config or ""):
            if key in SCRAM_MECHANISMS and kind == "user" and name is not None:
                ups.append(scram_upsertion(name, key, value))
            elif key in QUOTA_KEYS:
                try:
                    quotas[key] = float(value)
                except ValueError:
                    raise CliError(f"{key} takes a number, not {value!r}") from None
            else:
                raise CliError(f"unknown config {key!r} for {entity_type} (quotas: {', '.join(QUOTA_KEYS)}"
                               + (", SCRAM-SHA-256, SCRAM-SHA-512" if kind == "user" else "") + ")")
        for key in _deletions(args):
            if key in SCRAM_MECHANISMS and kind == "user" and name is not None:
                dels.append(ScramCredentialDeletion(name, key))
            elif key in QUOTA_KEYS:
                quotas[key] = None
            else:
                raise CliError(f"unknown config {key!r} for {entity_type}")
        if ups or dels:
            admin.alter_user_scram_credentials(ups, dels).all()
        if quotas:
            for _, error in admin.alter_client_quotas([({kind: name}, quotas)]):
                if error is not None:
                    raise error
        print(f"Completed updating default config for {entity_type} in the cluster." if name is None
              else f"Completed updating config for {entity_type[:-1]} {name}.")
        return 0
    component = (kind, MATCH_DEFAULT, None) if args.entity_default else \
        (kind, MATCH_EXACT, name) if name else (kind, MATCH_ANY, None)
    for entity, values in admin.describe_client_quotas([component], strict=True):
        who = entity.get(kind)
        text = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
        print(f"Quota configs for the default {label} are {text}" if who is None
              else f"Quota configs for {label} '{who}' are {text}")
    if kind == "user" and not args.entity_default:
        users = [name] if name else None
        for user, result in admin.describe_user_scram_credentials(users).items():
            if result.error is not None:
                if name:
                    continue  # a user with quotas and no credentials
                raise result.error
            mechs = ", ".join(f"{m}=iterations={i}" for m, i in sorted(result.value.items()))
            print(f"SCRAM credential configs for user-principal '{user}' are {mechs}")
    return 0


def _resource_configs(admin, args, resource_type: int, label: str) -> int:
    """topics, brokers, client-metrics, groups: IncrementalAlterConfigs / DescribeConfigs."""
    from broker.client.admin import AlterConfigOp, AlterConfigOpType, ConfigResource, ConfigResourceType

    name = "" if args.entity_default else (args.entity_name or "")
    if not name and label != "broker":
        raise CliError(f"--entity-type {label}s needs --entity-name")
    resource = ConfigResource(ConfigResourceType(resource_type), name)
    if args.alter:
        ops = [AlterConfigOp(k, v, AlterConfigOpType.SET) for k, v in split_config_list(args.add_config or "")]
        ops += [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in _deletions(args)]
        admin.incremental_alter_configs({resource: ops}).all()
        print(f"Completed updating config for {label} {name or '<default>'}.")
        return 0
    result = admin.describe_configs([resource])[resource]
    if result.error is not None:
        raise result.error
    print(f"Dynamic configs for {label} {name or '<default>'} are:")
    entries = result.value.values() if isinstance(result.value, dict) else result.value
    for entry in sorted(entries, key=lambda e: e.name):
        if label == "broker" and entry.source not in (1, 2, 3):  # only dynamic ones, as kafka-configs.sh
            continue
        if label in ("topic", "group") and entry.is_default:
            continue
        if label == "group" and entry.source != 8:  # GROUP_CONFIG: the group's own overrides
            continue
        print(f"  {entry.name}={'<hidden>' if entry.is_sensitive else entry.value}")
    return 0
