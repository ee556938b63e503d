-- How this database is served: standalone, or as a gateway in front of an upstream cluster (its
-- bootstrap servers). One row, written at the first start and checked at every start, so that a
-- gateway does not silently take over a standalone server's groups and topics, nor the reverse
-- (coordinator/server/serving_mode.py).

CREATE TABLE serving_mode (
    mode        text   NOT NULL PRIMARY KEY,
    upstream    text   NOT NULL,
    recorded_ms bigint NOT NULL
);

-- One row at most, as the cluster table: nodes starting one new database at once cannot record
-- two modes.
CREATE UNIQUE INDEX serving_mode_one_row ON serving_mode ((true));
