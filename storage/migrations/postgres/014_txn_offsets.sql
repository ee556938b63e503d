-- Transactional offsets (TxnOffsetCommit) waiting for their transaction's outcome: one row per
-- group, producer id and partition (docs/transactions.md).

CREATE TABLE txn_offsets (
    group_id         text    NOT NULL,
    producer_id      bigint  NOT NULL,
    topic            text    NOT NULL,
    partition        integer NOT NULL CHECK (partition >= 0),
    producer_epoch   integer NOT NULL,
    transactional_id text    NOT NULL,
    committed_offset bigint  NOT NULL,
    leader_epoch     integer NOT NULL,
    metadata         bytea   NOT NULL,
    commit_ms        bigint  NOT NULL,
    PRIMARY KEY (group_id, producer_id, topic, partition)
);
