"""ShareFetch and ShareAcknowledge (KIP-932): the share-partition leader's runtime
(docs/share-groups.md, "The data plane").

The delivery state lives in the core with the share groups (coordinator/core/share/delivery.py),
so that its writes go through the group's shard like every other write and a reply leaves only
once they are durable. This module does what the core cannot: share sessions, reading records
(the upstream in gateway mode, none standalone: share_records.py), waiting up to ``MaxWaitMs``,
finding a new share-partition's start offset per ``share.auto.offset.reset``, and releasing a
member's records when its session or connection closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Final

from coordinator.api.routes import Routes
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.core.shard_map import ShardMap, ShardState
from coordinator.core.share.delivery import (
    FetchTarget,
    ShareAcknowledgeOp,
    ShareAcquireOp,
    ShareInitializeOp,
    ShareLogStartOp,
    ShareOutcome,
    ShareReleaseOp,
)
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.share.partition import AcknowledgementBatch
from coordinator.server.runtime import Runtime
from coordinator.server.share_leader_hint import LeaderHint, leader_hint
from coordinator.server.share_records import (
    FetchedPartition,
    NoRecords,
    RecordSource,
    TopicPartition,
    records_for,
)
from coordinator.server.share_sessions import SessionError, ShareSessionCache, TopicIdPartition
from coordinator.server.share_write_gather import WriteGather
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages import share_acknowledge as sak
from protocol.messages import share_fetch as sf

log = logging.getLogger(__name__)

LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
READ_COMMITTED: Final = "read_committed"
STRICT_RECORD_LIMIT: Final = 1  # ShareAcquireMode


class _Outcome:
    """A ReplyTo handing the core's ShareOutcome to a future."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[ShareOutcome]) -> None:
        self.future = future

    def send(self, response: Any) -> None:
        if isinstance(response, ShareOutcome) and not self.future.done():
            self.future.set_result(response)


class ShareLeader:
    """Serves ShareFetch and ShareAcknowledge for every share group this node holds."""

    def __init__(
        self,
        runtime: Runtime,
        max_sessions: int,
        source: RecordSource | None = None,
        shard_map: ShardMap | None = None,
    ) -> None:
        self.runtime = runtime
        # Several nodes: a group's share-partitions are led by the node holding its shard.
        self.shard_map = shard_map
        self.sessions = ShareSessionCache(max_sessions)
        self.source: RecordSource = source or NoRecords()
        # Several members' acquisitions and acknowledgements start one commit together.
        self.gather = WriteGather(lambda: runtime.writer.stats.last_write_latency_s)
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def manager(self) -> ShareGroupManager:
        return self.runtime.coordinator.kind(ShareGroupManager)

    def install(self, routes: Routes) -> None:
        routes.add(ApiKey.SHARE_FETCH, sf.ShareFetchRequest, self.share_fetch)
        routes.add(ApiKey.SHARE_ACKNOWLEDGE, sak.ShareAcknowledgeRequest, self.share_acknowledge)

    # -- handlers --------------------------------------------------------------------------------

    def share_fetch(self, ctx: RequestContext, req: sf.ShareFetchRequest) -> Result:
        self._spawn(self._answer(ctx, self._share_fetch(ctx, req), sf.ShareFetchResponse))
        return Result()

    def share_acknowledge(self, ctx: RequestContext, req: sak.ShareAcknowledgeRequest) -> Result:
        self._spawn(self._answer(ctx, self._share_acknowledge(ctx, req), sak.ShareAcknowledgeResponse))
        return Result()

    def connection_closed(self, connection: object) -> None:
        """Kafka drops a member's share sessions with its connection, and its records with them."""
        for group_id, member_id, _listener in self.sessions.closed_by(connection):
            self._spawn(self._release(group_id, member_id))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- ShareFetch ------------------------------------------------------------------------------

    async def _share_fetch(self, ctx: RequestContext, req: sf.ShareFetchRequest) -> sf.ShareFetchResponse:
        group_id, member_id = req.group_id or "", req.member_id or ""
        if not group_id or not member_id:
            return sf.ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST)
        if req.is_renew_ack:
            refusal = renew_fetch_refusal(req)
            if refusal is not None:
                return sf.ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=refusal)
        wanted: list[TopicIdPartition] = []
        acks: dict[TopicIdPartition, list[AcknowledgementBatch]] = {}
        for topic in req.topics:
            for p in topic.partitions:
                wanted.append((topic.topic_id, p.partition_index))
                if p.acknowledgement_batches:
                    acks[(topic.topic_id, p.partition_index)] = _batches(p.acknowledgement_batches)
        forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
        key = (group_id, member_id, ctx.advertised)
        session, partitions = self.sessions.fetch_context(
            key, req.share_session_epoch, _owner(ctx), wanted, forgotten, bool(acks)
        )
        hint = self._elsewhere(ctx, group_id)
        if hint is not None:  # the session is kept here, as Kafka's brokers keep theirs
            return hint.share_fetch([*partitions, *(tp for tp in acks if tp not in partitions)], acks)
        names = self._topic_names()
        lock_ms = self.manager.limits_of(group_id).record_lock_duration_ms
        out: dict[TopicIdPartition, sf.PartitionData] = {}

        def entry(tp: TopicIdPartition) -> sf.PartitionData:
            data = out.get(tp)
            if data is None:
                data = out[tp] = sf.PartitionData(partition_index=tp[1])
            return data

        for tp, (code, message) in (await self._acknowledge(group_id, member_id, acks, names)).items():
            entry(tp).acknowledge_error_code, entry(tp).acknowledge_error_message = code, message
        if session is None:  # the final request: acknowledgements only, then the session goes
            await self._release(group_id, member_id)
        elif req.is_renew_ack:  # acknowledgements only: a renewing fetch acquires nothing (Kafka 4.4)
            pass
        else:
            fetchable = [tp for tp in partitions if tp[0] in names]
            for tp in partitions:
                if tp[0] not in names:
                    entry(tp).error_code = ErrorCode.UNKNOWN_TOPIC_ID
            await self._acquire_into(ctx, req, group_id, member_id, fetchable, names, entry)
            if req.share_session_epoch == 0:
                for tp in partitions:
                    entry(tp)
        by_topic: dict[bytes, list[sf.PartitionData]] = {}
        for (topic_id, _), data in out.items():
            by_topic.setdefault(topic_id, []).append(data)
        return sf.ShareFetchResponse(
            acquisition_lock_timeout_ms=lock_ms,
            responses=[
                sf.ShareFetchableTopicResponse(topic_id=t, partitions=parts) for t, parts in by_topic.items()
            ],
        )

    async def _acquire_into(
        self,
        ctx: RequestContext,
        req: sf.ShareFetchRequest,
        group_id: str,
        member_id: str,
        fetchable: Sequence[TopicIdPartition],
        names: Mapping[bytes, str],
        entry: Any,
    ) -> None:
        """Read records from each share-partition's next fetch offset and acquire them for the
        member, waiting up to MaxWaitMs for some; the records and ranges go into ``entry``."""
        if not fetchable:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
        by_name = {(names[tid], index): (tid, index) for tid, index in fetchable}
        max_records = req.max_records if req.max_records > 0 else 500
        strict = req.share_acquire_mode == STRICT_RECORD_LIMIT
        committed_only = self.manager.settings_for(group_id).isolation_level == READ_COMMITTED
        while True:
            targets = await self._targets(group_id, member_id, list(by_name))
            readable: dict[TopicPartition, int] = {}
            for tp, target in targets.items():
                if target.error_code:
                    entry(by_name[tp]).error_code = target.error_code
                elif target.can_acquire and target.offset >= 0:
                    readable[tp] = target.offset
            remaining_ms = max(int((deadline - loop.time()) * 1000), 0)
            if not readable:
                if remaining_ms > 0:
                    await asyncio.sleep(min(remaining_ms, 100) / 1000)  # a window is full: wait for acks
                    continue
                return
            fetched = await self.source.fetch(
                readable, remaining_ms, req.min_bytes, req.max_bytes, committed_only
            )
            if await self._follow_log_starts(group_id, readable, fetched):
                continue  # the start offsets moved past deleted records: read from there
            failed = False
            for tp, answer in fetched.items():
                if answer.error_code:
                    entry(by_name[tp]).error_code = answer.error_code
                    failed = True
            batches = {
                tp: [(b, last) for b, last, _, _ in f.batches] for tp, f in fetched.items() if f.batches
            }
            if batches:
                hidden = {tp: f.hidden for tp, f in fetched.items() if f.hidden}
                await self.gather.turn((group_id, member_id))
                outcome = await self._op(
                    ShareAcquireOp(group_id, member_id, batches, max_records, strict, hidden)
                )
                self.gather.answered((group_id, member_id))
                if outcome.write_error:
                    for tp in batches:
                        entry(by_name[tp]).error_code = outcome.write_error
                    return
                if outcome.acquired:
                    self._read_ahead(
                        group_id, member_id, list(outcome.acquired), req.max_bytes, committed_only
                    )
                    for tp, ranges in outcome.acquired.items():
                        data = entry(by_name[tp])
                        data.acquired_records = [
                            sf.AcquiredRecords(r.first_offset, r.last_offset, r.delivery_count)
                            for r in ranges
                        ]
                        data.records = records_for(
                            fetched[tp], [(r.first_offset, r.last_offset) for r in ranges]
                        )
                    return
            if failed or loop.time() >= deadline:
                return  # an error is answered at once, as Kafka does
            if not batches:
                # Nothing new although MaxWaitMs is not spent (an upstream that answers early):
                # a short pause, not a busy loop.
                await asyncio.sleep(min(deadline - loop.time(), 0.05))

    def _read_ahead(
        self,
        group_id: str,
        member_id: str,
        partitions: list[TopicPartition],
        max_bytes: int,
        committed_only: bool,
    ) -> None:
        """Have the next records of the partitions just acquired from read while the member
        works on these (docs/share-groups.md, "Reading ahead")."""
        targets = self.manager.fetch_targets(group_id, member_id, partitions)
        wanted = {
            tp: t.offset for tp, t in targets.items() if not t.error_code and t.can_acquire and t.offset >= 0
        }
        if wanted:
            self.source.read_ahead(wanted, max_bytes, committed_only)

    async def _follow_log_starts(
        self,
        group_id: str,
        readable: Mapping[TopicPartition, int],
        fetched: Mapping[TopicPartition, FetchedPartition],
    ) -> bool:
        """A share-partition read below the upstream's log start (records deleted by retention
        or DeleteRecords) answers OFFSET_OUT_OF_RANGE: as Kafka's share-partition leader, its
        start offset moves to the log start and what went is archived. True when one moved."""
        behind = [tp for tp, a in fetched.items() if a.error_code == ErrorCode.OFFSET_OUT_OF_RANGE]
        if not behind:
            return False
        starts = await self.source.start_offsets(behind, EARLIEST_TIMESTAMP)
        moved = {tp: start for tp, start in starts.items() if start > readable[tp]}
        if not moved:
            return False  # out of range past the end: answered as the upstream's error
        await self._op(ShareLogStartOp(group_id, moved))
        return True

    async def _targets(
        self, group_id: str, member_id: str, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, FetchTarget]:
        """Each partition's fetch target; share-partitions without state are started first at
        the offset ``share.auto.offset.reset`` says, written before anything is acquired."""
        targets = self.manager.fetch_targets(group_id, member_id, partitions)
        new = [tp for tp, t in targets.items() if not t.error_code and t.offset < 0]
        if not new:
            return targets
        settings = self.manager.settings_for(group_id)
        duration = settings.auto_offset_reset_duration_ms
        if duration is not None:
            timestamp = self.runtime.clock.wall_ms() - duration
        elif settings.auto_offset_reset.strip().lower() == "earliest":
            timestamp = EARLIEST_TIMESTAMP
        else:
            timestamp = LATEST_TIMESTAMP
        starts = await self.source.start_offsets(new, timestamp)
        if starts:
            await self._op(ShareInitializeOp(group_id, starts))
        return self.manager.fetch_targets(group_id, member_id, partitions)

    # -- ShareAcknowledge ------------------------------------------------------------------------

    async def _share_acknowledge(
        self, ctx: RequestContext, req: sak.ShareAcknowledgeRequest
    ) -> sak.ShareAcknowledgeResponse:
        group_id, member_id = req.group_id or "", req.member_id or ""
        if not group_id or not member_id:
            return sak.ShareAcknowledgeResponse(error_code=ErrorCode.INVALID_REQUEST)
        closing = self.sessions.acknowledge_context(
            (group_id, member_id, ctx.advertised), req.share_session_epoch
        )
        hint = self._elsewhere(ctx, group_id)
        if hint is not None:
            return hint.share_acknowledge(req)
        names = self._topic_names()
        acks = {
            (t.topic_id, p.partition_index): _batches(p.acknowledgement_batches)
            for t in req.topics
            for p in t.partitions
        }
        results = await self._acknowledge(group_id, member_id, acks, names)
        if closing:
            await self._release(group_id, member_id)
        by_topic: dict[bytes, list[sak.PartitionData]] = {}
        for (topic_id, index), (code, message) in results.items():
            by_topic.setdefault(topic_id, []).append(
                sak.PartitionData(partition_index=index, error_code=code, error_message=message)
            )
        return sak.ShareAcknowledgeResponse(
            acquisition_lock_timeout_ms=self.manager.limits_of(group_id).record_lock_duration_ms,
            responses=[
                sak.ShareAcknowledgeTopicResponse(topic_id=t, partitions=p) for t, p in by_topic.items()
            ],
        )

    # -- shared ----------------------------------------------------------------------------------

    def _elsewhere(self, ctx: RequestContext, group_id: str) -> LeaderHint | None:
        """Where to send the client when the group's shard is not held here (docs/share-groups.md,
        "Several nodes"): nothing is read or changed here, so only the shard's owner acquires."""
        shard_map = self.shard_map
        if shard_map is None:
            return None
        status = shard_map.status(group_id, ctx.now_ms)
        if status is None:
            return leader_hint(*shard_map.leader(group_id, ctx.now_ms))
        if status is not ShardState.ACTIVE:
            # Loading (a takeover, a start): the members are not known yet, and Kafka's share
            # consumer fails on UNKNOWN_MEMBER_ID; no leader is retriable. The shard loads next.
            shard_map.want(group_id)
            return leader_hint(None, 0)
        return None

    async def _acknowledge(
        self,
        group_id: str,
        member_id: str,
        acks: Mapping[TopicIdPartition, list[AcknowledgementBatch]],
        names: Mapping[bytes, str],
    ) -> dict[TopicIdPartition, tuple[int, str | None]]:
        results: dict[TopicIdPartition, tuple[int, str | None]] = {}
        known = {(names[tid], index): (tid, index) for tid, index in acks if tid in names}
        for tp in acks:
            if tp[0] not in names:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_ID, None)
        if known:
            await self.gather.turn((group_id, member_id))
            outcome = await self._op(
                ShareAcknowledgeOp(group_id, member_id, {name: acks[wire] for name, wire in known.items()})
            )
            self.gather.answered((group_id, member_id))
            for name, wire in known.items():
                results[wire] = (
                    (outcome.write_error, None)
                    if outcome.write_error
                    else outcome.errors.get(name, (0, None))
                )
        return results

    async def _release(self, group_id: str, member_id: str) -> None:
        await self._op(ShareReleaseOp(group_id, member_id))

    async def operate(self, op: object) -> ShareOutcome:
        """Run one delivery operation in the core; its outcome comes once its writes are durable."""
        return await self._op(op)

    async def _op(self, op: object) -> ShareOutcome:
        """Run one delivery operation in the core; its outcome comes once its writes are durable."""
        future: asyncio.Future[ShareOutcome] = asyncio.get_running_loop().create_future()
        clock = self.runtime.clock
        ctx = RequestContext(clock.now_ms(), clock.wall_ms(), 0, "", "", _Outcome(future))
        self.runtime.apply(self.runtime.coordinator.handle(ctx, op))
        return await future

    def _topic_names(self) -> dict[bytes, str]:
        return {record.topic_id: name for name, record in self.manager.catalog.topics.items()}

    async def _answer(self, ctx: RequestContext, work: Coroutine[Any, Any, Any], error_type: type) -> None:
        try:
            response = await work
        except SessionError as refused:
            response = error_type(error_code=refused.code)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("share request failed (client id %r)", ctx.client_id)
            response = error_type(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
        ctx.reply_to.send(response)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _owner(ctx: RequestContext) -> object:
    return getattr(ctx.reply_to, "connection", ctx.reply_to)


def _batches(
    batches: Sequence[sf.AcknowledgementBatch | sak.AcknowledgementBatch],
) -> list[AcknowledgementBatch]:
    return [AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types)) for b in batches]


__all__ = ["FetchedPartition", "ShareLeader"]


def renew_fetch_refusal(req: sf.ShareFetchRequest) -> str | None:
    """Kafka 4.4's refusal of a ShareFetch with IsRenewAck that would also fetch (its message)."""
    message = "".join(
        f"{name} must be set to 0, "
        for name, value in (
            ("maxBytes", req.max_bytes),
            ("minBytes", req.min_bytes),
            ("maxRecords", req.max_records),
            ("maxWaitMs", req.max_wait_ms),
        )
        if value != 0
    )
    return message + "if isRenewAck is true." if message else None
