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
    "record",
)
ResultRow = tuple[str, int, int, str, str, float, float, int, int, int]
# record: the pipeline mode's record id (producer task << 40 | sequence) on "produced" and
# "consumed" rows, -1 on every other row.
# raw.parquet adds where the task ran: the Spark executor id ("driver" in local mode) and the
# executor's host name (loadtest.spark.executor_identity).
RAW_COLUMNS: Final = (*RESULT_COLUMNS, "executor", "host")

# One row per round trip. The consumer_group_* ops are ConsumerGroupHeartbeat (KIP-848, api 68)
# requests: with epoch 0 (join), a positive epoch (heartbeats, revocation acknowledgements)
# and epoch -1/-2 (leave); "metadata" is the topic-id lookup of a KIP-848 member.
REQUEST_OPS: Final = (
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "offset_commit",
    "offset_fetch",
    "leave_group",
    "metadata",
    "consumer_group_join",
    "consumer_group_heartbeat",
    "consumer_group_leave",
    "produce",
    "fetch",
)
# One row per completed membership cycle: the first one of a member is "join", later ones
# (after REBALANCE_IN_PROGRESS and friends) are "rebalance".
CYCLE_OPS: Final = ("join", "rebalance")
# Events that are not round trips: "kill" (abrupt disconnect) and "churn" (graceful leave
# that is followed by a replacement member), and the client's own event-loop lag samples.
EVENT_OPS: Final = ("kill", "churn")
LOOP_LAG_OP: Final = "loop_lag"

# KIP-848 mode (group_protocol "consumer"): rows the task's group trackers write (member -1
# except for double_ownership). "reconciliation": per group epoch, start_ms = the first response
# carrying the epoch, latency_ms = until every live member of the group reported that epoch and
# their owned sets formed a complete disjoint split of the topic (code 0), or until a newer epoch
# replaced it first (SUPERSEDED); INSTANT (latency 0) when the response that started the epoch
# also completed it (a group of one member), kept out of the percentiles. "handover": for each
# epoch reconciled with code 0, from its start to the last change of any member's owned set. "double_ownership": a member took a partition another
# member of its group still owned (DOUBLE_OWNERSHIP, at the time it took it). "group_end": one per
# group when the load stops, before the members leave: 0 when the group is reconciled then,
# NOT_CONVERGED otherwise.
RECONCILIATION_OP: Final = "reconciliation"
HANDOVER_OP: Final = "handover"
DOUBLE_OWNERSHIP_OP: Final = "double_ownership"
GROUP_END_OP: Final = "group_end"
TRACKER_OPS: Final = (RECONCILIATION_OP, HANDOVER_OP, DOUBLE_OWNERSHIP_OP, GROUP_END_OP)

GROUP_PROTOCOLS: Final = ("classic", "consumer")

# Pipeline mode (Scenario.produce_rate > 0; loadtest.pipeline): "produce"/"fetch" are round
# trips (in REQUEST_OPS). "produced": one row per record the broker acknowledged (group = the
# topic, generation = the partition, start_ms = produce time, latency_ms = until acknowledged).
# "consumed": one row per record a member read (group = the member's group, generation = the
# partition, start_ms = the produce time carried in the record, latency_ms = end to end, from
# that time to when the fetch response was read; wall clocks of producer and consumer).
PRODUCED_OP: Final = "produced"
CONSUMED_OP: Final = "consumed"
RECORD_OPS: Final = (PRODUCED_OP, CONSUMED_OP)

# Client-side outcomes that have no Kafka error code. All are unexpected.
CLIENT_TIMEOUT: Final = -100
CLIENT_DISCONNECTED: Final = -101
CLIENT_DECODE_ERROR: Final = -102
NOT_JOINED: Final = -103  # a member's lifetime ended without it ever getting an assignment
ABORTED: Final = -104  # a member killed or churned away before its first assignment (expected)
DOUBLE_OWNERSHIP: Final = -105  # two members of a group owned a partition at the same time
SUPERSEDED: Final = -106  # a group epoch replaced by a newer one before it was reconciled (expected)
NOT_CONVERGED: Final = -107  # a group not reconciled when the load stopped
INSTANT: Final = -108  # an epoch reconciled by the response that started it: a lone member (expected)

CLIENT_CODE_NAMES: Final = {
    CLIENT_TIMEOUT: "CLIENT_TIMEOUT",
    CLIENT_DISCONNECTED: "CLIENT_DISCONNECTED",
    CLIENT_DECODE_ERROR: "CLIENT_DECODE_ERROR",
    NOT_JOINED: "NOT_JOINED",
    ABORTED: "ABORTED",
    DOUBLE_OWNERSHIP: "DOUBLE_OWNERSHIP",
    SUPERSEDED: "SUPERSEDED",
    NOT_CONVERGED: "NOT_CONVERGED",
    INSTANT: "INSTANT",
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


# KIP-848 members: STALE_MEMBER_EPOCH tells a committer to retry after its next heartbeat.
_ALWAYS_EXPECTED_CONSUMER: Final = frozenset(
    {ErrorCode.NONE, ErrorCode.STALE_MEMBER_EPOCH, ABORTED, SUPERSEDED, INSTANT}
)
# With churn or kills: a member fenced or expired by the server rejoins; a static replacement
# started while the killed instance is still a member waits for its session to expire.
_EXPECTED_WITH_FAULTS_CONSUMER: Final = frozenset(
    {
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.FENCED_MEMBER_EPOCH,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNRELEASED_INSTANCE_ID,
    }
)


def expected_codes(faults: bool, group_protocol: str = "classic") -> frozenset[int]:
    if group_protocol == "consumer":
        always, with_faults = _ALWAYS_EXPECTED_CONSUMER, _EXPECTED_WITH_FAULTS_CONSUMER
    else:
        always, with_faults = _ALWAYS_EXPECTED, _EXPECTED_WITH_FAULTS
    return always | with_faults if faults else always


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
# Negotiated on top in the KIP-848 mode, and the lowest versions that mode needs of the others
# (OffsetCommit/OffsetFetch v9 carry the member epoch, Metadata v10+ the topic ids).
CONSUMER_PREFERRED_VERSIONS: Final[dict[int, int]] = {ApiKey.CONSUMER_GROUP_HEARTBEAT: 1}
# The pipeline mode: Produce v3+ and Fetch v4+ carry record batches v2; Fetch up to v12
# names topics (v13 takes ids).
PIPELINE_PREFERRED_VERSIONS: Final[dict[int, int]] = {ApiKey.PRODUCE: 9, ApiKey.FETCH: 12}
PIPELINE_MIN_VERSIONS: Final[dict[int, int]] = {ApiKey.PRODUCE: 3, ApiKey.FETCH: 4}
CONSUMER_MIN_VERSIONS: Final[dict[int, int]] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: 0,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9,
    ApiKey.METADATA: 10,
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


def registered_slots(spark: Any, master: str) -> int:
    """Task slots: N for local[N]; on a cluster, the cores of the executors registered now.

    Not ``defaultParallelism``: on a cluster it is at least 2 whatever the cores (Spark's
    ``max(totalCoreCount, 2)``), so a one-core worker would show 2 slots and the warning that
    tasks queue for a slot could not fire."""
    local = local_slots(master)
    if local is not None:
        return local
    context = spark.sparkContext
    try:
        cores = context._jsc.sc().schedulerBackend().totalCoreCount()  # py4j: the AtomicInteger's value
        return int(cores.get() if hasattr(cores, "get") else cores)
    except Exception:  # a scheduler backend without a core count: the best Spark says
        return int(context.defaultParallelism)


@dataclass(frozen=True, slots=True)
class Scenario:
    """Everything a task needs; plain data so that it pickles to the executors unchanged."""

    run_id: str
    target: str
    bootstrap: str
    tasks: int
    members: int  # in total over the tasks, at any time (members_of: a task's share)
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
    group_protocol: str = "classic"  # "consumer": KIP-848 members (loadtest.consumer)
    produce_rate: float = 0.0  # records/s per task; > 0: the pipeline mode (loadtest.pipeline)
    record_bytes: int = 100  # value size of a produced record
    drain_s: float = 0.0  # the producers stop this long before the end; consumers catch up
    data_broker: str = ""  # HOST:PORT leading every partition of the topics (pipeline mode)

    @property
    def pipeline(self) -> bool:
        return self.produce_rate > 0

    @property
    def faults(self) -> bool:
        return self.churn_rate > 0 or self.kill_rate > 0

    @property
    def consumer(self) -> bool:
        return self.group_protocol == "consumer"

    def group_name(self, index: int) -> str:
        return f"loadtest-{self.run_id}-g{index}"

    def members_of(self, task: int) -> int:
        """A task's share of the members: the total split evenly, the first tasks one more."""
        share, extra = divmod(self.members, self.tasks)
        return share + (1 if task < extra else 0)

    def first_member(self, task: int) -> int:
        """The run-wide index of a task's slot 0 (the members of earlier tasks come before)."""
        share, extra = divmod(self.members, self.tasks)
        return task * share + min(task, extra)

    def group_of_slot(self, task: int, slot: int) -> int:
        """Classic: members are spread over the groups round-robin, so a group spans tasks.
        Consumer: groups are task-local (task t has groups t, t + tasks, ...; needs groups >=
        tasks), so that one task sees every owner of a partition and reconciliation completely."""
        if self.consumer:
            local = self.task_groups(task)
            return local[slot % len(local)]
        return (self.first_member(task) + slot) % self.groups

    def task_groups(self, task: int) -> range:
        """The groups of a task in the consumer mode."""
        return range(task % self.groups, self.groups, self.tasks)

    def topic_of_group(self, group_index: int) -> str:
        return self.topic_names[group_index % len(self.topic_names)]

    def is_static_slot(self, task: int, slot: int) -> bool:
        if self.static_share <= 0:
            return False
        # Spread evenly: slot k is static when floor((k+1)*share) > floor(k*share).
        index = self.first_member(task) + slot
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
