"""The classic group APIs on a streams group: refused with the errors Kafka 4.4 answers
(JoinGroup INCONSISTENT_GROUP_PROTOCOL, SyncGroup and Heartbeat UNKNOWN_MEMBER_ID, LeaveGroup
UNKNOWN_MEMBER_ID per member), so that the id stays the streams group's."""

from __future__ import annotations

from coordinator.core.context import RequestContext
from coordinator.core.effects import Effects
from coordinator.core.errors import INCONSISTENT_GROUP_PROTOCOL, NONE, UNKNOWN_MEMBER_ID
from coordinator.core.members import leave_group_response
from protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from protocol.messages.leave_group import LeaveGroupRequest, MemberResponse
from protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse


class ClassicRefusal:
    """A ClassicProtocolApi (coordinator/core/group.py) that takes no classic member."""

    def join_group(self, ctx: RequestContext, req: JoinGroupRequest, fx: Effects) -> None:
        fx.reply(
            ctx.reply_to,
            JoinGroupResponse(
                error_code=INCONSISTENT_GROUP_PROTOCOL,
                generation_id=-1,
                protocol_name=None if ctx.api_version >= 7 else "",
                member_id=req.member_id,
            ),
        )

    def sync_group(self, ctx: RequestContext, req: SyncGroupRequest, fx: Effects) -> None:
        fx.reply(ctx.reply_to, SyncGroupResponse(error_code=UNKNOWN_MEMBER_ID, assignment=b""))

    def heartbeat(
        self, ctx: RequestContext, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> int:
        return UNKNOWN_MEMBER_ID

    def leave_group(self, ctx: RequestContext, req: LeaveGroupRequest, fx: Effects) -> None:
        if ctx.api_version >= 3:
            results = [
                MemberResponse(m.member_id, m.group_instance_id, UNKNOWN_MEMBER_ID) for m in req.members
            ]
        else:
            results = [MemberResponse(req.member_id, None, UNKNOWN_MEMBER_ID)]
        fx.reply(ctx.reply_to, leave_group_response(ctx.api_version, NONE, results))
