"""Classic groups: one kind of group (docs/group-model.md#the-folders)."""
