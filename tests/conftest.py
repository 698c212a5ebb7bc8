"""Settings shared by the tests: the budget of the property-based fuzz tests (Hypothesis).

`make test` runs the short profile (`default`: a few dozen examples a test, the same ones
every run). The long one tries thousands of new examples a test, in the fuzz modules
(`test_*_fuzz.py`):

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests -k fuzz
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=5000,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
