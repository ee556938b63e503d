"""A group's offsets as parallel columns per topic (coordinator/core/group_offsets.py) hold and
hand back exactly what a map of (topic, partition) to record would, whatever the order of
commits, deletions and loaded rows (docs/performance.md#offsets-in-parallel-arrays)."""

from __future__ import annotations

import random

from coordinator.core.group_offsets import GroupOffsets
from storage.records import OffsetCommitRecord, OffsetRow

Key = tuple[str, int]


def record(
    topic: str, partition: int, offset: int, metadata: str = "", expire_ms: int | None = None
) -> OffsetCommitRecord:
    return OffsetCommitRecord(
        "g", topic, partition, offset, offset % 7 - 1, metadata, 1_000 + offset, expire_ms
    )


def as_row(r: OffsetCommitRecord) -> OffsetRow:
    return (r.group_id, r.topic, r.partition, r.offset, r.leader_epoch, r.metadata, r.commit_ms, r.expire_ms)


def check(offsets: GroupOffsets, model: dict[Key, OffsetCommitRecord]) -> None:
    assert offsets.records() == [model[k] for k in sorted(model)]
    assert len(offsets) == len(model)
    assert sorted(offsets.committed_keys()) == sorted(model)
    for topic in {t for t, _ in model} | {"absent"}:
        assert offsets.partitions(topic) == sorted(p for t, p in model if t == topic)
        for partition in range(-1, 40):
            assert offsets.get(topic, partition) == model.get((topic, partition))
    for entry in offsets.topic_offsets:
        partitions = entry.partitions()
        assert partitions == sorted(set(partitions))  # ascending, one each
        assert entry.metadata is None or any(entry.metadata)
        assert entry.expire_ms is None or any(e is not None for e in entry.expire_ms)


def test_commits_and_deletions_in_any_order_match_a_map_of_records() -> None:
    rng = random.Random(34)
    topics = [f"t{i}" for i in range(12)]  # more than the scanned maximum: the index comes and goes
    offsets = GroupOffsets("g")
    model: dict[Key, OffsetCommitRecord] = {}
    for step in range(3_000):
        topic = rng.choice(topics[: 3 + step // 300])
        partition = rng.randrange(0, 30) if rng.random() < 0.5 else rng.randrange(0, 4)
        if rng.random() < 0.3:
            offsets.discard(topic, partition)
            model.pop((topic, partition), None)
        else:
            metadata = rng.choice(["", "", "", "meta", "ü" * 3])
            expire_ms = rng.choice([None, None, None, 5_000 + step])
            r = record(topic, partition, step, metadata, expire_ms)
            offsets.put(r)
            model[(topic, partition)] = r
        if step % 97 == 0:
            check(offsets, model)
        assert (offsets._index is not None) == (len(offsets.topic_offsets) > 8)
    check(offsets, model)
    for topic, partition in list(model):
        offsets.discard(topic, partition)
    assert offsets.topic_offsets == () and not offsets.has_offsets() and offsets._index is None


def test_loaded_rows_in_key_order_or_not_give_the_same_offsets() -> None:
    rows = [record(t, p, 10 * p + len(t), "m" if p == 3 else "") for t in ("a", "bb") for p in (0, 1, 3, 9)]
    in_order = GroupOffsets("g")
    for topic in ("a", "bb"):
        in_order.load_topic(topic, [as_row(r) for r in rows if r.topic == topic])
    expected = {(r.topic, r.partition): r for r in rows}
    check(in_order, expected)
    shuffled = GroupOffsets("g")
    for r in reversed(rows):
        shuffled.load_topic(r.topic, [as_row(r)])
    check(shuffled, expected)
    # A run with a repeated partition: the last row wins, as with records.
    repeated = GroupOffsets("g")
    later = record("a", 0, 99)
    repeated.load_topic("a", [as_row(record("a", 0, 1)), as_row(record("a", 1, 2)), as_row(later)])
    check(repeated, {("a", 0): later, ("a", 1): record("a", 1, 2)})


def test_metadata_and_expiry_lists_exist_only_while_some_partition_has_one() -> None:
    offsets = GroupOffsets("g")
    offsets.put(record("t", 0, 1))
    offsets.put(record("t", 1, 2))
    (entry,) = offsets.topic_offsets
    assert entry.metadata is None and entry.expire_ms is None
    offsets.put(record("t", 1, 3, "checkpoint", 9_000))
    assert entry.metadata == ["", "checkpoint"] and entry.expire_ms == [None, 9_000]
    offsets.discard("t", 1)
    assert entry.metadata is None and entry.expire_ms is None
    check(offsets, {("t", 0): record("t", 0, 1)})
