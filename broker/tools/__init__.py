"""The console tools, Kafka's ``bin/kafka-*.sh``: one module per tool, each a subcommand
of the ``kafkalog`` command. Like Kafka's ``tools`` module, they sit apart from the
client and the server: built on ``broker.client`` (and ``broker.log`` / ``broker.record``
to read log files), never imported by them.

Owns, one module per tool (``kafkalog <NAME>``, the Kafka tool it follows):

- ``server_start``      ``broker``     kafka-server-start.sh: hands its arguments to
                                       ``python -m broker`` (``broker/__main__.py``)
- ``dump_log``          ``dump-log``   kafka-dump-log.sh: the command; ``log_dumper`` is
                                       its engine (reads and prints one log file),
                                       ``coordinator_decoders`` its --offsets-decoder and
                                       --transaction-log-decoder (on the tables of
                                       ``coordinator_schemas``, generated)
- ``topics``            ``topics``     kafka-topics.sh
- ``console_producer``  ``produce``    kafka-console-producer.sh
- ``console_consumer``  ``consume``    kafka-console-consumer.sh
- ``consumer_groups``   ``groups``     kafka-consumer-groups.sh
- ``share_groups``      ``share-groups`` kafka-share-groups.sh (KIP-932 share groups)
- ``configs``           ``configs``    kafka-configs.sh (``--entity-type users``: SCRAM credentials)
- ``acls``              ``acls``       kafka-acls.sh (the authorizer's ACLs)
- ``transactions``      ``transactions`` kafka-transactions.sh (list, describe, find and
                                       abort hanging transactions)
- ``get_offsets``       ``get-offsets`` kafka-get-offsets.sh (offsets for a time spec,
                                       earliest-local and latest-tiered included)
- ``schemas``           ``schemas``    a Schema Registry's subjects, schemas, compatibility
                                       and modes; export and import (``schemas_dump``)

and what they share: ``common`` (``CliError``, ``parse_key_value``, ``warn``, the
``progress`` / ``offset_progress`` bars) and ``records_format`` (the console producer's
line parser and the console consumer's message formatter, client property files).

New tools go here, one module each. A tool module defines::

    NAME = "topics"                      # the word after ``kafkalog``
    SUMMARY = "create, list, describe, alter and delete topics"   # one line for --help
    def add_arguments(parser): ...       # argparse options (parser.description defaults
                                         # to the module docstring's first paragraph)
    def run(args) -> int: ...            # heavy imports inside run(), not at module level

and its module path goes into ``TOOLS``. A tool that hands its whole argument list to
another program defines ``PASSTHROUGH = True`` and ``run_argv(argv) -> int`` instead of
``add_arguments``/``run`` (``server_start``). ``run`` reports bad input by raising
``common.CliError`` (or ``ValueError`` / ``OSError``): the dispatcher prints one line
``kafkalog <NAME>: error: ...`` and exits 1.

The dispatcher is the ``kafkalog`` console script, ``spark_kafkalog/cli/main.py``: it lists
``TOOLS`` and adds the Spark subcommands (``export``). Invariants: nothing here imports
``spark_kafkalog`` or ``pyspark`` (a tool runs where Spark is not installed, and
``kafkalog topics`` never starts to load it); importing this package or a tool module
imports nothing heavy (the clients are imported inside ``run``).

Thread-safety: a tool runs on the main thread (see each module for its own threads).
"""

from __future__ import annotations

# The tools' modules, in the order ``kafkalog --help`` lists them.
TOOLS: tuple[str, ...] = (
    "broker.tools.server_start",
    "broker.tools.dump_log",
    "broker.tools.topics",
    "broker.tools.console_producer",
    "broker.tools.console_consumer",
    "broker.tools.consumer_groups",
    "broker.tools.share_groups",
    "broker.tools.configs",
    "broker.tools.acls",
    "broker.tools.transactions",
    "broker.tools.get_offsets",
    "broker.tools.schemas",
)
