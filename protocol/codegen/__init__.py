"""Code generator: Kafka JSON message specs -> committed Python codecs in protocol/messages/."""
