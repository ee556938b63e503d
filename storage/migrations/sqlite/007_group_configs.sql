-- Dynamic group configs (KIP-848: DescribeConfigs / IncrementalAlterConfigs on GROUP
-- resources): one row per group and overridden config name.

CREATE TABLE group_configs (
    group_id TEXT NOT NULL,
    name     TEXT NOT NULL,
    value    TEXT NOT NULL,
    PRIMARY KEY (group_id, name)
) STRICT;
