-- KIP-932 share groups (docs/share-groups.md): one row per group and one per member. A
-- ShareGroupTombstone deletes the group row, its member rows and its share-partition states
-- (start offset, state epoch, in-flight batches: docs/share-groups.md, "What is persisted").

CREATE TABLE share_groups (
    group_id         TEXT    NOT NULL PRIMARY KEY,
    group_epoch      INTEGER NOT NULL CHECK (group_epoch BETWEEN -2147483648 AND 2147483647),
    assignment_epoch INTEGER NOT NULL CHECK (assignment_epoch BETWEEN -2147483648 AND 2147483647)
) STRICT, WITHOUT ROWID;

CREATE TABLE share_members (
    group_id              TEXT    NOT NULL,
    member_id             TEXT    NOT NULL,
    rack_id               TEXT,
    client_id             TEXT    NOT NULL,
    client_host           TEXT    NOT NULL,
    member_epoch          INTEGER NOT NULL CHECK (member_epoch BETWEEN -2147483648 AND 2147483647),
    previous_member_epoch INTEGER NOT NULL CHECK (previous_member_epoch BETWEEN -2147483648 AND 2147483647),
    -- subscribed topic names, assignment and target: storage/codec.py's consumer topics blob
    -- (its pending-revocation list stays empty: share groups have no revocation)
    topics                BLOB    NOT NULL,
    PRIMARY KEY (group_id, member_id)
) STRICT;

CREATE TABLE share_partitions (
    group_id     TEXT    NOT NULL,
    topic        TEXT    NOT NULL,
    partition    INTEGER NOT NULL CHECK (partition BETWEEN 0 AND 2147483647),
    start_offset INTEGER NOT NULL,
    state_epoch  INTEGER NOT NULL CHECK (state_epoch BETWEEN -2147483648 AND 2147483647),
    -- the in-flight batches: storage/codec.py's share batches blob
    batches      BLOB    NOT NULL,
    PRIMARY KEY (group_id, topic, partition)
) STRICT, WITHOUT ROWID;
