"""Authorization denials as log lines, like Kafka's ``kafka.authorizer.logger``, rate-limited.

One INFO line per denial on the ``coordinator.authorizer`` logger, in Kafka's words::

    Principal = User:bob is Denied Operation = Read from host = 10.0.0.7 on resource = Group:LITERAL:billing

with the fields principal, operation, resource and host in the JSON format. A client retrying
a denied request would otherwise write a line per attempt: per (principal, resource) the first
denial of a window of ``window_s`` seconds is logged and the rest are counted; the next line
logged for that pair says how many were left out. At most ``max_keys`` pairs are remembered
(the oldest forgotten first), so a flood of distinct names cannot grow memory.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Final

from coordinator.security.acl import Operation, ResourceType

log = logging.getLogger("coordinator.authorizer")

DENIAL_LOG_WINDOW_S: Final = 60.0
DENIAL_LOG_MAX_KEYS: Final = 10_000

_OPERATION_NAMES: Final[Mapping[int, str]] = {
    Operation.ALL: "All",
    Operation.READ: "Read",
    Operation.WRITE: "Write",
    Operation.CREATE: "Create",
    Operation.DELETE: "Delete",
    Operation.ALTER: "Alter",
    Operation.DESCRIBE: "Describe",
    Operation.CLUSTER_ACTION: "ClusterAction",
    Operation.DESCRIBE_CONFIGS: "DescribeConfigs",
    Operation.ALTER_CONFIGS: "AlterConfigs",
    Operation.IDEMPOTENT_WRITE: "IdempotentWrite",
}
_RESOURCE_NAMES: Final[Mapping[int, str]] = {
    ResourceType.GROUP: "Group",
    ResourceType.TOPIC: "Topic",
    ResourceType.CLUSTER: "Cluster",
}


class DenialLog:
    def __init__(
        self,
        window_s: float = DENIAL_LOG_WINDOW_S,
        max_keys: int = DENIAL_LOG_MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.window_s = window_s
        self.max_keys = max_keys
        self.clock = clock
        # (principal, resource) -> (when its last line was logged, denials left out since)
        self._windows: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()

    def denied(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> None:
        resource = f"{_name(_RESOURCE_NAMES, resource_type)}:LITERAL:{name}"
        key = (principal, resource)
        now = self.clock()
        window = self._windows.get(key)
        if window is not None and now - window[0] < self.window_s:
            self._windows[key] = (window[0], window[1] + 1)
            return
        left_out = window[1] if window is not None else 0
        self._windows[key] = (now, 0)
        self._windows.move_to_end(key)
        while len(self._windows) > self.max_keys:
            self._windows.popitem(last=False)
        operation_name = _name(_OPERATION_NAMES, operation)
        suffix = (
            f" ({left_out} more denials of this principal on this resource not logged)" if left_out else ""
        )
        log.info(
            "Principal = %s is Denied Operation = %s from host = %s on resource = %s%s",
            principal, operation_name, host, resource, suffix,
            extra={"principal": principal, "operation": operation_name, "resource": resource, "host": host},
        )  # fmt: skip


def _name(names: Mapping[int, str], value: int) -> str:
    return names.get(value, str(value))
