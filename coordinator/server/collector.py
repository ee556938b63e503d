"""The cyclic garbage collector's thresholds while a server runs.

With the interpreter's defaults (700, 10, 10) a server creating groups spent up to half its CPU
in the collector, more the more groups it held: objects alive across a durable write (a
request's effects, continuations, replies) outlive two young collections, are promoted to the
oldest generation and die there by reference counting. Promotions, not survivors, count towards
the oldest generation's trigger, so full collections, each walking every group, offset and
member the server holds, came about once per 1,000 groups created. Fewer young collections promote
fewer of these short-lived objects, and a full collection at most every 100 middle ones keeps
the walks of the whole heap rare (docs/performance.md, "Group creation and the garbage
collector").
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

SERVER_THRESHOLDS = (10_000, 10, 100)


@contextlib.contextmanager
def server_collector() -> Iterator[None]:
    """The server's thresholds inside, the previous ones restored on the way out."""
    previous = gc.get_threshold()
    gc.set_threshold(*SERVER_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
