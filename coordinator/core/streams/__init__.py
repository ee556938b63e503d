"""Streams groups (KIP-1071): docs/streams-groups.md."""
