"""The Hypothesis settings of the property tests.

``derandomize=True``: the examples follow from each test's source, so CI reruns the same cases and
a failure reproduces anywhere; no example database is written. ``deadline=None``: timings vary on
shared machines and are no property. ``max_examples`` is bounded so that the whole folder stays
near a minute on two cores; ``MULTIDRAFT_HYPOTHESIS_PROFILE=thorough`` searches ten times longer
(random, not derandomized) for local bug hunts.
"""
import os

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, database=None, print_blob=False,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", derandomize=True, max_examples=20, **_COMMON)
settings.register_profile("thorough", derandomize=False, max_examples=200, **_COMMON)
settings.load_profile(os.environ.get("MULTIDRAFT_HYPOTHESIS_PROFILE", "ci"))
