"""The ``kafkalog`` command: an argparse dispatcher over one module per subcommand.

Owns: the top-level parser, the registry of subcommands (``SUBCOMMANDS``), and the
behaviour every subcommand shares:

- ``kafkalog --help`` lists the subcommands; ``kafkalog <command> --help`` shows one;
  both exit 0. ``kafkalog --version`` prints the installed version.
- Bad usage (unknown subcommand, missing or unknown option, bad value) prints ONE line,
  ``kafkalog <command>: error: <message> (see 'kafkalog <command> --help')``, on stderr
  and exits 1, instead of argparse's usage block and exit 2. An unknown option is named
  before anything else is checked, with the closest option of that subcommand when one is
  close (``unrecognized option '--creat' (did you mean '--create'?)``); tokens after
  ``--`` and the values of options are not options.
- A subcommand's ``run()`` returns the exit code. ``CliError``, ``ValueError`` (thus
  ``ConfigError``) and ``OSError`` escaping it print ``kafkalog <command>: error: ...`` (one
  line) and exit 1. A closed stdout (``kafkalog dump-log ... | head``) ends the command
  quietly with 141, as a process killed by SIGPIPE; Ctrl-C exits 130 without a traceback.

Subcommands: the console tools ``broker.tools.TOOLS`` (Spark-free: ``broker``, ``dump-log``,
``topics``, ``produce``, ``consume``, ``groups``; ``broker/tools/__init__.py`` says how to
write one) then the Spark ones of this package (``export_cmd.py``). This module is the one
place where ``spark_kafkalog`` imports ``broker.tools``, and it imports only what the command
line asks for: every subcommand module is imported (for its ``NAME`` and ``SUMMARY``, cheap
by contract), but only the chosen one's ``add_arguments`` and ``run`` are called, so that a
Spark-free subcommand never imports ``spark_kafkalog.jobs`` nor ``pyspark``.

Thread-safety: a command runs on the main thread.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
from types import ModuleType

from broker.tools import TOOLS
from broker.tools.common import CliError

PROG = "kafkalog"

# The subcommands that need Spark (this package's), listed after the console tools.
SPARK_SUBCOMMANDS: tuple[str, ...] = (
    "spark_kafkalog.cli.export_cmd",
)

# One module per subcommand, in the order --help lists them.
SUBCOMMANDS: tuple[str, ...] = TOOLS + SPARK_SUBCOMMANDS

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_SIGPIPE = 141  # 128 + SIGPIPE, what a shell reports for a process killed by it
EXIT_INTERRUPTED = 130  # 128 + SIGINT


class UsageError(Exception):
    """argparse rejected the command line; ``prog`` names the (sub)command."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises ``UsageError`` instead of printing usage and exiting 2."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.subcommands: dict[str, argparse.ArgumentParser] = {}  # name -> its parser

    def error(self, message: str):  # noqa: D401 - argparse's hook
        raise UsageError(self.prog, message)


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _looks_like_option(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NEGATIVE_NUMBER.match(token)


def unknown_option(parser: argparse.ArgumentParser,
                   args: list[str]) -> tuple[argparse.ArgumentParser, str] | None:
    """The first of ``args`` that is written as an option but is none of ``parser``'s (or,
    past a sub-subcommand's name such as ``transactions find-hanging``, none of that
    subcommand's), with the parser it was given to; or None. Tokens after ``--`` and the
    values of options that take one are not options.

    argparse checks required options and groups before it reports unknown ones, so that
    ``topics --creat`` would say that one of --create, --list... is required; the
    dispatcher asks this first, to name the misspelt option instead."""
    actions: dict[str, argparse.Action] = {}
    children: dict[str, argparse.ArgumentParser] = {}
    for known in parser._actions:  # argparse keeps no public list of its options
        for option in known.option_strings:
            actions[option] = known
        if isinstance(known, argparse._SubParsersAction):
            children.update(known.choices)
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            return None
        if not _looks_like_option(token):
            if token in children:  # the rest belongs to the sub-subcommand
                return unknown_option(children[token], args[i:])
            continue
        name, equals, _ = token.partition("=")
        has_value = bool(equals)
        action = actions.get(name)
        if action is None and not token.startswith("--") and token[:2] in actions:
            action, has_value = actions[token[:2]], len(token) > 2  # -n5: a short option and its value
        if action is None:
            return parser, name
        nargs = action.nargs
        if has_value or nargs == 0:
            continue
        if nargs == argparse.REMAINDER:
            return None
        if nargs in (None, "?"):
            wanted = 1
        elif isinstance(nargs, int):
            wanted = nargs
        else:  # "*", "+": every value up to the next option
            wanted = len(args)
        while wanted and i < len(args) and not _looks_like_option(args[i]):
            i += 1
            wanted -= 1
    return None


def _unrecognized(parser: argparse.ArgumentParser, option: str) -> str:
    known = [o for action in parser._actions for o in action.option_strings]
    close = difflib.get_close_matches(option, known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unrecognized option '{option}'{hint}"


def _load_subcommands() -> list[ModuleType]:
    return [importlib.import_module(name) for name in SUBCOMMANDS]


def _description(module: ModuleType) -> str:
    doc = (module.__doc__ or "").strip()
    return doc.split("\n\n", 1)[0]


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("spark-kafkalog")
    except Exception:  # noqa: BLE001 - not installed (running from a checkout)
        return "unknown"


def build_parser(modules: list[ModuleType], command: str | None = None) -> _Parser:
    """The parser of ``kafkalog``: every module is a subcommand, but only the one named
    ``command`` gets its options (``add_arguments``), or every one when ``command`` is None."""
    parser = _Parser(
        prog=PROG, allow_abbrev=False,
        description="Tools for the kafkalog broker and its log files, named after Kafka's.",
        epilog=f"Run '{PROG} <command> --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)
    for module in modules:
        passthrough = getattr(module, "PASSTHROUGH", False)
        child = sub.add_parser(
            module.NAME, help=module.SUMMARY, description=_description(module),
            add_help=not passthrough, allow_abbrev=False,
            formatter_class=argparse.RawDescriptionHelpFormatter)
        if not passthrough and command in (None, module.NAME):
            module.add_arguments(child)
            parser.subcommands[module.NAME] = child
        child.set_defaults(_module=module)
    return parser


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())  # always one line


def _run(name: str, call) -> int:
    try:
        code = call()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_SIGPIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (CliError, ValueError, OSError) as exc:  # ConfigError is a ValueError
        print(f"{PROG} {name}: error: {_error_text(exc)}", file=sys.stderr, flush=True)
        return EXIT_ERROR
    except SystemExit as exc:  # a passthrough program's own argparse
        return _exit_code(exc.code)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_SIGPIPE
    return EXIT_OK if code is None else int(code)


def _exit_code(code) -> int:
    if code is None:
        return EXIT_OK
    if isinstance(code, int):
        return EXIT_ERROR if code == 2 else code  # argparse's usage errors: 1, as ours
    print(code, file=sys.stderr)
    return EXIT_ERROR


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    """Run ``kafkalog`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    modules = _load_subcommands()
    # A passthrough command gets everything after its name untouched (its own --help too).
    if argv:
        for module in modules:
            if getattr(module, "PASSTHROUGH", False) and argv[0] == module.NAME:
                return _run(module.NAME, lambda module=module: module.run_argv(argv[1:]))
    parser = build_parser(modules, command=argv[0] if argv else "")
    try:
        child = parser.subcommands.get(argv[0]) if argv else None
        if child is not None and (unknown := unknown_option(child, argv[1:])) is not None:
            raise UsageError(unknown[0].prog, _unrecognized(*unknown))
        args, extras = parser.parse_known_args(argv)
        if extras:  # name the subcommand, not the top level, as argparse would
            chosen = getattr(args, "_module", None)
            prog = f"{PROG} {chosen.NAME}" if chosen is not None else PROG
            raise UsageError(prog, f"unrecognized arguments: {' '.join(extras)}")
    except UsageError as exc:
        return _usage_error(exc)
    except SystemExit as exc:  # --help, --version
        return _exit_code(exc.code)
    chosen = getattr(args, "_module", None)
    if chosen is None:
        print(f"{PROG}: error: a command is required (see '{PROG} --help')", file=sys.stderr, flush=True)
        return EXIT_ERROR
    return _run(chosen.NAME, lambda: chosen.run(args))


def _usage_error(exc: UsageError) -> int:
    command = exc.prog[len(PROG):].strip()
    label = f"{PROG} {command}" if command else PROG
    print(f"{label}: error: {exc.message} (see '{label} --help')", file=sys.stderr, flush=True)
    return EXIT_ERROR


def entry() -> None:
    """The ``kafkalog`` console script."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
