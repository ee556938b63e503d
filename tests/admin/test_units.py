"""The admin CLI's parts that need no server: parsers, the CSV file, tables, usage errors."""

from __future__ import annotations

import io
import re
import socket
import struct
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coordinator.cli.admin.assignment import decode_assignment
from coordinator.cli.admin.client import TP, AdminClient, Member, Node
from coordinator.cli.admin.csvfile import OffsetRow, read_offsets_csv, write_offsets_csv
from coordinator.cli.admin.errors import KafkaError, UsageError
from coordinator.cli.admin.groups_cmd import (
    OffsetLine,
    format_partitions,
    format_subscription,
    known_log_end,
    unknown_end_note,
)
from coordinator.cli.admin.output import render_table
from coordinator.cli.admin.specs import parse_datetime_ms, parse_duration_ms, parse_topic_spec
from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.errors import ErrorCode
from protocol.messages.consumer_protocol import (
    ConsumerProtocolAssignment,
    TopicPartition,
    encode_consumer_protocol_assignment_v0,
    encode_consumer_protocol_assignment_v3,
)
from protocol.messages.find_coordinator import Coordinator, FindCoordinatorResponse
from protocol.messages.metadata import MetadataResponse
from protocol.wire import encode_request
from tests.admin.support import cli


def _unused_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_topic_specs() -> None:
    assert parse_topic_spec("orders") == ("orders", None)
    assert parse_topic_spec("orders:2,0,2") == ("orders", [0, 2])
    for bad in ("orders:", "orders:a", "orders:-1", "bad topic", ""):
        with pytest.raises(ValueError):
            parse_topic_spec(bad)


def test_datetimes_and_durations() -> None:
    assert parse_datetime_ms("2024-05-01T12:00:00Z") == 1714564800000
    assert parse_datetime_ms("2024-05-01T14:00:00.000+02:00") == 1714564800000
    naive = datetime(2024, 5, 1, 12, 0, 0).astimezone(UTC)  # no zone: local time, as Kafka's tool
    assert parse_datetime_ms("2024-05-01T12:00:00") == int(naive.timestamp() * 1000)
    assert parse_duration_ms("PT30M") == 30 * 60_000
    assert parse_duration_ms("P1DT2H3M") == (86400 + 7200 + 180) * 1000
    assert parse_duration_ms("pt1.5s") == 1500
    for bad in ("P", "PT", "1D", "P1H", "-PT1M", "P1DT"):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)
    with pytest.raises(ValueError):
        parse_datetime_ms("yesterday")


def test_csv_round_trip_and_kafka_layout() -> None:
    rows = [OffsetRow("orders", 0, 5, "a,b"), OffsetRow("orders", 1, 0, "")]
    out = io.StringIO()
    write_offsets_csv(out, rows, with_metadata=False)
    assert out.getvalue() == "orders,0,5\norders,1,0\n"  # kafka-consumer-groups' reset file
    out = io.StringIO()
    write_offsets_csv(out, rows, with_metadata=True)
    assert read_offsets_csv(io.StringIO(out.getvalue()), "f") == rows
    with_header = "topic,partition,offset\n\norders,3,7\n"
    assert read_offsets_csv(io.StringIO(with_header), "f") == [OffsetRow("orders", 3, 7)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("orders,x,1\n", "f line 1: partition 'x' is not a non-negative integer"),
        ("orders,0,1\norders,0,-4\n", "f line 2: offset '-4' is not a non-negative integer"),
        ("orders,0\n", "f line 1: expected topic,partition,offset[,metadata], got 2 columns"),
        ("orders,0,1\norders,0,2\n", "f line 2: orders:0 already on line 1"),
        (",0,1\n", "f line 1: empty topic name"),
    ],
)
def test_bad_csv_is_named_by_line(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        read_offsets_csv(io.StringIO(text), "f")


def test_assignment_bytes_decode_for_every_version() -> None:
    assignment = ConsumerProtocolAssignment([TopicPartition("b", [1, 0]), TopicPartition("a", [2])], b"x")
    for version, encode in (
        (0, encode_consumer_protocol_assignment_v0),
        (3, encode_consumer_protocol_assignment_v3),
    ):
        data = bytearray(struct.pack(">h", version))
        encode(assignment, data)
        assert decode_assignment(bytes(data)) == [("a", 2), ("b", 0), ("b", 1)]
    future = bytearray(struct.pack(">h", 9))  # a newer version is read with our newest layout
    encode_consumer_protocol_assignment_v3(assignment, future)
    assert decode_assignment(bytes(future)) == [("a", 2), ("b", 0), ("b", 1)]
    assert decode_assignment(b"") == []
    assert decode_assignment(b"\x00\x00\x00\x00\x00\x09") is None  # truncated


def test_table_is_aligned_and_dashes_missing_values() -> None:
    text = render_table(["GROUP", "LAG"], [["billing", 10], ["x", None]])
    assert text.splitlines() == ["GROUP    LAG", "billing  10", "x        -"]


def test_lag_is_never_negative_a_log_end_before_the_commit_is_unknown() -> None:
    assert known_log_end(40, 100) == 100
    assert known_log_end(100, 100) == 100
    assert known_log_end(None, 100) == 100  # assigned, nothing committed: the end is still known
    assert known_log_end(54, 0) is None  # a broker that holds no records answers 0
    assert known_log_end(5, None) is None  # ListOffsets failed for the partition
    lines = [
        OffsetLine(TP("t", 0), 40, known_log_end(40, 100), None, 100),
        OffsetLine(TP("t", 1), 54, known_log_end(54, 0), None, 0),
        OffsetLine(TP("t", 2), 5, known_log_end(5, None), None, None),
    ]
    assert [line.lag for line in lines] == [60, None, None]
    note = unknown_end_note(lines)
    assert note is not None and note.startswith(
        "log end unknown for 1 partition: the broker reports a log end (0)"
    )
    assert unknown_end_note(lines[:1]) is None


def test_kafka_error_text_names_the_error() -> None:
    error = KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, "group 'g' does not exist")
    assert str(error) == "GROUP_ID_NOT_FOUND: group 'g' does not exist (The group id does not exist)"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["offsets", "reset", "g", "--topic", "t"], "one of the arguments --to-earliest"),
        (["offsets", "reset", "g", "--topic", "t", "--to-latest", "--to-earliest"], "not allowed with"),
        (
            ["offsets", "reset", "g", "--topic", "t", "--to-latest", "--dry-run", "--execute"],
            "not allowed with",
        ),
        (["offsets", "reset", "g", "--topic", "t", "--all-topics", "--to-latest"], "not allowed with"),
        (["offsets", "reset", "g", "--topic", "t:x", "--to-latest"], "invalid partition 'x'"),
        (["offsets", "reset", "g", "--topic", "t", "--to-datetime", "noon"], "invalid ISO 8601 date-time"),
        (["offsets", "reset", "g", "--topic", "t", "--by-duration", "1h"], "invalid ISO 8601 duration"),
        (["offsets", "reset", "g", "--topic", "t", "--to-offset", "-3"], "expected a non-negative integer"),
        (["offsets", "reset", "g", "--to-latest"], "--topic --all-topics is required"),
        (["offsets", "import", "g", "/nonexistent/offsets.csv"], "cannot read /nonexistent/offsets.csv"),
        (["offsets", "delete", "g"], "the following arguments are required: --topic"),
        (["groups", "describe"], "give GROUP names or --all-groups"),
        (["groups", "rename", "g"], "argument VERB: invalid choice: 'rename'"),
        (["groups", "list", "--format", "xml"], "invalid choice: 'xml'"),
    ],
)
def test_usage_errors_exit_2_with_a_readable_message(argv: list[str], message: str) -> None:
    result = cli(_unused_address(), *argv)  # nothing listens there: usage is checked first
    assert result.code == 2, result
    assert message in result.err


def test_bad_bootstrap_is_a_usage_error() -> None:
    result = cli("localhost", "groups", "list")
    assert result.code == 2
    assert "expected HOST:PORT, got 'localhost'" in result.err


def test_bad_csv_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "offsets.csv"
    path.write_text("orders,0,ten\n")
    result = cli(_unused_address(), "offsets", "import", "g", str(path))
    assert result.code == 2
    assert (
        result.err.strip()
        == f"coordinator offsets import: error: {path} line 1: offset 'ten' is not a non-negative integer"
    )


def test_unreachable_broker_is_a_named_error() -> None:
    address = _unused_address()
    result = cli(address, "groups", "list")
    assert result.code == 1
    assert result.err.startswith(f"NETWORK_EXCEPTION: cannot connect to {address}: ")


def test_consumer_group_assignment_and_subscription_cells() -> None:
    assignment = [TP("orders", 2), TP("audit", 0), TP("orders", 0)]
    assert format_partitions(assignment) == "audit:0;orders:0,2"
    assert format_partitions([]) == format_partitions(None) == "-"
    member = Member("m", None, "c", "/h", [], subscribed_topics=["a", "b"], subscribed_topic_regex="^x.*")
    assert format_subscription(member) == "a,b,/^x.*/"
    assert format_subscription(Member("m", None, "c", "/h", [])) == "-"


class _RecordingConnection:
    """Stands in for a BrokerConnection at one version; checks that every request encodes."""

    def __init__(self, version: int, response: object) -> None:
        self.chosen = version
        self.response = response
        self.versions: dict[ApiKey, tuple[int, int]] = {}

    def version(self, api: ApiKey) -> int:
        return self.chosen

    def request(self, api: ApiKey, body: object, version: int | None = None) -> object:
        encode_request(api, self.chosen if version is None else version, 1, "test", body)
        return self.response


@pytest.mark.parametrize("version", range(SERVED_VERSIONS[ApiKey.FIND_COORDINATOR][1] + 1))
def test_find_coordinator_request_fits_every_version(version: int) -> None:
    """Key before v4, CoordinatorKeys from v4 (KIP-699): a field a version lacks keeps its default."""
    if version >= 4:
        response = FindCoordinatorResponse(coordinators=[Coordinator("g", 3, "h", 9092)])
    else:
        response = FindCoordinatorResponse(node_id=3, host="h", port=9092)
    client = AdminClient("127.0.0.1:1")
    client._connections[client.bootstrap] = _RecordingConnection(version, response)  # type: ignore[assignment]
    assert client.coordinator("g") == Node(3, "h", 9092)


@pytest.mark.parametrize("version", range(SERVED_VERSIONS[ApiKey.METADATA][1] + 1))
def test_metadata_request_fits_every_version(version: int) -> None:
    client = AdminClient("127.0.0.1:1")
    client._connections[client.bootstrap] = _RecordingConnection(version, MetadataResponse())  # type: ignore[assignment]
    assert client.metadata(["orders"]).topics == {}
    assert client.metadata().brokers == {}
