"""Whole-request error responses: every served API and version, for any request it may carry."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.error_responses import ERROR_RESPONSES, error_response
from protocol.errors import ErrorCode
from protocol.wire import decode_response, encode_response
from tests.protocol.model import (
    canon_ours,
    message_strategy,
    pair_id,
    request_side,
    response_side,
    served_pairs,
    to_ours,
)

PAIRS = served_pairs()
CODE = int(ErrorCode.UNKNOWN_SERVER_ERROR)


def test_every_served_api_has_an_error_response() -> None:
    assert set(ERROR_RESPONSES) == set(SERVED_VERSIONS)


def _codes(plain: Any) -> list[int]:
    """Every error code in a plain response value (only fields present in its version)."""
    found: list[int] = []
    if isinstance(plain, list):
        for item in plain:
            found += _codes(item)
    elif isinstance(plain, dict):
        for name, value in plain.items():
            if name == "error_code":
                found.append(value)
            else:
                found += _codes(value)
    return found


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_error_response_encodes_and_carries_the_error(pair: tuple[ApiKey, int], data: st.DataObject) -> None:
    key, version = pair
    side = request_side(key)
    request = to_ours(side, data.draw(message_strategy(side.msg.name, version, long=False)), version)
    response = error_response(key, version, request, CODE, "it broke")
    _, decoded = decode_response(key, version, encode_response(key, version, 7, response)[4:])
    codes = _codes(canon_ours(decoded, response_side(key).msg.fields, version))
    # Nothing but the error; a response listing nothing (no groups, no topics asked) has no code.
    assert set(codes) <= {CODE}
    if key not in _ENTRIES_ONLY and not (key == ApiKey.FETCH and version < 7):  # v7 added ErrorCode
        assert codes, f"{key.name} v{version} carries no error code"


# Responses whose only error codes are per entry echoed from the request.
_ENTRIES_ONLY = {
    ApiKey.PRODUCE,
    ApiKey.LIST_OFFSETS,
    ApiKey.METADATA,
    ApiKey.OFFSET_COMMIT,
    ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.DELETE_GROUPS,
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.CREATE_ACLS,
    ApiKey.DELETE_ACLS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    ApiKey.STREAMS_GROUP_DESCRIBE,
    ApiKey.SHARE_GROUP_DESCRIBE,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.FIND_COORDINATOR,
}


@pytest.mark.parametrize("version", range(0, 10))
def test_join_group_protocol_name_is_null_from_v7(version: int) -> None:
    from protocol.messages.join_group import JoinGroupRequest

    response = error_response(ApiKey.JOIN_GROUP, version, JoinGroupRequest(group_id="g"), CODE)
    assert response.protocol_name == (None if version >= 7 else "")
    assert (response.generation_id, response.member_id, response.leader) == (-1, "", "")
