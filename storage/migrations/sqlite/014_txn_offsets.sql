-- Transactional offsets (TxnOffsetCommit) waiting for their transaction's outcome: one row per
-- group, producer id and partition (docs/transactions.md).

CREATE TABLE txn_offsets (
    group_id         TEXT    NOT NULL,
    producer_id      INTEGER NOT NULL,
    topic            TEXT    NOT NULL,
    partition        INTEGER NOT NULL CHECK (partition BETWEEN 0 AND 2147483647),
    producer_epoch   INTEGER NOT NULL CHECK (producer_epoch BETWEEN -2147483648 AND 2147483647),
    transactional_id TEXT    NOT NULL,
    committed_offset INTEGER NOT NULL,
    leader_epoch     INTEGER NOT NULL CHECK (leader_epoch BETWEEN -2147483648 AND 2147483647),
    metadata         TEXT    NOT NULL,
    commit_ms        INTEGER NOT NULL,
    PRIMARY KEY (group_id, producer_id, topic, partition)
) STRICT, WITHOUT ROWID;
