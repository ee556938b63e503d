"""Gateway mode: the coordinator in front of a Kafka-compatible cluster.

Group and offset APIs are served here; produce, fetch and the other data-plane APIs are
forwarded to the upstream brokers, each of which gets a virtual broker (a listener port) on the
gateway. Only responses that carry broker addresses are decoded and rewritten. See
docs/gateway.md for the design.
"""
