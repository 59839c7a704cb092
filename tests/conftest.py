"""Shared pytest configuration: Hypothesis profiles.

The "ci" profile (default) keeps the suite fast and free of flaky deadlines; select another one with
`HYPOTHESIS_PROFILE=thorough pytest ...` (or `dev` for a quick smoke run).
"""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                          print_blob=True)
settings.register_profile("dev", max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
