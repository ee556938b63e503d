-- KIP-848 consumer groups, apart from the classic groups table: one row per group and one per
-- member. A ConsumerGroupTombstone deletes the group row and all of its member rows.

CREATE TABLE consumer_groups (
    group_id         text    NOT NULL PRIMARY KEY,
    group_epoch      integer NOT NULL,
    assignment_epoch integer NOT NULL,
    state_ms         bigint  NOT NULL
);

CREATE TABLE consumer_members (
    group_id               text    NOT NULL,
    member_id              text    NOT NULL,
    instance_id            text,
    rack_id                text,
    client_id              text    NOT NULL,
    client_host            text    NOT NULL,
    subscribed_topic_regex text,
    server_assignor        text,
    rebalance_timeout_ms   integer NOT NULL,
    member_epoch           integer NOT NULL,
    previous_member_epoch  integer NOT NULL,
    state                  integer NOT NULL,
    -- subscribed topic names, assigned, pending revocation, target: storage/codec.py, version-prefixed
    topics                 bytea   NOT NULL,
    PRIMARY KEY (group_id, member_id)
);
