"""kafkalog schemas: list, describe, register, check and delete schemas of a Confluent-compatible
Schema Registry (this broker's with schema.registry.listeners, or any other), set
compatibility levels and modes, and export or import a whole registry.

Owns the command line and the output; the work is ``broker.client.registry``'s
(``SchemaRegistryClient``) and, for dumps, ``schemas_dump``'s. Exactly one action per run:

  --list      [--subject-prefix P] [--deleted]       one subject per line
  --versions  --subject S [--deleted]               one version per line
  --describe  --subject S [--version V|latest] [--deleted]  |  --id N
              "Subject: S<TAB>Version: V<TAB>Id: N<TAB>Guid: G<TAB>Type: AVRO" (by id:
              "Id: N<TAB>Guid: G<TAB>Type: T<TAB>Subjects: S:V,..."), then
              "References: name=subject:version,..." when it has any, then the schema
  --register  --subject S --schema-file F [--schema-type AVRO|PROTOBUF|JSON]
              [--reference NAME=SUBJECT:VERSION ...] [--normalize]   prints the id
  --check     --subject S --schema-file F [--version V] [--verbose] (and --schema-type,
              --reference, --normalize): "compatible", or "incompatible" and with
              --verbose the registry's messages, one a line; exit status 1 when
              incompatible. Without --version, against every version the subject's
              compatibility level names (what registering would check)
  --config    [--subject S] [--compatibility LEVEL | --delete]
              prints the level (a subject without its own: the global one), sets it
              or removes the subject's (global: back to the registry's default)
  --mode      [--subject S] [--set READWRITE|READONLY|READONLY_OVERRIDE|IMPORT [--force] | --delete]
  --delete    --subject S [--version V] [--permanent]   soft delete (--permanent: remove
              what was soft-deleted); prints the versions deleted
  --export    FILE (``-``: stdout)   the registry as ``_schemas`` records, in the format
              kafka-console-consumer --property print.key=true prints (``schemas_dump``)
  --import    FILE (``-``: stdin)    a dump (that format, or a Karapace v1 or v2 backup)
              replayed through the REST API in IMPORT mode: the same ids and versions,
              soft deletes, configs and modes; the global mode is restored afterwards.
              With --direct --bootstrap-server B: the records written as they are into
              the registry's topic (--kafkastore-topic, default _schemas) with the
              project's producer, for a broker whose registry is off (it loads them when
              started with it on; while it runs the topic is the registry's alone)

The registry is --schema-registry-url (comma-separated URLs tried in turn), else
``schema.registry.url`` of --command-config, else http://localhost:8081.
--command-config is a Java properties file of Schema Registry client settings:
``schema.registry.url``, ``basic.auth.user.info`` (``USER:PASSWORD``),
``basic.auth.credentials.source`` (USER_INFO, URL), ``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location``, ``ssl.key.password``, and any client key
prefixed ``schema.registry.`` (``schema.registry.request.timeout.ms``,
``schema.registry.max.retries`` ...); with --direct its other keys are the producer's.

Errors are one line, ``kafkalog schemas: error: <the registry's message> (HTTP 404, error
code 40401)``, exit status 1; an unreachable registry is named with the cause (``no schema
registry of http://127.0.0.1:1 reachable (connection refused); waited 3012 ms (max.retries
3)``).

Thread-safety: a command runs on the main thread.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .common import CliError, parse_key_value, report_unreachable

NAME = "schemas"
SUMMARY = "list, describe, register, check and delete schemas of a Schema Registry; export and import it"

DEFAULT_URL = "http://localhost:8081"
DEFAULT_TOPIC = "_schemas"
_ACTIONS = ("list", "versions", "describe", "register", "check", "config", "mode", "export", "import")
_SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")
_MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
_LEVELS = ("BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE")
# keys of --command-config that are the registry client's without the schema.registry. prefix
_UNPREFIXED = ("basic.auth.user.info", "basic.auth.credentials.source", "ssl.ca.location",
               "ssl.certificate.location", "ssl.key.location", "ssl.key.password")
_PREFIX = "schema.registry."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_argument_group("actions (one per run)")
    actions.add_argument("--list", action="store_true", help="list the subjects")
    actions.add_argument("--versions", action="store_true", help="list the versions of --subject")
    actions.add_argument("--describe", action="store_true",
                         help="show a schema: of --subject (and --version) or of --id")
    actions.add_argument("--register", action="store_true",
                         help="register --schema-file under --subject; prints the id")
    actions.add_argument("--check", action="store_true",
                         help="test whether --schema-file is compatible with --subject (exit 1 when not)")
    actions.add_argument("--config", action="store_true",
                         help="show, set (--compatibility) or remove (--delete) a compatibility level")
    actions.add_argument("--mode", action="store_true", help="show, set (--set) or remove (--delete) a mode")
    actions.add_argument("--delete", action="store_true",
                         help="delete --subject or one --version of it (soft unless --permanent); "
                              "with --config / --mode: remove the setting")
    actions.add_argument("--export", metavar="FILE", help="write the registry's records to FILE (-: stdout)")
    actions.add_argument("--import", dest="import_", metavar="FILE",
                         help="load a dump (this tool's, kafka-console-consumer's of _schemas, Karapace "
                              "v1/v2) keeping ids; -: stdin")
    parser.add_argument("--schema-registry-url", metavar="URL",
                        help=f"the registry, comma-separated URLs tried in turn (default: schema.registry.url "
                             f"of --command-config, else {DEFAULT_URL})")
    parser.add_argument("--command-config", metavar="FILE",
                        help="Schema Registry client settings (Java properties: schema.registry.url, "
                             "basic.auth.user.info, ssl.ca.location, ...)")
    parser.add_argument("--subject", metavar="SUBJECT", help="the subject")
    parser.add_argument("--subject-prefix", metavar="PREFIX", help="with --list: only subjects starting with it")
    parser.add_argument("--deleted", action="store_true",
                        help="with --list, --versions, --describe: soft-deleted ones too")
    parser.add_argument("--version", metavar="V", help="a version number, or latest")
    parser.add_argument("--id", type=int, metavar="N", help="with --describe: the schema of this id")
    parser.add_argument("--schema-file", metavar="FILE", help="the schema text (Avro JSON, .proto, JSON Schema)")
    parser.add_argument("--schema-type", type=str.upper, choices=_SCHEMA_TYPES, metavar="TYPE",
                        help="AVRO (default), PROTOBUF or JSON")
    parser.add_argument("--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION",
                        help="a reference of the schema (repeatable)")
    parser.add_argument("--normalize", action="store_true", help="normalize the schema (--register, --check)")
    parser.add_argument("--verbose", action="store_true", help="with --check: the reasons it is incompatible")
    parser.add_argument("--compatibility", type=str.upper, choices=_LEVELS, metavar="LEVEL",
                        help="with --config: set this level (BACKWARD, FORWARD, FULL, NONE, *_TRANSITIVE)")
    parser.add_argument("--set", type=str.upper, choices=_MODES, metavar="MODE",
                        help="with --mode: set READWRITE, READONLY, READONLY_OVERRIDE or IMPORT")
    parser.add_argument("--force", action="store_true", help="with --mode --set IMPORT: even with schemas registered")
    parser.add_argument("--permanent", action="store_true", help="with --delete: a hard delete")
    parser.add_argument("--direct", action="store_true",
                        help="with --import: write the records into the broker's registry topic instead")
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap_server", metavar="HOST:PORT",
                        help="with --import --direct: the broker")
    parser.add_argument("--kafkastore-topic", default=DEFAULT_TOPIC, metavar="TOPIC",
                        help=f"with --import --direct: the registry's topic (default {DEFAULT_TOPIC})")


def _action(args) -> str:
    given = [a for a in _ACTIONS if getattr(args, "import_" if a == "import" else a) not in (None, False)]
    if len(given) > 1:
        raise CliError(f"only one of {', '.join('--' + a for a in given)} can be given")
    if given:
        return given[0]
    if args.delete:
        return "delete"
    raise CliError("one of --list, --versions, --describe, --register, --check, --config, --mode, --delete, "
                   "--export, --import is required")


def _check_options(args, action: str) -> None:
    def only(option: str, given: bool, allowed: tuple[str, ...]) -> None:
        if given and action not in allowed:
            raise CliError(f"{option} can only be used with {' or '.join('--' + a for a in allowed)}")

    if action in ("versions", "register", "check", "delete") and not args.subject:
        raise CliError(f"--subject is required with --{action}")
    if action in ("register", "check") and not args.schema_file:
        raise CliError(f"--schema-file is required with --{action}")
    if action == "describe" and (args.subject is None) == (args.id is None):
        raise CliError("--describe needs --subject (and --version) or --id")
    only("--subject", args.subject is not None,
         ("versions", "describe", "register", "check", "config", "mode", "delete"))
    only("--subject-prefix", args.subject_prefix is not None, ("list",))
    only("--deleted", args.deleted, ("list", "versions", "describe"))
    only("--version", args.version is not None, ("describe", "check", "delete"))
    only("--id", args.id is not None, ("describe",))
    only("--schema-file", args.schema_file is not None, ("register", "check"))
    only("--schema-type", args.schema_type is not None, ("register", "check"))
    only("--reference", bool(args.reference), ("register", "check"))
    only("--normalize", args.normalize, ("register", "check"))
    only("--verbose", args.verbose, ("check",))
    only("--compatibility", args.compatibility is not None, ("config",))
    only("--set", args.set is not None, ("mode",))
    only("--force", args.force, ("mode",))
    only("--permanent", args.permanent, ("delete",))
    only("--direct", args.direct, ("import",))
    only("--bootstrap-server", args.bootstrap_server is not None, ("import",))
    if args.id is not None and args.version is not None:
        raise CliError("--version goes with --subject, not --id")
    if args.force and args.set is None:
        raise CliError("--force goes with --mode --set")
    if action in ("config", "mode") and args.delete and (args.compatibility or args.set):
        raise CliError(f"--delete removes the {action} setting: it cannot be given with "
                       f"{'--compatibility' if action == 'config' else '--set'}")
    if args.bootstrap_server is not None and not args.direct:
        raise CliError("--bootstrap-server goes with --import --direct")
    if args.direct and not args.bootstrap_server:
        raise CliError("--direct needs --bootstrap-server (the broker whose registry topic is written)")
    if args.kafkastore_topic != DEFAULT_TOPIC and not args.direct:
        raise CliError("--kafkastore-topic goes with --import --direct")


def _version(text: str | None, *, allow_latest: bool = True) -> int | str | None:
    if text is None:
        return None
    if text == "latest" and allow_latest:
        return "latest"
    try:
        version = int(text)
    except ValueError:
        raise CliError(f"--version {text!r} is not a version number{' or latest' if allow_latest else ''}") from None
    if version < 1 and not (version == -1 and allow_latest):
        raise CliError(f"--version must be at least 1, not {version}")
    return "latest" if version == -1 else version


def _reference(item: str):
    from broker.schema.base import SchemaReference

    name, value = parse_key_value(item, "--reference")
    subject, sep, version = value.rpartition(":")
    if not sep or not subject:
        raise CliError(f"--reference {item!r} is not of the form NAME=SUBJECT:VERSION")
    try:
        number = int(version)
    except ValueError:
        raise CliError(f"--reference {item!r}: the version {version!r} is not a number") from None
    return SchemaReference(name, subject, number)


def client_config(args) -> tuple[dict[str, Any], dict[str, str]]:
    """The registry client's settings and the rest of --command-config (the producer's,
    for --direct)."""
    from broker.client.registry_http import CONFIG_KEYS
    from broker.config import load_properties

    props = dict(load_properties(args.command_config)) if args.command_config else {}
    conf: dict[str, Any] = {}
    rest: dict[str, str] = {}
    for key, value in props.items():
        if key.startswith(_PREFIX):
            bare = key[len(_PREFIX):]
            if bare not in CONFIG_KEYS:
                raise CliError(f"{key} (in {args.command_config}) is not a Schema Registry client setting; "
                               f"they are {', '.join(sorted(_PREFIX + k for k in CONFIG_KEYS))}")
            conf[bare] = value
        elif key in _UNPREFIXED:
            conf.setdefault(key, value)
        else:
            rest[key] = value
    if args.schema_registry_url:
        conf["url"] = args.schema_registry_url
    conf.setdefault("url", DEFAULT_URL)
    return conf, rest


def _schema(args):
    from broker.client.registry import Schema

    path = Path(args.schema_file)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{args.schema_file}: not UTF-8 text") from None
    if not text.strip():
        raise CliError(f"{args.schema_file} is empty")
    kind = args.schema_type or _guess_type(path, text)
    return Schema(text, kind, tuple(_reference(r) for r in args.reference))


def _guess_type(path: Path, text: str) -> str:
    """The type a file's name says (``.proto``, ``.avsc``, ``.json`` with ``$schema``);
    AVRO otherwise, as the registry defaults it."""
    suffix = path.suffix.lower()
    if suffix == ".proto":
        return "PROTOBUF"
    if suffix == ".json" and '"$schema"' in text:
        return "JSON"
    return "AVRO"


def run(args) -> int:
    from broker.client.registry import SchemaRegistryClient, SchemaRegistryError

    action = _action(args)
    _check_options(args, action)
    if action == "import" and args.direct:
        return _import_direct(args)
    conf, _ = client_config(args)
    try:
        with SchemaRegistryClient(conf) as client:
            return _run(client, args, action)
    except SchemaRegistryError as exc:
        raise CliError(str(exc)) from None


def _run(client, args, action: str) -> int:
    out = sys.stdout
    if action == "list":
        for subject in client.get_subjects(args.subject_prefix, deleted=args.deleted):
            out.write(f"{subject}\n")
    elif action == "versions":
        for version in client.get_versions(args.subject, deleted=args.deleted):
            out.write(f"{version}\n")
    elif action == "describe":
        _describe(client, args)
    elif action == "register":
        out.write(f"{client.register_schema(args.subject, _schema(args), args.normalize)}\n")
    elif action == "check":
        version = _version(args.version)
        result = client.test_compatibility(args.subject, _schema(args), version, args.normalize, args.verbose)
        out.write("compatible\n" if result.is_compatible else "incompatible\n")
        if args.verbose:
            for message in result.messages:
                out.write(f"{message}\n")
        return 0 if result.is_compatible else 1
    elif action == "config":
        _config(client, args)
    elif action == "mode":
        _mode(client, args)
    elif action == "delete":
        _delete(client, args)
    elif action == "export":
        _export(client, args)
    else:
        _import(client, args)
    return 0


def _references_text(references) -> str:
    return ",".join(f"{r.name}={r.subject}:{r.version}" for r in references)


def _describe(client, args) -> None:
    out = sys.stdout
    if args.id is not None:
        reg = client.get_schema(args.id)
        pairs = client.get_schema_versions(args.id)
        out.write(f"Id: {args.id}\tGuid: {reg.guid or ''}\tType: {reg.schema_type}\t"
                  f"Subjects: {','.join(f'{s}:{v}' for s, v in pairs)}\n")
    else:
        version = _version(args.version) or "latest"
        reg = client.get_version(args.subject, version, deleted=args.deleted)
        out.write(f"Subject: {reg.subject}\tVersion: {reg.version}\tId: {reg.id}\tGuid: {reg.guid or ''}\t"
                  f"Type: {reg.schema_type}\n")
    if reg.references:
        out.write(f"References: {_references_text(reg.references)}\n")
    out.write(reg.schema if reg.schema.endswith("\n") else reg.schema + "\n")


def _config(client, args) -> None:
    subject = args.subject
    where = f"subject {subject}" if subject else "global"
    if args.delete:
        client.delete_config(subject)
        print(f"Removed the {where} compatibility level." if subject else
              "Removed the global compatibility level (back to the registry's default).")
    elif args.compatibility:
        level = client.set_compatibility(subject, args.compatibility)
        print(f"Compatibility level of {where} set to {level}." if subject else
              f"Global compatibility level set to {level}.")
    else:
        print(client.get_compatibility(subject))


def _mode(client, args) -> None:
    subject = args.subject
    if args.delete:
        client.delete_mode(subject)
        print(f"Removed the mode of subject {subject}." if subject else
              "Removed the global mode (back to READWRITE).")
    elif args.set:
        mode = client.set_mode(args.set, subject, force=args.force)
        print(f"Mode of subject {subject} set to {mode}." if subject else f"Global mode set to {mode}.")
    else:
        print(client.get_mode(subject))


def _delete(client, args) -> None:
    how = "permanently " if args.permanent else ""
    if args.version is not None:
        version = _version(args.version)
        deleted = client.delete_version(args.subject, version, permanent=args.permanent)
        print(f"Deleted {how}version {deleted} of subject {args.subject}.")
    else:
        versions = client.delete_subject(args.subject, permanent=args.permanent)
        print(f"Deleted {how}subject {args.subject} (versions {','.join(map(str, versions))}).")


def _export(client, args) -> None:
    from .schemas_dump import export_state, write_console

    state = export_state(client)
    records = state.records()
    if args.export == "-":
        write_console(records, sys.stdout)
        print(f"kafkalog {NAME}: exported {state.summary()}", file=sys.stderr)
        return
    with open(args.export, "w", encoding="utf-8", newline="\n") as out:
        write_console(records, out)
    print(f"Exported {state.summary()} to {args.export}.")


def _import(client, args) -> None:
    from .schemas_dump import RegistryState, read_dump, replay

    fmt, records = read_dump(args.import_)
    state = RegistryState.fold(records)
    replay(client, state)
    print(f"Imported {state.summary()} from {args.import_} ({fmt} format); ids and versions kept.")


def _import_direct(args) -> int:
    from broker.client.errors import KafkaError

    from .schemas_dump import read_dump

    fmt, records = read_dump(args.import_)
    _, rest = client_config(args)
    config: dict[str, Any] = {**rest, "bootstrap.servers": args.bootstrap_server}
    config.setdefault("client.id", "kafkalog-schemas")
    config.setdefault("acks", "all")
    config.setdefault("max.block.ms", 60000)
    topic = args.kafkastore_topic
    try:
        with report_unreachable(NAME, "max.block.ms", config["max.block.ms"]):
            _ensure_topic(config, topic)
            _produce(config, topic, records)
    except KafkaError as exc:
        raise CliError(f"writing {topic}: {exc}") from None
    print(f"Wrote {len(records)} records ({fmt} format) to {topic}.")
    return 0


def _ensure_topic(config: dict[str, Any], topic: str) -> None:
    """The registry's topic as Confluent's registry creates it (one partition, compacted),
    unless it exists."""
    from broker.client.admin import AdminClient, NewTopic, TopicAlreadyExistsError

    admin_keys = {k: v for k, v in config.items() if k not in ("acks", "max.block.ms")}
    admin_keys["default.api.timeout.ms"] = config["max.block.ms"]
    with AdminClient(admin_keys) as admin:
        if topic in admin.list_topics(include_internal=True):
            return
        try:
            admin.create_topics([NewTopic(topic, 1, -1, {"cleanup.policy": "compact"})])[topic].result()
        except TopicAlreadyExistsError:
            pass


def _produce(config: dict[str, Any], topic: str, records) -> None:
    from broker.client.producer import KafkaProducer

    with KafkaProducer(config) as producer:
        futures = [producer.send(topic, r.value, r.key, 0) for r in records]
        producer.flush()
        for n, future in enumerate(futures, 1):
            error = future.exception()
            if error is not None:
                raise CliError(f"record {n} of {len(futures)} was not written to {topic}: {error}")
