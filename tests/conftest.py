"""Hypothesis profiles for every property test: ``ci`` (default, quick) and ``long`` (soak).

Registered here, at the root, so a partial run uses the same settings as the full suite.
Select with ``HYPOTHESIS_PROFILE=long pytest tests/protocol`` (tests that set their own example
counts read the variable themselves).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "long",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
