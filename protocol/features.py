"""Feature names this server advertises in ApiVersions (v3+, SupportedFeatures, KIP-584).

Kafka clients ignore feature names they do not know, so a capability only our own tools act on
can travel in the handshake every client already makes.
"""

from __future__ import annotations

from typing import Final

# Present (versions 1-1) when the broker is a standalone group coordinator whose logs hold no
# records: ListOffsets answers 0 because there is no log, not because the log is empty, so its
# earliest and latest offsets say nothing about where a consumer should be.
STANDALONE_COORDINATOR: Final = "standalone.group.coordinator"
