"""TxnOffsetCommit v0-6 and pending transactional offsets (docs/transactions.md)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.core.txn_offsets import Resolution
from protocol.errors import ErrorCode
from protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from storage.records import OffsetCommitRecord, TxnOffsetRecord, TxnOffsetTombstone
from tests.coordinator.harness import Harness, classic_group_of

TXN_OFFSET_COMMIT = 28
PID, EPOCH = 1000, 3
DAY = 24 * 3_600_000
RETENTION = 7 * DAY


class Outcome:
    """A ReplyTo for complete_transaction."""

    def __init__(self) -> None:
        self.resolutions: list[Resolution] = []

    def send(self, response: Any) -> None:
        self.resolutions.append(response)


def txn_commit(
    h: Harness,
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    producer_id: int = PID,
    epoch: int = EPOCH,
    version: int = 3,
    generation: int = -1,
    member_id: str = "",
    transactional_id: str = "tx",
    metadata: str = "",
) -> Any:
    by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            TxnOffsetCommitRequestPartition(partition, offset, -1, metadata)
        )
    request = TxnOffsetCommitRequest(
        transactional_id=transactional_id,
        group_id=group,
        producer_id=producer_id,
        producer_epoch=epoch,
        generation_id_or_member_epoch=generation if version >= 3 else -1,
        member_id=member_id if version >= 3 else "",
        topics=[TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    return h._call(h.coordinator.txn_commit_offsets, TXN_OFFSET_COMMIT, version, request)


def complete(h: Harness, committed: bool, producer_id: int = PID, epoch: int = EPOCH) -> Resolution:
    outcome = Outcome()
    h.apply(h.coordinator.complete_transaction(producer_id, epoch, committed, outcome, h.now_ms, h.wall_ms))
    assert len(outcome.resolutions) == 1
    return outcome.resolutions[0]


def codes(reply: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in reply.wire.topics for p in t.partitions}


def offsets(h: Harness, group: str, topics: dict[str, list[int]], *, stable: bool = False) -> dict[Any, Any]:
    reply = h.fetch(group, topics, version=7, require_stable=stable)
    return {
        (t.name, p.partition_index): (p.committed_offset, p.error_code)
        for t in reply.wire.topics
        for p in t.partitions
    }


@pytest.mark.parametrize("version", range(6))  # v6 names topics by id: the API layer resolves them
def test_pending_offsets_are_invisible_until_the_transaction_commits(h: Harness, version: int) -> None:
    h.commit("g", {("t", 0): 5})
    reply = txn_commit(h, "g", {("t", 0): 10, ("t", 1): 11}, version=version)
    assert codes(reply) == {("t", 0): 0, ("t", 1): 0}
    assert offsets(h, "g", {"t": [0, 1]}) == {("t", 0): (5, 0), ("t", 1): (-1, 0)}
    unstable = ErrorCode.UNSTABLE_OFFSET_COMMIT
    assert offsets(h, "g", {"t": [0, 1]}, stable=True) == {("t", 0): (-1, unstable), ("t", 1): (-1, unstable)}
    assert complete(h, committed=True) == Resolution(2, 0)
    assert offsets(h, "g", {"t": [0, 1]}, stable=True) == {("t", 0): (10, 0), ("t", 1): (11, 0)}
    assert h.store.txn_offsets == {}
    assert h.store.offsets[("g", "t", 0)].offset == 10


def test_abort_discards_the_pending_offsets(h: Harness) -> None:
    h.commit("g", {("t", 0): 5})
    txn_commit(h, "g", {("t", 0): 10})
    assert complete(h, committed=False) == Resolution(1, 0)
    assert offsets(h, "g", {"t": [0]}, stable=True) == {("t", 0): (5, 0)}
    assert h.store.txn_offsets == {}


def test_an_outcome_resolves_only_its_own_producer_and_epoch(h: Harness) -> None:
    txn_commit(h, "g", {("t", 0): 10})
    txn_commit(h, "g", {("t", 1): 20}, producer_id=PID + 1)
    txn_commit(h, "h", {("t", 0): 30}, epoch=EPOCH + 1, producer_id=PID + 2)
    assert complete(h, committed=True, epoch=EPOCH + 1) == Resolution(0, 0)  # no such transaction
    assert complete(h, committed=True) == Resolution(1, 0)
    assert offsets(h, "g", {"t": [0, 1]}) == {("t", 0): (10, 0), ("t", 1): (-1, 0)}
    assert offsets(h, "g", {"t": [1]}, stable=True) == {("t", 1): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)}


def test_pending_offsets_survive_a_restart(h: Harness) -> None:
    txn_commit(h, "g", {("t", 0): 10})
    assert list(h.store.txn_offsets) == [("g", PID, "t", 0)]
    h2 = h.restart()
    assert offsets(h2, "g", {"t": [0]}, stable=True) == {("t", 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)}
    assert complete(h2, committed=True) == Resolution(1, 0)
    assert offsets(h2.restart(), "g", {"t": [0]}, stable=True) == {("t", 0): (10, 0)}


def test_a_failed_resolution_write_leaves_the_offsets_pending(h: Harness) -> None:
    txn_commit(h, "g", {("t", 0): 10})
    h.fail_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert complete(h, committed=True) == Resolution(0, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    h.fail_code = None
    assert offsets(h, "g", {"t": [0]}, stable=True) == {("t", 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)}
    assert complete(h, committed=True) == Resolution(1, 0)  # the client's retried EndTxn
    assert offsets(h, "g", {"t": [0]}) == {("t", 0): (10, 0)}


def test_the_reply_waits_for_the_pending_offsets_to_be_durable(h: Harness) -> None:
    h.hold = True
    reply = txn_commit(h, "g", {("t", 0): 10})
    assert not reply.answered
    h.flush(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert codes(reply) == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert offsets(h, "g", {"t": [0]}, stable=True) == {("t", 0): (-1, 0)}  # nothing pending


def test_metadata_too_large_is_refused_per_partition(h: Harness) -> None:
    reply = txn_commit(h, "g", {("t", 0): 10}, metadata="x" * 5000)
    assert codes(reply) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert h.store.txn_offsets == {}


def test_an_empty_group_id_is_invalid(h: Harness) -> None:
    assert codes(txn_commit(h, "", {("t", 0): 1})) == {("t", 0): ErrorCode.INVALID_GROUP_ID}


# -- KIP-447: the member and generation checks of v3+ ---------------------------------------------


def test_v3_checks_the_member_and_generation_of_a_classic_group(h0: Harness) -> None:
    members, generation = h0.stable_group("g", 1)
    ok = txn_commit(h0, "g", {("t", 0): 1}, generation=generation, member_id=members[0])
    assert codes(ok) == {("t", 0): 0}
    stale = txn_commit(h0, "g", {("t", 0): 1}, generation=generation - 1, member_id=members[0])
    assert codes(stale) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    unknown = txn_commit(h0, "g", {("t", 0): 1}, generation=generation, member_id="nobody")
    assert codes(unknown) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}


def test_without_a_member_a_transactional_commit_is_taken_by_a_live_group(h0: Harness) -> None:
    h0.stable_group("g", 1)
    # v0-2 name no member (and v3+ producers without group metadata): Kafka takes the commit.
    assert codes(txn_commit(h0, "g", {("t", 0): 1}, version=2)) == {("t", 0): 0}
    # An OffsetCommit without a member is refused by the same group.
    assert (
        h0.commit("g", {("t", 0): 1}).wire.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    )


def test_a_generation_for_an_unknown_group_is_illegal(h: Harness) -> None:
    reply = txn_commit(h, "nowhere", {("t", 0): 1}, generation=4, member_id="m")
    assert codes(reply) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert classic_group_of(h.coordinator, "nowhere") is None


# -- deletion and retention ------------------------------------------------------------------------


def test_deleting_a_group_deletes_its_pending_offsets(h: Harness) -> None:
    txn_commit(h, "g", {("t", 0): 10})
    assert h.delete_groups("g").wire.results[0].error_code == 0
    assert h.store.txn_offsets == {}
    assert TxnOffsetTombstone("g", PID, "t", 0) in h.store.records()
    assert complete(h, committed=True) == Resolution(0, 0)
    assert offsets(h, "g", {"t": [0]}) == {("t", 0): (-1, 0)}


def test_an_offset_with_an_open_transaction_does_not_expire(h: Harness) -> None:
    h.commit("simple", {("t", 0): 1, ("t", 1): 2})
    txn_commit(h, "simple", {("t", 0): 10})
    h.advance(RETENTION + DAY)
    assert offsets(h, "simple", {"t": [0, 1]}) == {("t", 0): (1, 0), ("t", 1): (-1, 0)}
    assert classic_group_of(h.coordinator, "simple") is not None
    complete(h, committed=False)
    h.advance(DAY)
    assert offsets(h, "simple", {"t": [0, 1]}) == {("t", 0): (-1, 0), ("t", 1): (-1, 0)}
    assert classic_group_of(h.coordinator, "simple") is None


def test_a_group_with_only_pending_offsets_is_not_swept(h: Harness) -> None:
    txn_commit(h, "g", {("t", 0): 10})
    h.advance(RETENTION + DAY)
    assert classic_group_of(h.coordinator, "g") is not None
    complete(h, committed=True)
    assert h.store.offsets[("g", "t", 0)] == OffsetCommitRecord(
        "g", "t", 0, 10, -1, "", h.store.offsets[("g", "t", 0)].commit_ms, None
    )


def test_a_later_commit_of_the_same_producer_replaces_the_pending_offset(h: Harness) -> None:
    txn_commit(h, "g", {("t", 0): 10})
    txn_commit(h, "g", {("t", 0): 12})
    assert [r.offset for r in h.store.txn_offsets.values()] == [12]
    assert isinstance(next(iter(h.store.txn_offsets.values())), TxnOffsetRecord)
    complete(h, committed=True)
    assert offsets(h, "g", {"t": [0]}) == {("t", 0): (12, 0)}


@pytest.mark.parametrize("version", [0, 3, 5])
def test_a_share_group_takes_no_transactional_offsets(h0: Harness, version: int) -> None:
    from tests.coordinator.test_share_groups import beat

    h0.catalog.set_topic("t", 1)
    beat(h0, "m1", group="sg")
    reply = txn_commit(h0, "sg", {("t", 0): 5}, version=version, generation=1, member_id="m1")
    assert codes(reply) == {("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}
    # Nothing pending: a pending offset would answer UNSTABLE_OFFSET_COMMIT here.
    assert offsets(h0, "sg", {"t": [0]}, stable=True) == {("t", 0): (-1, ErrorCode.NONE)}
