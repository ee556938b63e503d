"""Serving DescribeUserScramCredentials and AlterUserScramCredentials: both need the stored
credentials, which live in the storage (not in the core's memory), so each request reads them
on the event loop, then answers (Describe) or writes the planned records and answers once they
are durable (Alter). Kafka's checks and answers are coordinator.api.scram_users'.

Logins read credentials through a cache of about a second, so a change applies to new logins
within that time, as with `coordinator users` on the database.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from coordinator.api.amend import reply
from coordinator.api.routes import Routes
from coordinator.api.scram_users import describe_response, plan_alter
from coordinator.core.admin_write import admin_write
from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from coordinator.server.runtime import Runtime
from coordinator.server.tasks import StorageAnswers
from protocol.apis import ApiKey
from protocol.error_responses import error_response
from protocol.errors import ErrorCode
from protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from storage.base import StoreError
from storage.records import UserCredentialRecord

log = logging.getLogger(__name__)

AllCredentials = Callable[[], Awaitable[list[UserCredentialRecord]]]
UNAVAILABLE = "the credentials could not be read from storage, try again later"


class ScramUsers:
    def __init__(self, runtime: Runtime, load_all: AllCredentials) -> None:
        self.runtime = runtime
        self.load_all = load_all
        self.answers = StorageAnswers(runtime.apply)

    def install(self, routes: Routes) -> None:
        routes.add(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, DescribeUserScramCredentialsRequest, self.describe)
        routes.add(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, AlterUserScramCredentialsRequest, self.alter)

    def describe(self, ctx: RequestContext, req: DescribeUserScramCredentialsRequest) -> Result:
        async def answer() -> Result:
            return reply(ctx, describe_response(req, await self.load_all()))

        self._spawn(ctx, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, req, answer)
        return Result()

    def alter(self, ctx: RequestContext, req: AlterUserScramCredentialsRequest) -> Result:
        async def answer() -> Result:
            response, records = plan_alter(req, await self.load_all())
            if not records:
                return reply(ctx, response)

            def fail_entries(code: int) -> None:
                for result in response.results:
                    if not result.error_code:
                        result.error_code, result.error_message = code, "could not store the credentials"

            return admin_write(ctx.reply_to, records, response, fail_entries=fail_entries)

        self._spawn(ctx, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, req, answer)
        return Result()

    def _spawn(
        self, ctx: RequestContext, api_key: ApiKey, req: Any, answer: Callable[[], Awaitable[Result]]
    ) -> None:
        async def answer_or_unavailable() -> Result:
            try:
                return await answer()
            except StoreError as exc:
                log.error("cannot read the SCRAM credentials for %s: %s", api_key.name, exc)
                code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
                return reply(ctx, error_response(api_key, ctx.api_version, req, code, UNAVAILABLE))

        self.answers.spawn(answer_or_unavailable)

    async def close(self) -> None:
        await self.answers.close()
