"""The dependencies the venv resolves are ones pyspark supports: pyspark 4 warns on every
session that it "does not yet fully support pandas >= 3.0.0", so pyproject.toml pins
pandas below 3 until pyspark says otherwise. This checks pyspark's own verdict on the
installed pandas (its ``require_minimum_pandas_version``, the function behind the warning),
so a resolver that brings pandas 3 back fails here rather than in a user's log."""

from __future__ import annotations

import warnings


def test_pyspark_supports_the_installed_pandas() -> None:
    from pyspark.sql.pandas.utils import require_minimum_pandas_version

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        require_minimum_pandas_version()
    assert [str(w.message) for w in caught if "pandas" in str(w.message)] == []
