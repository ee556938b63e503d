"""Pipeline mode: records produced at a target rate and consumed by the group members.

Each task runs one `Producer`: every tick it produces the records due at `produce_rate` (per
task) to the topics' partitions in turn, in one Produce request (acks=all) on its own
connection, and records one "produced" row per acknowledged record. A record's value carries
its id (producer task, sequence) and its produce time (wall clock), padded to `record_bytes`.

Each member runs one `Reader` on its own connection to the data broker: it fetches (long poll)
the partitions the member may consume from the member's positions and records one "consumed"
row per record, with the end-to-end latency. Positions start at the group's committed offsets
(the member's OffsetFetch; no committed offset: the start of the log) and the member commits
them, so a partition that moves to another member continues where the last commit left it:
records read after the last commit are read again (duplicates), none is skipped (no loss). A
partition that changed hands while a fetch was in flight is not advanced by its response.

The data broker leads every partition of the topics (a single broker, or a gateway in front of
a cluster); the driver checks that with Metadata before the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from typing import Final, Protocol

from loadtest.client import Connection, ConnectionLost, RequestTimeout
from loadtest.records import RecordError, decode_batches, encode_batch
from loadtest.runtime import MemberRuntime
from loadtest.scenario import (
    CLIENT_DECODE_ERROR,
    CLIENT_DISCONNECTED,
    CLIENT_TIMEOUT,
    CONSUMED_OP,
    PRODUCED_OP,
    parse_hostport,
)
from protocol.apis import ApiKey
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.produce import PartitionProduceData, ProduceRequest, ProduceResponse, TopicProduceData
from protocol.primitives import DecodeError

_VALUE: Final = struct.Struct(">4sHQd")  # tag, producer task, sequence, produce time (epoch ms)
_TAG: Final = b"LTP1"
_TICK_S: Final = 0.02
_MAX_PER_REQUEST: Final = 5000  # records; a producer behind its rate catches up in steps
_FETCH_WAIT_MS: Final = 200
_PARTITION_MAX_BYTES: Final = 1 << 20
_RETRY_S: Final = 0.5
_SEQUENCE_BITS: Final = 40


# What a round trip can fail with on the client side (recorded as client codes, never raised).
_CLIENT_ERRORS: Final = (
    RequestTimeout,
    ConnectionLost,
    DecodeError,
    IndexError,
    struct.error,
    UnicodeDecodeError,
)


def _client_code(exc: Exception) -> int:
    if isinstance(exc, RequestTimeout):
        return CLIENT_TIMEOUT
    if isinstance(exc, ConnectionLost):
        return CLIENT_DISCONNECTED
    return CLIENT_DECODE_ERROR


def record_id(task: int, sequence: int) -> int:
    return (task << _SEQUENCE_BITS) | sequence


def encode_value(task: int, sequence: int, produced_ms: float, size: int) -> bytes:
    head = _VALUE.pack(_TAG, task, sequence, produced_ms)
    return head + bytes(max(size - len(head), 0))


def decode_value(value: bytes | None) -> tuple[int, float] | None:
    """(record id, produce time in epoch ms) of a record this mode produced; None otherwise."""
    if value is None or len(value) < _VALUE.size:
        return None
    tag, task, sequence, produced_ms = _VALUE.unpack_from(value)
    if tag != _TAG:
        return None
    return record_id(task, sequence), produced_ms


async def _open(rt: MemberRuntime, client_id: str) -> Connection:
    host, port = parse_hostport(rt.scenario.data_broker)
    return await Connection.open(host, port, client_id, rt.scenario.request_timeout_ms / 1000)


class Producer:
    def __init__(self, rt: MemberRuntime) -> None:
        self.rt = rt
        sc = rt.scenario
        self.targets = [(topic, p) for p in range(sc.partitions) for topic in sc.topic_names]
        self.next_target = 0
        self.sequence = 0
        self.client_id = f"loadtest-t{rt.task}-producer"
        self.epoch_offset = time.time() - time.perf_counter()

    async def run(self, started: float, stop_at: float) -> None:
        """Produce at the scenario's rate from `started` until `stop_at` (loop times)."""
        rt, sc = self.rt, self.rt.scenario
        conn: Connection | None = None
        loop = rt.loop
        try:
            while loop.time() < stop_at:
                due = int((loop.time() - started) * sc.produce_rate) - self.sequence
                if due <= 0:
                    await asyncio.sleep(_TICK_S)
                    continue
                if conn is None or conn.closed:
                    try:
                        conn = await _open(rt, self.client_id)
                    except ConnectionLost:
                        now = time.perf_counter()
                        rt.record_row(-1, "", "produce", now, now, CLIENT_DISCONNECTED, -1)
                        await asyncio.sleep(_RETRY_S)
                        continue
                if not await self._produce(conn, min(due, _MAX_PER_REQUEST)):
                    await asyncio.sleep(_RETRY_S)
                else:
                    await asyncio.sleep(_TICK_S)
        finally:
            if conn is not None:
                conn.close()

    async def _produce(self, conn: Connection, count: int) -> bool:
        rt, sc = self.rt, self.rt.scenario
        produced_ms = (time.perf_counter() + self.epoch_offset) * 1000.0
        batches: dict[tuple[str, int], list[int]] = {}
        for _ in range(count):
            target = self.targets[self.next_target % len(self.targets)]
            self.next_target += 1
            batches.setdefault(target, []).append(self.sequence)
            self.sequence += 1
        topics: dict[str, list[PartitionProduceData]] = {}
        for (topic, partition), sequences in batches.items():
            records = [(None, encode_value(rt.task, s, produced_ms, sc.record_bytes)) for s in sequences]
            batch = encode_batch(records, int(produced_ms))
            topics.setdefault(topic, []).append(PartitionProduceData(partition, batch))
        request = ProduceRequest(
            acks=-1,
            timeout_ms=sc.request_timeout_ms,
            topic_data=[TopicProduceData(name=t, partition_data=parts) for t, parts in topics.items()],
        )
        started = time.perf_counter()
        try:
            response: ProduceResponse
            response, sent, received = await conn.request(
                ApiKey.PRODUCE, rt.versions[ApiKey.PRODUCE], request, sc.request_timeout_ms / 1000
            )
        except _CLIENT_ERRORS as exc:
            code = _client_code(exc)
            rt.record_row(-1, "", "produce", started, time.perf_counter(), code, -1)
            conn.close()
            return False  # not acknowledged: not expected to be consumed
        first_error = 0
        for answer in response.responses:
            for part in answer.partition_responses:
                if part.error_code:
                    first_error = first_error or part.error_code
                    if part.error_message:
                        rt.note(f"produce {answer.name}/{part.index}: {part.error_message}", part.error_code)
                    continue
                for sequence in batches.get((answer.name, part.index), ()):
                    rt.record_row(
                        -1,
                        answer.name,
                        PRODUCED_OP,
                        sent,
                        received,
                        0,
                        part.index,
                        record_id(rt.task, sequence),
                    )
        rt.record_row(-1, "", "produce", sent, received, first_error, -1)
        return first_error == 0


class Consuming(Protocol):
    """The member a reader reads for."""

    number: int
    group: str
    topic: str
    generation: int
    offsets: dict[int, int]

    def consumable(self) -> list[int]: ...


class Reader:
    def __init__(self, rt: MemberRuntime, member: Consuming, client_id: str) -> None:
        self.rt = rt
        self.member = member
        self.client_id = f"{client_id}-fetch"
        self.conn: Connection | None = None
        self.epoch_offset = time.time() - time.perf_counter()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    async def run(self) -> None:
        try:
            while True:
                partitions = self.member.consumable()
                if not partitions:
                    await asyncio.sleep(_TICK_S * 2)
                    continue
                if not await self._fetch(partitions):
                    await asyncio.sleep(_RETRY_S)
        finally:
            self.close()

    def _row(self, op: str, start: float, end: float, code: int, partition: int, record: int = -1) -> None:
        m = self.member
        self.rt.record_row(m.number, m.group, op, start, end, code, partition, record)

    async def _fetch(self, partitions: list[int]) -> bool:
        rt, sc, member = self.rt, self.rt.scenario, self.member
        positions = {p: member.offsets[p] for p in partitions}
        request = FetchRequest(
            max_wait_ms=_FETCH_WAIT_MS,
            min_bytes=1,
            max_bytes=len(positions) * _PARTITION_MAX_BYTES,
            topics=[
                FetchTopic(
                    topic=member.topic,
                    partitions=[
                        FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=_PARTITION_MAX_BYTES)
                        for p, o in positions.items()
                    ],
                )
            ],
        )
        started = time.perf_counter()
        try:
            if self.conn is None or self.conn.closed:
                self.conn = await _open(rt, self.client_id)
            response: FetchResponse
            response, sent, received = await self.conn.request(
                ApiKey.FETCH,
                rt.versions[ApiKey.FETCH],
                request,
                sc.request_timeout_ms / 1000 + _FETCH_WAIT_MS / 1000,
            )
        except _CLIENT_ERRORS as exc:
            code = _client_code(exc)
            self._row("fetch", started, time.perf_counter(), code, -1)
            self.close()
            return False
        code = response.error_code
        consumable = set(member.consumable())
        for topic in response.responses:
            for part in topic.partitions:
                p = part.partition_index
                code = code or part.error_code
                if part.error_code or p not in consumable or member.offsets.get(p) != positions.get(p):
                    continue  # an error, or the partition changed hands meanwhile
                try:
                    position = self._consume(p, positions[p], part.records, received)
                except RecordError as exc:
                    rt.note(f"fetch {member.topic}/{p}: {exc}", CLIENT_DECODE_ERROR)
                    code = code or CLIENT_DECODE_ERROR
                    continue
                member.offsets[p] = position
        self._row("fetch", sent, received, code, -1)
        return code == 0

    def _consume(self, partition: int, position: int, records: bytes | None, received: float) -> int:
        """Record the records from `position` on; return the next position."""
        row = self.rt.record_row
        m = self.member
        for record in decode_batches(records):
            if record.offset < position:
                continue  # a batch starts before the position
            decoded = decode_value(record.value)
            position = record.offset + 1
            if decoded is None:
                continue
            ident, produced_ms = decoded
            start = produced_ms / 1000.0 - self.epoch_offset  # back on the perf_counter clock
            row(m.number, m.group, CONSUMED_OP, start, received, 0, partition, ident)
        return position


async def cancel(task: asyncio.Task[None] | None) -> None:
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
