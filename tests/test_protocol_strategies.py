"""The hypothesis strategies of tests/support/protocol_strategies.py build values that
encode for every version of a message."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.messages import REQUEST_SCHEMAS
from broker.protocol.primitives import ZERO_UUID
from broker.protocol.schema import encode_bytes
from tests.support.protocol_strategies import SETTINGS, message_values


def test_values_encode_for_every_version_of_a_message() -> None:
    message = REQUEST_SCHEMAS[0]

    @settings(SETTINGS, max_examples=5)
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        for version in range(message.valid_versions[0], message.valid_versions[1] + 1):
            value = data.draw(message_values(message, version))
            assert isinstance(encode_bytes(message, version, value), bytes)

    check()


def test_zero_uuid_is_uuid() -> None:
    assert ZERO_UUID == uuid.UUID(int=0)
