-- The transaction version of a pending transactional offset's transaction (1, or 2 when the
-- producer committed with TxnOffsetCommit v5+, KIP-890): how an upstream DescribeTransactions
-- answer decides its outcome depends on it (docs/transactions.md, the resolver).

ALTER TABLE txn_offsets ADD COLUMN transaction_version integer NOT NULL DEFAULT 1
    CHECK (transaction_version BETWEEN 1 AND 2);
