-- KIP-1071 streams groups: one row per group (its epochs and topology, a JSON document) and one
-- per member (its tasks and metadata, a JSON document: coordinator/core/streams/records.py).
-- A StreamsGroupTombstone deletes the group row and all of its member rows.

CREATE TABLE streams_groups (
    group_id         text    NOT NULL PRIMARY KEY,
    group_epoch      integer NOT NULL,
    assignment_epoch integer NOT NULL,
    state_ms         bigint  NOT NULL,
    topology         text    NOT NULL
);

CREATE TABLE streams_members (
    group_id              text    NOT NULL,
    member_id             text    NOT NULL,
    instance_id           text,
    member_epoch          integer NOT NULL,
    previous_member_epoch integer NOT NULL,
    state                 integer NOT NULL,
    process_id            text    NOT NULL,
    details               text    NOT NULL,
    PRIMARY KEY (group_id, member_id)
);
