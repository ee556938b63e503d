-- KIP-932 share groups (docs/share-groups.md): one row per group and one per member. A
-- ShareGroupTombstone deletes the group row, its member rows and its share-partition states
-- (start offset, state epoch, in-flight batches: docs/share-groups.md, "What is persisted").

CREATE TABLE share_groups (
    group_id         text    NOT NULL PRIMARY KEY,
    group_epoch      integer NOT NULL,
    assignment_epoch integer NOT NULL
);

CREATE TABLE share_members (
    group_id              text    NOT NULL,
    member_id             text    NOT NULL,
    rack_id               text,
    client_id             text    NOT NULL,
    client_host           text    NOT NULL,
    member_epoch          integer NOT NULL,
    previous_member_epoch integer NOT NULL,
    -- subscribed topic names, assignment and target: storage/codec.py's consumer topics blob
    -- (its pending-revocation list stays empty: share groups have no revocation)
    topics                bytea   NOT NULL,
    PRIMARY KEY (group_id, member_id)
);

CREATE TABLE share_partitions (
    group_id     text    NOT NULL,
    topic        text    NOT NULL,
    partition    integer NOT NULL CHECK (partition >= 0),
    start_offset bigint  NOT NULL,
    state_epoch  integer NOT NULL,
    -- the in-flight batches: storage/codec.py's share batches blob
    batches      bytea   NOT NULL,
    PRIMARY KEY (group_id, topic, partition)
);
