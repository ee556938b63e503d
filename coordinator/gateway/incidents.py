"""One log line when something upstream breaks and one when it recovers, not one per request."""

from __future__ import annotations

import logging


class Incidents:
    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._open: dict[str, str] = {}

    def failed(self, key: str, message: str, *, credentials: bool = False) -> None:
        if key in self._open:
            return
        self._open[key] = message
        if credentials:
            self._log.error("%s (credentials error: check upstream.sasl.* settings)", message)
        else:
            self._log.warning("%s; retrying", message)

    def recovered(self, key: str) -> None:
        if self._open.pop(key, None) is not None:
            self._log.info("%s is reachable again", key)

    def is_open(self, key: str) -> bool:
        return key in self._open
