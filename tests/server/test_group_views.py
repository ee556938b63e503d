"""The views the console reads say which mode the server runs in: the standalone lag hint and
reason are never shown in gateway mode."""

from __future__ import annotations

from coordinator.core.group_coordinator import GroupCoordinator
from coordinator.core.group_settings import BrokerGroupSettings
from coordinator.core.lag_status import LagTracker
from coordinator.server.group_views import LAG_NOT_SAMPLED, LAG_UNAVAILABLE, GroupViews


class FixedClock:
    def now_ms(self) -> int:
        return 1_000

    def wall_ms(self) -> int:
        return 1_700_000_000_000


def test_gateway_mode_shows_no_standalone_hint() -> None:
    views = GroupViews(GroupCoordinator(BrokerGroupSettings()), LagTracker(), FixedClock(), gateway_mode=True)
    overview = views.overview()
    assert overview["mode"] == "gateway" and overview["lag_hint"] is None
    assert views.lag_unavailable_reason(None) == LAG_NOT_SAMPLED


def test_standalone_mode_explains_that_lag_needs_gateway_mode() -> None:
    views = GroupViews(GroupCoordinator(BrokerGroupSettings()), LagTracker(), FixedClock())
    overview = views.overview()
    assert overview["mode"] == "standalone" and "gateway mode" in str(overview["lag_hint"])
    assert views.lag_unavailable_reason(None) == LAG_UNAVAILABLE
