"""`coordinator groups configure` and `groups describe --configs` against our server."""

from __future__ import annotations

import pytest

from tests.admin.support import cli, commit, create_topics, table_rows
from tests.support.server import ServerProcess

pytestmark = pytest.mark.integration

SESSION, INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
CONSUMER = (SESSION, INTERVAL)


def _consumer_rows(rows: list[list[str]]) -> list[list[str]]:
    """The header and the consumer group configs' rows (a group also shows the streams ones)."""
    return [row for row in rows if row[0] == "GROUP" or row[1] in CONSUMER]


def test_configure_sets_and_deletes_then_describe_shows_the_values_and_sources(ours: ServerProcess) -> None:
    done = cli(ours.bootstrap, "groups", "configure", "gc-billing", "--set", f"{SESSION}=50000",
               "--set", f"{INTERVAL}=6000")  # fmt: skip
    assert done.code == 0, done.err
    assert _consumer_rows(table_rows(done.out)) == [
        ["GROUP", "CONFIG", "VALUE", "SOURCE"],
        ["gc-billing", SESSION, "50000", "DYNAMIC_GROUP_CONFIG"],
        ["gc-billing", INTERVAL, "6000", "DYNAMIC_GROUP_CONFIG"],
    ]
    assert cli(ours.bootstrap, "groups", "configure", "gc-billing", "--delete", INTERVAL).code == 0
    shown = cli(
        ours.bootstrap, "groups", "describe", "gc-billing", "gc-unset", "--configs", "--format", "json"
    )
    assert shown.code == 0, shown.err
    assert [
        (c["group"], c["name"], c["value"], c["source"]) for c in shown.json() if c["name"] in CONSUMER
    ] == [
        ("gc-billing", SESSION, "50000", "DYNAMIC_GROUP_CONFIG"),
        ("gc-billing", INTERVAL, "5000", "DEFAULT_CONFIG"),
        ("gc-unset", SESSION, "45000", "DEFAULT_CONFIG"),
        ("gc-unset", INTERVAL, "5000", "DEFAULT_CONFIG"),
    ]


def test_describe_configs_beside_the_other_views_of_an_existing_group(ours: ServerProcess) -> None:
    create_topics(ours.bootstrap, gc_topic=1)
    commit(ours.bootstrap, "gc-existing", {("gc_topic", 0): 5})
    assert cli(ours.bootstrap, "groups", "configure", "gc-existing", "--set", f"{SESSION}=46000").code == 0
    shown = cli(
        ours.bootstrap, "groups", "describe", "gc-existing", "--state", "--configs", "--format", "json"
    )
    assert shown.code == 0, shown.err
    [group] = shown.json()
    assert {name: c for name, c in group["configs"].items() if name in CONSUMER} == {
        SESSION: {"value": "46000", "source": "DYNAMIC_GROUP_CONFIG"},
        INTERVAL: {"value": "5000", "source": "DEFAULT_CONFIG"},
    }
    assert group["configs"]["streams.num.standby.replicas"] == {"value": "0", "source": "DEFAULT_CONFIG"}
    table = cli(ours.bootstrap, "groups", "describe", "gc-existing", "--offsets", "--configs")
    assert ["gc-existing", SESSION, "46000", "DYNAMIC_GROUP_CONFIG"] in table_rows(table.out)


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--set", f"{SESSION}=70000"], 1,
         "INVALID_CONFIG: consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
        (["--set", "bogus=1"], 1, "INVALID_CONFIG: Unknown group config name: bogus"),
        ([], 2, "nothing to change"),
        (["--set", "novalue"], 2, "--set takes NAME=VALUE, not 'novalue'"),
        (["--set", f"{SESSION}=50000", "--delete", SESSION], 2, f"{SESSION} given more than once"),
    ],
)  # fmt: skip
def test_bad_changes_are_refused_with_a_readable_message(
    ours: ServerProcess, argv: list[str], code: int, message: str
) -> None:
    refused = cli(ours.bootstrap, "groups", "configure", "gc-refused", *argv)
    assert (refused.code, refused.out) == (code, "")
    assert message in refused.err
