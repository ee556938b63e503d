-- Audit trail of every accepted offset commit (written only when the store is created with
-- history_retention_ms; pruned by commit_ms).

CREATE TABLE offset_commit_history (
    seq              bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_id         text    NOT NULL,
    topic            text    NOT NULL,
    partition        integer NOT NULL,
    committed_offset bigint  NOT NULL,
    leader_epoch     integer NOT NULL,
    metadata         bytea   NOT NULL,
    commit_ms        bigint  NOT NULL,
    expire_ms        bigint
);

CREATE INDEX offset_commit_history_commit_ms ON offset_commit_history (commit_ms);
CREATE INDEX offset_commit_history_group ON offset_commit_history (group_id, seq);
