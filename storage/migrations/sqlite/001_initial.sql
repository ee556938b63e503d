-- State tables: one row per key, upserted by records and deleted by tombstones.
-- STRICT enforces the column types; the CHECKs mirror the PostgreSQL column widths so both
-- backends accept and reject the same records.

CREATE TABLE offsets (
    group_id         TEXT    NOT NULL,
    topic            TEXT    NOT NULL,
    partition        INTEGER NOT NULL CHECK (partition BETWEEN 0 AND 2147483647),
    committed_offset INTEGER NOT NULL,
    leader_epoch     INTEGER NOT NULL CHECK (leader_epoch BETWEEN -2147483648 AND 2147483647),
    metadata         TEXT    NOT NULL,
    commit_ms        INTEGER NOT NULL,
    expire_ms        INTEGER,
    PRIMARY KEY (group_id, topic, partition)
) STRICT, WITHOUT ROWID;

CREATE TABLE groups (
    group_id      TEXT    NOT NULL PRIMARY KEY,
    protocol_type TEXT,
    generation_id INTEGER NOT NULL CHECK (generation_id BETWEEN -2147483648 AND 2147483647),
    protocol_name TEXT,
    leader_id     TEXT,
    state_ms      INTEGER NOT NULL,
    members       BLOB    NOT NULL  -- storage/codec.py, version-prefixed
) STRICT, WITHOUT ROWID;

CREATE TABLE topics (
    name               TEXT    NOT NULL PRIMARY KEY,
    topic_id           BLOB    NOT NULL CHECK (length(topic_id) = 16),
    num_partitions     INTEGER NOT NULL CHECK (num_partitions BETWEEN -2147483648 AND 2147483647),
    replication_factor INTEGER NOT NULL CHECK (replication_factor BETWEEN -2147483648 AND 2147483647),
    configs            TEXT    NOT NULL  -- JSON array of [name, value|null]
) STRICT, WITHOUT ROWID;
