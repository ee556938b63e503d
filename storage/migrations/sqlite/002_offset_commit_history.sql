-- Audit trail of every accepted offset commit (written only when the store is created with
-- history_retention_ms; pruned by commit_ms).

CREATE TABLE offset_commit_history (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id         TEXT    NOT NULL,
    topic            TEXT    NOT NULL,
    partition        INTEGER NOT NULL,
    committed_offset INTEGER NOT NULL,
    leader_epoch     INTEGER NOT NULL,
    metadata         TEXT    NOT NULL,
    commit_ms        INTEGER NOT NULL,
    expire_ms        INTEGER
) STRICT;

CREATE INDEX offset_commit_history_commit_ms ON offset_commit_history (commit_ms);
CREATE INDEX offset_commit_history_group ON offset_commit_history (group_id, seq);
