"""One simulated classic consumer-group member: an asyncio state machine on its own connection.

Flow: connect to the bootstrap address, FindCoordinator (reconnect if the coordinator is
elsewhere), JoinGroup (dynamic members on v4+ first get MEMBER_ID_REQUIRED with their id and
join again, KIP-394), SyncGroup (the leader computes a range assignment over its topic's
partitions), then OffsetFetch of the assigned partitions and Heartbeat / OffsetCommit at their
intervals until the server signals a rebalance (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID), which sends the member back to JoinGroup. LeaveGroup at the end.

A member has exactly one request in flight at a time, on its own connection: the server handles
one request per connection at a time, and a JoinGroup stays parked until the rebalance completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
import time
from typing import Any, Final

from loadtest.client import Connection, ConnectionLost, Prepared, RequestTimeout
from loadtest.pipeline import Reader, cancel
from loadtest.runtime import MemberRuntime
from loadtest.scenario import (
    ABORTED,
    CLIENT_DECODE_ERROR,
    CLIENT_DISCONNECTED,
    CLIENT_TIMEOUT,
    NOT_JOINED,
    parse_hostport,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartition,
    decode_consumer_protocol_assignment_v0,
    decode_consumer_protocol_assignment_v1,
    decode_consumer_protocol_assignment_v2,
    decode_consumer_protocol_assignment_v3,
    encode_consumer_protocol_assignment_v0,
    encode_consumer_protocol_subscription_v0,
)
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol, JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse, MemberIdentity
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment, SyncGroupResponse
from protocol.primitives import DecodeError

_VERSION_PREFIX: Final = struct.Struct(">h")
_ASSIGNMENT_DECODERS: Final = (
    decode_consumer_protocol_assignment_v0,
    decode_consumer_protocol_assignment_v1,
    decode_consumer_protocol_assignment_v2,
    decode_consumer_protocol_assignment_v3,
)
PROTOCOL_TYPE: Final = "consumer"
_LATE_START_S: Final = 5.0
ASSIGNOR: Final = "range"

# Codes after which a member goes back to JoinGroup, and whether it keeps its member id.
_REJOIN_KEEP_ID: Final = frozenset({ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION})
_REJOIN_RESET_ID: Final = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID})
_COORDINATOR_MOVED: Final = frozenset(
    {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)


class Broken(Exception):
    """The member's connection failed (already recorded); reconnect and rejoin."""


class Fatal(Exception):
    """The run must stop (e.g. a non-loopback coordinator under a local master)."""


def encode_subscription(topic: str) -> bytes:
    out = bytearray(_VERSION_PREFIX.pack(0))
    encode_consumer_protocol_subscription_v0(ConsumerProtocolSubscription(topics=[topic]), out)
    return bytes(out)


def encode_assignment(topic: str, partitions: list[int]) -> bytes:
    out = bytearray(_VERSION_PREFIX.pack(0))
    assigned = [TopicPartition(topic, partitions)] if partitions else []
    encode_consumer_protocol_assignment_v0(ConsumerProtocolAssignment(assigned), out)
    return bytes(out)


def decode_assignment(data: bytes, topic: str) -> list[int]:
    if len(data) < 2:
        return []
    (version,) = _VERSION_PREFIX.unpack_from(data, 0)
    decoder = _ASSIGNMENT_DECODERS[max(0, min(version, len(_ASSIGNMENT_DECODERS) - 1))]
    assignment, _ = decoder(data, 2)
    return sorted(p for tp in assignment.assigned_partitions if tp.topic == topic for p in tp.partitions)


def range_assign(member_ids: list[str], partitions: int) -> dict[str, list[int]]:
    """Kafka's RangeAssignor for one topic: members in id order, leading ones get one extra."""
    ordered = sorted(member_ids)
    if not ordered:
        return {}
    per_member, extra = divmod(partitions, len(ordered))
    result: dict[str, list[int]] = {}
    for i, member_id in enumerate(ordered):
        start = i * per_member + min(i, extra)
        length = per_member + (1 if i < extra else 0)
        result[member_id] = list(range(start, start + length))
    return result


class Member:
    def __init__(self, rt: MemberRuntime, number: int, slot: int) -> None:
        sc = rt.scenario
        self.rt = rt
        self.number = number
        self.slot = slot
        group_index = sc.group_of_slot(rt.task, slot)
        self.group = sc.group_name(group_index)
        self.topic = sc.topic_of_group(group_index)
        self.instance_id = sc.instance_id(rt.task, slot) if sc.is_static_slot(rt.task, slot) else None
        self.client_id = f"loadtest-t{rt.task}-m{number}"
        self.member_id = ""
        self.generation = -1
        self.partitions: list[int] = []
        self.offsets: dict[int, int] = {}
        self.conn: Connection | None = None
        self.coordinator: tuple[str, int] | None = None
        self.joined_once = False
        self.stable = False
        self.started = time.perf_counter()
        self.main: asyncio.Task[None] | None = None
        self.offsets_ready = False  # pipeline mode: `offsets` hold the group's positions
        self.reader: Reader | None = Reader(rt, self, self.client_id) if sc.pipeline else None
        self.reading: asyncio.Task[None] | None = None
        self._rng = random.Random(f"{sc.seed}-{rt.task}-{number}")

    # lifecycle, driven by the task

    def start(self) -> None:
        self.main = self.rt.loop.create_task(self._guarded_run())
        if self.reader is not None:
            self.reading = self.rt.loop.create_task(self.reader.run())

    def consumable(self) -> list[int]:
        """Pipeline mode: the partitions the member may read now, each with its position in
        `offsets`."""
        if not self.offsets_ready:
            return []
        return [p for p in self.partitions if p in self.offsets]

    async def _guarded_run(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a Fatal: stop the whole task, loudly
            self.rt.fail(exc)

    async def stop(self, leave: bool, aborted: bool = False) -> None:
        """Cancel the member's work; then LeaveGroup (graceful) or nothing (killed)."""
        if self.main is not None and not self.main.done():
            self.main.cancel()
            await asyncio.gather(self.main, return_exceptions=True)
        await cancel(self.reading)
        self.stable = False
        self._stopped()
        if not self.joined_once:
            self.joined_once = True  # only one final "join" row per member
            now = time.perf_counter()
            # A member started in the last seconds (late ramp-up, a replacement) had no fair chance;
            # with kills, a rebalance may wait one session timeout for a dead member.
            grace = _LATE_START_S + (
                self.rt.scenario.session_timeout_ms / 1000 if self.rt.scenario.faults else 0
            )
            late = now - self.started < grace
            self.rt.record(self, "join", self.started, now, ABORTED if aborted or late else NOT_JOINED, -1)
        if leave and self._in_group():
            if self.conn is not None and (self.conn.busy or self.conn.closed):
                # A parked JoinGroup/SyncGroup holds the connection: leave on a fresh one.
                self.conn.close()
                self.conn = None
            with contextlib.suppress(Broken, Fatal):
                await self._leave()
        self.close()

    def kill(self) -> None:
        """Abrupt disconnect: no LeaveGroup; the server finds out by session expiry."""
        if self.main is not None:
            self.main.cancel()
        if self.reading is not None:
            self.reading.cancel()
        if self.reader is not None:
            self.reader.close()
        if self.conn is not None:
            self.conn.abort()
            self.conn = None
        self.stable = False
        self._stopped()
        if not self.joined_once:
            self.joined_once = True
            self.rt.record(self, "join", self.started, time.perf_counter(), ABORTED, -1)

    def _stopped(self) -> None:
        """The member's work was cancelled (stop or kill); subclasses drop their state here."""

    def _in_group(self) -> bool:
        """Whether the server may know the member, so that stopping it gracefully means leaving."""
        return bool(self.member_id)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # the state machine

    async def _run(self) -> None:
        while True:
            try:
                await self._join_cycle()
                await self._stable_loop()
            except Broken:
                self.close()
                self.stable = False
                await asyncio.sleep(0.2 + self._rng.random() * 0.3)

    async def _join_cycle(self) -> None:
        cycle_start = self.started if not self.joined_once else time.perf_counter()
        while True:
            join = await self._join()
            code = join.error_code
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = join.member_id
                continue
            if code != ErrorCode.NONE:
                await self._after_error(code)
                continue
            self.member_id = join.member_id
            self.generation = join.generation_id
            assignments: list[SyncGroupRequestAssignment] = []
            if join.leader == self.member_id:
                plan = range_assign([m.member_id for m in join.members], self.rt.scenario.partitions)
                assignments = [
                    SyncGroupRequestAssignment(member_id, encode_assignment(self.topic, parts))
                    for member_id, parts in plan.items()
                ]
            sync = await self._sync(join, assignments)
            if sync.error_code != ErrorCode.NONE:
                await self._after_error(sync.error_code)
                continue
            try:
                self.partitions = decode_assignment(sync.assignment, self.topic)
            except (DecodeError, IndexError, struct.error):
                self.partitions = []
            op = "rebalance" if self.joined_once else "join"
            self.joined_once = True
            self.rt.record(self, op, cycle_start, time.perf_counter(), ErrorCode.NONE, self.generation)
            return

    async def _stable_loop(self) -> None:
        sc = self.rt.scenario
        loop = self.rt.loop
        self.stable = True
        try:
            if self.partitions:
                if sc.pipeline:
                    self.offsets.clear()  # positions of an earlier generation are stale
                await self._offset_fetch()
            self.offsets_ready = True
            heartbeat = Prepared(
                ApiKey.HEARTBEAT,
                self.rt.versions[ApiKey.HEARTBEAT],
                self.client_id,
                HeartbeatRequest(self.group, self.generation, self.member_id, self.instance_id),
            )
            hb_interval = sc.heartbeat_interval_ms / 1000
            commit_interval = sc.commit_interval_ms / 1000
            now = loop.time()
            # Members of a group finish SyncGroup together; spread their first ticks over an interval.
            next_hb = now + hb_interval * (0.05 + 0.95 * self._rng.random())
            next_commit = now + commit_interval * (0.05 + 0.95 * self._rng.random())
            while True:
                wake = min(next_hb, next_commit) if self.partitions else next_hb
                delay = wake - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                now = loop.time()
                if self.partitions and now >= next_commit:
                    next_commit = now + commit_interval
                    code = await self._commit()
                    if code != ErrorCode.NONE and await self._stable_error(code):
                        return
                if now >= next_hb:
                    code = await self._heartbeat(heartbeat)
                    next_hb = loop.time() + hb_interval
                    if code != ErrorCode.NONE and await self._stable_error(code):
                        return
        finally:
            self.stable = False
            self.offsets_ready = False

    async def _stable_error(self, code: int) -> bool:
        """Handle an error seen while stable; True when the member must rejoin."""
        if code in _REJOIN_KEEP_ID or code in _REJOIN_RESET_ID or code in _COORDINATOR_MOVED:
            await self._after_error(code)
            return True
        # Anything else (recorded as unexpected): back off and keep going.
        await asyncio.sleep(1.0)
        return False

    async def _after_error(self, code: int) -> None:
        if code in _REJOIN_RESET_ID:
            self.member_id = ""
            self.generation = -1
            return
        if code in _REJOIN_KEEP_ID:
            self.generation = -1
            return
        if code in _COORDINATOR_MOVED:
            self.close()
            self.coordinator = None
        # Retriable coordinator errors and unexpected ones: back off before trying again.
        await asyncio.sleep(0.5 + self._rng.random() * 0.5)

    # round trips

    async def _call(self, op: str, api_key: int, body: Any, timeout_ms: int) -> tuple[Any, float, float]:
        conn = await self._connection()
        return await self._on(conn, op, api_key, body, timeout_ms)

    async def _on(
        self, conn: Connection, op: str, api_key: int, body: Any, timeout_ms: int
    ) -> tuple[Any, float, float]:
        started = time.perf_counter()
        try:
            if isinstance(body, Prepared):
                return await conn.request_prepared(body, timeout_ms / 1000)
            return await conn.request(api_key, self.rt.versions[api_key], body, timeout_ms / 1000)
        except RequestTimeout:
            self.rt.record(self, op, started, time.perf_counter(), CLIENT_TIMEOUT, self.generation)
        except ConnectionLost:
            self.rt.record(self, op, started, time.perf_counter(), CLIENT_DISCONNECTED, self.generation)
        except (DecodeError, IndexError, struct.error, UnicodeDecodeError):
            self.rt.record(self, op, started, time.perf_counter(), CLIENT_DECODE_ERROR, self.generation)
        conn.close()
        raise Broken(op)

    async def _connection(self) -> Connection:
        if self.conn is not None and not self.conn.closed:
            return self.conn
        sc = self.rt.scenario
        if self.coordinator is None:
            host, port = parse_hostport(sc.bootstrap)
            conn = await self._open(host, port)
            coordinator = await self._find_coordinator(conn)
            if coordinator == (host, port):
                self.coordinator = coordinator
                self.conn = conn
                return conn
            conn.close()
            self.coordinator = coordinator
        host, port = self.coordinator
        self.conn = await self._open(host, port)
        return self.conn

    async def _open(self, host: str, port: int) -> Connection:
        started = time.perf_counter()
        try:
            conn = await Connection.open(
                host, port, self.client_id, self.rt.scenario.request_timeout_ms / 1000
            )
        except ConnectionLost:
            self.rt.record(
                self, "connect", started, time.perf_counter(), CLIENT_DISCONNECTED, self.generation
            )
            self.coordinator = None
            raise Broken("connect") from None
        self.rt.record(self, "connect", started, time.perf_counter(), ErrorCode.NONE, self.generation)
        return conn

    async def _find_coordinator(self, conn: Connection) -> tuple[str, int]:
        version = self.rt.versions[ApiKey.FIND_COORDINATOR]
        if version >= 4:
            request = FindCoordinatorRequest(key_type=0, coordinator_keys=[self.group])
        else:
            request = FindCoordinatorRequest(key=self.group, key_type=0)
        response: FindCoordinatorResponse
        response, sent, received = await self._on(
            conn, "find_coordinator", ApiKey.FIND_COORDINATOR, request, self.rt.scenario.request_timeout_ms
        )
        if version >= 4:
            entry = response.coordinators[0] if response.coordinators else None
            code = entry.error_code if entry else ErrorCode.UNKNOWN_SERVER_ERROR
            host, port = (entry.host, entry.port) if entry else ("", -1)
        else:
            code, host, port = response.error_code, response.host, response.port
        self.rt.record(self, "find_coordinator", sent, received, code, self.generation)
        if code != ErrorCode.NONE:
            conn.close()
            await asyncio.sleep(0.5)
            raise Broken("find_coordinator")
        if self.rt.scenario.loopback_only and not self.rt.loopback_ok(host):
            raise Fatal(f"coordinator {host}:{port} is not a loopback address (local master)")
        return host, port

    async def _join(self) -> JoinGroupResponse:
        sc = self.rt.scenario
        request = JoinGroupRequest(
            group_id=self.group,
            session_timeout_ms=sc.session_timeout_ms,
            rebalance_timeout_ms=sc.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type=PROTOCOL_TYPE,
            protocols=[JoinGroupRequestProtocol(ASSIGNOR, self.rt.subscription(self.topic))],
        )
        response: JoinGroupResponse
        response, sent, received = await self._call(
            "join_group", ApiKey.JOIN_GROUP, request, sc.rebalance_timeout_ms + 5000
        )
        generation = response.generation_id if response.error_code == 0 else self.generation
        self.rt.record(self, "join_group", sent, received, response.error_code, generation)
        return response

    async def _sync(
        self, join: JoinGroupResponse, assignments: list[SyncGroupRequestAssignment]
    ) -> SyncGroupResponse:
        sc = self.rt.scenario
        request = SyncGroupRequest(
            group_id=self.group,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type=join.protocol_type or PROTOCOL_TYPE,
            protocol_name=join.protocol_name or ASSIGNOR,
            assignments=assignments,
        )
        response: SyncGroupResponse
        response, sent, received = await self._call(
            "sync_group", ApiKey.SYNC_GROUP, request, sc.rebalance_timeout_ms + 5000
        )
        self.rt.record(self, "sync_group", sent, received, response.error_code, self.generation)
        return response

    async def _heartbeat(self, prepared: Prepared) -> int:
        response: HeartbeatResponse
        response, sent, received = await self._call(
            "heartbeat", ApiKey.HEARTBEAT, prepared, self.rt.scenario.request_timeout_ms
        )
        self.rt.record(self, "heartbeat", sent, received, response.error_code, self.generation)
        return response.error_code

    async def _commit(self) -> int:
        offsets = self.offsets
        partitions = []
        if self.rt.scenario.pipeline:
            # The positions the reader reached: what was consumed is committed, nothing more.
            partitions = [OffsetCommitRequestPartition(p, offsets[p], -1, -1, "") for p in self.consumable()]
            if not partitions:
                return ErrorCode.NONE
        else:
            for p in self.partitions:
                offsets[p] = offsets.get(p, 0) + 10
                partitions.append(OffsetCommitRequestPartition(p, offsets[p], -1, -1, ""))
        request = OffsetCommitRequest(
            group_id=self.group,
            generation_id_or_member_epoch=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            topics=[OffsetCommitRequestTopic(name=self.topic, partitions=partitions)],
        )
        response: OffsetCommitResponse
        response, sent, received = await self._call(
            "offset_commit", ApiKey.OFFSET_COMMIT, request, self.rt.scenario.request_timeout_ms
        )
        code = _first_error(p.error_code for t in response.topics for p in t.partitions)
        self.rt.record(self, "offset_commit", sent, received, code, self.generation)
        return code

    async def _offset_fetch(self) -> int:
        version = self.rt.versions[ApiKey.OFFSET_FETCH]
        if version >= 8:
            request = OffsetFetchRequest(
                groups=[
                    OffsetFetchRequestGroup(
                        group_id=self.group,
                        topics=[OffsetFetchRequestTopics(name=self.topic, partition_indexes=self.partitions)],
                    )
                ]
            )
        else:
            request = OffsetFetchRequest(
                group_id=self.group,
                topics=[OffsetFetchRequestTopic(name=self.topic, partition_indexes=self.partitions)],
            )
        response: OffsetFetchResponse
        response, sent, received = await self._call(
            "offset_fetch", ApiKey.OFFSET_FETCH, request, self.rt.scenario.request_timeout_ms
        )
        if version >= 8:
            group = response.groups[0] if response.groups else None
            code = group.error_code if group else ErrorCode.UNKNOWN_SERVER_ERROR
            found = [
                (p.partition_index, p.committed_offset, p.error_code)
                for t in (group.topics if group else [])
                for p in t.partitions
            ]
        else:
            code = response.error_code
            found = [
                (p.partition_index, p.committed_offset, p.error_code)
                for t in response.topics
                for p in t.partitions
            ]
        code = code or _first_error(c for _, _, c in found)
        for partition, offset, _ in found:
            self.offsets[partition] = max(offset, 0)
        self.rt.record(self, "offset_fetch", sent, received, code, self.generation)
        return code

    async def _leave(self) -> None:
        version = self.rt.versions[ApiKey.LEAVE_GROUP]
        if version >= 3:
            request = LeaveGroupRequest(
                group_id=self.group,
                members=[MemberIdentity(self.member_id, self.instance_id, "loadtest member stops")],
            )
        else:
            request = LeaveGroupRequest(group_id=self.group, member_id=self.member_id)
        response: LeaveGroupResponse
        response, sent, received = await self._call(
            "leave_group", ApiKey.LEAVE_GROUP, request, self.rt.scenario.request_timeout_ms
        )
        code = response.error_code or _first_error(m.error_code for m in response.members)
        self.rt.record(self, "leave_group", sent, received, code, self.generation)
        self.member_id = ""


def _first_error(codes: Any) -> int:
    for code in codes:
        if code:
            return int(code)
    return 0
