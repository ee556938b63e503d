"""Ceiling stub: a Kafka-protocol server that answers every request with a pre-encoded response.

It does no group work at all, so the rate the load generator reaches against it is the
generator's own limit (or the limit of one asyncio loop doing nothing but framing). Responses
are encoded once at start-up with the project's generated codecs; per request only the
correlation id is patched in.

    .venv/bin/python bench/stub_server.py [--port 0]      # prints "listening on 127.0.0.1:PORT" on stderr
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import struct
import sys
from pathlib import Path
from typing import Any, Final, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocol.apis import SERVED_VERSIONS
from protocol.messages import api_versions as av
from protocol.messages import create_topics as ct
from protocol.messages import find_coordinator as fc
from protocol.messages import heartbeat as hb
from protocol.messages import join_group as jg
from protocol.messages import leave_group as lg
from protocol.messages import offset_commit as oc
from protocol.messages import offset_fetch as of
from protocol.messages import sync_group as sg
from protocol.wire import encode_response

_HEADER: Final = struct.Struct(">ihhi")  # frame length, api key, api version, correlation id
MEMBER: Final = "stub-member-1"
TOPIC: Final = "bench-commit"


def build_responses(port: int) -> dict[tuple[int, int], bytes]:
    """(api key, version) -> a complete response frame with correlation id 0."""
    subscription = b"\x00\x00\x00\x00\x00\x01\x00\x0cbench-commit\xff\xff\xff\xff"
    bodies: dict[tuple[int, int], Any] = {
        (18, 3): av.ApiVersionsResponse(
            0, [av.ApiVersion(int(k), lo, hi) for k, (lo, hi) in sorted(SERVED_VERSIONS.items())], 0
        ),
        (10, 3): fc.FindCoordinatorResponse(0, 0, None, 0, "127.0.0.1", port),
        (10, 4): fc.FindCoordinatorResponse(
            coordinators=[fc.Coordinator("g", 0, "127.0.0.1", port, 0, None)]
        ),
        (19, 5): ct.CreateTopicsResponse(
            0, [ct.CreatableTopicResult(name=TOPIC, error_code=36, configs=None)]
        ),
        (13, 3): lg.LeaveGroupResponse(0, 0, [lg.MemberResponse(MEMBER, None, 0)]),
        (8, 8): oc.OffsetCommitResponse(
            0, [oc.OffsetCommitResponseTopic(name=TOPIC, partitions=[oc.OffsetCommitResponsePartition(0, 0)])]
        ),
        (9, 8): of.OffsetFetchResponse(
            groups=[
                of.OffsetFetchResponseGroup(
                    "g",
                    [
                        of.OffsetFetchResponseTopics(
                            name=TOPIC, partitions=[of.OffsetFetchResponsePartitions(0, 1, -1, "", 0)]
                        )
                    ],
                    0,
                )
            ]
        ),
    }
    members = [jg.JoinGroupResponseMember(MEMBER, None, subscription)]
    for version in (5, 9):
        bodies[(11, version)] = jg.JoinGroupResponse(
            0, 0, 1, "consumer" if version >= 7 else None, "range", MEMBER, False, MEMBER, members
        )
    for version in (3, 5):
        bodies[(14, version)] = sg.SyncGroupResponse(
            0, 0, "consumer" if version >= 5 else None, "range" if version >= 5 else None, b""
        )
    for version in (3, 4):
        bodies[(12, version)] = hb.HeartbeatResponse(0, 0)
    return {key: encode_response(key[0], key[1], 0, body) for key, body in bodies.items()}


class StubConnection(asyncio.Protocol):
    responses: dict[tuple[int, int], bytes] = {}

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        responses = self.responses
        out = bytearray()
        pos = 0
        end = len(buffer)
        unpack = _HEADER.unpack_from
        while end - pos >= 12:
            size, key, version, corr = unpack(buffer, pos)
            if end - pos - 4 < size:
                break
            response = responses.get((key, version))
            if response is None:
                print(f"stub: no response for api {key} v{version}", file=sys.stderr)
                assert self.transport is not None
                self.transport.close()
                return
            out += response[:4]
            out += corr.to_bytes(4, "big", signed=True)
            out += response[8:]
            pos += 4 + size
        if pos:
            del buffer[:pos]
        if out and self.transport is not None:
            self.transport.write(out)


async def serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(StubConnection, host, port, reuse_address=True)
    bound = int(server.sockets[0].getsockname()[1])
    StubConnection.responses = build_responses(bound)
    print(f"stub listening on {host}:{bound}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.host not in ("127.0.0.1", "localhost"):
        parser.error("the stub listens on loopback only")
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(args.host, args.port))
    else:
        uvloop.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
