"""Kafka's Java consumer (group.protocol classic with range and cooperative-sticky, static members;
group.protocol consumer) in the same scenario against Kafka's coordinator and against ours: the
same split of partitions, the same committed offsets, the same generations where the protocol
fixes them, and the same group left behind (described by Kafka's Admin)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.kafka.conftest import Sides
from tests.support.java_driver import JavaDriver

pytestmark = pytest.mark.kafka

PARTITIONS = 6
PER_PARTITION = 20

SCENARIOS: dict[str, dict[str, Any]] = {
    "classic-range": {"protocol": "classic", "assignor": "range", "static": False},
    "classic-cooperative-sticky": {"protocol": "classic", "assignor": "cooperative-sticky", "static": False},
    "classic-range-static-bounce": {"protocol": "classic", "assignor": "range", "static": True, "bounce": 1},
    "consumer": {"protocol": "consumer", "assignor": "", "static": False},
    "consumer-static-bounce": {"protocol": "consumer", "assignor": "", "static": True, "bounce": 1},
}


def _members(prefix: str, static: bool) -> list[dict[str, str | None]]:
    return [
        {"client_id": f"{prefix}-c{i}", "instance_id": f"{prefix}-i{i}" if static else None} for i in range(3)
    ]


def _normalized_round(round_: dict[str, Any], fixed_split: bool) -> dict[str, Any]:
    members = round_["members"]
    committed: dict[str, int] = {}
    for member in members:
        committed.update(member["committed"])
    shape: dict[str, Any] = {
        "sizes": sorted(len(m["assignment"]) for m in members),
        "owned": Counter(p for m in members for p in m["assignment"]),
        "committed": committed,
    }
    if fixed_split:
        # The classic range assignor sorts static members by group.instance.id: the split itself
        # is fixed. (Server-side assignors order members by their random member ids.)
        shape["by_instance"] = {m["instance_id"]: m["assignment"] for m in members}
    return shape


def _describe_shape(description: dict[str, Any]) -> dict[str, Any]:
    return {
        "state": description["state"],
        "type": description["type"],
        "simple": description["simple"],
        "assignor": description["assignor"],
        "members": sorted(
            (m["client_id"], m["instance_id"], len(m["assignment"])) for m in description["members"]
        ),
    }


# Two sides, each up to two rounds that wait while the group progresses (ConsumerScenario.round).
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_java_consumer_gets_the_same_group_from_both(
    name: str, sides: Sides, java_driver: JavaDriver, unique: str
) -> None:
    scenario = SCENARIOS[name]
    topic = f"{unique}-orders"
    java_driver.produce(sides.kafka, topic, PARTITIONS, PER_PARTITION)
    results: dict[str, Any] = {}
    for side, bootstrap in sides.items():
        group = f"{unique}-group"
        run = java_driver.consume(
            bootstrap,
            group,
            topics=[topic],
            partitions=PARTITIONS,
            records=PARTITIONS * PER_PARTITION,
            protocol=scenario["protocol"],
            assignor=scenario["assignor"],
            members=_members(unique, scenario["static"]),
            **({"bounce": scenario["bounce"]} if "bounce" in scenario else {}),
        )
        described = java_driver.admin(bootstrap, "describe_groups", groups=[group])[group]
        results[side] = (run, described)

    kafka_run, kafka_group = results["kafka"]
    our_run, our_group = results["ours"]
    assert our_run["records"] == kafka_run["records"] == PARTITIONS * PER_PARTITION
    assert len(our_run["rounds"]) == len(kafka_run["rounds"])
    every_partition = Counter(f"{topic}-{p}" for p in range(PARTITIONS))
    fixed_split = scenario["static"] and scenario["protocol"] == "classic"
    for kafka_round, our_round in zip(kafka_run["rounds"], our_run["rounds"], strict=True):
        ours = _normalized_round(our_round, fixed_split)
        assert ours == _normalized_round(kafka_round, fixed_split)
        assert ours["owned"] == every_partition
        assert ours["committed"] == {p: PER_PARTITION for p in every_partition}
    if "bounce" in scenario:
        # A static member coming back with the same instance id: the protocol says whether the
        # group moves to a new generation (classic: no; consumer: the member's epoch is kept).
        def generations(run: dict[str, Any]) -> list[int]:
            first, second = run["rounds"]
            return [
                b["generation"] - a["generation"]
                for a, b in zip(first["members"], second["members"], strict=True)
            ]

        def kept(run: dict[str, Any]) -> list[bool]:
            first, second = run["rounds"]
            return [
                a["assignment"] == b["assignment"]
                for a, b in zip(first["members"], second["members"], strict=True)
            ]

        assert generations(our_run) == generations(kafka_run)
        assert kept(our_run) == kept(kafka_run) == [True, True, True]
    assert _describe_shape(our_group) == _describe_shape(kafka_group)
