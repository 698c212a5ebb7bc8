"""The error of a plan (or a command line) that cannot run."""

from __future__ import annotations


class PlanError(ValueError):
    """A plan (or a command line) that cannot run, with where the problem is. Defined
    here, with no import of pydantic, so the command line can catch it before it loads
    the plan's models."""
