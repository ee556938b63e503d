"""Authorization of forwarded requests with the client's principal (docs/gateway.md#security-model).

The upstream cluster sees only the gateway's own identity, so every forwarded request is decoded
here and checked against the server's ACLs as Kafka's KafkaApis would check it (the rules per API
are in authz_rules.py). The parts of a request the principal may not touch are answered with the
API's authorization error and only the rest goes upstream; upstream's answer is then merged with
the refusals in request order. When nothing is left to forward the answer is made here. A request
the gateway cannot decode (a version without a codec here) is refused: never forwarded blindly.

Decisions are cached per (principal, host, operation, resource) until the ACLs change.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from coordinator.gateway.catalog import UpstreamCatalog
from coordinator.security.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType
from protocol.gateway_wire import (
    decodable,
    decode_forwarded,
    decode_forwarded_response,
    encode_forwarded,
    encode_forwarded_response,
    request_header_end,
)
from protocol.primitives import DecodeError

log = logging.getLogger(__name__)

CACHE_MAX_ENTRIES: Final = 100_000
_MALFORMED: Final = (DecodeError, struct.error, IndexError, UnicodeDecodeError)


@dataclass(slots=True)
class Decision:
    """What a rule decided about one request.

    Nothing set: forward it as it is. ``request``: forward this body instead (the allowed part).
    ``answer``: answer this body here, forward nothing. ``merge``: amend upstream's decoded
    response body (refusals put back, unauthorized entries left out). ``refuse``: close the
    connection with this reason."""

    request: Any = None
    answer: Any = None
    merge: Callable[[Any], None] | None = None
    refuse: str | None = None


FORWARD: Final = Decision()


class Access:
    """One request's view of the ACLs: the client's principal and host, and the upstream catalog
    (topic ids and names, which topics exist)."""

    __slots__ = ("_cache", "authorizer", "catalog", "host", "principal")

    def __init__(
        self,
        authorizer: Authorizer,
        cache: dict[tuple[str, str, int, int, str], bool],
        principal: str,
        host: str,
        catalog: UpstreamCatalog,
    ) -> None:
        self.authorizer = authorizer
        self._cache = cache
        self.principal = principal
        self.host = host
        self.catalog = catalog

    def allowed(self, operation: int, resource_type: int, name: str, *, log_denied: bool = True) -> bool:
        key = (self.principal, self.host, operation, resource_type, name)
        decided = self._cache.get(key)
        if decided is None:
            decided = self.authorizer.authorize(
                self.principal, self.host, operation, resource_type, name, log_denied=log_denied
            )
            if len(self._cache) >= CACHE_MAX_ENTRIES:
                self._cache.clear()
            self._cache[key] = decided
        elif not decided and log_denied and self.authorizer.on_denied is not None:
            self.authorizer.on_denied(self.principal, self.host, operation, resource_type, name)
        return decided

    def topic(self, operation: int, name: str, *, log_denied: bool = True) -> bool:
        return self.allowed(operation, ResourceType.TOPIC, name, log_denied=log_denied)

    def cluster(self, operation: int, *, log_denied: bool = True) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied)

    def transactional_id(self, operation: int, transactional_id: str) -> bool:
        return self.allowed(operation, ResourceType.TRANSACTIONAL_ID, transactional_id)

    def may_create(self, name: str) -> bool:
        """CREATE on the cluster (asked quietly) or on the topic, as Kafka checks topic creation."""
        return self.cluster(Operation.CREATE, log_denied=False) or self.topic(Operation.CREATE, name)

    def may_write_some_topic(self) -> bool:
        return self.authorizer.authorize_any(self.principal, self.host, Operation.WRITE, ResourceType.TOPIC)

    def topic_name(self, topic_id: bytes) -> str | None:
        record = self.catalog.topic_by_id(topic_id)
        return record.name if record is not None else None

    def operations(self, resource_type: int, name: str) -> int:
        return self.authorizer.authorized_operations(self.principal, self.host, resource_type, name)


Rule = Callable[[Access, int, Any], Decision]
# A cheap first look at a request frame (body from the given offset), without decoding it all:
# True when all of it may be forwarded as it is; False sends it through its Rule.
Preview = Callable[[Access, int, bytes, int], bool]


@dataclass(slots=True)
class Screened:
    """The forwarder's part: forward ``frame`` (and pass upstream's answer through ``merge``),
    or answer ``answer`` (a complete response frame) without forwarding, or close with ``refuse``."""

    frame: bytes | None = None
    merge: Callable[[bytes], bytes] | None = None
    answer: bytes | None = None
    refuse: str | None = None


class ForwardedAuthorization:
    """The forwarder's authorization hook, installed when the authorizer is on."""

    def __init__(
        self,
        authorizer: Authorizer,
        catalog: UpstreamCatalog,
        rules: dict[int, Rule],
        previews: dict[int, Preview] | None = None,
    ) -> None:
        self.authorizer = authorizer
        self.catalog = catalog
        self.rules = rules
        self.previews = previews or {}
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        self._generation = authorizer.generation

    def screen(self, principal: str, host: str, api_key: int, version: int, frame: bytes) -> Screened:
        rule = self.rules.get(api_key)
        if rule is None:
            return Screened(refuse=f"api key {api_key} cannot be authorized by the gateway")
        if self._generation != self.authorizer.generation:
            self._cache.clear()
            self._generation = self.authorizer.generation
        access = Access(self.authorizer, self._cache, principal, host, self.catalog)
        preview = self.previews.get(api_key)
        try:
            previewed = preview is not None and decodable(api_key, version)
            if (
                previewed
                and preview is not None
                and preview(access, version, frame, request_header_end(frame))
            ):
                return Screened(frame=frame)
            header_end, body = decode_forwarded(frame)
        except _MALFORMED as exc:
            return Screened(refuse=f"malformed api {api_key} v{version} request: {exc}")
        decision = rule(access, version, body)
        if decision.refuse is not None:
            return Screened(refuse=decision.refuse)
        if decision.answer is not None:
            correlation_id = int.from_bytes(frame[4:8], "big", signed=True)
            return Screened(
                answer=encode_forwarded_response(api_key, version, correlation_id, decision.answer)
            )
        forwarded = (
            frame if decision.request is None else encode_forwarded(frame, header_end, decision.request)
        )
        merge = decision.merge
        if merge is None:
            return Screened(frame=forwarded)
        return Screened(frame=forwarded, merge=_merging(api_key, version, merge))


def _merging(api_key: int, version: int, merge: Callable[[Any], None]) -> Callable[[bytes], bytes]:
    def merged(response: bytes) -> bytes:
        correlation_id, body = decode_forwarded_response(api_key, version, response)
        merge(body)
        try:
            return encode_forwarded_response(api_key, version, correlation_id, body)
        except ValueError as exc:  # a field upstream set that this version cannot carry
            raise DecodeError(f"api {api_key} v{version} response cannot be re-encoded: {exc}") from exc

    return merged
