"""The several-groups CSV file (group,topic,partition,offset), without a server."""

from __future__ import annotations

import io

import pytest

from coordinator.cli.admin.csvfile import OffsetRow, read_group_offsets_csv, write_group_offsets_csv
from coordinator.cli.admin.errors import UsageError


def test_round_trip_with_header_and_blank_lines() -> None:
    out = io.StringIO()
    rows = [("g1", OffsetRow("t", 0, 5)), ("g,2", OffsetRow("t", 1, 6))]
    write_group_offsets_csv(out, rows)
    text = "group,topic,partition,offset\n\n" + out.getvalue()
    assert read_group_offsets_csv(io.StringIO(text), "f") == rows


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("g,t,0,1\ng,t,0,2\n", "f line 2: g t:0 already on line 1"),
        (",t,0,1\n", "empty group id"),
        ("g,t,x,1\n", "partition 'x'"),
        ("g,t,0,-1\n", "offset '-1'"),
        ("g,t,0,1,meta\n", "expected group,topic,partition,offset, got 5 columns"),
    ],
)
def test_malformed_rows_name_the_line(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        read_group_offsets_csv(io.StringIO(text), "f")
