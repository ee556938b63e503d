-- Several nodes (docs/multinode.md#what-other-nodes-learn): a counter per shared catalog that
-- every change of it bumps in the same transaction, so a node's poll learns of a change made
-- through another node by reading one row rather than the catalog. Today: 'acls'.

CREATE TABLE change_counters (
    name    text   NOT NULL PRIMARY KEY,
    version bigint NOT NULL
);
