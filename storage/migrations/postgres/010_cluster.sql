-- The cluster this database belongs to (Kafka's meta.properties cluster.id): one row, written
-- when the database is formatted and checked at every start.

CREATE TABLE cluster (
    cluster_id   text   NOT NULL PRIMARY KEY,
    formatted_ms bigint NOT NULL
);
