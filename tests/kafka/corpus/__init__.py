"""The differential corpus: scripted request sequences that go, byte for byte the same, to Kafka's
group coordinator and to ours (tests/kafka/test_differential.py compares the answers).

A scenario is run at each version of its ``api`` that both coordinators serve. Its ``steps``
function gets that version and the scenario's names and returns the steps; a step's request is
built when it is sent, from what earlier steps captured (a member id, a generation), so one
script drives both sides. Steps that block on the coordinator (a JoinGroup waiting for the other
members) are sent with ``wait=False`` on their own connection and collected by a later ``Await``.

New group types extend the corpus with a module of their own (share groups, streams groups) that
adds its scenarios to ``SCENARIOS``: the runner needs nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.apis import ApiKey

Context = dict[str, Any]
# The context key of the version the request being built is sent at (some fields exist only in
# some versions, and the codecs refuse to write a field its version lacks).
VERSION = "version being sent"


@dataclass(frozen=True)
class Names:
    """Unique per scenario and version: groups and topics outlive a scenario on the session broker."""

    group: str
    topic: str  # an existing topic with PARTITIONS partitions
    other_group: str


@dataclass(frozen=True)
class Step:
    api: ApiKey
    request: Callable[[Context], Any]
    # The version to send; None: the highest both coordinators serve.
    version: int | None = None
    connection: str = "a"
    wait: bool = True
    # Keeps values of the answer for later steps (a member id, a generation, an epoch).
    capture: Callable[[Any, Context], None] | None = None
    # Drops parts of an answer that the scenario does not own (other tests' groups in ListGroups),
    # or keeps just the part it is about (an error code).
    only: Callable[[Any, Names], Any] | None = None


@dataclass(frozen=True)
class Await:
    """The answer to the step sent on ``connection`` with ``wait=False``."""

    connection: str
    capture: Callable[[Any, Context], None] | None = None


@dataclass(frozen=True)
class Until:
    """Sends ``step`` again until its answer satisfies ``done``: waits for a state that a request
    on another connection brings about (the coordinator serves connections concurrently). Only
    the last answer is compared."""

    step: Step
    done: Callable[[Any], bool]
    timeout_s: float = 30


@dataclass(frozen=True)
class Scenario:
    name: str
    api: ApiKey
    steps: Callable[[int, Names], list[Step | Await | Until]]
    versions: range = field(default=range(0, 100))


PARTITIONS = 2
