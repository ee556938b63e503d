"""Share groups (KIP-932): the share-partition delivery state; see docs/share-groups.md."""
