"""kafkalog acls, like Kafka's kafka-acls.sh: add, remove and list the ACLs of the broker's
authorizer (``authorizer.class.name``) through the admin client's CreateAcls, DeleteAcls
and DescribeAcls.

Owns the command line and the output; the work is ``AdminClient.create_acls`` /
``delete_acls`` / ``describe_acls`` (model: ``broker.client.admin_acls``). The options are
kafka-acls.sh's (AclCommand):

* one action: ``--add``, ``--remove`` or ``--list``;
* resources: ``--topic T``, ``--group G``, ``--transactional-id I`` (each repeatable),
  ``--cluster``; ``--resource-pattern-type literal|prefixed`` (default literal; ``any``
  and ``match`` only for --list / --remove; ``--cluster`` only with literal);
* entries: ``--allow-principal`` / ``--deny-principal`` (``Type:name``, repeatable),
  ``--allow-host`` / ``--deny-host`` (default ``*`` once a principal is given),
  ``--operation`` (repeatable; Kafka's names Read, Write, Create, Delete, Alter, Describe,
  ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens,
  DescribeTokens, TwoPhaseCommit, All (the default); READ / describe_configs too): every
  principal x host x operation of each resource; an operation the resource type does
  not support is refused ("ResourceType TOPIC only supports operations ...");
* ``--producer``: WRITE, DESCRIBE, CREATE on the topics, WRITE, DESCRIBE on the
  transactional ids, with ``--idempotent`` IDEMPOTENT_WRITE on the cluster;
  ``--consumer``: READ, DESCRIBE on the topics, READ on the groups (both: the union);
  neither takes --operation or --deny-*;
* ``--list`` shows the ACLs of the resources given (all ACLs without one), ``--principal
  P`` (repeatable) only the ACLs of those principals;
* ``--remove`` without principals removes every ACL of the resources; it asks "Are you
  sure ...? (y/n)" on stdout and reads the answer from stdin (anything but y/Y keeps the
  ACLs), unless ``--force``. Where stdin is not a terminal and gives no answer (end of
  input), the command fails asking for ``--force``.

Output is kafka-acls.sh's: "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC,
name=t, patternType=LITERAL)`: " then one tab-indented "(principal=User:alice, host=*,
operation=READ, permissionType=ALLOW)" line per entry; after --add and --remove the
current ACLs of the resources, "Current ACLs for resource `...`: " (resources and entries
sorted, where Kafka prints them in hash order). The broker comes from --bootstrap-server,
else bootstrap.servers of --command-config (admin client settings: security.protocol,
sasl.* ...), else localhost:9092. Errors (bad option combinations, the broker's refusal
such as SECURITY_DISABLED or CLUSTER_AUTHORIZATION_FAILED) are one line, ``kafkalog acls:
error: ...``, exit status 1.

Thread-safety: a command runs on the main thread.
"""

from __future__ import annotations

import argparse
import re
import sys

from .common import CliError, admin_config, report_unreachable

NAME = "acls"
SUMMARY = "add, remove and list ACLs of the broker's authorizer (like kafka-acls.sh)"

PATTERN_TYPES = ("literal", "prefixed", "any", "match")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", metavar="HOST:PORT",
                        help="the broker to connect to (default: bootstrap.servers of --command-config, "
                             "else localhost:9092)")
    parser.add_argument("--command-config", metavar="FILE",
                        help="properties file of admin client settings (security.protocol, sasl.* ...)")
    parser.add_argument("--add", action="store_true", help="add the ACLs")
    parser.add_argument("--remove", action="store_true", help="remove the ACLs (every ACL of the resources "
                                                              "when no principal is given)")
    parser.add_argument("--list", action="store_true", help="list the ACLs of the resources (of every "
                                                            "resource when none is given)")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic (repeatable)")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP",
                        help="a consumer group (repeatable)")
    parser.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                        help="a transactional id (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument("--resource-pattern-type", default="literal", metavar="TYPE",
                        help="literal (default) or prefixed; any or match for --list / --remove")
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="e.g. User:alice (repeatable)")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="e.g. User:mallory (repeatable)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="host of the allow entries (repeatable; default *)")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                        help="host of the deny entries (repeatable; default *)")
    parser.add_argument("--operation", action="append", default=[], metavar="OP",
                        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                             "AlterConfigs, IdempotentWrite, All (default; repeatable)")
    parser.add_argument("--principal", action="append", default=[], metavar="PRINCIPAL",
                        help="with --list: only the ACLs of this principal (repeatable)")
    parser.add_argument("--producer", action="store_true",
                        help="the producer's ACLs: WRITE, DESCRIBE, CREATE on the topics (and WRITE, DESCRIBE "
                             "on --transactional-id)")
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    parser.add_argument("--consumer", action="store_true",
                        help="the consumer's ACLs: READ, DESCRIBE on the topics, READ on the groups")
    parser.add_argument("--force", action="store_true", help="remove without asking for confirmation")


# --- parsing options into Kafka's values ---

def parse_operation(name: str):
    """Kafka's ``SecurityUtils.operation``: ``DescribeConfigs``, ``describe_configs`` or
    ``DESCRIBE_CONFIGS``."""
    from broker.client.admin_acls import AclOperation

    text = name.strip()
    candidates = [text.upper(), re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text).upper()]
    for c in candidates:
        op = AclOperation.__members__.get(c)
        if op is not None and op != AclOperation.UNKNOWN:
            return op
    names = ", ".join(_camel(o.name) for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY))
    raise CliError(f"Unknown operation {name!r} (one of {names})")


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def parse_principal(text: str) -> str:
    """Kafka's ``SecurityUtils.parseKafkaPrincipal``: ``Type:name``."""
    text = text.strip()
    kind, sep, name = text.partition(":")
    if not sep or not kind:
        raise CliError(f"expected a string in format principalType:principalName but got {text!r}")
    return text


def _pattern_type(args):
    from broker.client.admin_acls import PatternType

    value = args.resource_pattern_type.strip().lower()
    if value not in PATTERN_TYPES:
        raise CliError(f"--resource-pattern-type {args.resource_pattern_type!r}: one of {', '.join(PATTERN_TYPES)}")
    return PatternType[value.upper()]


def check_args(args) -> None:
    """AclCommandOptions.checkArgs: Kafka's rules and messages."""
    if sum((args.add, args.remove, args.list)) != 1:
        raise CliError("Command must include exactly one action: --list, --add, --remove.")
    _invalid_with(args, "list", ("producer", "consumer", "allow_host", "allow_principal", "deny_host",
                                 "deny_principal"))
    for opt in ("producer", "consumer"):
        _invalid_with(args, opt, ("operation", "deny_principal", "deny_host"))
    if args.principal and not args.list:
        raise CliError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise CliError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise CliError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group
                          or (not args.producer and (args.cluster or args.transactional_id))):
        raise CliError("With --consumer you must specify a --topic and a --group and no --cluster or "
                       "--transactional-id option should be specified.")


def _invalid_with(args, used: str, others: tuple[str, ...]) -> None:
    if not getattr(args, used):
        return
    for other in others:
        if getattr(args, other):
            raise CliError(f'Option "--{used.replace("_", "-")}" can\'t be used with option '
                           f'"--{other.replace("_", "-")}"')


def resource_filters(args, pattern_type, *, die_if_none: bool = True) -> list:
    """AclCommand.getResourceFilter: the resources named on the command line."""
    from broker.client.admin_acls import CLUSTER_NAME, PatternType, ResourcePatternFilter, ResourceType

    out = [ResourcePatternFilter(ResourceType.TOPIC, t.strip(), pattern_type) for t in args.topic]
    if pattern_type == PatternType.LITERAL and (args.cluster or args.idempotent):
        out.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    out += [ResourcePatternFilter(ResourceType.GROUP, g.strip(), pattern_type) for g in args.group]
    out += [ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, i, pattern_type) for i in args.transactional_id]
    if not out and die_if_none:
        raise CliError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
                       "or --transactional-id <id>")
    return list(dict.fromkeys(out))


def _entries(args, operations) -> set:
    """AclCommand.getAcl: every principal x operation x host, ALLOW and DENY."""
    from broker.client.admin_acls import AccessControlEntry, AclPermissionType

    def hosts(given: list[str], principals: list[str]) -> list[str]:
        if given:
            return [h.strip() for h in given]
        return ["*"] if principals else []

    out = set()
    for principals, given, perm in ((args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
                                    (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for principal in (parse_principal(p) for p in principals):
            for host in hosts(given, principals):
                for op in operations:
                    out.add(AccessControlEntry(principal, host, op, perm))
    return out


def filters_to_entries(args, pattern_type) -> dict:
    """AclCommand.getResourceFilterToAcls: resource filter -> the entries for it."""
    from broker.client.admin_acls import AclOperation, ResourceType

    out: dict = {}
    if not args.producer and not args.consumer:
        ops = {parse_operation(o) for o in (args.operation or ["All"])}
        entries = _entries(args, ops)
        out = {f: set(entries) for f in resource_filters(args, pattern_type)}
    if args.producer:
        filters = resource_filters(args, pattern_type)
        topic_entries = _entries(args, {AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE})
        txn_entries = _entries(args, {AclOperation.WRITE, AclOperation.DESCRIBE})
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                out[f] = set(topic_entries)
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                out[f] = set(txn_entries)
            elif f.resource_type == ResourceType.CLUSTER and args.idempotent:
                out[f] = _entries(args, {AclOperation.IDEMPOTENT_WRITE})
    if args.consumer:
        for f in resource_filters(args, pattern_type):
            if f.resource_type == ResourceType.TOPIC:
                out[f] = out.get(f, set()) | _entries(args, {AclOperation.READ, AclOperation.DESCRIBE})
            elif f.resource_type == ResourceType.GROUP:
                out[f] = out.get(f, set()) | _entries(args, {AclOperation.READ})
    _validate_operations(out)
    return out


def _validate_operations(filter_to_entries: dict) -> None:
    from broker.client.admin_acls import SUPPORTED_OPERATIONS, AclOperation

    for f, entries in filter_to_entries.items():
        valid = (*SUPPORTED_OPERATIONS.get(f.resource_type, ()), AclOperation.ALL)
        if any(e.operation not in valid for e in entries):
            raise CliError(f"ResourceType {f.resource_type.name} only supports operations "
                           f"{','.join(o.name for o in valid)}")


# --- output ---

def _entry_key(e) -> tuple:
    return (e.principal, e.host, int(e.operation), int(e.permission_type))


def _block(title: str, entries) -> str:
    """Kafka's ``s"$title: $Newline ${acls.map("\\t" + _).mkString(Newline)} $Newline"``."""
    lines = "\n".join(f"\t{e}" for e in sorted(entries, key=_entry_key))
    return f"{title}: \n {lines} \n"


def _pattern_key(p) -> tuple:
    return (int(p.resource_type), p.name, int(p.pattern_type))


def _confirm(message: str, force: bool) -> bool:
    if force:
        return True
    print(message, flush=True)
    line = sys.stdin.readline()
    if not line:
        raise CliError("no answer on stdin to the confirmation question: use --force to remove ACLs "
                       "without confirmation")
    return line.strip().lower() == "y"


def run(args) -> int:
    with report_unreachable(NAME, "default.api.timeout.ms",
                            lambda: admin_config(args, NAME)["default.api.timeout.ms"]):
        return _run(args)


def _run(args) -> int:
    from broker.client.admin import AdminClient
    from broker.client.errors import KafkaError

    check_args(args)
    pattern_type = _pattern_type(args)
    try:
        if args.add:
            from broker.client.admin_acls import PatternType, ResourcePattern

            if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
                raise CliError(f"A '--resource-pattern-type' value of '{pattern_type.name}' is not valid when "
                               "adding acls.")
            to_add = {ResourcePattern(f.resource_type, f.name, f.pattern_type): entries
                      for f, entries in filters_to_entries(args, pattern_type).items()}
            if any(not entries for entries in to_add.values()):
                raise CliError("You must specify one of: --allow-principal, --deny-principal when trying to add "
                               "ACLs.")
            with AdminClient(admin_config(args, "kafkalog-acls")) as admin:
                _add(admin, to_add)
                _list(admin, args, pattern_type)
            return 0
        if args.remove:
            plan = filters_to_entries(args, pattern_type)
            with AdminClient(admin_config(args, "kafkalog-acls")) as admin:
                _remove(admin, plan, args.force)
                _list(admin, args, pattern_type)
            return 0
        with AdminClient(admin_config(args, "kafkalog-acls")) as admin:
            _list(admin, args, pattern_type, principals=[parse_principal(p) for p in args.principal])
        return 0
    except KafkaError as exc:
        raise CliError(str(exc)) from None


def _add(admin, to_add: dict) -> None:
    from broker.client.admin_acls import AclBinding

    for pattern in sorted(to_add, key=_pattern_key):
        entries = to_add[pattern]
        print(_block(f"Adding ACLs for resource `{pattern}`", entries))
        admin.create_acls([AclBinding(pattern, e) for e in sorted(entries, key=_entry_key)]).all()


def _remove(admin, plan: dict, force: bool) -> None:
    from broker.client.admin_acls import AccessControlEntryFilter, AclBindingFilter

    for flt in sorted(plan, key=_pattern_key):
        entries = plan[flt]
        if not entries:
            if _confirm(f"Are you sure you want to delete all ACLs for resource filter `{flt}`? (y/n)", force):
                admin.delete_acls([AclBindingFilter(flt, AccessControlEntryFilter.ANY)]).all()
        else:
            question = _block("Are you sure you want to remove ACLs", entries)
            if _confirm(f"{question} from resource filter `{flt}`? (y/n)", force):
                admin.delete_acls([AclBindingFilter(flt, e.to_filter())
                                   for e in sorted(entries, key=_entry_key)]).all()


def _list(admin, args, pattern_type, principals: list[str] | None = None) -> None:
    """AclCommand.listAcls: the current ACLs of the resources given (of all without one)."""
    from broker.client.admin_acls import AccessControlEntryFilter, AclBindingFilter

    filters = resource_filters(args, pattern_type, die_if_none=False)
    if filters:
        bindings = [b for f in filters for b in admin.describe_acls(AclBindingFilter(f, AccessControlEntryFilter.ANY))]
    else:
        bindings = admin.describe_acls(AclBindingFilter.ANY)
    by_pattern: dict = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, set()).add(b.entry)
    if not principals:
        _print_acls(by_pattern)
        return
    for principal in dict.fromkeys(principals):
        print(f"ACLs for principal `{principal}`")
        _print_acls({p: {e for e in entries if e.principal == principal} for p, entries in by_pattern.items()})


def _print_acls(by_pattern: dict) -> None:
    for pattern in sorted(by_pattern, key=_pattern_key):
        if by_pattern[pattern]:
            print(_block(f"Current ACLs for resource `{pattern}`", by_pattern[pattern]))


