"""Abuse suite: attack probes and random variations against a server with healthy members.

Starts a coordinator on loopback (SQLite in a temporary directory), lets 20 KIP-848 members of
one group heartbeat and commit, and meanwhile sends, from other connections, the probes of the
hardening issue and random variations of them: catastrophic subscription regexes with long topic
names, OffsetCommit retention overflow and NULs pipelined into the members' storage batches,
CreateTopics/CreatePartitions with huge partition counts, oversized DescribeGroups, identifiers
too long to answer, floods of pending JoinGroup members. A probe connection sends ApiVersions
every 10 ms; its round trip is the loop lag as a client sees it.

Pass: no healthy member is fenced or expired, none of their commits fails, and the server's
largest event-loop lag (its ``coordinator_event_loop_lag_max_seconds`` metric) stays under
100 ms. The probe's round trips are reported too; on a machine with few cores they also include
time the server waited for a CPU while the attacker encoded its large requests. Bounded in time (``--duration``) and in requests; every
connection goes to 127.0.0.1 only.

    .venv/bin/python bench/abuse.py --duration 30 [--seed 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from protocol.apis import ApiKey  # noqa: E402
from protocol.messages.api_versions import ApiVersionsRequest  # noqa: E402
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest  # noqa: E402
from protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsTopic  # noqa: E402
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest  # noqa: E402
from protocol.messages.describe_groups import DescribeGroupsRequest  # noqa: E402
from protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol  # noqa: E402
from protocol.messages.offset_commit import (  # noqa: E402
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from protocol.wire import decode_response, encode_request  # noqa: E402

GROUP = "healthy"
TOPIC = "orders"
PARTITIONS = 40
MEMBERS = 20
SESSION_MS = 3000
HEARTBEAT_MS = 1000
LAG_LIMIT_MS = 100.0
PROFILE: list[str] = []  # e.g. ["-m", "cProfile", "-o", "server.prof"] to profile the server
_LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)")


class Client:
    """One connection; requests may be pipelined, answers come back in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str) -> None:
        self.reader, self.writer, self.name = reader, writer, name
        self.correlation = 0
        self.lock = asyncio.Lock()

    @classmethod
    async def connect(cls, port: int, name: str) -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=64 << 20)
        return cls(reader, writer, name)

    async def request(self, api_key: int, version: int, body: Any, wait_s: float = 10) -> Any:
        async with self.lock:
            self.correlation += 1
            self.writer.write(encode_request(api_key, version, self.correlation, self.name, body))
            await self.writer.drain()
            return await asyncio.wait_for(self._read(api_key, version), wait_s)

    def send(self, api_key: int, version: int, body: Any) -> None:
        self.correlation += 1
        self.writer.write(encode_request(api_key, version, self.correlation, self.name, body))

    async def _read(self, api_key: int, version: int) -> Any:
        (length,) = struct.unpack(">i", await self.reader.readexactly(4))
        frame = await self.reader.readexactly(length)
        return decode_response(api_key, version, frame)[1]

    async def read(self, api_key: int, version: int, wait_s: float = 10) -> Any:
        return await asyncio.wait_for(self._read(api_key, version), wait_s)

    def close(self) -> None:
        self.writer.close()


@dataclass
class Report:
    duration_s: float = 0.0
    heartbeats: int = 0
    heartbeat_errors: dict[str, int] = field(default_factory=dict)
    commits: int = 0
    commit_errors: dict[str, int] = field(default_factory=dict)
    probes: dict[str, int] = field(default_factory=dict)
    probe_answers: dict[str, int] = field(default_factory=dict)
    lag_samples: int = 0
    lag_p50_ms: float = 0.0
    lag_p99_ms: float = 0.0
    lag_max_ms: float = 0.0
    lag_max_ms_by_probe: dict[str, float] = field(default_factory=dict)
    server_loop_lag_max_ms: float = 0.0  # coordinator_event_loop_lag_max_seconds at the end
    passed: bool = False

    def count(self, table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1


# ---- healthy members -------------------------------------------------------------------------
async def member(port: int, index: int, stop: asyncio.Event, report: Report) -> None:
    client = await Client.connect(port, f"healthy-{index}")
    member_id = f"healthy-member-{index:02d}-{'x' * 10}"
    epoch = 0
    owned: list[int] = []
    topic_id = b""
    offset = 0
    next_commit = time.monotonic()
    try:
        while not stop.is_set():
            request = ConsumerGroupHeartbeatRequest(
                group_id=GROUP,
                member_id=member_id,
                member_epoch=epoch,
                rebalance_timeout_ms=SESSION_MS,
                subscribed_topic_names=[TOPIC] if epoch == 0 else None,
                topic_partitions=[] if epoch == 0 else None,
            )
            if epoch != 0:
                request.topic_partitions = _owned(topic_id, owned)
            reply = await client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, request)
            report.heartbeats += 1
            if reply.error_code:
                report.count(report.heartbeat_errors, str(reply.error_code))
                epoch, owned = 0, []  # fenced or expired: rejoin
                await asyncio.sleep(0.1)
                continue
            epoch = reply.member_epoch
            if reply.assignment is not None:
                owned = [p for tp in reply.assignment.topic_partitions for p in tp.partitions]
                topic_id = (
                    reply.assignment.topic_partitions[0].topic_id
                    if reply.assignment.topic_partitions
                    else b""
                )
            if owned and time.monotonic() >= next_commit:
                offset += 1
                commit = OffsetCommitRequest(
                    group_id=GROUP,
                    generation_id_or_member_epoch=epoch,
                    member_id=member_id,
                    topics=[
                        OffsetCommitRequestTopic(
                            name=TOPIC, partitions=[OffsetCommitRequestPartition(p, offset) for p in owned]
                        )
                    ],
                )
                answer = await client.request(ApiKey.OFFSET_COMMIT, 9, commit)
                report.commits += 1
                for p in answer.topics[0].partitions:
                    if p.error_code:
                        report.count(report.commit_errors, str(p.error_code))
                next_commit = time.monotonic() + 0.3
            await asyncio.sleep(min(reply.heartbeat_interval_ms, HEARTBEAT_MS) / 1000)
    finally:
        client.close()


def _owned(topic: bytes, partitions: list[int]) -> list[Any]:
    from protocol.messages.consumer_group_heartbeat import TopicPartitions

    return [TopicPartitions(topic_id=topic, partitions=partitions)] if partitions else []


# ---- loop lag --------------------------------------------------------------------------------
def lag_probe(port: int, stop: Any, out: Any) -> None:
    """In its own process, so that the attacker's own encoding never counts as server lag."""
    import socket

    samples: list[tuple[float, float]] = []
    sock = socket.create_connection(("127.0.0.1", port))
    correlation = 0
    while not stop.is_set():
        correlation += 1
        started = time.perf_counter()
        sock.sendall(
            encode_request(ApiKey.API_VERSIONS, 3, correlation, "lag-probe", ApiVersionsRequest("abuse", "1"))
        )
        (length,) = struct.unpack(">i", _exactly(sock, 4))
        _exactly(sock, length)
        samples.append((started, (time.perf_counter() - started) * 1000))
        time.sleep(0.01)
    sock.close()
    out.put(samples)


def _exactly(sock: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


# ---- attacks ---------------------------------------------------------------------------------
async def attack(
    port: int, rng: random.Random, report: Report, windows: list[tuple[str, float, float]]
) -> None:
    kind = rng.choice(
        ["regex", "retention", "nul", "partitions", "describe", "identifiers", "pending", "metadata_bytes"]
    )
    report.count(report.probes, kind)
    print(f"{time.strftime('%H:%M:%S')} probe {kind}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    client = await Client.connect(port, "attacker" if kind != "identifiers" else "c" * rng.choice([10, 2000]))
    try:
        answer = await globals()[f"_attack_{kind}"](client, rng)
        report.count(report.probe_answers, f"{kind}:{answer}")
    except (ConnectionError, asyncio.IncompleteReadError):
        report.count(report.probe_answers, f"{kind}:closed")
    finally:
        client.close()
        windows.append((kind, started, time.perf_counter()))


async def _attack_regex(client: Client, rng: random.Random) -> str:
    name = "a" * rng.randint(20, 240)
    await client.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic(name, 1, 1)], 5000))
    pattern = rng.choice(["(a|a)*b", "(a+)+b", "(a|aa)*c", "(.*a){20}", "((a*)*)*b"])
    reply = await client.request(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        1,
        ConsumerGroupHeartbeatRequest(
            group_id=f"regex-{rng.randrange(1000)}",
            member_id=f"evil-{rng.randrange(10**6)}",
            rebalance_timeout_ms=5000,
            subscribed_topic_regex=pattern,
            topic_partitions=[],
        ),
    )
    return str(reply.error_code)


def _commit(group: str, offset: int, retention: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group,
        retention_time_ms=retention,
        topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=[OffsetCommitRequestPartition(0, offset)])],
    )


async def _attack_retention(client: Client, rng: random.Random) -> str:
    count = rng.randint(5, 50)
    for i in range(count):
        retention = rng.choice([2**63 - 1, -(2**63), 2**62 + rng.randrange(2**62), -2])
        client.send(ApiKey.OFFSET_COMMIT, 2, _commit(f"poison-{rng.randrange(100)}", i, retention))
    await client.writer.drain()
    codes = set()
    for _ in range(count):
        answer = await client.read(ApiKey.OFFSET_COMMIT, 2)
        codes.add(answer.topics[0].partitions[0].error_code)
    return ",".join(map(str, sorted(codes)))


async def _attack_nul(client: Client, rng: random.Random) -> str:
    group = "bad\x00" + "g" * rng.randrange(10)
    answer = await client.request(ApiKey.OFFSET_COMMIT, 2, _commit(group, 1, -1))
    return str(answer.topics[0].partitions[0].error_code)


async def _attack_partitions(client: Client, rng: random.Random) -> str:
    count = rng.choice([2**31 - 1, 2_000_000, 10_001, rng.randint(10_001, 2**31 - 1)])
    if rng.random() < 0.5:
        reply = await client.request(
            ApiKey.CREATE_TOPICS,
            5,
            CreateTopicsRequest([CreatableTopic(f"huge-{rng.randrange(10**6)}", count, 1)], 5000),
        )
        return str(reply.topics[0].error_code)
    reply = await client.request(
        ApiKey.CREATE_PARTITIONS,
        3,
        CreatePartitionsRequest([CreatePartitionsTopic(TOPIC, count, None)], 5000),
    )
    return str(reply.results[0].error_code)


async def _attack_describe(client: Client, rng: random.Random) -> str:
    count = rng.choice([150_000, 400_000, 10_001, 10_000, rng.randint(1, 10_000)])
    client.send(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[f"g{i % 10}" for i in range(count)]))
    await client.writer.drain()
    try:
        answer = await client.read(ApiKey.DESCRIBE_GROUPS, 5, wait_s=30)
        return f"answered:{len(answer.groups) == count}"
    except asyncio.IncompleteReadError:
        return "closed"


async def _attack_identifiers(client: Client, rng: random.Random) -> str:
    length = rng.choice([1025, 32767, rng.randint(1025, 32767)])
    protocols = [JoinGroupRequestProtocol("range", b"x" * rng.choice([10, 2 << 20]))]
    join = JoinGroupRequest(
        f"victim-{rng.randrange(100)}", 10000, 10000, "", "i" * length, "consumer", protocols
    )
    reply = await client.request(ApiKey.JOIN_GROUP, 5, join)
    described = await client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[join.group_id]))
    return f"{reply.error_code}/{described.groups[0].error_code}"


async def _attack_pending(client: Client, rng: random.Random) -> str:
    group = f"pending-{rng.randrange(5)}"
    count = rng.randint(500, 3000)
    for _ in range(count):
        protocols = [JoinGroupRequestProtocol("range", b"")]
        client.send(
            ApiKey.JOIN_GROUP, 5, JoinGroupRequest(group, 30000, 30000, "", None, "consumer", protocols)
        )
    await client.writer.drain()
    codes: dict[int, int] = {}
    for _ in range(count):
        code = (await client.read(ApiKey.JOIN_GROUP, 5)).error_code
        codes[code] = codes.get(code, 0) + 1
    return ",".join(f"{k}x{v}" for k, v in sorted(codes.items()))


async def _attack_metadata_bytes(client: Client, rng: random.Random) -> str:
    protocols = [JoinGroupRequestProtocol(f"p{i}", b"m" * (300 << 10)) for i in range(4)]
    reply = await client.request(
        ApiKey.JOIN_GROUP,
        5,
        JoinGroupRequest(f"fat-{rng.randrange(10)}", 10000, 10000, "", None, "consumer", protocols),
    )
    return str(reply.error_code)


# ---- the run ---------------------------------------------------------------------------------
def start_server(directory: Path, metrics_port: int) -> tuple[subprocess.Popen[str], int]:
    argv = [sys.executable, *PROFILE, "-m", "coordinator", "serve", "--host", "127.0.0.1", "--port", "0",
            "--storage", f"sqlite:///{directory / 'abuse.db'}", "--group-initial-rebalance-delay-ms", "0",
            "--group-consumer-session-timeout-ms", str(SESSION_MS),
            "--group-consumer-heartbeat-interval-ms", str(HEARTBEAT_MS),
            "--metrics-port", str(metrics_port)]  # fmt: skip
    log = open(directory / "server.log", "w")  # noqa: SIM115 - kept open for the server's lifetime
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        log.write(line)
        match = _LISTENING.search(line)
        if match:
            import threading

            def pump() -> None:
                assert process.stderr is not None
                for rest in process.stderr:
                    log.write(rest)
                log.close()

            threading.Thread(target=pump, daemon=True).start()
            return process, int(match.group(1))
    process.kill()
    raise RuntimeError("the server did not start")


def _server_lag_max_s(metrics_port: int) -> float:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as page:
        for line in page.read().decode().splitlines():
            if line.startswith("coordinator_event_loop_lag_max_seconds "):
                return float(line.split()[1])
    return float("nan")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def run(port: int, metrics_port: int, duration_s: float, seed: int) -> Report:
    report = Report()
    rng = random.Random(seed)
    setup = await Client.connect(port, "setup")
    await setup.request(
        ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest([CreatableTopic(TOPIC, PARTITIONS, 1)], 5000)
    )
    setup.close()
    stop = asyncio.Event()
    windows: list[tuple[str, float, float]] = []
    tasks = [asyncio.create_task(member(port, i, stop, report)) for i in range(MEMBERS)]
    await asyncio.sleep(3 * HEARTBEAT_MS / 1000)  # the members join and settle
    report.heartbeat_errors.clear()
    context = multiprocessing.get_context("spawn")
    lag_stop, lag_out = context.Event(), context.Queue()
    lag = context.Process(target=lag_probe, args=(port, lag_stop, lag_out), daemon=True)
    lag.start()
    await asyncio.sleep(1)
    started = time.monotonic()
    while time.monotonic() - started < duration_s:
        await attack(port, rng, report, windows)
        await asyncio.sleep(rng.uniform(0, 0.05))
    await asyncio.sleep(SESSION_MS / 1000)  # a member expired by the last probe would show now
    lag_stop.set()
    samples: list[tuple[float, float]] = await asyncio.get_running_loop().run_in_executor(None, lag_out.get)
    lag.join(10)
    stop.set()
    await asyncio.gather(*tasks)
    report.duration_s = round(time.monotonic() - started, 1)
    for kind, begin, end in windows:
        during = [ms for at, ms in samples if begin - 0.05 <= at <= end]
        if during:
            report.lag_max_ms_by_probe[kind] = max(
                report.lag_max_ms_by_probe.get(kind, 0.0), round(max(during), 1)
            )
    ordered = sorted(ms for _at, ms in samples)
    report.lag_samples = len(ordered)
    if ordered:
        report.lag_p50_ms = round(ordered[len(ordered) // 2], 1)
        report.lag_p99_ms = round(ordered[int(len(ordered) * 0.99)], 1)
        report.lag_max_ms = round(ordered[-1], 1)
    report.server_loop_lag_max_ms = round(_server_lag_max_s(metrics_port) * 1000, 1)
    report.passed = (
        not report.heartbeat_errors
        and not report.commit_errors
        and report.server_loop_lag_max_ms < LAG_LIMIT_MS
    )
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of attacks (default 30)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the report here")
    parser.add_argument("--server-log", help="keep the server's log here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        metrics_port = _free_port()
        process, port = start_server(Path(tmp), metrics_port)
        try:
            report = asyncio.run(run(port, metrics_port, args.duration, args.seed))
        finally:
            process.terminate()
            process.wait(30)
        server_log = (Path(tmp) / "server.log").read_text()
        if args.server_log:
            Path(args.server_log).write_text(server_log)
        errors = [line for line in server_log.splitlines() if " ERROR " in line]
    print(json.dumps(asdict(report), indent=2))
    print(f"server ERROR lines: {len(errors)}", *errors[:5], sep="\n")
    if args.json:
        Path(args.json).write_text(json.dumps(asdict(report), indent=2))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
