-- State tables: one row per key, upserted by records and deleted by tombstones.
-- metadata is bytea (UTF-8 of the client's string) because PostgreSQL text cannot hold U+0000
-- and the commit metadata is arbitrary client data; a bad value must not fail a whole batch.

CREATE TABLE offsets (
    group_id         text    NOT NULL,
    topic            text    NOT NULL,
    partition        integer NOT NULL CHECK (partition >= 0),
    committed_offset bigint  NOT NULL,
    leader_epoch     integer NOT NULL,
    metadata         bytea   NOT NULL,
    commit_ms        bigint  NOT NULL,
    expire_ms        bigint,
    PRIMARY KEY (group_id, topic, partition)
);

CREATE TABLE groups (
    group_id      text    NOT NULL PRIMARY KEY,
    protocol_type text,
    generation_id integer NOT NULL,
    protocol_name text,
    leader_id     text,
    state_ms      bigint  NOT NULL,
    members       bytea   NOT NULL  -- storage/codec.py, version-prefixed
);

CREATE TABLE topics (
    name               text    NOT NULL PRIMARY KEY,
    topic_id           bytea   NOT NULL CHECK (octet_length(topic_id) = 16),
    num_partitions     integer NOT NULL,
    replication_factor integer NOT NULL,
    configs            text    NOT NULL  -- JSON array of [name, value|null]
);
