"""The storage interface every backend implements."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from storage.records import LoadedState, Record, StoredIdentity, UserCredentialRecord


class StoreError(Exception):
    """The backend could not complete an operation (disk full, database down, ...).

    Nothing of the failed ``write`` is durable; the caller answers its requests with a
    retriable Kafka error and may retry later.
    """


@runtime_checkable
class GroupLoadingStore(Protocol):
    """Stores that load groups apart from the rest (every shipped backend): a single node
    serves once the unsharded state and the group ids are read and loads its shards in the background
    (docs/performance.md#loading-in-the-background)."""

    async def load_unsharded(self) -> LoadedState:
        """Topics, credentials, ACLs and the cluster id; the group lists are empty."""

    async def group_ids(self) -> list[str]:
        """Every group id with a row in any group table, read in one snapshot."""

    async def load_groups(self, group_ids: Collection[str]) -> LoadedState:
        """The rows of exactly these groups in every group table, read in one snapshot; the
        other lists are empty."""


class Store(Protocol):
    async def open(self) -> None:
        """Connect, create or migrate the schema."""

    async def load(self) -> LoadedState:
        """Return every stored topic, group and offset."""

    async def load_identity(self) -> StoredIdentity:
        """The stored cluster id rows and whether this open created the database (read at start,
        before serving: ``coordinator/server/cluster_identity.py``)."""

    async def load_credentials(self, user: str | None = None) -> list[UserCredentialRecord]:
        """The stored SCRAM credentials (of one user, or all)."""

    async def write(self, records: Sequence[Record]) -> None:
        """Apply records atomically and durably (all or nothing), in order.

        Raises StoreError when the batch did not land.
        """

    async def close(self) -> None:
        """Release connections and threads. Idempotent."""
