-- Classic-protocol members inside consumer groups (online migration): a member that joined
-- with JoinGroup keeps its session timeout and its JoinGroup protocols (storage/codec.py,
-- version-prefixed). Both are NULL for members of the consumer protocol.

ALTER TABLE consumer_members ADD COLUMN classic_session_timeout_ms INTEGER
    CHECK (classic_session_timeout_ms BETWEEN -2147483648 AND 2147483647);
ALTER TABLE consumer_members ADD COLUMN classic_protocols BLOB;
