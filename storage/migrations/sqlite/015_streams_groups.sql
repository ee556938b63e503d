-- KIP-1071 streams groups: one row per group (its epochs and topology, a JSON document) and one
-- per member (its tasks and metadata, a JSON document: coordinator/core/streams/records.py).
-- A StreamsGroupTombstone deletes the group row and all of its member rows.

CREATE TABLE streams_groups (
    group_id         TEXT    NOT NULL PRIMARY KEY,
    group_epoch      INTEGER NOT NULL CHECK (group_epoch BETWEEN -2147483648 AND 2147483647),
    assignment_epoch INTEGER NOT NULL CHECK (assignment_epoch BETWEEN -2147483648 AND 2147483647),
    state_ms         INTEGER NOT NULL,
    topology         TEXT    NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE streams_members (
    group_id              TEXT    NOT NULL,
    member_id             TEXT    NOT NULL,
    instance_id           TEXT,
    member_epoch          INTEGER NOT NULL CHECK (member_epoch BETWEEN -2147483648 AND 2147483647),
    previous_member_epoch INTEGER NOT NULL CHECK (previous_member_epoch BETWEEN -2147483648 AND 2147483647),
    state                 INTEGER NOT NULL CHECK (state BETWEEN -2147483648 AND 2147483647),
    process_id            TEXT    NOT NULL,
    details               TEXT    NOT NULL,
    PRIMARY KEY (group_id, member_id)
) STRICT;
