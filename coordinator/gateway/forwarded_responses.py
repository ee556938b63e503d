"""The responses of forwarded requests, made ready for their client: passed through as bytes,
except where the gateway must change them (an old client's version, the refusals of a request
authorized in part, broker addresses, KIP-951 node endpoints, ListOffsets(latest)) or learns from
them first (transaction outcomes, held until what they taught is durable: transactions.py), and
the cut-off of a client that does not read its answers (docs/gateway.md#back-pressure).
"""

from __future__ import annotations

import logging

from coordinator.gateway.broker_addresses import REWRITTEN, BrokerAddresses
from coordinator.gateway.forwarded import MALFORMED, Forwarded
from coordinator.gateway.high_watermarks import FetchWatch
from coordinator.gateway.latest_offsets import LatestOffsets
from coordinator.gateway.node_endpoints import carries_node_endpoints, endpoints_in, rewrite_node_endpoints
from coordinator.gateway.old_formats import converts, downgrade_response
from coordinator.gateway.transactions import TransactionOutcomes
from coordinator.gateway.upstream import frame_with_length
from coordinator.gateway.upstream_links import Spawn
from coordinator.gateway.upstream_pool import SlowClientBytes
from coordinator.gateway.virtual_brokers import VirtualBrokers
from coordinator.server.connection import Connection, PendingReply
from protocol.wire import decode_response

log = logging.getLogger(__name__)


class ForwardedResponses:
    """The forwarder's side of its requests' responses (forwarded.Responder)."""

    def __init__(
        self,
        brokers: VirtualBrokers,
        addresses: BrokerAddresses,
        latest_offsets: LatestOffsets,
        slow: SlowClientBytes,
        transactions: TransactionOutcomes | None,
        spawn: Spawn,
    ) -> None:
        self.brokers = brokers
        self.addresses = addresses
        self.latest_offsets = latest_offsets
        self.slow = slow
        self.transactions = transactions
        self._spawn = spawn

    def cut_off(self, connection: Connection, size: int) -> None:
        """A client that does not read, whose next answer does not fit in SlowClientBytes."""
        self.slow.cut_off += 1
        self.slow.release(connection)
        connection.abort(
            f"it does not read its answers and the next one ({size} bytes) does not fit in the bytes "
            "kept for such clients (docs/gateway.md#back-pressure)"
        )

    def respond(self, forwarded: Forwarded, frame: bytes, budgeted: int) -> None:
        """A response received whole: rewritten where it must be, then sent to the client."""
        reply = forwarded.reply
        connection = reply.connection
        if connection.closed:
            reply.send_frame(None, budgeted)  # gives the bytes back
            return
        api_key, version = reply.api_key, reply.api_version
        if forwarded.observed is not None and self.transactions is not None:
            self.transactions.response(
                forwarded.observed, frame, lambda ok: self._released(forwarded, frame, budgeted, ok)
            )
            return
        try:
            if (watch := self.watch(reply)) is not None:
                watch.feed(frame)
            # The refusals of a request authorized in part are merged into upstream's answer, then
            # an old client's answer goes back to its version (old_formats.py).
            if forwarded.merge is not None:
                frame = forwarded.merge(frame)
            if converts(api_key, version):
                frame = downgrade_response(api_key, version, frame)
            if api_key in REWRITTEN:
                correlation_id, body = decode_response(api_key, version, frame[4:])
                missing = self.addresses.learn(api_key, body)
                if missing:
                    after = self.addresses.respond_after_listeners(
                        reply, correlation_id, body, missing, budgeted
                    )
                    self._spawn(after)
                    return
                frame = self.addresses.rewritten(connection, api_key, version, correlation_id, body)
            elif carries_node_endpoints(api_key, version) and endpoints_in(api_key, version, frame, origin=4):
                rewritten = rewrite_node_endpoints(
                    api_key, version, frame[4:], self.brokers.addresses_for(connection.advertised)
                )
                frame = frame_with_length(rewritten)
            elif forwarded.latest:
                probe = self.latest_offsets.to_probe(version, forwarded.latest, frame)
                if probe:
                    after = self.latest_offsets.respond_after_probe(
                        reply, forwarded.latest, frame, probe, budgeted
                    )
                    self._spawn(after)
                    return
                frame = self.latest_offsets.corrected(version, forwarded.latest, frame)
            # else as upstream sent it, length prefix included
        except MALFORMED as exc:
            log.warning("malformed api %d v%d response from upstream: %s", api_key, version, exc)
            connection.close()
            reply.send_frame(None, budgeted)
            return
        reply.send_frame(frame, budgeted)

    def _released(self, forwarded: Forwarded, frame: bytes, budgeted: int, ok: bool) -> None:
        """A transactional response the gateway has learned from (transactions.py): sent once
        what it taught is durable; when that failed, the client's connection closes and it retries."""
        reply = forwarded.reply
        connection = reply.connection
        if connection.closed or not ok:
            if not connection.closed:
                connection.close()
            reply.send_frame(None, budgeted)  # gives the bytes back
            return
        reply.send_frame(frame, budgeted)

    def watch(self, reply: PendingReply) -> FetchWatch | None:
        """What reads a forwarded Fetch response's high watermarks (None for other APIs)."""
        return self.latest_offsets.fetch_watch(reply)
