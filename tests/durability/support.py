"""Shared pieces of the durability suite: raw-protocol helpers, committer threads, read-back checks.

Every client here speaks the wire protocol through our own codecs (``tests/support/wire_client``),
one TCP connection per client, so a test knows exactly which requests were sent and which
responses arrived: a commit counts as *acknowledged* only when its response came back with
error 0 for that partition.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from protocol.apis import ApiKey
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.describe_groups import DescribedGroup, DescribeGroupsRequest
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from protocol.wire import decode_response, encode_request
from tests.support.server import ServerProcess, start_server
from tests.support.wire_client import WireClient

Key = tuple[str, str, int]  # (group, topic, partition)
TP = tuple[str, int]  # (topic, partition)

COMMIT_VERSION = 8
FETCH_VERSION = 8

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
REQUEST_TIMED_OUT = 7
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
TOPIC_ALREADY_EXISTS = 36
MEMBER_ID_REQUIRED = 79
# REQUEST_TIMED_OUT (7, retriable) when a write outlives offsets.commit.timeout.ms.
RETRIABLE_COMMIT_ERRORS = frozenset({COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, 7})

# Offsets a committer sends: request number * OFFSET_STRIDE + partition. Distinct per request,
# increasing per partition, and the request that wrote a stored value is value // OFFSET_STRIDE.
OFFSET_STRIDE = 1000


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def base_seed() -> int:
    """DURABILITY_SEED replays a run; otherwise a fresh seed (printed by the tests)."""
    raw = os.environ.get("DURABILITY_SEED", "").strip()
    return int(raw) if raw else random.SystemRandom().randrange(2**32)


# --------------------------------------------------------------------------------------------
# Waiting


def wait_for(condition: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``condition`` until truthy; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


LOADED = " offsets from "  # in "loaded N topics, N groups and N offsets from <storage> in N ms"


def wait_for_log(server: ServerProcess, text: str, timeout: float = 60) -> None:
    wait_for(
        lambda: text in server.log_text() or server.process.poll() is not None,
        timeout,
        f"{text!r} in the server log",
        0.01,
    )
    assert text in server.log_text(), f"server exited before logging {text!r}:\n{server.log_text()}"


# --------------------------------------------------------------------------------------------
# Servers: every one a test starts is stopped by PID at the end


class Servers:
    def __init__(self) -> None:
        self.started: list[ServerProcess] = []

    def start(
        self, storage: str, extra: dict[str, str] | None = None, port: int = 0, *, wait_loaded: bool = True
    ) -> ServerProcess:
        """Start a coordinator; unless ``wait_loaded`` is false, wait until it has loaded its state."""
        server = start_server(storage, extra, port=port)
        self.started.append(server)
        if wait_loaded:
            wait_for_log(server, LOADED)
        return server

    def restart(
        self, server: ServerProcess, sig: int = signal.SIGTERM, extra: dict[str, str] | None = None
    ) -> ServerProcess:
        """Stop ``server`` with ``sig`` and start a new one on the same storage and port."""
        server.stop(sig)
        return self.start(server.storage, extra, port=server.port)

    def close(self) -> None:
        for server in self.started:
            server.stop(signal.SIGKILL if server.process.poll() is None else signal.SIGTERM, timeout=10)


@contextmanager
def servers() -> Iterator[Servers]:
    owned = Servers()
    try:
        yield owned
    finally:
        owned.close()


# --------------------------------------------------------------------------------------------
# Raw protocol


class PipelinedClient(WireClient):
    """A WireClient that may have several requests in flight (responses come back in order)."""

    def __init__(self, bootstrap: str, client_id: str = "durability", timeout: float = 15) -> None:
        super().__init__(bootstrap, client_id, timeout)
        self._inflight: deque[tuple[int, int, int]] = deque()

    def send(self, api_key: int, version: int, body: Any) -> None:
        self.correlation_id += 1
        self.send_raw(encode_request(api_key, version, self.correlation_id, self.client_id, body))
        self._inflight.append((api_key, version, self.correlation_id))

    def receive(self) -> Any:
        api_key, version, expected = self._inflight.popleft()
        correlation_id, response = decode_response(api_key, version, self.read_frame())
        assert correlation_id == expected, f"response {correlation_id} out of order, expected {expected}"
        return response

    def __enter__(self) -> PipelinedClient:
        return self

    @property
    def in_flight(self) -> int:
        return len(self._inflight)


def create_topics(bootstrap: str, topics: Mapping[str, int]) -> None:
    request = CreateTopicsRequest(
        topics=[
            CreatableTopic(name=name, num_partitions=n, replication_factor=1) for name, n in topics.items()
        ],
        timeout_ms=10000,
    )
    with WireClient(bootstrap, client_id="create-topics") as client:
        response = client.request(ApiKey.CREATE_TOPICS, 5, request)
    errors = {t.name: t.error_code for t in response.topics}
    assert all(code in (NONE, TOPIC_ALREADY_EXISTS) for code in errors.values()), errors


def commit_request(
    group: str,
    offsets: Mapping[TP, int],
    *,
    generation: int = -1,
    member_id: str = "",
    metadata: str = "",
) -> OffsetCommitRequest:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata
            )
        )
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def commit_errors(response: OffsetCommitResponse) -> dict[TP, int]:
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def commit(client: WireClient, group: str, offsets: Mapping[TP, int], **kw: Any) -> dict[TP, int]:
    """One OffsetCommit; {(topic, partition): error code}."""
    return commit_errors(
        client.request(ApiKey.OFFSET_COMMIT, COMMIT_VERSION, commit_request(group, offsets, **kw))
    )


@dataclass(frozen=True)
class Fetched:
    error_code: int  # the group-level error
    offsets: dict[TP, int]  # committed offsets; partitions without one are left out
    metadata: dict[TP, str | None]
    partition_errors: dict[TP, int]


def fetch(client: WireClient, group: str, partitions: Iterable[TP]) -> Fetched:
    """OffsetFetch v8 for ``partitions`` of ``group``."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    request = OffsetFetchRequest(
        groups=[
            OffsetFetchRequestGroup(
                group_id=group,
                topics=[OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
            )
        ]
    )
    response = client.request(ApiKey.OFFSET_FETCH, FETCH_VERSION, request)
    [answer] = response.groups
    offsets: dict[TP, int] = {}
    metadata: dict[TP, str | None] = {}
    errors: dict[TP, int] = {}
    for topic in answer.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            errors[key] = p.error_code
            if p.committed_offset >= 0:
                offsets[key] = p.committed_offset
                metadata[key] = p.metadata
    return Fetched(answer.error_code, offsets, metadata, errors)


def fetch_stored(bootstrap: str, keys: Iterable[Key], timeout: float = 30) -> dict[Key, int]:
    """Read back every key with OffsetFetch (retrying while the server still loads)."""
    groups: dict[str, list[TP]] = {}
    for group, topic, partition in keys:
        groups.setdefault(group, []).append((topic, partition))
    stored: dict[Key, int] = {}
    with WireClient(bootstrap, client_id="read-back") as client:
        for group, tps in groups.items():
            answer = wait_for(
                lambda group=group, tps=tps: _fetch_loaded(client, group, tps),
                timeout,
                f"OffsetFetch of {group}",
            )
            assert answer.error_code == NONE and not any(answer.partition_errors.values()), answer
            stored.update({(group, t, p): offset for (t, p), offset in answer.offsets.items()})
    return stored


def _fetch_loaded(client: WireClient, group: str, tps: list[TP]) -> Fetched | None:
    answer = fetch(client, group, tps)
    return None if answer.error_code == COORDINATOR_LOAD_IN_PROGRESS else answer


def describe(client: WireClient, group: str) -> DescribedGroup:
    response = client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[group]))
    [described] = response.groups
    assert isinstance(described, DescribedGroup)
    return described


# --------------------------------------------------------------------------------------------
# Committers: simple-consumer commits (generation -1) from one connection each


@dataclass(frozen=True)
class CommitterSpec:
    name: str
    group: str
    topic: str
    partitions: tuple[int, ...]
    bulk: bool = False  # every request commits all ``partitions``; else one partition, round-robin
    pipeline: int = 1  # requests in flight on the connection

    def offset_keys(self) -> list[Key]:
        return [(self.group, self.topic, p) for p in self.partitions]


@dataclass
class Outcome:
    sent_at: float
    answered_at: float
    codes: frozenset[int]
    # The time the server spent on it: a broker handles one request per connection at a time, so
    # a pipelined request's clock starts when the previous answer arrived.
    service_s: float


@dataclass
class Committer:
    """Commits with increasing offsets until told to stop, the deadline passes or the connection
    drops. ``sent`` records every offset before its request goes out (anything sent may have
    landed); ``acked`` the last offset acknowledged per key."""

    bootstrap: str
    spec: CommitterSpec
    stop: threading.Event
    deadline: float
    pause_after_error_s: float = 0.02
    sent: dict[Key, set[int]] = field(default_factory=dict)
    acked: dict[Key, int] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    requests_acked: int = 0
    partitions_acked: int = 0
    error_codes: Counter[int] = field(default_factory=Counter)
    connection_lost: str | None = None
    unanswered: int = 0  # requests in flight when the connection dropped
    crashed: str | None = None
    thread: threading.Thread | None = None

    def start(self) -> Committer:
        self.thread = threading.Thread(target=self._run, name=f"committer-{self.spec.name}", daemon=True)
        self.thread.start()
        return self

    def join(self, timeout: float = 20) -> None:
        assert self.thread is not None
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"committer {self.spec.name} did not stop"

    def _next_offsets(self, n: int) -> dict[TP, int]:
        spec = self.spec
        chosen = spec.partitions if spec.bulk else (spec.partitions[n % len(spec.partitions)],)
        return {(spec.topic, p): n * OFFSET_STRIDE + p for p in chosen}

    def _run(self) -> None:
        spec = self.spec
        inflight: deque[tuple[dict[TP, int], float]] = deque()
        n = 0
        try:
            with PipelinedClient(self.bootstrap, client_id=f"committer-{spec.name}") as client:
                while True:
                    active = not self.stop.is_set() and time.monotonic() < self.deadline
                    while active and len(inflight) < spec.pipeline:
                        n += 1
                        offsets = self._next_offsets(n)
                        for (topic, partition), offset in offsets.items():
                            self.sent.setdefault((spec.group, topic, partition), set()).add(offset)
                        client.send(ApiKey.OFFSET_COMMIT, COMMIT_VERSION, commit_request(spec.group, offsets))
                        inflight.append((offsets, time.monotonic()))
                    if not inflight:
                        return
                    response = client.receive()
                    offsets, sent_at = inflight.popleft()
                    self._record(offsets, sent_at, commit_errors(response))
        except (TimeoutError, OSError) as exc:  # ConnectionError is an OSError
            self.connection_lost = repr(exc)
            self.unanswered = len(inflight)
        except Exception as exc:
            self.crashed = repr(exc)
            raise

    def _record(self, offsets: dict[TP, int], sent_at: float, errors: dict[TP, int]) -> None:
        spec = self.spec
        assert set(errors) == set(offsets), f"response partitions {set(errors)} != request {set(offsets)}"
        codes = frozenset(errors.values())
        for tp, offset in offsets.items():
            code = errors[tp]
            if code == NONE:
                key = (spec.group, *tp)
                previous = self.acked.get(key, -1)
                assert offset > previous, f"acknowledged {offset} after {previous} for {key}"
                self.acked[key] = offset
                self.partitions_acked += 1
            else:
                self.error_codes[code] += 1
        if codes == {NONE}:
            self.requests_acked += 1
        answered = time.monotonic()
        last_answer = self.outcomes[-1].answered_at if self.outcomes else sent_at
        self.outcomes.append(Outcome(sent_at, answered, codes, answered - max(sent_at, last_answer)))
        if codes != {NONE} and self.pause_after_error_s:
            time.sleep(self.pause_after_error_s)


def start_committers(
    bootstrap: str, specs: Iterable[CommitterSpec], stop: threading.Event, max_seconds: float
) -> list[Committer]:
    deadline = time.monotonic() + max_seconds
    return [Committer(bootstrap, spec, stop, deadline).start() for spec in specs]


@dataclass
class ReadBack:
    problems: list[str]
    keys_checked: int
    acked_keys: int


def check_read_back(committers: Iterable[Committer], stored: Mapping[Key, int]) -> ReadBack:
    """Every acknowledged commit survived: for each key the stored offset is >= the last one
    acknowledged and is an offset that was actually sent; a bulk committer's partitions all
    come from the same request (a batch lands whole or not at all)."""
    problems: list[str] = []
    checked = acked_keys = 0
    for c in committers:
        for key in c.spec.offset_keys():
            offsets_sent = c.sent.get(key, set())
            checked += 1
            got = stored.get(key)
            last = c.acked.get(key)
            if last is not None:
                acked_keys += 1
                if got is None:
                    problems.append(f"{key}: acknowledged {last}, nothing stored")
                elif got < last:
                    problems.append(f"{key}: acknowledged {last}, stored {got} (lost)")
            if got is not None and got not in offsets_sent:
                problems.append(f"{key}: stored {got}, which was never sent")
        if c.spec.bulk:
            requests = {stored[k] // OFFSET_STRIDE for k in c.spec.offset_keys() if k in stored}
            present = sum(1 for k in c.spec.offset_keys() if k in stored)
            if len(requests) > 1 or present not in (0, len(c.spec.partitions)):
                problems.append(
                    f"{c.spec.name}: torn 100-partition commit: {present}/{len(c.spec.partitions)} "
                    f"partitions stored, from requests {sorted(requests)}"
                )
    return ReadBack(problems, checked, acked_keys)


def keys_of(committers: Iterable[Committer]) -> list[Key]:
    return [key for c in committers for key in c.spec.offset_keys()]
