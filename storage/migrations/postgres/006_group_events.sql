-- Group events (joins, leaves, timeouts, rebalances and their reasons), kept when the server runs
-- with group.events.persist: appended in batches, pruned by age (time_ms) and row count.
-- Member ids, messages and details carry client strings: bytea holding their UTF-8 bytes.

CREATE TABLE group_events (
    row_id     bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    group_id   text    NOT NULL,
    seq        bigint  NOT NULL,
    time_ms    bigint  NOT NULL,
    kind       text    NOT NULL,
    protocol   text    NOT NULL,
    state      text    NOT NULL,
    generation integer NOT NULL,
    member_id  bytea,
    message    bytea   NOT NULL,
    details    bytea   NOT NULL
);

CREATE INDEX group_events_time_ms ON group_events (time_ms);
CREATE INDEX group_events_group ON group_events (group_id, row_id);
