"""Shared pytest configuration: Hypothesis profiles.

The "ci" profile (default) keeps the suite fast and reproducible: no deadlines, and derandomized, so every run checks
the same examples (a CI failure is then never a fluke of the draw). `HYPOTHESIS_PROFILE=thorough pytest ...` draws
1000 fresh random examples per property to explore (or `dev` for a quick smoke run).
"""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                          print_blob=True, derandomize=True)
settings.register_profile("dev", max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
