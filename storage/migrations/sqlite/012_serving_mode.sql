-- How this database is served: standalone, or as a gateway in front of an upstream cluster (its
-- bootstrap servers). One row, written at the first start and checked at every start, so that a
-- gateway does not silently take over a standalone server's groups and topics, nor the reverse
-- (coordinator/server/serving_mode.py).

CREATE TABLE serving_mode (
    mode        TEXT    NOT NULL PRIMARY KEY,
    upstream    TEXT    NOT NULL,
    recorded_ms INTEGER NOT NULL
) STRICT;
