"""The table of request handlers: one typed route per API key.

A route pairs an API with the request class its decoder produces and the handler that answers it.
Layers that act before the handler -- authorization, unknown-topic filtering, request checks --
are wrappers installed with :meth:`Routes.wrap`, which checks that the wrapper was written for
that request class; a wrapper that refuses a whole request answers it with
:func:`protocol.error_responses.error_response`, the one builder of whole-request errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from coordinator.core.context import RequestContext
from coordinator.core.result import Result
from protocol.apis import ApiKey

RequestT = TypeVar("RequestT")

Handler = Callable[[RequestContext, RequestT], Result]
Wrapper = Callable[[Handler[RequestT]], Handler[RequestT]]


@dataclass(slots=True)
class Route(Generic[RequestT]):
    api_key: ApiKey
    request_type: type[RequestT]
    handle: Handler[RequestT]
    # A group API: the group ids a request names (none for ListGroups; the GROUP resources for
    # the config APIs). None: not a group API. The one list of group APIs (docs/architecture.md).
    groups: Callable[[RequestT], list[str]] | None = None


class Routes:
    """API key -> route. Adding a key twice is a mistake; wrapping a missing one too."""

    def __init__(self) -> None:
        self._routes: dict[int, Route[Any]] = {}
        # The route of an API key, or None: the dict's own get (looked up for every request).
        self.get: Callable[[int], Route[Any] | None] = self._routes.get
        self.group_apis: frozenset[int] = frozenset()  # the keys of the routes that name groups

    def add(
        self,
        api_key: ApiKey,
        request_type: type[RequestT],
        handler: Handler[RequestT],
        *,
        groups: Callable[[RequestT], list[str]] | None = None,
    ) -> None:
        if api_key in self._routes:
            raise ValueError(f"{api_key.name} already has a handler")
        self._routes[api_key] = Route(api_key, request_type, handler, groups)
        if groups is not None:
            self.group_apis = self.group_apis | {api_key}

    def wrap(self, api_key: ApiKey, request_type: type[RequestT], wrapper: Wrapper[RequestT]) -> None:
        route = self._routes[api_key]
        if route.request_type is not request_type:
            raise TypeError(
                f"{api_key.name} takes {route.request_type.__name__}, not {request_type.__name__}"
            )
        route.handle = wrapper(route.handle)

    def replace(self, api_key: ApiKey, request_type: type[RequestT], handler: Handler[RequestT]) -> None:
        self.wrap(api_key, request_type, lambda _previous: handler)

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._routes

    def __iter__(self) -> Iterator[Route[Any]]:
        return iter(self._routes.values())
