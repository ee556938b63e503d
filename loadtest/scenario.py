"""What one load-test run does: the scenario shipped to every Spark task, and the result row format."""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from protocol.apis import ApiKey
from protocol.errors import ErrorCode

# Result rows, in this column order (loadtest.spark.RESULT_SCHEMA is the Spark side of this).
# target: label of the bootstrap address (compare mode runs two); task: Spark partition index;
# member: member number inside the task (replacements after churn/kill get new numbers);
# start_ms: wall-clock epoch milliseconds when the request was written; latency_ms: until its
# response frame was read (for the composite ops "join"/"rebalance": from the first JoinGroup of
# the cycle until the SyncGroup that delivered the assignment); generation: the member's
# generation after the round trip (-1 when it has none).
RESULT_COLUMNS: Final = (
    "target",
    "task",
    "member",
    "group",
    "op",
    "start_ms",
    "latency_ms",
    "error_code",
    "generation",
)
ResultRow = tuple[str, int, int, str, str, float, float, int, int]

# One row per round trip.
REQUEST_OPS: Final = (
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "offset_commit",
    "offset_fetch",
    "leave_group",
)
# One row per completed membership cycle: the first one of a member is "join", later ones
# (after REBALANCE_IN_PROGRESS and friends) are "rebalance".
CYCLE_OPS: Final = ("join", "rebalance")
# Events that are not round trips: "kill" (abrupt disconnect) and "churn" (graceful leave
# that is followed by a replacement member), and the client's own event-loop lag samples.
EVENT_OPS: Final = ("kill", "churn")
LOOP_LAG_OP: Final = "loop_lag"

# Client-side outcomes that have no Kafka error code. All are unexpected.
CLIENT_TIMEOUT: Final = -100
CLIENT_DISCONNECTED: Final = -101
CLIENT_DECODE_ERROR: Final = -102
NOT_JOINED: Final = -103  # a member's lifetime ended without it ever getting an assignment
ABORTED: Final = -104  # a member killed or churned away before its first assignment (expected)

CLIENT_CODE_NAMES: Final = {
    CLIENT_TIMEOUT: "CLIENT_TIMEOUT",
    CLIENT_DISCONNECTED: "CLIENT_DISCONNECTED",
    CLIENT_DECODE_ERROR: "CLIENT_DECODE_ERROR",
    NOT_JOINED: "NOT_JOINED",
    ABORTED: "ABORTED",
}


def error_name(code: int) -> str:
    if code in CLIENT_CODE_NAMES:
        return CLIENT_CODE_NAMES[code]
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


# The protocol's signals that a consumer acts on rather than failures.
_ALWAYS_EXPECTED: Final = frozenset(
    {
        ErrorCode.NONE,
        ErrorCode.MEMBER_ID_REQUIRED,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ABORTED,
    }
)
# With churn or kills, members get dropped by the server (session expiry of a killed member,
# a slow rejoiner cut at join completion) and learn it this way.
_EXPECTED_WITH_FAULTS: Final = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID})


def expected_codes(faults: bool) -> frozenset[int]:
    return _ALWAYS_EXPECTED | _EXPECTED_WITH_FAULTS if faults else _ALWAYS_EXPECTED


# Highest version of each API the load test speaks (what a Kafka 3.9/4.x Java consumer sends);
# the run uses min(this, the server's max) as found by ApiVersions.
PREFERRED_VERSIONS: Final[dict[int, int]] = {
    ApiKey.FIND_COORDINATOR: 6,
    ApiKey.JOIN_GROUP: 9,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 5,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9,
    ApiKey.METADATA: 12,
    ApiKey.CREATE_TOPICS: 7,
}


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def parse_hostport(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def is_loopback_host(host: str) -> bool:
    """True when every address the host name resolves to is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror:
        return False
    addresses = {str(info[4][0]).split("%")[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


_LOCAL_MASTER: Final = re.compile(r"^local(\[(\*|\d+)(,\s*(\d+))?\])?$")


def local_slots(master: str) -> int | None:
    """Slots of a local master (None for a cluster master); ValueError for local[N,F] with
    retries (a retried task would repeat its load) and for other local-* masters."""
    match = _LOCAL_MASTER.match(master)
    if not match:
        if is_local_master(master) or master.startswith("local-"):
            raise ValueError(f"unsupported local master {master!r} (use local, local[N] or local[*])")
        return None
    if match.group(4) is not None and int(match.group(4)) > 1:
        raise ValueError(f"{master}: task retries would repeat the load; use local[N]")
    count = match.group(2)
    if count is None:
        return 1
    return (os.cpu_count() or 1) if count == "*" else int(count)


@dataclass(frozen=True, slots=True)
class Scenario:
    """Everything a task needs; plain data so that it pickles to the executors unchanged."""

    run_id: str
    target: str
    bootstrap: str
    tasks: int
    members: int  # per task, at any time
    groups: int  # in total, shared by all tasks
    topic_names: tuple[str, ...]
    partitions: int
    duration_s: float
    ramp_up_s: float
    heartbeat_interval_ms: int
    commit_interval_ms: int
    session_timeout_ms: int
    rebalance_timeout_ms: int
    request_timeout_ms: int
    churn_rate: float  # graceful leave + replacement, per task per second
    kill_rate: float  # abrupt disconnect + replacement, per task per second
    restart_delay_s: float
    static_share: float
    versions: dict[int, int] = field(default_factory=dict)
    loopback_only: bool = True
    progress_host: str | None = None
    progress_port: int = 0
    barrier: bool = False
    seed: int = 0
    loop_lag_interval_ms: int = 100
    stop_timeout_s: float = 10.0

    @property
    def faults(self) -> bool:
        return self.churn_rate > 0 or self.kill_rate > 0

    def group_name(self, index: int) -> str:
        return f"loadtest-{self.run_id}-g{index}"

    def group_of_slot(self, task: int, slot: int) -> int:
        """Members are spread over the groups round-robin, so a group spans tasks."""
        return (task * self.members + slot) % self.groups

    def topic_of_group(self, group_index: int) -> str:
        return self.topic_names[group_index % len(self.topic_names)]

    def is_static_slot(self, task: int, slot: int) -> bool:
        if self.static_share <= 0:
            return False
        # Spread evenly: slot k is static when floor((k+1)*share) > floor(k*share).
        index = task * self.members + slot
        return int((index + 1) * self.static_share) > int(index * self.static_share)

    def instance_id(self, task: int, slot: int) -> str:
        return f"loadtest-{self.run_id}-t{task}-s{slot}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        data = dict(data)
        data["topic_names"] = tuple(data["topic_names"])
        data["versions"] = {int(k): int(v) for k, v in data["versions"].items()}
        return cls(**data)
