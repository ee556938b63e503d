"""Writes the dead-letter records of share groups to the upstream (docs/share-groups.md,
"Dead-letter topics", Kafka 4.4's KIP-1191).

Records a share group archives while it has ``errors.deadletterqueue.topic.name`` set stay
ARCHIVING in the delivery state (persisted so, before the acknowledgement that archived them is
answered). This task finds them, produces their dead-letter records (acks all) and only then
marks them ARCHIVED; a restart finds the ARCHIVING ones in storage and writes them again. A
record's dead letter is therefore never lost; it is written twice only when the process dies
between the upstream's acknowledgement and the ARCHIVED write (Kafka has the same window).

The task is woken by the core once records written ARCHIVING are durable (an acknowledgement, a
release, a lock running out, a member leaving: ``ShareDelivery.dead_letters_due``); a scan every
``FALLBACK_SCAN_S`` retries what could not be written (the upstream unreachable) and is the only
periodic work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Final

from coordinator.api.streams_topics import CREATE_TOPICS_VERSION
from coordinator.core.share.delivery import PartitionKey, ShareDeadLetteredOp, ShareOutcome
from coordinator.core.share.manager import ShareGroupManager
from coordinator.core.share.partition import DeadLetterRun
from coordinator.gateway.dead_letter_records import (
    DeadLetter,
    context_headers,
    dead_letter_batch,
    originals,
    reason_for,
)
from coordinator.gateway.share_upstream import PARTITION_MAX_BYTES, UpstreamShareRecords
from coordinator.gateway.upstream import UpstreamError
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)

log = logging.getLogger(__name__)

DEFAULT_PREFIX: Final = "dlq."
MAX_RECORDS_PER_BATCH: Final = 500
FALLBACK_SCAN_S: Final = 5.0
RETRY_S: Final = 0.2  # runs left unwritten (the upstream failed, a topic being created)
# Answers after which the records are archived without a dead letter, as Kafka 4.4 does when its
# DLQ handler fails for good; every other error is retried.
_GIVE_UP: Final = frozenset(
    (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.INVALID_RECORD,
    )
)

Operate = Callable[[object], Coroutine[Any, Any, ShareOutcome]]


class DeadLetterWriter:
    """The background task of the gateway that writes pending dead letters (see the module)."""

    def __init__(
        self,
        manager: Callable[[], ShareGroupManager],
        records: UpstreamShareRecords,
        operate: Operate,
        wall_ms: Callable[[], int],
        prefix: str = DEFAULT_PREFIX,
        auto_create: bool = False,
        interval_s: float = FALLBACK_SCAN_S,
    ) -> None:
        self.manager = manager
        self.records = records
        self.operate = operate
        self.wall_ms = wall_ms
        self.prefix = prefix
        self.auto_create = auto_create
        self.interval_s = interval_s
        self.written = 0
        self.passes = 0  # scans of the pending dead letters, for tests
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            self.passes += 1
            left = True
            try:
                left = await self.write_pending()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("writing dead letters failed; retried")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), RETRY_S if left else self.interval_s)

    async def write_pending(self) -> bool:
        """One pass: every ARCHIVING run written (or given up on) and marked ARCHIVED. Whether
        runs are left (not written yet: retried after ``RETRY_S``)."""
        pending = self.manager().dead_letters_pending()
        left = False
        for key, runs in pending.items():
            done = await self._write(key, runs)
            left = left or len(done) < len(runs)
            if done:
                await self.operate(ShareDeadLetteredOp(key[0], {(key[1], key[2]): done}))
        return left

    async def _write(self, key: PartitionKey, runs: Sequence[DeadLetterRun]) -> list[DeadLetterRun]:
        """The runs whose dead letters are written, or can never be."""
        group_id, topic, partition = key
        config = self.manager().settings_for(group_id)
        target = config.dlq_topic_name.strip()
        problem = self._refusal(group_id, target)
        if problem is not None:
            log.warning("%s The records are archived without a dead letter.", problem)
            return list(runs)
        partitions = self.records.upstream.catalog.partitions_of(target)
        if partitions is None:
            await self.records.upstream.wait_refreshed(self.records.upstream.timeout_s)
            partitions = self.records.upstream.catalog.partitions_of(target)
        if not partitions and self.auto_create and await self._create_topic(target):
            return []  # written with a later pass, once the catalog has the topic
        if not partitions:
            log.warning(
                "DLQ topic does not exist and auto create is disabled on cluster for share group: "
                "%s, topic: %s. The records are archived without a dead letter.",
                group_id,
                target,
            )
            return list(runs)
        limit = config.delivery_count_limit
        done: list[DeadLetterRun] = []
        for run in runs:
            copies = await self._originals(topic, partition, run) if config.dlq_copy_record_enable else {}
            letters = []
            for offset in range(run.first_offset, run.last_offset + 1):
                key_value = copies.get(offset, (None, None))
                headers = context_headers(
                    topic,
                    partition,
                    offset,
                    group_id,
                    run.delivery_count,
                    reason_for(run.delivery_count, limit),
                )
                letters.append(DeadLetter(headers, *key_value))
            code = 0
            for start in range(0, len(letters), MAX_RECORDS_PER_BATCH):
                chunk = letters[start : start + MAX_RECORDS_PER_BATCH]
                code = await self.records.produce(
                    target, partition % partitions, dead_letter_batch(chunk, self.wall_ms())
                )
                if code:
                    break
            if code and code not in _GIVE_UP:
                log.info(
                    "dead letters of %s-%d for group %s: upstream answered %d; retried",
                    topic,
                    partition,
                    group_id,
                    code,
                )
                break  # in order: the later runs wait too
            if code:
                log.warning(
                    "dead letters of %s-%d for group %s refused (%d); archived without",
                    topic,
                    partition,
                    group_id,
                    code,
                )
            else:
                self.written += len(letters)
            done.append(run)
        return done

    def _refusal(self, group_id: str, target: str) -> str | None:
        """Kafka 4.4's checks of the DLQ topic when it writes (its messages)."""
        if not target:
            return f"DLQ topic is not configured for share group {group_id}."
        if target.startswith("__"):
            return (
                f"Configured DLQ topic name in share group: {group_id} cannot start with __, topic: {target}."
            )
        if self.prefix and not target.startswith(self.prefix):
            return (
                "Configured DLQ topic name does not comply with the DLQ topic prefix in share group: "
                f"{group_id}, topic: {target}, prefix: {self.prefix}."
            )
        return None

    async def _create_topic(self, topic: str) -> bool:
        """CreateTopics upstream as Kafka 4.4 creates a DLQ topic (the broker's default partitions
        and replication, DLQ enabled on it, CreateTime); whether it exists or may exist soon."""
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=topic,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=[
                        CreatableTopicConfig("errors.deadletterqueue.group.enable", "true"),
                        CreatableTopicConfig("message.timestamp.type", "CreateTime"),
                    ],
                )
            ],
            timeout_ms=int(self.records.upstream.timeout_s * 1000),
        )
        upstream = self.records.upstream
        try:
            connection = await upstream.connection_to(None)
            version = min(upstream.version_for(ApiKey.CREATE_TOPICS), CREATE_TOPICS_VERSION)
            response: CreateTopicsResponse = await connection.request(
                ApiKey.CREATE_TOPICS, version, request, upstream.timeout_s
            )
        except (UpstreamError, OSError, TimeoutError) as exc:
            log.info("creating the DLQ topic %s upstream failed: %s; retried", topic, exc)
            return True
        upstream.refresh_soon()
        for result in response.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                log.warning(
                    "Unable to create DLQ topic %s: %s %s",
                    topic,
                    ErrorCode(result.error_code).name,
                    result.error_message or "",
                )
                return False
        return True

    async def _originals(
        self, topic: str, partition: int, run: DeadLetterRun
    ) -> dict[int, tuple[bytes | None, bytes | None]]:
        # A short wait: some upstreams (Tansu) answer a Fetch without waiting with no partitions.
        fetched = await self.records.fetch(
            {(topic, partition): run.first_offset}, 500, 1, PARTITION_MAX_BYTES
        )
        answer = fetched.get((topic, partition))
        if answer is None or answer.error_code:
            return {}
        return originals(answer.records, run.first_offset, run.last_offset)
