"""Runnable Spark jobs: the main pipeline (``pipeline.py``) and the export (``export.py``).

Each is a module with a ``main(argv)`` that runs as ``python -m spark_kafkalog.jobs.<name>``
or ``spark-submit spark_kafkalog/jobs/<name>.py`` (absolute imports only, so that the file
also runs as a script). Importing the package is cheap: no Spark, no JVM.
"""
