"""A raw client for the forwarded APIs (the gateway's codec table) with SCRAM login, for the
authorization tests."""

from __future__ import annotations

from typing import Any

from protocol.apis import GATEWAY_DECODED, ApiKey
from protocol.gateway_wire import decode_forwarded_response
from protocol.messages import GATEWAY_CODECS, GATEWAY_FLEXIBLE
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.headers import RequestHeader, encode_request_header_v1, encode_request_header_v2
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from tests.support.wire_client import WireClient


def frame_of(api_key: int, version: int, body: Any, correlation_id: int = 7) -> bytes:
    """A request frame without its length prefix."""
    out = bytearray()
    header = RequestHeader(api_key, version, correlation_id, "authz-test")
    if (api_key, version) in GATEWAY_FLEXIBLE:
        encode_request_header_v2(header, out)
    else:
        encode_request_header_v1(header, out)
    GATEWAY_CODECS[(api_key, version)][1](body, out)
    return bytes(out)


class ForwardingClient(WireClient):
    """WireClient that also speaks the forwarded APIs at the versions the gateway advertises."""

    versions: dict[int, tuple[int, int]]

    def __enter__(self) -> ForwardingClient:
        return self

    def call(self, api_key: int, body: Any, version: int | None = None) -> Any:
        version = self.version_of(api_key) if version is None else version
        assert version is not None, f"api {api_key} is not advertised"
        self.correlation_id += 1
        frame = frame_of(api_key, version, body, self.correlation_id)
        self.send_raw(len(frame).to_bytes(4, "big") + frame)
        response = self.read_frame()
        correlation_id, answer = decode_forwarded_response(
            api_key, version, len(response).to_bytes(4, "big") + response
        )
        assert correlation_id == self.correlation_id
        return answer

    def version_of(self, api_key: int) -> int | None:
        """The highest version both the gateway advertises and the test can encode."""
        advertised = self.versions.get(api_key)
        decoded = GATEWAY_DECODED.get(api_key)
        if advertised is None or decoded is None:
            return None
        high = min(advertised[1], decoded[2])
        return high if high >= max(advertised[0], decoded[1]) else None


def scram_login(
    bootstrap: str, user: str, password: str, mechanism: str = "SCRAM-SHA-256"
) -> ForwardingClient:
    return authenticate(ForwardingClient(bootstrap), user, password, mechanism)


def authenticate(
    client: ForwardingClient, user: str, password: str, mechanism: str = "SCRAM-SHA-256"
) -> ForwardingClient:
    """SCRAM login on an open connection, then ApiVersions (closed on failure)."""
    from kafka.net.sasl.scram import ScramClient

    try:
        assert client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism)).error_code == 0
        scram = ScramClient(user, password, mechanism)
        first = client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(scram.first_message()))
        assert first.error_code == 0, first
        scram.process_server_first_message(first.auth_bytes)
        final = client.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(scram.final_message()))
        assert final.error_code == 0, final
        scram.process_server_final_message(final.auth_bytes)
        return with_versions(client)
    except BaseException:
        client.close()
        raise


def with_versions(client: ForwardingClient) -> ForwardingClient:
    answer = client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest("authz-test", "1"))
    client.versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    return client
