-- The cluster this database belongs to (Kafka's meta.properties cluster.id): one row, written
-- when the database is formatted and checked at every start.

CREATE TABLE cluster (
    cluster_id   TEXT    NOT NULL PRIMARY KEY,
    formatted_ms INTEGER NOT NULL
) STRICT;
