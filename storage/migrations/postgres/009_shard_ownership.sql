-- Several coordinator nodes on one database (docs/multinode.md): the shard count every node must
-- agree on, the live nodes, and one lease per shard. Times are the database's clock.

CREATE TABLE cluster_settings (
    name  text NOT NULL PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE coordinator_nodes (
    node_id    integer     NOT NULL PRIMARY KEY,
    host       text        NOT NULL,
    port       integer     NOT NULL,
    started_at timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL
);

CREATE TABLE shard_leases (
    shard      integer     NOT NULL PRIMARY KEY CHECK (shard >= 0),
    owner      integer,
    epoch      bigint      NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL DEFAULT now()
);
