"""One blocking connection to one broker, with the API versions negotiated on connect."""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any, Final

from coordinator.cli.admin.command_config import Security
from coordinator.cli.admin.errors import KafkaError
from coordinator.cli.admin.sasl_client import authenticate
from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from protocol.messages.sasl_handshake import SaslHandshakeRequest
from protocol.primitives import DecodeError
from protocol.wire import decode_response, encode_request

_LENGTH: Final = struct.Struct(">i")
_ERROR_CODE_AFTER_CORRELATION: Final = struct.Struct(">h")
MAX_FRAME: Final = 256 * 1024 * 1024
# The tool names topics and reads a missing group as Dead: it stops below the versions that name
# topics by id only (OffsetCommit/OffsetFetch v10) and answer a missing group with an error
# (DescribeGroups v6), docs/protocol.md#kafka-44s-group-api-versions.
TOOL_MAX: Final[dict[ApiKey, int]] = {
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9,
    ApiKey.DESCRIBE_GROUPS: 5,
}


def parse_address(text: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 as [::1]:9092) -> (host, port); ValueError with a readable message."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"port {port} out of range in {text!r}")
    return host.removeprefix("[").removesuffix("]"), port


HANDSHAKE_TIMEOUT_S: Final = 5.0


def foreign_protocol(head: bytes, address: str) -> str | None:
    """What a reply that is not a Kafka frame looks like, from its first bytes (None: no idea)."""
    if head[:4] in (b"HTTP", b"<htm", b"<!DO"):
        return f"{address} answered in HTTP: it is a web server (a metrics port?), not a Kafka listener"
    if head[0] in (0x15, 0x16) and head[1] == 0x03:
        return (
            f"{address} answered with TLS: it is a TLS listener; connect with security.protocol=SSL "
            "or SASL_SSL (--command-config)"
        )
    if head[:4] == b"SSH-":
        return f"{address} is an SSH server, not a Kafka listener"
    return None


class BrokerConnection:
    """Sends requests at the highest version both sides know and returns decoded responses."""

    def __init__(
        self, host: str, port: int, timeout: float, client_id: str, security: Security | None = None
    ) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.security = security or Security()
        self._correlation_id = 0
        self.features: dict[str, tuple[int, int]] = {}  # SupportedFeatures of ApiVersions v3+
        self.versions: dict[ApiKey, tuple[int, int]] = {}
        self._authenticated = False
        try:
            self._sock: socket.socket = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise KafkaError(
                ErrorCode.NETWORK_EXCEPTION, f"cannot connect to {self.address}: {exc.strerror or exc}"
            ) from exc
        try:
            if self.security.uses_tls:
                self._sock = self._start_tls(host)
            self.versions = self._negotiate()
            if self.security.uses_sasl:
                self._authenticate()
        except BaseException:
            self.close()
            raise

    def _start_tls(self, host: str) -> socket.socket:
        context = self.security.ssl_context()
        try:
            return context.wrap_socket(self._sock, server_hostname=host)
        except ssl.SSLCertVerificationError as exc:
            raise KafkaError(
                ErrorCode.NETWORK_EXCEPTION,
                f"TLS with {self.address}: the broker's certificate is not trusted: {exc.verify_message} "
                "(ssl.truststore.location / ssl.ca.location names the CA)",
                explain=False,
            ) from exc
        except (ssl.SSLError, OSError) as exc:
            raise KafkaError(
                ErrorCode.NETWORK_EXCEPTION,
                f"TLS handshake with {self.address} failed: {exc} (is it a TLS listener?)",
                explain=False,
            ) from exc

    def _authenticate(self) -> None:
        """SaslHandshake, then SaslAuthenticate round trips with the mechanism's messages."""
        security = self.security
        handshake = self.request(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest(security.mechanism))
        if handshake.error_code:
            offered = ", ".join(handshake.mechanisms) or "none"
            raise KafkaError(
                handshake.error_code,
                f"{self.address} does not offer SASL mechanism {security.mechanism} (it offers {offered})",
            )

        def exchange(token: bytes) -> bytes:
            answer = self.request(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(token))
            if answer.error_code:
                raise KafkaError(
                    answer.error_code,
                    f"{self.address} refused user {security.username!r}: {answer.error_message or 'no reason given'}",
                    explain=False,
                )
            reply: bytes = answer.auth_bytes
            return reply

        authenticate(security.mechanism, security.username or "", security.password or "", exchange)
        self._authenticated = True

    def close(self) -> None:
        self._sock.close()

    def version(self, api: ApiKey) -> int:
        """min(our max, their max) for the API, or UNSUPPORTED_VERSION if the windows miss."""
        low, high = SERVED_VERSIONS[api]
        ours = (low, min(high, TOOL_MAX.get(api, high)))
        theirs = self.versions.get(api)
        name = api.name.replace("_", " ").title().replace(" ", "")
        if theirs is None:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"broker {self.address} does not support {name}")
        chosen = min(ours[1], theirs[1])
        if chosen < max(ours[0], theirs[0]):
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"broker {self.address} serves {name} v{theirs[0]}-{theirs[1]}, this tool v{ours[0]}-{ours[1]}",
            )
        return chosen

    def request(self, api: ApiKey, body: Any, version: int | None = None) -> Any:
        """Send one request and wait for its response (decoded at the version sent)."""
        if version is None:
            version = self.version(api)
        try:
            frame = self._round_trip(api, version, body)
        except KafkaError as exc:
            hint = self._authentication_hint(api, exc)
            if hint is None:
                raise
            raise KafkaError(exc.code, f"{exc} - {hint}", explain=False) from exc
        _correlation_id, response = self._decode(api, version, frame)
        return response

    def _round_trip(self, api: ApiKey, version: int, body: Any) -> bytes:
        self._correlation_id += 1
        data = encode_request(api, version, self._correlation_id, self.client_id, body)
        try:
            self._sock.sendall(data)
            head = self._read_exactly(4)
            (size,) = _LENGTH.unpack(head)
            if not 4 <= size <= MAX_FRAME:
                raise KafkaError(
                    ErrorCode.CORRUPT_MESSAGE,
                    foreign_protocol(head, self.address)
                    or f"response frame of {size} bytes from {self.address}",
                    explain=False,
                )
            frame = self._read_exactly(size)
        except TimeoutError as exc:
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT, f"no answer from {self.address} to {api.name} v{version}"
            ) from exc
        except OSError as exc:
            raise KafkaError(
                ErrorCode.NETWORK_EXCEPTION, f"connection to {self.address} failed: {exc.strerror or exc}"
            ) from exc
        (correlation_id,) = _LENGTH.unpack_from(frame, 0)
        if correlation_id != self._correlation_id:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"{self.address} answered correlation id {correlation_id}, expected {self._correlation_id}",
                explain=False,
            )
        return frame

    def _authentication_hint(self, api: ApiKey, exc: KafkaError) -> str | None:
        """A broker that closes the connection on our first real request after ApiVersions, and
        that serves SASL, most likely wants us to authenticate first (Kafka closes, it says nothing)."""
        if (
            exc.code != ErrorCode.NETWORK_EXCEPTION
            or self._authenticated
            or self.security.uses_sasl
            or api in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
            or ApiKey.SASL_HANDSHAKE not in self.versions
        ):
            return None
        return (
            f"{self.address} may require authentication: give security.protocol, sasl.mechanism and "
            "credentials with --command-config FILE or the COORDINATOR_ADMIN_* variables"
        )

    def _decode(self, api: ApiKey, version: int, frame: bytes) -> tuple[int, Any]:
        try:
            return decode_response(api, version, frame)
        except DecodeError as exc:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE,
                f"unreadable {api.name} v{version} response from {self.address}: {exc}",
                explain=False,
            ) from exc

    def _read_exactly(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionResetError(0, "connection closed by the broker")
            chunks += chunk
        return bytes(chunks)

    def _negotiate(self) -> dict[ApiKey, tuple[int, int]]:
        """ApiVersions at our highest version; a broker that does not know it answers in v0 (KIP-511).

        Every Kafka broker answers ApiVersions at once, before authentication and without storage,
        so silence here means the port speaks another protocol (HTTP, TLS, ...): waited for at
        most HANDSHAKE_TIMEOUT_S and reported as such.
        """
        api = ApiKey.API_VERSIONS
        version = SERVED_VERSIONS[api][1]
        timeout = self._sock.gettimeout()
        self._sock.settimeout(min(timeout or HANDSHAKE_TIMEOUT_S, HANDSHAKE_TIMEOUT_S))
        try:
            frame = self._round_trip(api, version, ApiVersionsRequest("coordinator-admin", "0.1.0"))
        except KafkaError as exc:
            if exc.code == ErrorCode.NETWORK_EXCEPTION and not self.security.uses_tls:
                raise KafkaError(
                    ErrorCode.NETWORK_EXCEPTION,
                    f"{self.address} closed the connection on ApiVersions, which every Kafka listener "
                    "answers: is it a TLS listener? (security.protocol=SSL or SASL_SSL with --command-config)",
                    explain=False,
                ) from exc
            if exc.code != ErrorCode.REQUEST_TIMED_OUT:
                raise
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"{self.address} accepted the connection but did not answer ApiVersions within "
                f"{self._sock.gettimeout():g} s: it does not look like a Kafka listener (an HTTP port, "
                "or a TLS listener reached without TLS?)",
                explain=False,
            ) from exc
        finally:
            self._sock.settimeout(timeout)
        (error_code,) = _ERROR_CODE_AFTER_CORRELATION.unpack_from(frame, 4)
        if error_code == ErrorCode.UNSUPPORTED_VERSION:
            version = 0
        response: ApiVersionsResponse = self._decode(api, version, frame)[1]
        if response.error_code not in (ErrorCode.NONE, ErrorCode.UNSUPPORTED_VERSION):
            raise KafkaError(response.error_code, f"ApiVersions from {self.address}")
        self.features = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
        known = {int(k) for k in ApiKey}
        return {
            ApiKey(k.api_key): (k.min_version, k.max_version) for k in response.api_keys if k.api_key in known
        }
