"""Exactly-once through the gateway on a real Kafka 4.4 upstream (docs/transactions.md).

confluent-kafka's transactional producer commits its input offsets with
``send_offsets_to_transaction``: AddOffsetsToTxn and EndTxn go to Kafka's transaction
coordinator through the gateway's virtual brokers, TxnOffsetCommit to the gateway's group
coordinator, which keeps the offsets pending until the EndTxn (or a fencing InitProducerId)
it forwarded tells it the outcome.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import sqlite3
import struct
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from coordinator.gateway.versions import DESCRIBE_TRANSACTIONS, END_TXN
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.gateway_wire import decode_forwarded_response, encode_forwarded
from protocol.messages import GATEWAY_FLEXIBLE
from protocol.messages.describe_transactions import DescribeTransactionsRequest
from protocol.messages.end_txn import EndTxnRequest
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from tests.admin.support import cli, table_rows
from tests.support.java_driver import JavaDriver
from tests.support.kafka_broker import KafkaCluster, java_command
from tests.support.ports import free_port
from tests.support.server import ServerProcess, start_server
from tests.support.streams_app import input_lines, latest_counts, produce_lines, word_count_app
from tests.support.wire_client import WireClient

pytestmark = pytest.mark.kafka

RECORDS = 10


METRICS_PORT = free_port()


def _settings(kafka: KafkaCluster, base: int) -> dict[str, str]:
    return {
        "upstream-bootstrap-servers": kafka.bootstrap,
        "upstream-metadata-refresh-ms": "500",
        "gateway-broker-port-base": str(base),
        "metrics-port": str(METRICS_PORT),
    }


def _metric(line_start: str) -> float:
    """The value of the gateway's metric sample starting with ``line_start``."""
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as response:
        text = response.read().decode()
    found = [line for line in text.splitlines() if line.startswith(line_start + " ")]
    assert len(found) == 1, (line_start, text)
    return float(found[0].rsplit(" ", 1)[1])


@pytest.fixture
def gateway_at(kafka_broker: KafkaCluster, tmp_path: Path) -> Iterator[Callable[[], ServerProcess]]:
    """Starts (and restarts) one gateway on fixed ports with SQLite storage."""
    port, base = free_port(), free_port()
    storage = f"sqlite:///{tmp_path / 'gateway.db'}"
    started: list[ServerProcess] = []

    def start() -> ServerProcess:
        server = start_server(storage, _settings(kafka_broker, base), port=port)
        server.wait_loaded()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def _wait(condition: Callable[[], bool], timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, message
        time.sleep(0.1)


def _topics(kafka: KafkaCluster, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(30)


def _input(kafka: KafkaCluster, topic: str) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(RECORDS):
        producer.produce(topic, f"in-{i}".encode())
    assert producer.flush(30) == 0


def _producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60000,
            "socket.connection.setup.timeout.ms": 3000,
            "reconnect.backoff.max.ms": 500,
        }
    )
    producer.init_transactions(60)
    return producer


def _group_metadata(bootstrap: str, group: str) -> object:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    metadata = consumer.consumer_group_metadata()
    consumer.close()
    return metadata


def _fetch(bootstrap: str, group: str, topic: str, *, stable: bool) -> tuple[int, int]:
    """(committed offset, error code) of partition 0, OffsetFetch v7 (RequireStable)."""
    with WireClient(bootstrap) as client:
        answer = client.request(
            ApiKey.OFFSET_FETCH,
            7,
            OffsetFetchRequest(
                group_id=group, topics=[OffsetFetchRequestTopic(topic, [0])], require_stable=stable
            ),
        )
    partition = answer.topics[0].partitions[0]
    return int(partition.committed_offset), int(partition.error_code)


def _read_committed(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
    finally:
        consumer.close()
    return values


def _transaction(producer: Producer, bootstrap: str, group: str, source: str, sink: str) -> None:
    """Produce RECORDS outputs and commit the input offsets in one transaction (left open)."""
    producer.begin_transaction()
    for i in range(RECORDS):
        producer.produce(sink, f"out-{i}".encode())
    producer.send_offsets_to_transaction(
        [TopicPartition(source, 0, RECORDS)], _group_metadata(bootstrap, group), 30
    )


UNSTABLE = int(ErrorCode.UNSTABLE_OFFSET_COMMIT)


# Each sequence runs through the gateway and straight against Kafka 4.4, whose own group
# coordinator is the oracle: both must answer OffsetFetch alike during and after the transaction.
TARGETS = ["gateway", "kafka"]


def _bootstrap(target: str, kafka: KafkaCluster, gateway_at: Callable[[], ServerProcess]) -> str:
    return gateway_at().bootstrap if target == "gateway" else kafka.bootstrap


@pytest.mark.parametrize("target", TARGETS)
def test_commit_makes_the_offsets_visible_with_the_output(
    kafka_broker: KafkaCluster, gateway_at: Callable[[], ServerProcess], target: str
) -> None:
    bootstrap = _bootstrap(target, kafka_broker, gateway_at)
    name = uuid.uuid4().hex[:8]
    source, sink, group = f"in-{name}", f"out-{name}", f"eos-{name}"
    _topics(kafka_broker, source, sink)
    _input(kafka_broker, source)
    producer = _producer(bootstrap, f"tx-{name}")
    _transaction(producer, bootstrap, group, source, sink)
    assert _fetch(bootstrap, group, source, stable=False) == (-1, 0)
    assert _fetch(bootstrap, group, source, stable=True) == (-1, UNSTABLE)
    if target == "gateway":
        assert _metric("coordinator_pending_transactional_offsets") == 1
    producer.commit_transaction(30)
    _wait(lambda: _fetch(bootstrap, group, source, stable=True) != (-1, UNSTABLE), 30, "still unstable")
    assert _fetch(bootstrap, group, source, stable=True) == (RECORDS, 0)
    if target == "gateway":
        assert _metric("coordinator_pending_transactional_offsets") == 0
        assert (
            _metric('coordinator_transaction_resolutions_total{learned_from="EndTxn",outcome="commit"}') == 1
        )
        assert _metric('coordinator_transactional_offsets_resolved_total{outcome="commit"}') == 1
    assert _fetch(bootstrap, group, source, stable=False) == (RECORDS, 0)
    assert sorted(_read_committed(bootstrap, sink, RECORDS)) == sorted(
        f"out-{i}".encode() for i in range(RECORDS)
    )


@pytest.mark.parametrize("target", TARGETS)
def test_abort_leaves_the_offsets_unchanged(
    kafka_broker: KafkaCluster, gateway_at: Callable[[], ServerProcess], target: str
) -> None:
    bootstrap = _bootstrap(target, kafka_broker, gateway_at)
    name = uuid.uuid4().hex[:8]
    source, sink, group = f"in-{name}", f"out-{name}", f"eos-{name}"
    _topics(kafka_broker, source, sink)
    _input(kafka_broker, source)
    producer = _producer(bootstrap, f"tx-{name}")
    _transaction(producer, bootstrap, group, source, sink)
    assert _fetch(bootstrap, group, source, stable=True) == (-1, UNSTABLE)
    producer.abort_transaction(30)
    _wait(lambda: _fetch(bootstrap, group, source, stable=True) != (-1, UNSTABLE), 30, "still unstable")
    assert _fetch(bootstrap, group, source, stable=True) == (-1, 0)


def test_a_gateway_killed_before_end_txn_keeps_the_offsets_pending_until_the_commit(
    kafka_broker: KafkaCluster, gateway_at: Callable[[], ServerProcess]
) -> None:
    gateway = gateway_at()
    name = uuid.uuid4().hex[:8]
    source, sink, group = f"in-{name}", f"out-{name}", f"eos-{name}"
    _topics(kafka_broker, source, sink)
    _input(kafka_broker, source)
    producer = _producer(gateway.bootstrap, f"tx-{name}")
    _transaction(producer, gateway.bootstrap, group, source, sink)
    gateway.kill()
    gateway = gateway_at()
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, UNSTABLE)  # still pending
    producer.commit_transaction(60)  # EndTxn through the restarted gateway
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (RECORDS, 0)
    assert len(_read_committed(gateway.bootstrap, sink, RECORDS)) == RECORDS


def test_a_fenced_zombie_s_pending_offsets_are_discarded(
    kafka_broker: KafkaCluster, gateway_at: Callable[[], ServerProcess]
) -> None:
    gateway = gateway_at()
    name = uuid.uuid4().hex[:8]
    source, sink, group = f"in-{name}", f"out-{name}", f"eos-{name}"
    _topics(kafka_broker, source, sink)
    _input(kafka_broker, source)
    zombie = _producer(gateway.bootstrap, f"tx-{name}")
    _transaction(zombie, gateway.bootstrap, group, source, sink)
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, UNSTABLE)
    successor = _producer(gateway.bootstrap, f"tx-{name}")  # InitProducerId fences the zombie
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, 0)
    resolutions = 'coordinator_transaction_resolutions_total{learned_from="InitProducerId",outcome="abort"}'
    assert _metric(resolutions) == 1
    with pytest.raises(KafkaException):
        zombie.commit_transaction(30)
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, 0)
    assert _read_committed(gateway.bootstrap, sink, 1, timeout=5) == []
    successor.begin_transaction()
    successor.send_offsets_to_transaction(
        [TopicPartition(source, 0, 3)], _group_metadata(gateway.bootstrap, group), 30
    )
    successor.commit_transaction(30)
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (3, 0)


def _transaction_state(kafka: KafkaCluster, transactional_id: str) -> str:
    """The transaction's state as Kafka's kafka-transactions tool describes it."""
    out = subprocess.run(
        java_command(
            "org.apache.kafka.tools.TransactionsCommand",
            "--bootstrap-server", kafka.bootstrap, "describe", "--transactional-id", transactional_id,
        ),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return out.stdout


def test_a_transaction_timed_out_upstream_loses_its_pending_offsets(
    kafka_broker: KafkaCluster, gateway_at: Callable[[], ServerProcess]
) -> None:
    gateway = gateway_at()
    name = uuid.uuid4().hex[:8]
    source, sink, group, transactional_id = f"in-{name}", f"out-{name}", f"eos-{name}", f"tx-{name}"
    _topics(kafka_broker, source, sink)
    _input(kafka_broker, source)
    stalled = Producer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 2000,
        }
    )
    stalled.init_transactions(60)
    _transaction(stalled, gateway.bootstrap, group, source, sink)
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, UNSTABLE)
    # Kafka aborts the transaction once it is older than its timeout (checked every 10 s).
    _wait(lambda: "CompleteAbort" in _transaction_state(kafka_broker, transactional_id), 90, "not aborted")
    with pytest.raises(KafkaException):
        stalled.commit_transaction(30)  # refused: the transaction was aborted upstream
    # Learned from the application's new producer (InitProducerId), or earlier from upstream's
    # DescribeTransactions (the transaction was seen open and no EndTxn was forwarded for it).
    _producer(gateway.bootstrap, transactional_id)  # the application's new producer: InitProducerId
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, 0)
    assert _read_committed(gateway.bootstrap, sink, 1, timeout=5) == []


# ---- outcomes learned from upstream's DescribeTransactions (docs/transactions.md, the resolver) ----


def _raw(address: str, api_key: int, version: int, body: Any) -> Any:
    """One request of an API the gateway forwards (its codecs: protocol/gateway_wire.py) to a
    broker, straight, without the gateway."""
    client_id = b"test-client"
    header = struct.pack(">hhih", api_key, version, 1, len(client_id)) + client_id
    if (api_key, version) in GATEWAY_FLEXIBLE:
        header += b"\x00"
    frame = encode_forwarded(header, len(header), body)
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _read_exactly(sock, 4))[0]
        answer = _read_exactly(sock, size)
    return decode_forwarded_response(api_key, version, struct.pack(">i", size) + answer)[1]


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed"
        data += chunk
    return bytes(data)


def _end_txn_behind_the_gateway(
    kafka: KafkaCluster, database: Path, transactional_id: str, commit: bool
) -> None:
    """EndTxn straight to Kafka (one broker: the transaction coordinator), as if the gateway had
    forwarded it and died before the answer came back: upstream decides, the gateway never hears."""
    described = _raw(
        kafka.bootstrap, DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest([transactional_id])
    )
    state = described.transaction_states[0]
    assert state.transaction_state == "Ongoing", state
    with sqlite3.connect(database) as db:
        (version,) = db.execute("SELECT max(transaction_version) FROM txn_offsets").fetchone()
    request = EndTxnRequest(transactional_id, state.producer_id, state.producer_epoch, commit)
    answer = _raw(kafka.bootstrap, END_TXN, 5 if version == 2 else 3, request)
    assert answer.error_code == 0, answer


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_an_outcome_decided_behind_a_killed_gateway_is_learned_from_upstream_after_the_restart(
    kafka_broker: KafkaCluster, gateway_at: Callable[[], ServerProcess], tmp_path: Path, commit: bool
) -> None:
    """The records are written before the EndTxn sent behind the gateway, as commit_transaction
    writes them before its EndTxn (records still in flight at the kill would not be part of the
    committed transaction). A producer request reaching the restarted gateway before the resolver
    asked is held (docs/transactions.md#the-hold-a-transaction-of-unknown-state); that race is
    not reproducible on demand here, its sequence is tests/gateway/test_transaction_hold.py's."""
    gateway = gateway_at()
    name = uuid.uuid4().hex[:8]
    source, sink, group, transactional_id = f"in-{name}", f"out-{name}", f"eos-{name}", f"tx-{name}"
    _topics(kafka_broker, source, sink)
    _input(kafka_broker, source)
    producer = _producer(gateway.bootstrap, transactional_id)
    _transaction(producer, gateway.bootstrap, group, source, sink)
    assert producer.flush(30) == 0
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, UNSTABLE)
    gateway.kill()
    _end_txn_behind_the_gateway(kafka_broker, tmp_path / "gateway.db", transactional_id, commit)
    gateway = gateway_at()
    _wait(
        lambda: _fetch(gateway.bootstrap, group, source, stable=True) != (-1, UNSTABLE), 30, "stuck unstable"
    )
    assert _fetch(gateway.bootstrap, group, source, stable=True) == ((RECORDS, 0) if commit else (-1, 0))
    outcome = "commit" if commit else "abort"
    learned = f'coordinator_transaction_resolutions_total{{learned_from="DescribeTransactions",outcome="{outcome}"}}'
    assert _metric(learned) == 1
    assert _metric("coordinator_pending_transactional_offsets") == 0
    assert len(_read_committed(gateway.bootstrap, sink, RECORDS, timeout=5 if not commit else 60)) == (
        RECORDS if commit else 0
    )


def test_a_producer_re_initialised_after_a_gateway_restart_discards_its_open_transaction(
    kafka_broker: KafkaCluster, gateway_at: Callable[[], ServerProcess]
) -> None:
    gateway = gateway_at()
    name = uuid.uuid4().hex[:8]
    source, sink, group, transactional_id = f"in-{name}", f"out-{name}", f"eos-{name}", f"tx-{name}"
    _topics(kafka_broker, source, sink)
    _input(kafka_broker, source)
    crashed = _producer(gateway.bootstrap, transactional_id)
    _transaction(crashed, gateway.bootstrap, group, source, sink)
    gateway.kill()
    gateway = gateway_at()
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, UNSTABLE)
    # What an operator sees of the stuck transaction: the pending offset and who holds it.
    state = _raw(
        kafka_broker.bootstrap, DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest([transactional_id])
    ).transaction_states[0]
    shown = cli(gateway.bootstrap, "groups", "describe", group, "--http", f"127.0.0.1:{METRICS_PORT}")
    assert shown.code == 0, shown
    rows = table_rows(shown.out)
    header = rows.index(["GROUP", "TOPIC", "PARTITION", "PENDING-OFFSET", "PRODUCER-ID", "PRODUCER-EPOCH",
                         "TRANSACTIONAL-ID", "SINCE"])  # fmt: skip
    assert rows[header + 1][:7] == [
        group,
        source,
        "0",
        str(RECORDS),
        str(state.producer_id),
        str(state.producer_epoch),
        transactional_id,
    ]
    del crashed  # the application died
    _producer(gateway.bootstrap, transactional_id)  # the application restarted: InitProducerId
    _wait(
        lambda: _fetch(gateway.bootstrap, group, source, stable=True) != (-1, UNSTABLE), 30, "stuck unstable"
    )
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, 0)
    assert _metric("coordinator_pending_transactional_offsets") == 0
    assert _read_committed(gateway.bootstrap, sink, 1, timeout=5) == []


def _commit_or_abort(producer: Producer, deadline: float) -> bool:
    """Commit the open transaction, retrying what is retriable; abort it when it must be
    (the caller redoes it). True when it committed."""
    while True:
        assert time.monotonic() < deadline, "the transaction did not end"
        try:
            producer.commit_transaction(10)
            return True
        except KafkaException as exc:
            error = exc.args[0]
            if error.retriable():
                continue
            assert error.txn_requires_abort(), error
        _abort(producer, deadline)
        return False


def test_transactions_go_on_while_the_gateway_is_killed_again_and_again(
    kafka_broker: KafkaCluster, gateway_at: Callable[[], ServerProcess]
) -> None:
    """A transactional producer loop with the gateway SIGKILLed every ~1.5 s, whatever the
    producer is doing: the committed offset is the last committed transaction's, and none is
    left pending. The stall once seen here (docs/transactions.md) is librdkafka's: its
    send_offsets_to_transaction waits for the group coordinator without a deadline, and after
    a connection loss at the wrong moment it never sends TxnOffsetCommit to the restarted
    gateway (which has nothing pending and serves everything else); a watchdog replaces such a
    producer, and the new producer's InitProducerId aborts the stuck transaction."""
    gateway = gateway_at()
    name = uuid.uuid4().hex[:8]
    source, sink, group, transactional_id = f"in-{name}", f"out-{name}", f"eos-{name}", f"tx-{name}"
    _topics(kafka_broker, source, sink)
    _input(kafka_broker, source)
    metadata = _group_metadata(gateway.bootstrap, group)
    gateways = [gateway]
    killing = threading.Event()
    killing.set()

    failures: list[BaseException] = []

    def killer() -> None:
        try:
            for _ in range(KILLS):
                time.sleep(1.5)
                gateways[-1].kill()
                gateways.append(gateway_at())
        except BaseException as exc:
            failures.append(exc)
        finally:
            killing.clear()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        committed_offset, replaced = _transactions_until_the_kills_end(
            lambda: _producer(gateways[0].bootstrap, transactional_id), metadata, source, sink, killing
        )
    except BaseException:
        print("DEBUG last gateway log:\n" + gateways[-1].log_text()[-20000:])
        raise
    thread.join(60)
    assert not failures, failures
    gateway = gateways[-1]
    _wait(lambda: _fetch(gateway.bootstrap, group, source, stable=True)[1] == 0, 60, "left unstable")
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (committed_offset, 0)
    assert _metric("coordinator_pending_transactional_offsets") == 0
    print(
        f"last committed input offset {committed_offset}, producers replaced after a client hang: {replaced}"
    )


KILLS = 8


class _ClientHung(Exception):
    """A librdkafka call that did not return within its watchdog (see the test's docstring)."""


def _watched(call: Callable[[], object], seconds: float) -> None:
    """``call`` in a thread; _ClientHung when it has not returned in ``seconds`` (it is left
    blocked: the producer is replaced, as an application's watchdog would)."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise _ClientHung
    if failures:
        raise failures[0]


def _transactions_until_the_kills_end(
    new_producer: Callable[[], Producer], metadata: object, source: str, sink: str, killing: threading.Event
) -> tuple[int, int]:
    """Transactions, one input offset further each, until two after the kills ended: the offset
    of the last committed one, and how many producers hung in librdkafka and were replaced."""
    producer = new_producer()
    committed_offset, offset, after_kills, replaced = -1, 0, 0, 0
    while after_kills < 2:
        if not killing.is_set():
            after_kills += 1
        offset += 1
        deadline = time.monotonic() + 90
        try:
            producer.begin_transaction()
            producer.produce(sink, f"out-{offset}".encode())
            try:
                send = partial(
                    producer.send_offsets_to_transaction, [TopicPartition(source, 0, offset)], metadata, 10
                )
                _watched(send, CLIENT_WATCHDOG_S)
            except KafkaException as exc:
                assert exc.args[0].retriable() or exc.args[0].txn_requires_abort(), exc
                _abort(producer, deadline)
                continue
            if _commit_or_abort(producer, deadline):
                committed_offset = offset
        except _ClientHung:
            replaced += 1
            producer = new_producer()  # InitProducerId fences the hung one: its transaction aborts
    return committed_offset, replaced


# librdkafka's send_offsets_to_transaction can block past its timeout when the group
# coordinator's connection drops at the wrong moment (confluentinc/librdkafka#5456, #5511).
CLIENT_WATCHDOG_S = 45


def _abort(producer: Producer, deadline: float) -> None:
    while True:
        assert time.monotonic() < deadline, "the transaction could not be aborted"
        try:
            producer.abort_transaction(10)
            return
        except KafkaException as exc:
            assert exc.args[0].retriable(), exc


# ---- the Java producer's sendOffsetsToTransaction (tests/java: Transforming.java) -----------


@pytest.mark.parametrize("group_protocol", ["consumer", "classic"])
@pytest.mark.parametrize("target", TARGETS)
def test_java_consume_transform_produce_is_exactly_once(
    kafka_broker: KafkaCluster,
    gateway_at: Callable[[], ServerProcess],
    java_driver: JavaDriver,
    target: str,
    group_protocol: str,
) -> None:
    """Kafka 4.4's Java consumer and transactional producer (transaction version 2: TxnOffsetCommit
    v5) through the gateway, Kafka 4.4's own coordinator as the oracle: every input record's
    output exactly once in the read_committed output, the input offsets committed."""
    bootstrap = _bootstrap(target, kafka_broker, gateway_at)
    name = uuid.uuid4().hex[:8]
    source, sink, group = f"in-{name}", f"out-{name}", f"eos-{name}"
    _topics(kafka_broker, source, sink)
    _input(kafka_broker, source)
    answer = java_driver.call(
        "transform", bootstrap=bootstrap, input=source, output=sink, group=group,
        transactional_id=f"tx-{name}", expected=RECORDS, timeout_ms=90000, group_protocol=group_protocol,
    )  # fmt: skip
    assert answer["processed"] == RECORDS and answer["transactions"] >= 1
    assert _fetch(bootstrap, group, source, stable=True) == (RECORDS, 0)
    output = _read_committed(bootstrap, sink, RECORDS)
    assert sorted(output) == sorted(f"out-in-{i}".encode() for i in range(RECORDS))
    assert _read_committed(bootstrap, sink, RECORDS + 1, timeout=3) == output  # nothing more
    if target == "gateway":
        committed = 'coordinator_transaction_resolutions_total{learned_from="EndTxn",outcome="commit"}'
        assert _metric(committed) == answer["transactions"]
        assert _metric("coordinator_pending_transactional_offsets") == 0


def test_a_java_application_killed_mid_transaction_is_replaced_exactly_once(
    kafka_broker: KafkaCluster,
    gateway_at: Callable[[], ServerProcess],
    java_driver: JavaDriver,
    tmp_path: Path,
) -> None:
    """The Java application SIGKILLed between sendOffsetsToTransaction and commitTransaction;
    its replacement (same transactional id and group) fences it with InitProducerId: the
    killed transaction's offsets are discarded, its records never read_committed, and the
    replacement processes every input exactly once."""
    gateway = gateway_at()
    name = uuid.uuid4().hex[:8]
    source, sink, group, transactional_id = f"in-{name}", f"out-{name}", f"eos-{name}", f"tx-{name}"
    _topics(kafka_broker, source, sink)
    _input(kafka_broker, source)
    doomed = JavaDriver(tmp_path / "doomed.log")
    try:
        request = {
            "op": "transform", "bootstrap": gateway.bootstrap, "input": source, "output": sink, "group": group,
            "transactional_id": transactional_id, "expected": RECORDS, "timeout_ms": 120000,
            "pause_ms": 120000, "group_protocol": "classic", "session_timeout_ms": 6000,
        }  # fmt: skip
        assert doomed.process.stdin is not None
        doomed.process.stdin.write(json.dumps(request).encode() + b"\n")
        doomed.process.stdin.flush()
        _wait(lambda: _metric("coordinator_pending_transactional_offsets") >= 1, 60, "no pending offsets")
        assert _fetch(gateway.bootstrap, group, source, stable=True) == (-1, UNSTABLE)
    finally:
        os.killpg(doomed.process.pid, signal.SIGKILL)
        doomed.process.wait(30)
        for pipe in (doomed.process.stdin, doomed.process.stdout):
            if pipe is not None:
                pipe.close()
    answer = java_driver.call(
        "transform", bootstrap=gateway.bootstrap, input=source, output=sink, group=group,
        transactional_id=transactional_id, expected=RECORDS, timeout_ms=90000, group_protocol="classic",
        session_timeout_ms=6000,
    )  # fmt: skip
    assert answer["processed"] == RECORDS
    assert _fetch(gateway.bootstrap, group, source, stable=True) == (RECORDS, 0)
    aborted = 'coordinator_transaction_resolutions_total{learned_from="InitProducerId",outcome="abort"}'
    assert _metric(aborted) == 1
    output = _read_committed(gateway.bootstrap, sink, RECORDS)
    assert sorted(output) == sorted(f"out-in-{i}".encode() for i in range(RECORDS))
    assert _read_committed(gateway.bootstrap, sink, RECORDS + 1, timeout=3) == output


# ---- Kafka Streams with processing.guarantee=exactly_once_v2 (tests/java: WordCount.java) ----


def test_kafka_streams_exactly_once_v2_counts_exactly_after_an_instance_sigkill(
    kafka_broker: KafkaCluster, tmp_path: Path
) -> None:
    """A word count with exactly_once_v2 and the streams group protocol through the gateway on
    Kafka 4.4: an instance SIGKILLed while it processes leaves an open transaction with pending
    offsets (its transactional id is its own, so no InitProducerId fences it); upstream aborts it
    on its timeout and the resolver learns that, so the task's new owner, whose stable offset
    fetch answered UNSTABLE_OFFSET_COMMIT until then, resumes from the last committed offsets:
    the read_committed counts are exact."""
    port, base = free_port(), free_port()
    settings = _settings(kafka_broker, base) | {
        "group-streams-heartbeat-interval-ms": "500",
        "group-streams-session-timeout-ms": "6000",
    }
    gateway = start_server(f"sqlite:///{tmp_path / 'gateway.db'}", settings, port=port)
    try:
        gateway.wait_loaded()
        name = uuid.uuid4().hex[:8]
        words, output = f"words-{name}", f"counts-{name}"
        admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
        for future in admin.create_topics([NewTopic(t, 3, 1) for t in (words, output)]).values():
            future.result(30)
        lines, expected = input_lines(seed=5, lines=400)
        first, second = lines[:200], lines[200:]
        half = dict(collections.Counter(w for line in first for w in line.split()))
        with word_count_app(
            gateway.bootstrap, f"eos-{name}", tmp_path, (words, output), guarantee="exactly_once_v2"
        ) as app:
            a, b = app.start(), app.start()
            app.wait_running([a, b])
            produce_lines(gateway.bootstrap, words, first)
            counted = latest_counts(gateway.bootstrap, output, half, 120, isolation_level="read_committed")
            assert counted == half, app.logs()
            produce_lines(gateway.bootstrap, words, second)
            a.process.send_signal(signal.SIGKILL)  # mid-processing, its transaction open
            a.process.wait(10)
            c = app.start()
            app.wait_running([c])
            counts = latest_counts(gateway.bootstrap, output, expected, 240, isolation_level="read_committed")
            assert counts == expected, app.logs()
        _wait(lambda: _metric("coordinator_pending_transactional_offsets") == 0, 60, "offsets left pending")
    finally:
        gateway.stop()
