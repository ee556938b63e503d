-- KIP-848 consumer groups, apart from the classic groups table: one row per group and one per
-- member. A ConsumerGroupTombstone deletes the group row and all of its member rows.
-- consumer_members keeps its rowid: a row carries the whole assignment and can be large.

CREATE TABLE consumer_groups (
    group_id         TEXT    NOT NULL PRIMARY KEY,
    group_epoch      INTEGER NOT NULL CHECK (group_epoch BETWEEN -2147483648 AND 2147483647),
    assignment_epoch INTEGER NOT NULL CHECK (assignment_epoch BETWEEN -2147483648 AND 2147483647),
    state_ms         INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE consumer_members (
    group_id               TEXT    NOT NULL,
    member_id              TEXT    NOT NULL,
    instance_id            TEXT,
    rack_id                TEXT,
    client_id              TEXT    NOT NULL,
    client_host            TEXT    NOT NULL,
    subscribed_topic_regex TEXT,
    server_assignor        TEXT,
    rebalance_timeout_ms   INTEGER NOT NULL CHECK (rebalance_timeout_ms BETWEEN -2147483648 AND 2147483647),
    member_epoch           INTEGER NOT NULL CHECK (member_epoch BETWEEN -2147483648 AND 2147483647),
    previous_member_epoch  INTEGER NOT NULL CHECK (previous_member_epoch BETWEEN -2147483648 AND 2147483647),
    state                  INTEGER NOT NULL CHECK (state BETWEEN -2147483648 AND 2147483647),
    -- subscribed topic names, assigned, pending revocation, target: storage/codec.py, version-prefixed
    topics                 BLOB    NOT NULL,
    PRIMARY KEY (group_id, member_id)
) STRICT;
