"""Which APIs the gateway serves, which it forwards, and the versions it advertises.

Served here: the group, offset, SASL and ACL APIs, at the coordinator's own version ranges
(so KIP-848 is advertised even when upstream lacks it). Forwarded: the data-plane and topic
APIs below, at the intersection of upstream's range and the highest version whose layout the
gateway knows (the Kafka 4.x message specs the codecs are generated from): a version newer than
that could carry a broker address in a field the gateway cannot see, so it is not advertised.
Anything else is refused.
"""

from __future__ import annotations

from typing import Final

from coordinator.api.table import GROUP_APIS, GROUP_CONFIG_APIS
from coordinator.gateway.old_formats import FETCH_UPSTREAM_VERSION, PRODUCE_UPSTREAM_VERSION
from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.messages.api_versions import ApiVersion, ApiVersionsResponse

OFFSET_FOR_LEADER_EPOCH: Final = 23
DELETE_RECORDS: Final = 21
INIT_PRODUCER_ID: Final = 22
ADD_PARTITIONS_TO_TXN: Final = 24
ADD_OFFSETS_TO_TXN: Final = 25
END_TXN: Final = 26
TXN_OFFSET_COMMIT: Final = 28
DESCRIBE_CONFIGS: Final = 32
ALTER_CONFIGS: Final = 33
INCREMENTAL_ALTER_CONFIGS: Final = 44
DESCRIBE_PRODUCERS: Final = 61
DESCRIBE_TRANSACTIONS: Final = 65
LIST_TRANSACTIONS: Final = 66

# api key -> highest version forwarded. Metadata, FindCoordinator and DescribeCluster stop at
# the versions our codecs decode (they are rewritten); Produce and Fetch at the last versions
# whose NodeEndpoints layout node_endpoints.py knows.
FORWARDED_MAX: Final[dict[int, int]] = {
    ApiKey.PRODUCE: 13,
    ApiKey.FETCH: 18,
    ApiKey.LIST_OFFSETS: 11,
    ApiKey.METADATA: SERVED_VERSIONS[ApiKey.METADATA][1],
    OFFSET_FOR_LEADER_EPOCH: 4,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 6,
    DELETE_RECORDS: 2,
    INIT_PRODUCER_ID: 6,
    ADD_PARTITIONS_TO_TXN: 5,
    ADD_OFFSETS_TO_TXN: 4,
    END_TXN: 5,
    DESCRIBE_CONFIGS: 4,
    ALTER_CONFIGS: 2,
    ApiKey.CREATE_PARTITIONS: 3,
    INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.DESCRIBE_CLUSTER: SERVED_VERSIONS[ApiKey.DESCRIBE_CLUSTER][1],
    ApiKey.LIST_CONFIG_RESOURCES: SERVED_VERSIONS[ApiKey.LIST_CONFIG_RESOURCES][1],
    DESCRIBE_PRODUCERS: 0,
    DESCRIBE_TRANSACTIONS: 0,
    LIST_TRANSACTIONS: 2,
}

# Served by the gateway itself, at SERVED_VERSIONS: the group APIs of the route table (the config
# APIs only for their GROUP resources: forwarder.py), the SASL, ACL and credential APIs.
SERVED_HERE: Final = (GROUP_APIS - GROUP_CONFIG_APIS) | frozenset(
    {
        ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.DESCRIBE_ACLS,
        ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE,
    }
)  # fmt: skip


def advertised_versions(upstream: dict[int, tuple[int, int]] | None) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) the gateway advertises; `upstream` None while it is unknown."""
    ranges: dict[int, tuple[int, int]] = {}
    for served in SERVED_HERE:
        ranges[int(served)] = SERVED_VERSIONS[served]
    # FindCoordinator: groups served here, transaction coordinators looked up upstream.
    ranges[int(ApiKey.FIND_COORDINATOR)] = SERVED_VERSIONS[ApiKey.FIND_COORDINATOR]
    for forwarded, top in FORWARDED_MAX.items():
        ranges[forwarded] = (0, top)
    if upstream is not None:
        for key in [*FORWARDED_MAX, int(ApiKey.FIND_COORDINATOR)]:
            theirs = upstream.get(int(key))
            low, high = ranges[int(key)]
            if theirs is None or max(low, theirs[0]) > min(high, theirs[1]):
                if key == ApiKey.FIND_COORDINATOR:
                    continue  # upstream lacks it: groups are still found here
                del ranges[int(key)]
            else:
                ranges[int(key)] = (max(low, theirs[0]), min(high, theirs[1]))
        for key, converted_to in (
            (ApiKey.PRODUCE, PRODUCE_UPSTREAM_VERSION),
            (ApiKey.FETCH, FETCH_UPSTREAM_VERSION),
        ):
            # Old message formats are converted here (old_formats.py): versions below upstream's
            # lowest are served as long as upstream takes the version they are converted to.
            if int(key) in ranges and ranges[int(key)][0] <= converted_to:
                ranges[int(key)] = (0, ranges[int(key)][1])
        # GROUP resources are listed here (group_configs.py): v1 is advertised even when upstream
        # lacks it; v0 asks for client metrics resources only, upstream's.
        listing = int(ApiKey.LIST_CONFIG_RESOURCES)
        ranges[listing] = (ranges.get(listing, (1, 1))[0], SERVED_VERSIONS[ApiKey.LIST_CONFIG_RESOURCES][1])
        for key in (DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
            # GROUP config resources are served here (group_configs.py): advertised at our
            # versions even when upstream lacks the API.
            ranges.setdefault(key, SERVED_VERSIONS[ApiKey(key)])
    return ranges


def api_versions_response(
    upstream: dict[int, tuple[int, int]] | None, error_code: int = 0
) -> ApiVersionsResponse:
    keys = [ApiVersion(key, low, high) for key, (low, high) in sorted(advertised_versions(upstream).items())]
    return ApiVersionsResponse(error_code=error_code, api_keys=keys)
