"""The per-shard states of ShardMap (docs/architecture.md#shard-states): moves follow the table,
and what the gate, the loader and /readyz read follows the states."""

from __future__ import annotations

import pytest

from coordinator.core.shard_map import SHARD_TRANSITIONS, ShardMap, ShardState, ShardStateError

SHARDS = 4


def group_in(shard_map: ShardMap, shard: int) -> str:
    return next(f"g{i}" for i in range(1000) if shard_map.shard_of(f"g{i}") == shard)


def test_every_move_outside_the_table_is_refused() -> None:
    for source, allowed in SHARD_TRANSITIONS.items():
        for target in ShardState:
            shard_map = ShardMap(SHARDS, 0)
            shard_map.states[0] = source
            if target is source or target in allowed:
                shard_map.move(0, target)
                assert shard_map.state(0) is target
            else:
                with pytest.raises(ShardStateError):
                    shard_map.move(0, target)
                assert shard_map.state(0) is source


def test_a_shard_answers_here_while_loading_failed_or_active_and_not_once_closed() -> None:
    shard_map = ShardMap(SHARDS, 1, valid_until_ms=1000)
    group = group_in(shard_map, 2)
    assert shard_map.status(group, 0) is None and shard_map.owner(group, 0) is None
    shard_map.move(2, ShardState.LOADING)
    assert shard_map.status(group, 0) is ShardState.LOADING and shard_map.loading == {2}
    shard_map.move(2, ShardState.FAILED)
    assert shard_map.status(group, 0) is ShardState.FAILED and shard_map.loading == {2}
    shard_map.move(2, ShardState.LOADING)
    shard_map.move(2, ShardState.ACTIVE)
    assert shard_map.status(group, 0) is ShardState.ACTIVE and not shard_map.loading
    assert shard_map.owner(group, 0) == 1
    assert shard_map.status(group, 1000) is None  # the lease is not known to hold any more
    shard_map.close(2)
    assert shard_map.state(2) is ShardState.CLOSED and shard_map.status(group, 0) is None
    shard_map.close(2)  # closing a closed shard is a no-op
    shard_map.move(2, ShardState.LOADING)  # taken again


def test_one_process_is_ready_once_every_shard_is_active() -> None:
    shard_map = ShardMap.for_one_process(SHARDS, 0)
    for shard in range(SHARDS):
        shard_map.move(shard, ShardState.LOADING)
    assert not shard_map.ready
    for shard in range(SHARDS - 1):
        shard_map.move(shard, ShardState.ACTIVE)
    last = group_in(shard_map, SHARDS - 1)
    assert not shard_map.ready and shard_map.status(last, 0) is ShardState.LOADING
    shard_map.move(SHARDS - 1, ShardState.ACTIVE)
    assert shard_map.ready and shard_map.status(last, 0) is ShardState.ACTIVE
