"""The ``kafkalog`` command line (console script ``kafkalog``, or ``python -m spark_kafkalog.cli``).

Owns the dispatcher and the Spark subcommands: ``main.py`` is the dispatcher and the
registry of subcommands, ``export_cmd.py`` the ``export`` subcommand (a Spark job). The
Spark-free subcommands (``broker``, ``dump-log``, ``topics``, ``produce``, ``consume``,
``groups``) are Kafka's console tools, in ``broker/tools/`` with their shared helpers
(``broker.tools.common``); this package is the only part of ``spark_kafkalog`` that imports
them. Importing this package imports nothing heavy.
"""
