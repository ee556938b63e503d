"""A blocking raw-protocol client over our own codecs, for tests."""

from __future__ import annotations

import socket
import struct
from typing import Any

from protocol.wire import decode_response, encode_request


class WireClient:
    def __init__(self, bootstrap: str, client_id: str = "test-client", timeout: float = 10) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("connection closed by the server")
            chunks += chunk
        return bytes(chunks)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        self.correlation_id += 1
        self.send_raw(encode_request(api_key, version, self.correlation_id, self.client_id, body))
        correlation_id, response = decode_response(api_key, version, self.read_frame())
        assert correlation_id == self.correlation_id
        return response

    def is_closed_by_peer(self, timeout: float = 5) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
