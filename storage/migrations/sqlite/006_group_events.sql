-- Group events (joins, leaves, timeouts, rebalances and their reasons), kept when the server runs
-- with group.events.persist: appended in batches, pruned by age (time_ms) and row count.

CREATE TABLE group_events (
    row_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    group_id   TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    time_ms    INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    protocol   TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    member_id  TEXT,
    message    TEXT    NOT NULL,
    details    TEXT    NOT NULL
) STRICT;

CREATE INDEX group_events_time_ms ON group_events (time_ms);
CREATE INDEX group_events_group ON group_events (group_id, row_id);
