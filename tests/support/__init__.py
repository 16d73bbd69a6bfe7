"""Shared test support: fixtures and helpers of the suite (see ``tests/conftest.py``)."""
