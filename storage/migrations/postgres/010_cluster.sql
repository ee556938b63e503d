-- The cluster this database belongs to (Kafka's meta.properties cluster.id): one row, written
-- when the database is formatted and checked at every start.

CREATE TABLE cluster (
    cluster_id   text   NOT NULL PRIMARY KEY,
    formatted_ms bigint NOT NULL
);

-- One row at most: nodes formatting one new database at the same moment cannot both write an
-- id; the loser's write fails and it reads back the winner's (coordinator/server/app.py).
CREATE UNIQUE INDEX cluster_one_row ON cluster ((true));
