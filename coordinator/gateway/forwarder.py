"""The gateway's hook in the dispatcher: which client frames are forwarded to the upstream
brokers, and the checks they pass first (SASL, supported versions, authorization, the
conversion of old formats). Request bodies are never decoded (only the header, and Produce's
acks).

The modules around it: upstream_links.py picks the upstream connection a request travels on;
forwarded.py is a request waiting for its response, passed on while it arrives when it can be
(cut_through.py); forwarded_responses.py makes a response received whole ready for its client
(broker_addresses.py for Metadata, DescribeCluster and FindCoordinator, node_endpoints.py,
latest_offsets.py, old_formats.py). The client connection sends its answers in request order
(coordinator/server/connection.py).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Final

from coordinator.api.table import GROUP_CONFIG_APIS
from coordinator.core.cluster import NodeIdentity
from coordinator.gateway.authorization import ForwardedAuthorization
from coordinator.gateway.broker_addresses import BrokerAddresses
from coordinator.gateway.forwarded import MALFORMED, Forwarded
from coordinator.gateway.forwarded_responses import ForwardedResponses
from coordinator.gateway.group_configs import (
    lists_group_resources,
    names_group_resources,
    upstream_part,
    with_group_resources,
)
from coordinator.gateway.latest_offsets import LatestOffsets, asked_latest
from coordinator.gateway.old_formats import (
    ConversionError,
    converts,
    downgrade_response,
    produce_error_response,
    upgrade_request,
    upgraded_version,
)
from coordinator.gateway.transactions import TransactionOutcomes
from coordinator.gateway.upstream_cluster import UpstreamCluster
from coordinator.gateway.upstream_links import FORWARDED, UpstreamLinks
from coordinator.gateway.upstream_pool import SlowClientBytes
from coordinator.gateway.versions import FORWARDED_MAX, SERVED_HERE, api_versions_response
from coordinator.gateway.virtual_brokers import VirtualBrokers
from coordinator.server.authn import SaslServer
from coordinator.server.byte_budget import UNLIMITED, ByteBudget
from coordinator.server.connection import Connection
from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from protocol.gateway_wire import encode_forwarded_response
from protocol.primitives import DecodeError, read_uvarint, skip_tagged_fields
from protocol.wire import Request, decode_request, encode_response, peek_header

log = logging.getLogger(__name__)

_INT16: Final = struct.Struct(">h")
# Forwarded unless they name groups (FindCoordinator for groups, GROUP config resources).
_SOMETIMES_SERVED_HERE: Final = frozenset(
    {ApiKey.FIND_COORDINATOR, ApiKey.LIST_CONFIG_RESOURCES, *GROUP_CONFIG_APIS}
)
UNKNOWN_API_MESSAGE: Final = "api key {key} v{version} is not forwarded by the gateway"


@dataclass(frozen=True, slots=True)
class GroupListing:
    """The groups with dynamic configs; whether a single node still loads its shards, and a
    call once they are loaded."""

    group_ids: Callable[[], Iterable[str]]
    loading: Callable[[], bool]
    after_loading: Callable[[Callable[[], None]], None]


class Forwarder:
    """The gateway's hook in the dispatcher: takes the frames of forwarded APIs.

    Forwarded requests are pipelined: each is written upstream at once (up to upstream_links.MAX_PIPELINE per
    connection, the connection's FORWARDED pipeline), and the responses, which upstream returns
    in order, are handed to the client connection, which sends them in request order. A request
    served here that arrives behind forwarded ones waits until they are answered (the connection
    lets only requests of one pipeline be in the server together)."""

    def __init__(
        self,
        upstream: UpstreamCluster,
        brokers: VirtualBrokers,
        coordinator: Callable[[], NodeIdentity],
        budget: ByteBudget | None = None,
        pool_size: int = 0,
        transactions: TransactionOutcomes | None = None,
    ) -> None:
        self.upstream = upstream
        self.brokers = brokers
        self.sasl: SaslServer | None = None
        # With the authorizer on, every forwarded request is authorized with the client's
        # principal (authorization.py); until the hook is installed nothing is forwarded.
        self.authorization_required = False
        self.authorization: ForwardedAuthorization | None = None
        # The GROUP part of a ListConfigResources that also asks upstream's types (setup.py).
        self.group_listing: GroupListing | None = None
        self._refused_logged: set[tuple[int, int]] = set()
        self.transactions = transactions  # docs/transactions.md
        self._tasks: set[asyncio.Task[None]] = set()
        addresses = BrokerAddresses(upstream, brokers, coordinator)
        # What the answers of clients that do not read may hold on shared upstream connections
        # (docs/gateway.md#back-pressure).
        self.slow = SlowClientBytes(UNLIMITED if budget is None else budget.limit // 2)
        self.links = UpstreamLinks(upstream, brokers, addresses, self.slow, self._spawn, budget, pool_size)
        self.responses = ForwardedResponses(
            brokers, addresses, LatestOffsets(upstream), self.slow, transactions, self._spawn
        )

    # ---- the dispatcher's hook -------------------------------------------------------------
    def forward(self, connection: Connection, frame: bytes) -> bool:
        """True when the frame was taken here; False leaves it to the dispatcher."""
        return self._take(connection, frame)

    def pipeline_of(self, connection: Connection, frame: bytes) -> str | None:
        """FORWARDED for a frame that is surely forwarded (the connection lets it join earlier
        forwarded requests in flight); None when it may be served here."""
        if len(frame) < 4:
            return None
        api_key = int.from_bytes(frame[:2], "big", signed=True)
        version = int.from_bytes(frame[2:4], "big", signed=True)
        if (
            api_key in SERVED_HERE
            or api_key in _SOMETIMES_SERVED_HERE
            or not 0 <= version <= FORWARDED_MAX.get(api_key, -1)
        ):
            return None
        session = connection.sasl
        if session is not None and not session.authenticated:
            return None
        return FORWARDED.name

    def _take(self, connection: Connection, frame: bytes) -> bool:
        try:
            api_key, version, correlation_id = peek_header(frame)
        except DecodeError:
            return False  # the dispatcher closes the connection with its message
        if api_key in SERVED_HERE:
            if api_key == ApiKey.API_VERSIONS and version > SERVED_VERSIONS[ApiKey.API_VERSIONS][1]:
                # KIP-511: a newer ApiVersions gets v0 with our ranges, so the client retries lower.
                body = api_versions_response(self.upstream.api_versions, ErrorCode.UNSUPPORTED_VERSION)
                connection.send_raw(encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body))
                return True
            return False
        if api_key == ApiKey.FIND_COORDINATOR:
            try:
                request = decode_request(frame)
            except Exception:
                return False  # malformed or unsupported: the dispatcher answers as it does today
            if request.body.key_type != 1:
                return False  # groups are served here; other key types get the dispatcher's error
        if api_key in GROUP_CONFIG_APIS and names_group_resources(frame):
            return False  # GROUP config resources are served here (docs/gateway.md)
        listed_here: Callable[[bytes], bytes] | None = None  # GROUP with other types: split
        if api_key == ApiKey.LIST_CONFIG_RESOURCES:
            if not self._upstream_serves(api_key, version):
                return False  # GROUP alone listed here, else refused as upstream would (group_configs.py)
            others = upstream_part(frame) if self.group_listing is not None else None
            if others is not None and self.group_listing is not None:
                frame, listed_here = others, with_group_resources(version, self.group_listing.group_ids)
            elif lists_group_resources(frame):
                return False  # GROUP alone, or malformed: the dispatcher's
        if not self._admitted(connection, api_key, version, correlation_id):
            return True
        high = FORWARDED_MAX.get(api_key)
        if api_key == ApiKey.FIND_COORDINATOR:
            high = SERVED_VERSIONS[ApiKey.FIND_COORDINATOR][1]
        if high is None or not 0 <= version <= high:
            if (api_key, version) not in self._refused_logged:
                self._refused_logged.add((api_key, version))
                log.warning(
                    "refused from %s: %s; unknown APIs are not passed blindly to the upstream cluster "
                    "(the connection is closed, as Kafka does for an API it does not know)",
                    connection.peer, UNKNOWN_API_MESSAGE.format(key=api_key, version=version),
                )  # fmt: skip
            connection.close()
            return True
        try:
            expects_response = api_key != ApiKey.PRODUCE or _produce_acks(frame, version) != 0
        except (struct.error, IndexError, DecodeError):
            connection.abort(f"malformed Produce v{version} request")
            return True
        upstream_version = version
        if converts(api_key, version):
            # An old client's request is authorized as the version it goes upstream in (the
            # rules know current versions only); answers made here go back in the client's.
            upgraded = self._upgraded(connection, frame, expects_response)
            if upgraded is None:
                return True
            frame, upstream_version = upgraded, upgraded_version(api_key)
        merge: Callable[[bytes], bytes] | None = None
        if self.authorization_required:
            screened = self._authorized(connection, api_key, upstream_version, frame, version)
            if screened is None:
                return True
            frame, merge = screened
        if listed_here is not None:
            merge = listed_here if merge is None else _then(merge, listed_here)
        latest = (
            asked_latest(frame, version) if api_key == ApiKey.LIST_OFFSETS and version >= 1 else frozenset()
        )
        reply = connection.start(api_key, version, correlation_id)
        held = None if self.transactions is None else self.transactions.held_answer(api_key, version, frame)
        if held is not None:
            reply.send_frame(encode_forwarded_response(api_key, version, correlation_id, held))
            return True
        forwarded = Forwarded(self.responses, reply, merge, latest)
        if expects_response and self.transactions is not None:
            forwarded.observed = self.transactions.request(api_key, version, frame)
        group_listing = self.group_listing
        if listed_here is not None and group_listing is not None and group_listing.loading():
            # The GROUP part waits for every shard, as a listing served here does; the request is
            # not pipelined (pipeline_of), so nothing later on the connection goes up before it.
            def forward_when_loaded() -> None:
                if not connection.closed:
                    self.links.forward(connection, api_key, frame, forwarded, expects_response)

            group_listing.after_loading(forward_when_loaded)
            return True
        self.links.forward(connection, api_key, frame, forwarded, expects_response)
        return True

    def upstream_lists(self, version: int) -> bool:
        """Whether upstream serves this ListConfigResources version."""
        return self._upstream_serves(ApiKey.LIST_CONFIG_RESOURCES, version)

    def _upstream_serves(self, api_key: int, version: int) -> bool:
        """Whether upstream's ApiVersions lists this version (True while they are not known)."""
        known = self.upstream.api_versions
        if known is None:
            return True
        low, high = known.get(api_key, (0, -1))
        return low <= version <= high

    def _upgraded(self, connection: Connection, frame: bytes, expects_response: bool) -> bytes | None:
        """An old client's Produce v0-2 or Fetch v0-3 as upstream gets it (old_formats.py); None
        when it was answered here (a message set that cannot be converted) or was malformed."""
        try:
            return upgrade_request(frame)
        except ConversionError as exc:
            log.info("produce from %s refused: %s", connection.peer, exc)
            if expects_response:
                connection.send_raw(produce_error_response(frame, exc.code))
            return None
        except MALFORMED as exc:
            connection.abort(f"malformed request: {exc}")
            return None

    def _authorized(
        self, connection: Connection, api_key: int, version: int, frame: bytes, client_version: int
    ) -> tuple[bytes, Callable[[bytes], bytes] | None] | None:
        """The frame to forward (and how to merge its answer), or None when answered or refused
        here; ``version`` is the frame's, ``client_version`` the one an answer made here takes."""
        authorization = self.authorization
        if authorization is None:
            connection.abort("the gateway's authorization is not ready yet")
            return None
        screened = authorization.screen(connection.principal, connection.client_host, api_key, version, frame)
        if screened.answer is not None:
            answer = screened.answer
            if client_version != version:
                answer = downgrade_response(api_key, client_version, answer)
            connection.send_raw(answer)
            return None
        if screened.frame is None:
            if (api_key, -2) not in self._refused_logged:
                self._refused_logged.add((api_key, -2))
                log.warning(
                    "refused from %s: %s (the connection is closed)", connection.peer, screened.refuse
                )
            connection.close()
            return None
        return screened.frame, screened.merge

    def connection_closed(self, connection: Connection) -> None:
        self.links.connection_closed(connection)

    async def close(self) -> None:
        self.links.close()
        for task in list(self._tasks):
            task.cancel()

    # ---- refused here ----------------------------------------------------------------------
    def _admitted(self, connection: Connection, api_key: int, version: int, correlation_id: int) -> bool:
        session = connection.sasl
        if session is None:
            return True
        if self.sasl is None:
            connection.abort("SASL is not configured")
            return False
        return self.sasl.admit(connection, session, Request(api_key, version, correlation_id, None, None))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _then(first: Callable[[bytes], bytes], second: Callable[[bytes], bytes]) -> Callable[[bytes], bytes]:
    return lambda frame: second(first(frame))


def _produce_acks(frame: bytes, version: int) -> int:
    """Produce's acks, read past the header and the transactional id without decoding the rest."""
    (client_id_length,) = _INT16.unpack_from(frame, 8)
    pos = 10 + max(client_id_length, 0)
    if version < 3:
        pass  # no transactional id before v3
    elif version >= 9:
        pos = skip_tagged_fields(frame, pos)
        size, pos = read_uvarint(frame, pos)  # compact nullable transactional id
        pos += max(size - 1, 0)
    else:
        (size,) = _INT16.unpack_from(frame, pos)
        pos += 2 + max(size, 0)
    (acks,) = _INT16.unpack_from(frame, pos)
    return int(acks)
