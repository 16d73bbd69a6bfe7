"""The ``kafkalog`` command line (console script ``kafkalog``, or ``python -m spark_kafkalog.cli``).

Owns nothing itself: ``main.py`` is the dispatcher and registry of subcommands, ``common.py``
the helpers they share, and each subcommand lives in its own module (``dump_log.py``,
``broker_cmd.py``, ...). Importing this package imports nothing heavy.
"""
