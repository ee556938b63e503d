"""Runs corpus scenarios against two bootstraps and normalizes the answers for comparison
(tests/kafka/test_differential.py, test_differential_limits.py)."""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any

from protocol.apis import SERVED_VERSIONS, ApiKey
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from protocol.wire import decode_response, encode_request
from tests.kafka.corpus import PARTITIONS, VERSION, Await, Context, Names, Step, Until
from tests.support.wire_client import WireClient

EPOCH_RANKS = "epochs seen, in order"
_GENERATED_MEMBER_ID = re.compile(r"^(.*)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_EPOCHS = {"member_epoch", "group_epoch", "assignment_epoch"}
_MASKED = {
    "node_id": "<node>",
    "host": "<host>",
    "port": "<port>",
    "throttle_time_ms": 0,
    "error_message": None,
}


def common_versions(kafka: str, ours: str) -> dict[ApiKey, range]:
    """Per API, the versions Kafka, our server and our codecs all speak."""
    theirs, mine = served(kafka), served(ours)
    common = {}
    for api, (low, high) in SERVED_VERSIONS.items():
        if api in theirs and api in mine:
            common[api] = range(
                max(low, theirs[api][0], mine[api][0]), min(high, theirs[api][1], mine[api][1]) + 1
            )
    return common


def served(bootstrap: str) -> dict[int, tuple[int, int]]:
    with WireClient(bootstrap) as client:
        answer = client.request(
            ApiKey.API_VERSIONS,
            3,
            ApiVersionsRequest(client_software_name="corpus", client_software_version="1"),
        )
    return {api.api_key: (api.min_version, api.max_version) for api in answer.api_keys}


def wait_for_topic(bootstrap: str, topic: str, timeout: float = 30) -> None:
    """Until our gateway's view of upstream has the topic (it refreshes upstream metadata)."""
    deadline = time.monotonic() + timeout
    with WireClient(bootstrap) as client:
        while True:
            answer = client.request(
                ApiKey.METADATA,
                12,
                MetadataRequest(topics=[MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False),
            )
            if answer.topics[0].error_code == 0 and len(answer.topics[0].partitions) == PARTITIONS:
                return
            assert time.monotonic() < deadline, f"{bootstrap} does not know {topic}"
            time.sleep(0.2)


class Run:
    """One side's run of one scenario: connections by name, answers normalized as they come."""

    def __init__(self, bootstrap: str, names: Names, common: dict[ApiKey, range]) -> None:
        self.bootstrap = bootstrap
        self.names = names
        self.common = common
        self.connections: dict[str, WireClient] = {}
        self.pending: dict[str, tuple[Step, int, int]] = {}
        self.context: Context = {}
        self.answers: list[Any] = []

    def connection(self, name: str) -> WireClient:
        if name not in self.connections:
            self.connections[name] = WireClient(self.bootstrap, client_id="corpus", timeout=60)
        return self.connections[name]

    def close(self) -> None:
        for client in self.connections.values():
            client.close()

    def run(self, steps: list[Step | Await | Until]) -> list[Any]:
        for step in steps:
            if isinstance(step, Until):
                self._until(step)
                continue
            if isinstance(step, Await):
                sent, version, correlation_id = self.pending.pop(step.connection)
                self._answered(
                    sent, version, correlation_id, self.connection(step.connection).read_frame(), step.capture
                )
                continue
            version = self.common[step.api][-1] if step.version is None else step.version
            client = self.connection(step.connection)
            client.correlation_id += 1
            self.context[VERSION] = version
            client.send_raw(
                encode_request(
                    step.api, version, client.correlation_id, client.client_id, step.request(self.context)
                )
            )
            if step.wait:
                self._answered(step, version, client.correlation_id, client.read_frame(), step.capture)
            else:
                self.pending[step.connection] = (step, version, client.correlation_id)
        assert not self.pending, f"answers never collected: {sorted(self.pending)}"
        return self.answers

    def _until(self, until: Until) -> None:
        deadline = time.monotonic() + until.timeout_s
        step = until.step
        version = self.common[step.api][-1] if step.version is None else step.version
        client = self.connection(step.connection)
        while True:
            self.context[VERSION] = version
            answer = client.request(step.api, version, step.request(self.context))
            if until.done(answer):
                break
            assert time.monotonic() < deadline, f"{self.bootstrap}: never {until}"
            time.sleep(0.05)
        self.answers.append(
            (
                step.api.name,
                version,
                self._normalized(documented_differences(step.api, dataclasses.asdict(answer))),
            )
        )

    def _answered(self, step: Step, version: int, correlation_id: int, frame: bytes, capture: Any) -> None:
        answered_id, answer = decode_response(step.api, version, frame)
        assert answered_id == correlation_id
        if capture is not None:
            capture(answer, self.context)
        if step.only is not None:
            answer = step.only(answer, self.names)
        if not dataclasses.is_dataclass(answer):  # ``only`` kept a single value
            self.answers.append((step.api.name, version, answer))
            return
        fields = documented_differences(step.api, dataclasses.asdict(answer))  # type: ignore[arg-type]
        self.answers.append((step.api.name, version, self._normalized(fields)))

    def _normalized(self, value: Any, key: str = "") -> Any:
        if key in _MASKED:
            return _MASKED[key]
        if key in _EPOCHS and isinstance(value, int) and value > 0:
            # Consumer group epochs compare by order, not value (docs/kafka-differences.md#consumer-group-epochs).
            ranks = self.context.setdefault(EPOCH_RANKS, {})
            return f"<epoch {ranks.setdefault(value, len(ranks) + 1)}>"
        if isinstance(value, dict):
            return {k: self._normalized(v, k) for k, v in value.items()}
        if isinstance(value, list):
            items = [self._normalized(v) for v in value]
            if items and all(isinstance(i, dict) and ("member_id" in i or "group_id" in i) for i in items):
                items.sort(key=repr)  # members and per-group results come in no fixed order
            return items
        if isinstance(value, str) and value:
            for alias, member_id in self.context.items():
                if value == member_id and alias not in (VERSION, EPOCH_RANKS):
                    return f"<member {alias}>"
            match = _GENERATED_MEMBER_ID.match(value)
            if match:
                return f"{match.group(1)}-<generated>"
        return value


def documented_differences(api: ApiKey, fields: dict[str, Any]) -> dict[str, Any]:
    """Blanks what we answer differently on purpose, on both sides alike."""
    if api == ApiKey.DESCRIBE_GROUPS:
        for group in fields["groups"]:
            if group["group_state"] != "Stable":
                # Kafka's Java coordinator describes stale metadata and assignments outside Stable;
                # we follow its Scala coordinator (docs/groups.md#where-kafkas-two-coordinators-differ).
                for member in group["members"]:
                    member["member_metadata"] = member["member_assignment"] = b""
    return fields
