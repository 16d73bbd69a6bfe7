"""``python -m spark_kafkalog.cli ...``: the same as the ``kafkalog`` console script."""

from .main import entry

if __name__ == "__main__":
    entry()
