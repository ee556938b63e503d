"""SASL/SCRAM credential records (issue 9), against every backend: round trip, upsert, delete,
per-user reads, survival across reopen, and atomicity with the rest of a batch."""

from __future__ import annotations

import pytest

from storage.base import Store, StoreError
from storage.records import UserCredentialRecord, UserCredentialTombstone
from tests.storage.conftest import StoreFactory
from tests.storage.helpers import offset

pytestmark = pytest.mark.asyncio


def credential(user: str = "alice", mechanism: str = "SCRAM-SHA-512", seed: int = 1) -> UserCredentialRecord:
    return UserCredentialRecord(
        user, mechanism, bytes([seed]) * 32, bytes([seed + 1]) * 64, bytes([seed + 2]) * 64, 4096 + seed
    )


def _key(c: UserCredentialRecord) -> tuple[str, str]:
    return (c.user, c.mechanism)


async def test_credentials_round_trip_upsert_and_delete(store: Store) -> None:
    a512, a256, b512 = credential(), credential(mechanism="SCRAM-SHA-256"), credential("bob", seed=7)
    await store.write([a512, a256, b512])
    assert sorted((await store.load()).credentials, key=_key) == sorted([a512, a256, b512], key=_key)
    newer = credential(seed=9)
    await store.write([newer, UserCredentialTombstone("alice", "SCRAM-SHA-256")])
    assert sorted((await store.load()).credentials, key=_key) == [newer, b512]
    assert await store.load_credentials("alice") == [newer]  # type: ignore[attr-defined]
    assert await store.load_credentials("nobody") == []  # type: ignore[attr-defined]
    assert len(await store.load_credentials()) == 2  # type: ignore[attr-defined]
    await store.write([UserCredentialTombstone("nobody", "SCRAM-SHA-512")])  # deleting nothing is fine


async def test_credentials_survive_reopen(store_factory: StoreFactory) -> None:
    first = await store_factory.opened()
    await first.write([credential(), offset()])
    await first.close()
    second = await store_factory.opened()
    assert (await second.load()).credentials == [credential()]


async def test_a_failing_batch_stores_no_credential(store: Store) -> None:
    poison = offset(partition=-1)  # every backend rejects a negative partition
    with pytest.raises(StoreError):
        await store.write([credential(), poison])
    assert (await store.load()).credentials == []


async def test_repr_hides_key_material() -> None:
    text = repr(credential())
    assert "alice" in text and "\\x02" not in text and "stored_key" not in text
