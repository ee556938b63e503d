"""RENEW acknowledgements and ``share.renew.acknowledge.enable``: enabled (Kafka's default) a RENEW
restarts the member's lock; disabled, Kafka 4.4's share-partition answers INVALID_RECORD_STATE
"Renewing acquisition locks is not enabled for the group." and applies none of the partition's
acknowledgements (docs/share-groups.md, "Transitions")."""

from __future__ import annotations

import pytest

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.delivery import ShareAcknowledgeOp, ShareAcquireOp, ShareInitializeOp
from coordinator.core.share.partition import AcknowledgementBatch, AcknowledgeType, RecordState
from protocol.errors import ErrorCode
from tests.coordinator.harness import Harness
from tests.coordinator.test_group_configs import SET, outcome
from tests.coordinator.test_share_delivery import run, state
from tests.coordinator.test_share_groups import beat

LOCK_MS = 15_000  # the smallest lock duration the broker's default bounds let a group config set
RENEW, ACCEPT = int(AcknowledgeType.RENEW), int(AcknowledgeType.ACCEPT)


@pytest.fixture
def h() -> Harness:
    harness = Harness(
        BrokerGroupSettings(group_initial_rebalance_delay_ms=0, group_share_record_lock_duration_ms=LOCK_MS)
    )
    harness.catalog.set_topic("t", 2)
    beat(harness, "m")
    for index in (0, 1):
        run(harness, ShareInitializeOp("g", {("t", index): 0}))
        run(harness, ShareAcquireOp("g", "m", {("t", index): [(0, 1)]}, 100))
    return harness


def test_renew_restarts_the_lock_when_enabled(h: Harness) -> None:
    h.advance(LOCK_MS - 1000)
    renewed = run(h, ShareAcknowledgeOp("g", "m", {("t", 0): [AcknowledgementBatch(0, 1, (RENEW,))]}))
    assert renewed.value is not None and renewed.value.errors[("t", 0)] == (0, None)
    h.advance(2000)  # past the first lock, within the renewed one
    assert state(h, 0) == RecordState.ACQUIRED


def test_renew_is_refused_when_the_group_disables_it(h: Harness) -> None:
    assert outcome(h, ("share.renew.acknowledge.enable", SET, "false")) == (0, None)
    h.advance(LOCK_MS - 1000)
    refused = run(
        h,
        ShareAcknowledgeOp(
            "g",
            "m",
            {
                ("t", 0): [AcknowledgementBatch(0, 0, (ACCEPT,)), AcknowledgementBatch(1, 1, (RENEW,))],
                ("t", 1): [AcknowledgementBatch(0, 1, (ACCEPT,))],
            },
        ),
    )
    assert refused.value is not None
    assert refused.value.errors[("t", 0)] == (
        ErrorCode.INVALID_RECORD_STATE,
        "Renewing acquisition locks is not enabled for the group.",
    )
    assert refused.value.errors[("t", 1)] == (0, None)  # another partition is unaffected
    assert state(h, 0) == RecordState.ACQUIRED  # the ACCEPT beside the RENEW was not applied either
    h.advance(2000)  # the lock was not renewed: it runs out at its first deadline
    assert state(h, 1) == RecordState.AVAILABLE
