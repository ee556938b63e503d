"""Share group membership under random joins, heartbeats, leaves, session expiries, topic changes
and restarts (docs/share-groups.md, "Membership"): the invariants Kafka's share groups keep."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.share.manager import ShareGroupManager
from protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from tests.coordinator.harness import Harness, Reply

SHARE_GROUP_HEARTBEAT = 76
MEMBERS = ["m0", "m1", "m2", "m3", "m4"]

Step = tuple[str, int]
steps = st.lists(
    st.tuples(st.sampled_from(["join", "beat", "leave", "idle", "grow", "restart"]), st.integers(0, 4)),
    max_size=40,
)


def send(h: Harness, member_id: str, epoch: int, topics: list[str] | None) -> Reply:
    ctx = h.ctx(SHARE_GROUP_HEARTBEAT, 1)
    request = ShareGroupHeartbeatRequest(
        group_id="g", member_id=member_id, member_epoch=epoch, subscribed_topic_names=topics
    )
    h.apply(h.coordinator.handle(ctx, request))
    assert isinstance(ctx.reply_to, Reply)
    return ctx.reply_to


@settings(max_examples=60, deadline=None)
@given(steps)
def test_membership_invariants(script: list[Step]) -> None:
    h = Harness(BrokerGroupSettings())
    h.catalog.set_topic("t", 2)
    epochs: dict[str, int] = {}  # what each live client believes its epoch is
    last_group_epoch = 0
    for action, index in script:
        member = MEMBERS[index]
        if action == "join" and member not in epochs:
            reply = send(h, member, 0, ["t"])
            assert reply.wire.error_code == 0
            epochs[member] = reply.wire.member_epoch
        elif action == "beat" and member in epochs:
            reply = send(h, member, epochs[member], None)
            if reply.wire.error_code == 0:
                assert reply.wire.member_epoch >= epochs[member]  # epochs never go back
                epochs[member] = reply.wire.member_epoch
            else:  # its session ran out meanwhile: the client rejoins from scratch
                assert reply.wire.error_code in (25, 110)  # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH
                del epochs[member]
        elif action == "leave" and member in epochs:
            reply = send(h, member, -1, None)
            assert reply.wire.error_code in (0, 25)
            del epochs[member]
        elif action == "idle":
            h.advance(20_000)  # sessions are 45 s: two idle steps without a beat lose a member
        elif action == "grow":
            h.catalog.set_topic("t", min(h.catalog.topics["t"].num_partitions + 1, 6))
        elif action == "restart":
            h = h.restart()
        group = h.coordinator.kind(ShareGroupManager).groups.get("g")
        if group is None:
            continue
        assert group.group_epoch >= last_group_epoch
        last_group_epoch = group.group_epoch
        assert group.assignment_epoch <= group.group_epoch
        # Every member's assignment is a target of an epoch it was given; partitions are shared as
        # the simple assignor shares them once the target is current.
        if group.members and group.assignment_epoch == group.group_epoch:
            partitions = group.subscription_metadata.get("t", (b"", 0))[1]
            holders: dict[int, int] = {}
            for target in group.target.values():
                for _, p in target:
                    holders[p] = holders.get(p, 0) + 1
            if partitions:
                wanted = math.ceil(len(group.members) / partitions) if len(group.members) > partitions else 1
                assert holders == dict.fromkeys(range(partitions), wanted)
    # Stored state reloads to the same membership and epochs.
    group = h.coordinator.kind(ShareGroupManager).groups.get("g")
    if group is not None:
        after = h.restart().coordinator.kind(ShareGroupManager).groups["g"]
        assert (after.group_epoch, after.assignment_epoch) == (group.group_epoch, group.assignment_epoch)
        assert {m: (x.member_epoch, x.assigned) for m, x in after.members.items()} == {
            m: (x.member_epoch, x.assigned) for m, x in group.members.items()
        }
