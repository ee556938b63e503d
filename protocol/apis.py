"""API keys and the version window served for each: the single source for ApiVersions and codegen."""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    LIST_CONFIG_RESOURCES = 74
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    # Transactional offsets (docs/transactions.md).
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# (min, max) version served per API. Produce is decoded only to refuse it with a clear error:
# a standalone coordinator holds no records.
SERVED_VERSIONS: Final[dict[ApiKey, tuple[int, int]]] = {
    ApiKey.PRODUCE: (0, 9),
    ApiKey.FETCH: (0, 13),
    ApiKey.LIST_OFFSETS: (0, 8),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (0, 10),
    ApiKey.OFFSET_FETCH: (0, 10),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 5),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 3),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    # KIP-1142 (v0: ListClientMetricsResources): docs/group-configs.md#listing-config-resources.
    ApiKey.LIST_CONFIG_RESOURCES: (0, 1),
    # KIP-848.
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # KIP-1071.
    ApiKey.STREAMS_GROUP_HEARTBEAT: (0, 1),
    ApiKey.STREAMS_GROUP_DESCRIBE: (0, 1),
    # Transactional offsets (docs/transactions.md).
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 6),
    # KIP-932 share groups (docs/share-groups.md).
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
}

# Spec file stem for each API (requests are "<stem>Request", responses "<stem>Response").
SPEC_NAMES: Final[dict[ApiKey, str]] = {
    ApiKey.PRODUCE: "Produce",
    ApiKey.FETCH: "Fetch",
    ApiKey.LIST_OFFSETS: "ListOffsets",
    ApiKey.METADATA: "Metadata",
    ApiKey.OFFSET_COMMIT: "OffsetCommit",
    ApiKey.OFFSET_FETCH: "OffsetFetch",
    ApiKey.FIND_COORDINATOR: "FindCoordinator",
    ApiKey.JOIN_GROUP: "JoinGroup",
    ApiKey.HEARTBEAT: "Heartbeat",
    ApiKey.LEAVE_GROUP: "LeaveGroup",
    ApiKey.SYNC_GROUP: "SyncGroup",
    ApiKey.DESCRIBE_GROUPS: "DescribeGroups",
    ApiKey.LIST_GROUPS: "ListGroups",
    ApiKey.SASL_HANDSHAKE: "SaslHandshake",
    ApiKey.API_VERSIONS: "ApiVersions",
    ApiKey.CREATE_TOPICS: "CreateTopics",
    ApiKey.DELETE_TOPICS: "DeleteTopics",
    ApiKey.CREATE_PARTITIONS: "CreatePartitions",
    ApiKey.DELETE_GROUPS: "DeleteGroups",
    ApiKey.DESCRIBE_ACLS: "DescribeAcls",
    ApiKey.CREATE_ACLS: "CreateAcls",
    ApiKey.DELETE_ACLS: "DeleteAcls",
    ApiKey.DESCRIBE_CONFIGS: "DescribeConfigs",
    ApiKey.SASL_AUTHENTICATE: "SaslAuthenticate",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    ApiKey.OFFSET_DELETE: "OffsetDelete",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "DescribeUserScramCredentials",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentials",
    ApiKey.DESCRIBE_CLUSTER: "DescribeCluster",
    ApiKey.LIST_CONFIG_RESOURCES: "ListConfigResources",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "ConsumerGroupHeartbeat",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
    ApiKey.STREAMS_GROUP_HEARTBEAT: "StreamsGroupHeartbeat",
    ApiKey.STREAMS_GROUP_DESCRIBE: "StreamsGroupDescribe",
    ApiKey.ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn",
    ApiKey.END_TXN: "EndTxn",
    ApiKey.TXN_OFFSET_COMMIT: "TxnOffsetCommit",
    ApiKey.SHARE_GROUP_HEARTBEAT: "ShareGroupHeartbeat",
    ApiKey.SHARE_GROUP_DESCRIBE: "ShareGroupDescribe",
    ApiKey.SHARE_FETCH: "ShareFetch",
    ApiKey.SHARE_ACKNOWLEDGE: "ShareAcknowledge",
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: "AlterShareGroupOffsets",
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: "DeleteShareGroupOffsets",
}

# Requests the gateway forwards upstream are decoded to authorize them with the client's
# principal (coordinator/gateway/authorization.py): api key -> (spec stem, lowest, highest version
# decoded). Kept apart from SERVED_VERSIONS: decoding a version is not serving it.
GATEWAY_DECODED: Final[dict[int, tuple[str, int, int]]] = {
    0: ("Produce", 0, 13),
    1: ("Fetch", 0, 18),
    2: ("ListOffsets", 0, 11),
    3: ("Metadata", 0, 12),
    10: ("FindCoordinator", 0, 6),
    19: ("CreateTopics", 0, 7),
    20: ("DeleteTopics", 0, 6),
    21: ("DeleteRecords", 0, 2),
    22: ("InitProducerId", 0, 6),
    23: ("OffsetForLeaderEpoch", 2, 4),
    24: ("AddPartitionsToTxn", 0, 5),
    25: ("AddOffsetsToTxn", 0, 4),
    26: ("EndTxn", 0, 5),
    32: ("DescribeConfigs", 1, 4),
    33: ("AlterConfigs", 0, 2),
    37: ("CreatePartitions", 0, 3),
    44: ("IncrementalAlterConfigs", 0, 1),
    60: ("DescribeCluster", 0, 1),
    61: ("DescribeProducers", 0, 0),
    65: ("DescribeTransactions", 0, 0),
    66: ("ListTransactions", 0, 2),
    74: ("ListConfigResources", 0, 1),
}
