"""Admin CLI: `coordinator groups …` and `coordinator offsets …` over the Kafka protocol.

It speaks only the Kafka wire protocol (through our own codecs), so it works against this
server and against any Kafka-compatible cluster.
"""
