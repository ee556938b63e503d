-- Classic-protocol members inside consumer groups (online migration): a member that joined
-- with JoinGroup keeps its session timeout and its JoinGroup protocols (storage/codec.py,
-- version-prefixed). Both are NULL for members of the consumer protocol.

ALTER TABLE consumer_members ADD COLUMN classic_session_timeout_ms integer;
ALTER TABLE consumer_members ADD COLUMN classic_protocols bytea;
