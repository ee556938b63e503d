"""Durable state of the coordinator: committed offsets, group metadata and the topic catalog.

The package knows nothing of the wire protocol or of group semantics: it stores the records the
coordinator core emits (``storage.records``) and hands them back on start-up.
"""
